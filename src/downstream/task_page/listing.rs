//! One listing per refresh for every viewer of the task page: a task of its own lists the
//! tasks (one store listing of at most `max_tasks`) every `refresh` while anyone watches,
//! and hands that one listing to each viewer, which filters it for itself. With nobody
//! watching it lists nothing, and forgets the last listing, so that the next viewer sees a
//! fresh one.

use crate::gateway::Gateway;
use crate::tasks::hosted::overview::Overview;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// A listing: every owner's tasks and whether more were left out, or the store's failure.
pub(super) type Listed = Result<(Vec<Overview>, bool), String>;

/// What viewers watch: the latest listing (`None`: none since somebody watched).
pub(super) type Watched = watch::Receiver<Option<Arc<Listed>>>;

/// The task page's lister.
pub(super) struct Listings {
    tx: watch::Sender<Option<Arc<Listed>>>,
    /// The lister task was started (with the first viewer).
    started: AtomicBool,
}

impl Listings {
    pub(super) fn new() -> Arc<Listings> {
        Arc::new(Listings { tx: watch::channel(None).0, started: AtomicBool::new(false) })
    }

    /// A new viewer's view of the listings: the latest at once if there is one, then each
    /// new one. The lister starts with the first viewer, and ends with the server
    /// (`stopping`) or the gateway.
    pub(super) fn watch(self: &Arc<Self>, gateway: &Arc<Gateway>, stopping: &CancellationToken) -> Watched {
        let mut rx = self.tx.subscribe();
        rx.mark_changed();
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(list(Arc::downgrade(self), Arc::downgrade(gateway), stopping.clone()));
        }
        rx
    }
}

/// Lists every `refresh` while anyone watches.
async fn list(me: Weak<Listings>, gateway: Weak<Gateway>, stopping: CancellationToken) {
    let Some(refresh) = gateway.upgrade().map(|g| g.config.server.task_page.refresh) else { return };
    let mut tick = tokio::time::interval(refresh);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopping.cancelled() => return,
            _ = tick.tick() => {}
        }
        let (Some(me), Some(gateway)) = (me.upgrade(), gateway.upgrade()) else { return };
        if me.tx.receiver_count() == 0 {
            me.tx.send_replace(None);
            continue;
        }
        let listed = gateway.hosted.overview(gateway.config.tasks.max_tasks).await.map_err(|e| e.message);
        crate::metrics::global().task_page_listed();
        me.tx.send_replace(Some(Arc::new(listed)));
    }
}
