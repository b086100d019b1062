//! What every strategy may reach of its session ([`Reach`]: its upstream's settings, the
//! path to its client, its link, and a weak handle for the tasks it starts), and what the
//! strategies that host tasks reach besides ([`Hosting`]). A strategy's own context builds
//! on them; the session lends itself as each (`contexts`). A leaf: it names no part of the
//! session, so a strategy that uses it does not depend on the session through it.

use crate::config::UpstreamConfig;
use crate::jsonrpc::{Id, Message, Method, RpcError};
use crate::mcp::task_messages::TaskSupport;
use crate::tasks::hosted::Hosted;
use crate::upstream::client::ClientSession;
use crate::upstream::client::Route;
use crate::upstream::link::{ClientRef, Link};
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::{Arc, Weak};

/// What every strategy may reach of its session.
pub(super) trait Reach: Send + Sync + Sized + 'static {
    /// The session's upstream's settings (its name, its timeouts, its long calls).
    fn upstream(&self) -> &UpstreamConfig;
    /// The most requests of one kind a session keeps in flight.
    fn max_in_flight(&self) -> usize;
    /// Client request `id`, as the session's link knows it.
    fn client_ref(&self, id: Id) -> ClientRef;
    /// Sends the client `msg`, translated and shaped for it.
    fn to_client(&self, msg: Message, route: Route);
    /// Answers client request `id` with `resp` (a tree), translated as an answer to a
    /// request of method `answers`.
    fn answer(&self, id: Id, resp: Value, answers: Option<Method>);
    /// The client's request `id` is no longer answered on its stream.
    fn abandon(&self, id: &Id);
    /// The live link, started again if it died.
    fn link(&self) -> impl Future<Output = Result<Arc<Link>, RpcError>> + Send;
    /// The link as it is, live or not.
    fn current_link(&self) -> Option<Arc<Link>>;
    /// The client's `initialize` params, once they arrived.
    fn client_init(&self) -> Option<Arc<Value>>;
    /// A new id for a request the gateway sends the client.
    fn next_client_side_id(&self) -> Id;
    /// Whether the upstream's tasks are the tasks extension's (it decides per call whether
    /// it makes a task).
    fn upstream_tasks_are_extension(&self) -> bool;
    /// `msg`, a request for the client, in the client's version.
    fn down_request(&self, msg: Message) -> Result<Message, RpcError>;
    /// Whether the client is a 2026-07-28 request (its era has no `params.task`, and its
    /// per-request `_meta` is not the upstream's).
    fn client_is_modern(&self) -> bool;
    /// The session, for the tasks a strategy starts, which must not keep it alive.
    fn weak(&self) -> Weak<Self>;
    /// `f`'s value, run under the session's lock, if the session has not ended: its end marks
    /// it so under the same lock before it drains what its strategies keep, so what `f`
    /// records (a bridged call's slot, an operation) is found by that drain. `f` takes only
    /// the strategy's own locks and calls nothing of the host's that may take the session's
    /// (the std mutex is not reentrant).
    fn while_open<R>(&self, f: impl FnOnce() -> R) -> Option<R>;

    /// Whether the session has ended.
    fn is_closed(&self) -> bool {
        self.while_open(|| ()).is_none()
    }

    /// What the client's `initialize` declared, as a modern upstream reads it per request.
    fn capabilities_for_modern(&self) -> Map<String, Value> {
        let init = self.client_init();
        crate::mcp::modern::legacy::client_capabilities(declared(init.as_deref()).unwrap_or(&Value::Null))
    }
}

/// The capabilities a client's `initialize` params (`init`) declared.
pub(super) fn declared(init: Option<&Value>) -> Option<&Value> {
    init.and_then(|p| p.get("capabilities"))
}

/// What a strategy that hosts tasks reaches of its session besides.
pub(super) trait Hosting: Reach {
    /// The gateway's hosted tasks.
    fn hosted(&self) -> &Arc<Hosted>;
    /// Whose tasks the session's are.
    fn owner(&self) -> &str;
    /// Who the client is, as the tasks it creates record it.
    fn client(&self) -> &str;
    /// The session as a hosted task's waiter: its questions and progress reach the client.
    fn waiter(&self) -> Weak<dyn ClientSession>;
    /// Whether the gateway hosts tool `name`'s calls (the upstream's listing read if need be).
    fn hosts_tool(&self, name: &str) -> impl Future<Output = Result<bool, RpcError>> + Send;
    /// Tool `name`'s task support (the upstream's listing read if need be).
    fn tool_support(&self, name: &str) -> impl Future<Output = Result<TaskSupport, RpcError>> + Send;
    /// A hosted task created for call `msg`: its id, its creation's answer, the link it runs
    /// on, and the call to send there.
    fn create_hosted(
        &self,
        msg: Value,
    ) -> impl Future<Output = Result<(Arc<str>, Value, Arc<Link>, Value), RpcError>> + Send;
    /// Hosted task `task_id`'s call `msg`, started on `link`.
    fn run_hosted(&self, task_id: Arc<str>, link: Arc<Link>, msg: Value) -> impl Future<Output = ()> + Send;
}
