//! The client's `Authorization`, as an HTTP upstream configured with
//! `authorization = "pass"` receives it: one value per upstream session, set by the
//! gateway's session from each request its client sends, and read by the connection for
//! every request it makes (so a client that refreshes its token is heard with the new one).
//! Nothing here decides whether a client's token may go upstream: the configuration does.

use crate::locks::Mutex;
use hyper::header::HeaderValue;

/// The `Authorization` value a connection sends, if any. Its `Debug` never shows the value.
#[derive(Default)]
pub struct Credential {
    value: Mutex<Option<HeaderValue>>,
}

impl Credential {
    /// The client's latest request carried `value` (`None`: no `Authorization`, or one that
    /// is not a valid header value): later requests upstream carry it.
    pub fn set(&self, value: Option<&str>) {
        let parsed = value.and_then(|v| HeaderValue::from_str(v).ok()).map(|mut v| {
            v.set_sensitive(true);
            v
        });
        *self.value.lock().unwrap() = parsed;
    }

    /// What a request upstream carries now.
    pub fn get(&self) -> Option<HeaderValue> {
        self.value.lock().unwrap().clone()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.value.lock().unwrap().is_some();
        f.debug_struct("Credential").field("set", &set).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_value_is_sent_and_never_shown() {
        let c = Credential::default();
        assert!(c.get().is_none());
        c.set(Some("Bearer one"));
        assert_eq!(c.get().unwrap(), "Bearer one");
        assert!(c.get().unwrap().is_sensitive());
        c.set(Some("Bearer two"));
        assert_eq!(c.get().unwrap(), "Bearer two");
        assert!(!format!("{c:?}").contains("two"));
        // A value that cannot be a header is not sent (the client's request is answered as
        // the upstream answers one without credentials).
        c.set(Some("Bearer \n bad"));
        assert!(c.get().is_none());
        c.set(None);
        assert!(c.get().is_none());
    }
}
