//! The spans the test's own in-process gateway opens, seen by a subscriber layer on the
//! test's thread: what a test waits on when nothing outside the process shows that the
//! gateway has reached a point (a request being served, for one).

use std::sync::{Arc, Mutex};
use tracing_subscriber::layer::SubscriberExt;

/// A span's name and its fields as `key=value`.
pub type SpanSeen = (String, Vec<String>);

/// Each new span, from [`Seen::install`] on.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<SpanSeen>>>);

struct Fields(Vec<String>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={:?}", field.name(), value));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut f = Fields(Vec::new());
        attrs.record(&mut f);
        self.0.lock().unwrap().push((attrs.metadata().name().to_string(), f.0));
    }
}

impl Seen {
    /// Sees every span opened on this thread while the guard lives. A `#[tokio::test]` runs
    /// its runtime, and so every task of an in-process gateway, on its own thread.
    pub fn install() -> (Seen, tracing::subscriber::DefaultGuard) {
        let seen = Seen::default();
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(seen.clone()));
        // Whether a span is wanted is remembered per call site for the whole process: under a
        // plain `cargo test` another test's thread (no subscriber) may have asked first.
        tracing::callsite::rebuild_interest_cache();
        (seen, guard)
    }

    /// The spans seen so far.
    pub fn spans(&self) -> Vec<SpanSeen> {
        self.0.lock().unwrap().clone()
    }

    /// How many spans named `name` carried the field `field` (`key=value`).
    pub fn count(&self, name: &str, field: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|(n, f)| n == name && f.iter().any(|x| x == field)).count()
    }
}
