//! What every part of the redis store uses: key names, bounded calls, the scripts.

use crate::tasks::store::StoreError;
use std::future::Future;
use std::time::Duration;

/// The longest a store call waits for Redis.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(3);

pub(super) fn backend(cause: impl std::fmt::Display) -> StoreError {
    StoreError::Backend { store: "redis", cause: cause.to_string() }
}

/// Runs a call against Redis, bounded by [`CALL_TIMEOUT`].
pub(super) async fn bounded<T>(f: impl Future<Output = redis::RedisResult<T>>) -> Result<T, StoreError> {
    match tokio::time::timeout(CALL_TIMEOUT, f).await {
        Ok(r) => r.map_err(backend),
        Err(_) => Err(backend(format!("no answer within {CALL_TIMEOUT:?}"))),
    }
}

#[derive(Clone)]
pub(super) struct Keys(pub String);

impl Keys {
    pub fn k(&self, s: &str) -> String {
        format!("{}{s}", self.0)
    }
    pub fn task(&self, id: &str) -> String {
        self.k(&format!("t:{id}"))
    }
    pub fn client(&self, c: &str) -> String {
        self.k(&format!("client:{c}"))
    }
    pub fn owner(&self, o: &str) -> String {
        self.k(&format!("owner:{o}"))
    }
    pub fn session(&self, id: &str) -> String {
        self.k(&format!("session:{id}"))
    }
    pub fn era(&self, upstream: &str) -> String {
        self.k(&format!("era:{upstream}"))
    }
    pub fn channel(&self) -> String {
        self.k("status")
    }
}

/// A task's hash fields, as read.
pub(super) type Fields = (Option<String>, Option<u64>, Option<u64>, Option<String>);

pub(super) struct Scripts {
    pub insert: redis::Script,
    pub update: redis::Script,
    pub remove: redis::Script,
}
