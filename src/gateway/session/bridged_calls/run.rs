//! Running a bridged call: the bridge of a 2025-11-25 task built for the session's link, and
//! the background task that follows it to its end and answers the client.

use super::{BridgedCalls, Host};
use crate::jsonrpc::{self, Id, RpcError};
use crate::tasks::bridge::core_tasks::Bridge;
use crate::tasks::bridge::{Ending, PlainCall};
use crate::upstream::link::Link;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

impl BridgedCalls {
    /// A plain call of a tool the upstream runs only as a task: bridged (see [`Bridge`]).
    pub(in super::super) async fn start(&self, s: &impl Host, id: Id, msg: Value) -> Result<(), RpcError> {
        let link = s.link().await?;
        let cancel = self.claim_open(s, &id)?;
        let bridge = self.core(s, &link, &id, msg, cancel);
        self.spawn(s, id, link, bridge.run());
        Ok(())
    }

    /// A slot for client request `id` (see [`BridgedCalls::claim`]), claimed under the session's
    /// lock: once the session's end has set `closed` and drained the slots, none is given
    /// (-32603), so no bridge outlives the end uncancelled.
    pub(in super::super) fn claim_open(&self, s: &impl Host, id: &Id) -> Result<CancellationToken, RpcError> {
        let limit = s.max_in_flight();
        s.while_open(|| self.claim(id, limit))
            .unwrap_or_else(|| Err(RpcError::new(jsonrpc::INTERNAL_ERROR, "the session has ended")))
    }

    /// The bridge of client call `id` (`call`) through a 2025-11-25 task on `link`.
    pub(in super::super) fn core(
        &self,
        s: &impl Host,
        link: &Arc<Link>,
        id: &Id,
        mut call: Value,
        cancel: CancellationToken,
    ) -> Bridge {
        // A 2025-11-25 upstream gets none of a modern client's per-request `_meta` (its
        // version, capabilities, clientInfo), as a forwarded request does not.
        if s.client_is_modern() {
            crate::mcp::modern::meta::strip(&mut call);
        }
        Bridge {
            plain: Self::plain(s, link, id, call, cancel),
            // The upstream must keep the task at least as long as the call may run.
            ttl: s.upstream().tasks.ttl.max(s.upstream().max_request_time),
        }
    }

    /// Client call `id` (`call`) to be bridged on `link`, with the upstream's bounds: what a
    /// bridge of either task dialect has.
    pub(in super::super) fn plain(
        s: &impl Host,
        link: &Arc<Link>,
        id: &Id,
        call: Value,
        cancel: CancellationToken,
    ) -> PlainCall {
        PlainCall {
            link: link.clone(),
            client: s.client_ref(id.clone()),
            request: call,
            request_timeout: s.upstream().request_timeout,
            max_request_time: s.upstream().max_request_time,
            cancel,
        }
    }

    /// Runs a bridged call (its slot claimed) to its end: the link stays open until then
    /// (and the task is cancelled), the slot is freed, and the answer, if one is due, goes
    /// to the client.
    pub(in super::super) fn spawn(
        &self,
        s: &impl Host,
        id: Id,
        link: Arc<Link>,
        run: impl std::future::Future<Output = Ending> + Send + 'static,
    ) {
        link.retain();
        let me = s.weak();
        tokio::spawn(async move {
            let ending = run.await;
            link.release();
            let Some(s) = me.upgrade() else { return };
            s.bridged_calls().ended(&*s, &id);
            if let Ending::Answer(resp) = ending {
                s.answer(id, resp, Some(crate::jsonrpc::Method::ToolsCall));
            }
        });
    }

    /// The bridged call `id` has ended: its slot is free, and questions of an extension
    /// task's call the client has not answered are moot now (see `ext::bridged`).
    pub(in super::super) fn ended(&self, s: &impl Host, id: &Id) {
        self.release(id);
        s.drop_moot_inputs();
    }
}
