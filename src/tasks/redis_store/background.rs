//! What the redis store does in the background: sweeping expired tasks, and the subscriber
//! that fans the status channel out (reconnecting when its connection goes).

use super::codec::{decode, ms};
use super::conn::{Fields, Keys, Scripts, bounded};
use super::fanout::Fanout;
use crate::tasks::store::{StoreError, TaskRecord};
use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Removals per sweeping script.
const SWEEP_BATCH: usize = 1000;

/// What sweeps: a handle of its own, so that the sweeping task does not hold the store.
pub(super) struct Sweeper {
    pub conn: ConnectionManager,
    pub keys: Keys,
    pub scripts: Arc<Scripts>,
}

impl Sweeper {
    /// Removes the finished tasks (or task `one`) whose retention ended by `now`. A failure
    /// removes nothing and is logged: the next sweep tries again.
    pub async fn remove(&self, now: SystemTime, one: Option<&str>) -> Vec<TaskRecord> {
        let k = &self.keys;
        let mut c = self.conn.clone();
        let res: Result<Vec<Option<String>>, _> = bounded(
            self.scripts
                .remove
                .key(k.k("expiry"))
                .key(k.k("count"))
                .key(k.k("bytes"))
                .key(k.k("acct"))
                .arg(ms(now))
                .arg(one.unwrap_or(""))
                .arg(&k.0)
                .arg(k.channel())
                .arg(SWEEP_BATCH)
                .invoke_async(&mut c),
        )
        .await;
        match res {
            Ok(flat) => flat
                .chunks(3)
                .filter_map(|row| match row {
                    [Some(_), Some(m), seq] => {
                        decode(m, seq.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0), None)
                    }
                    _ => None,
                })
                .collect(),
            Err(e) => {
                tracing::error!(error = %e, "task store: sweeping the redis store failed");
                Vec::new()
            }
        }
    }
}

pub(super) async fn subscribe(client: &redis::Client, channel: &str) -> Result<redis::aio::PubSub, StoreError> {
    let mut ps = bounded(client.get_async_pubsub()).await?;
    bounded(ps.subscribe(channel)).await?;
    Ok(ps)
}

/// The subscriber: hears the channel and fans it out; when its connection goes, connects
/// again with backoff (100 ms doubling to 5 s), resubscribes, and re-reads what is watched.
pub(super) async fn listen(
    client: redis::Client,
    first: redis::aio::PubSub,
    conn: ConnectionManager,
    keys: Keys,
    fanout: Arc<Fanout>,
) {
    let mut next = Some(first);
    let mut backoff = Duration::from_millis(100);
    loop {
        let ps = match next.take() {
            Some(ps) => ps,
            None => match subscribe(&client, &keys.channel()).await {
                Ok(ps) => {
                    tracing::info!("redis task store: subscribed again");
                    resync(&conn, &keys, &fanout).await;
                    ps
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "redis task store: cannot subscribe");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            },
        };
        backoff = Duration::from_millis(100);
        let mut messages = ps.into_on_message();
        while let Some(msg) = messages.next().await {
            match msg.get_payload::<String>() {
                Ok(text) => fanout.heard(&text),
                Err(e) => tracing::warn!(error = %e, "redis task store: unreadable message"),
            }
        }
        tracing::warn!("redis task store: the subscriber's connection closed; reconnecting");
    }
}

/// Shows each watched task as it is now.
async fn resync(conn: &ConnectionManager, keys: &Keys, fanout: &Fanout) {
    for id in fanout.watched() {
        let mut c = conn.clone();
        let fields: Result<Fields, _> =
            bounded(redis::cmd("HMGET").arg(keys.task(&id)).arg(&["m", "seq", "ver", "out"]).query_async(&mut c)).await;
        match fields {
            Ok((Some(m), seq, ver, _)) => {
                if let Some(rec) = decode(&m, seq.unwrap_or(0), None) {
                    fanout.show(&id, Some(rec.status), ver.unwrap_or(0));
                }
            }
            Ok((None, ..)) => fanout.show(&id, None, 0),
            Err(e) => tracing::warn!(error = %e, "redis task store: re-reading a watched task failed"),
        }
    }
}
