//! What a modern client's request needs of its session: its narrow context, which the
//! session lends it (`session/contexts.rs`). The strategy's files import it, and it imports
//! none of them but `state`'s `Parked` (what a front parks).

use super::super::long_calls;
use super::super::plan::{Plan, UpstreamSide};
use super::super::principal_tasks::PrincipalTasks;
use super::super::sides::Sides;
use super::state::Parked;
use crate::jsonrpc::{Id, Message, Method, RpcError};
use crate::tasks::relayed::RelayedTasks;
use crate::upstream::client::Route;
use crate::upstream::link::{Link, SessionTag, Shape};
use arc_swap::Guard;
use std::future::Future;
use std::sync::Arc;

/// What a modern client's request needs of its session beyond what long calls (and every
/// strategy that hosts tasks) reach: its narrow context.
pub(in crate::gateway::session) trait Host: long_calls::Host {
    /// The session's link and what the plan says of its upstream, joined first if need be.
    fn linked(&self) -> impl Future<Output = Result<(Arc<Link>, UpstreamSide), RpcError>> + Send;
    /// Sends client request `frame` (`id`) up `link`, a modern upstream's, shaped `shape`.
    fn up_modern(
        &self,
        link: &Arc<Link>,
        id: Id,
        frame: Message,
        shape: Shape,
    ) -> impl Future<Output = Result<(), RpcError>> + Send;
    /// What the two sides said of themselves (versions, capabilities, the upstream's
    /// `initialize`), as they are now.
    fn sides(&self) -> Guard<Arc<Sides>>;
    /// The session's plan.
    fn plan(&self) -> Plan;
    /// Hands `msg` to the client as it is (of the era already).
    fn deliver(&self, msg: Message, route: Route);
    /// With authentication, the upstream's tasks bound to the session's principal.
    fn principal_tasks(&self) -> Option<PrincipalTasks<'_>>;
    /// The upstreams' tasks the gateway relays, by the ids it gave them.
    fn relayed(&self) -> &RelayedTasks;
    /// The longest task id the gateway keeps.
    fn max_task_id_bytes(&self) -> usize;
    /// The session's tag on its link.
    fn tag(&self) -> SessionTag;
    /// The session, to be parked while its client answers (`None`: it is gone).
    fn parkable(&self) -> Option<Arc<dyn Parked>>;
    /// Ends the session.
    fn close(&self) -> impl Future<Output = ()> + Send;
    /// The client's answer `frame` to a request of the server's, handled by the session.
    fn handle_response(&self, frame: Message) -> impl Future<Output = ()> + Send;
    /// Upstream request `upstream_id` on `link`, waiting for the client's answer, under a
    /// new id of the session's (`answers`: its method, for the answer's translation), noted
    /// for no hosted task (the relay notes a task's question before it gets here); `None`
    /// past `max_in_flight`.
    fn register_server_request(&self, link: &Arc<Link>, upstream_id: &Id, answers: Option<Method>) -> Option<Id>;
    /// Whether the client declared what request `msg` of the server's needs.
    fn client_can_answer(&self, msg: &Message) -> bool;
}
