//! The narrow contexts the session lends its strategies: what every strategy may reach of
//! it ([`Reach`]), and what each strategy that names no session type says, as a trait of its
//! own on top of that, it needs besides. The session is each of them here.

use super::bridged_calls::{self, BridgedCalls};
use super::by_token::operations::{self, Listed};
use super::ext::{self, ExtTasks};
use super::input_rounds::{self, InputRounds};
use super::long_calls::{self, state::LongCalls};
use super::modern_client::{self, state::Parked};
use super::reach::{Hosting, Reach};
use super::tools::listing as tools;
use super::*;
use crate::mcp::task_messages::TaskSupport;
use crate::tasks::bridge::extension::ExtBridge;
use std::future::Future;

impl Reach for Session {
    fn upstream(&self) -> &UpstreamConfig {
        &self.upstream
    }

    fn max_in_flight(&self) -> usize {
        self.gateway.limits().max_in_flight
    }

    fn client_ref(&self, id: Id) -> ClientRef {
        Session::client_ref(self, id)
    }

    fn to_client(&self, msg: Message, route: Route) {
        Session::to_client(self, msg, route)
    }

    fn answer(&self, id: Id, resp: Value, answers: Option<Method>) {
        Session::answer(self, id, resp, answers)
    }

    fn abandon(&self, id: &Id) {
        self.sink.abandon(id)
    }

    fn link(&self) -> impl Future<Output = Result<Arc<Link>, RpcError>> + Send {
        Session::link(self)
    }

    fn current_link(&self) -> Option<Arc<Link>> {
        self.link.load_full()
    }

    fn client_init(&self) -> Option<Arc<Value>> {
        self.sides.now().init_params.clone()
    }

    fn next_client_side_id(&self) -> Id {
        Session::next_client_side_id(self)
    }

    fn upstream_tasks_are_extension(&self) -> bool {
        self.plan().tasks.extension()
    }

    fn down_request(&self, msg: Message) -> Result<Message, RpcError> {
        self.crossing().down_request(msg)
    }

    fn client_is_modern(&self) -> bool {
        self.modern.is_some()
    }

    fn weak(&self) -> Weak<Session> {
        self.me.clone()
    }

    fn while_open<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let st = self.state.lock().unwrap();
        (!st.closed).then(f)
    }
}

impl Hosting for Session {
    fn hosts_tool(&self, name: &str) -> impl Future<Output = Result<bool, RpcError>> + Send {
        self.tools.hosts(self, name)
    }

    fn hosted(&self) -> &Arc<Hosted> {
        Session::hosted(self)
    }

    fn owner(&self) -> &str {
        &self.owner
    }

    fn create_hosted(
        &self,
        msg: Value,
    ) -> impl Future<Output = Result<(Arc<str>, Value, Arc<Link>, Value), RpcError>> + Send {
        Session::create_hosted(self, msg)
    }

    fn run_hosted(&self, task_id: Arc<str>, link: Arc<Link>, msg: Value) -> impl Future<Output = ()> + Send {
        Session::run_hosted(self, task_id, link, msg)
    }

    fn waiter(&self) -> Weak<dyn ClientSession> {
        self.me.clone()
    }

    fn client(&self) -> &str {
        &self.client
    }

    fn tool_support(&self, name: &str) -> impl Future<Output = Result<TaskSupport, RpcError>> + Send {
        self.tools.support(self, name)
    }
}

impl input_rounds::Host for Session {
    fn rounds(&self) -> &InputRounds {
        &self.rounds
    }

    fn versions(&self) -> Option<(ProtocolVersion, ProtocolVersion)> {
        Session::versions(self)
    }
}

impl bridged_calls::Host for Session {
    fn bridged_calls(&self) -> &BridgedCalls {
        &self.bridged_calls
    }

    fn drop_moot_inputs(&self) {
        self.ext.drop_moot_inputs()
    }
}

impl long_calls::Host for Session {
    fn long_calls(&self) -> Option<&LongCalls> {
        self.long_calls.as_ref()
    }

    fn client_has_tasks(&self) -> bool {
        if let Some(modern) = &self.modern {
            return modern.declared_extension();
        }
        let sides = self.sides.now();
        let declared = sides.client_capabilities().and_then(|c| c.get("tasks")).is_some();
        sides.version.is_some_and(|v| v.has_tasks()) && declared
    }

    async fn lists_tool_read(&self, name: &str) -> bool {
        self.tools.support(self, name).await.is_ok() && self.tools.lists(name)
    }

    fn lists_tool(&self, name: &str) -> bool {
        self.tools.lists(name)
    }

    fn has_output_schema(&self, name: &str) -> bool {
        self.tools.has_output_schema(name)
    }

    fn refused_by_policy(&self, frame: &Message) -> Option<RpcError> {
        Session::refused_by_policy(self, frame)
    }
}

impl operations::Host for Session {
    fn upstream_runs_tasks(&self) -> bool {
        (dispatch::Dispatch { s: self, plan: self.plan() }).runs_tasks()
    }

    fn listed(&self) -> Listed {
        // Under the session's lock: a new link's `adopt` changes the capabilities and
        // forgets the tools under it.
        let _held = self.state.lock().unwrap();
        let declares = tools::Host::upstream_declares_tool_tasks(self);
        Listed { support: self.tools.all(), declares, marks_tasks: self.tools.marks_tasks() }
    }

    fn ext_bridge(&self, link: &Arc<Link>, id: &Id, call: Value, cancel: CancellationToken) -> ExtBridge {
        self.ext.bridge(self, link, id, call, None, cancel)
    }

    fn for_client_version(&self, msg: Message, answers: Option<Method>) -> Option<Message> {
        self.crossing().down(msg, answers)
    }
}

impl ext::Host for Session {
    fn ext(&self) -> &ExtTasks {
        &self.ext
    }

    fn keep_for_retry(&self, id: &Id, frame: &Message) -> bool {
        Session::keep_for_retry(self, id, frame)
    }

    fn take_retry(&self, id: &Id) -> Option<Message> {
        Session::take_retry(self, id)
    }

    fn cannot_ask(&self, msg: &Message, related: &Id) -> Option<String> {
        match &self.modern {
            Some(client) => client.cannot_ask(self, msg, &Route::Related(related.clone())),
            None if !self.client_can_answer(msg) => Some(format!("the client does not support {}", msg.method_name())),
            None => None,
        }
    }

    fn with_server_requests<R>(&self, f: impl FnOnce(usize) -> R) -> R {
        let st = self.state.lock().unwrap();
        f(st.server_requests.len())
    }

    fn ask(&self, id: Id, msg: Message, related: &Id) {
        match &self.modern {
            Some(client) => client.put(id, &msg),
            None => self.to_client(msg.with_id(&id), Route::Related(related.clone())),
        }
    }

    fn asked_all(&self) {
        if let Some(client) = &self.modern {
            client.ask_waiting(self);
        }
    }

    fn follow_permit(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.gateway.followers.clone().try_acquire_owned().ok()
    }

    fn remember_followed(&self) -> impl Future<Output = ()> + Send {
        Session::remember_followed(self)
    }

    fn round_policy(&self) -> hosted::RoundPolicy {
        Session::round_policy(self)
    }
}

impl modern_client::Host for Session {
    fn linked(&self) -> impl Future<Output = Result<(Arc<Link>, UpstreamSide), RpcError>> + Send {
        Session::linked(self)
    }

    fn up_modern(
        &self,
        link: &Arc<Link>,
        id: Id,
        frame: Message,
        shape: Shape,
    ) -> impl Future<Output = Result<(), RpcError>> + Send {
        Session::up_modern(self, link, id, frame, shape)
    }

    fn sides(&self) -> arc_swap::Guard<Arc<Sides>> {
        self.sides.now()
    }

    fn plan(&self) -> Plan {
        Session::plan(self)
    }

    fn deliver(&self, msg: Message, route: Route) {
        self.sink.deliver(msg, route)
    }

    fn principal_tasks(&self) -> Option<principal_tasks::PrincipalTasks<'_>> {
        Session::principal_tasks(self)
    }

    fn relayed(&self) -> &crate::tasks::relayed::RelayedTasks {
        &self.gateway.relayed
    }

    fn max_task_id_bytes(&self) -> usize {
        self.gateway.config.tasks.max_task_id_bytes
    }

    fn tag(&self) -> SessionTag {
        self.tag
    }

    fn parkable(&self) -> Option<Arc<dyn Parked>> {
        self.me.upgrade().map(|me| me as Arc<dyn Parked>)
    }

    fn close(&self) -> impl Future<Output = ()> + Send {
        Session::close(self)
    }

    fn handle_response(&self, frame: Message) -> impl Future<Output = ()> + Send {
        Session::handle_response(self, frame)
    }

    fn register_server_request(&self, link: &Arc<Link>, upstream_id: &Id, answers: Option<Method>) -> Option<Id> {
        Session::register_server_request(self, link, upstream_id, None, answers)
    }

    fn client_can_answer(&self, msg: &Message) -> bool {
        Session::client_can_answer(self, msg)
    }
}

/// A modern request's session, parked in its front while its client answers.
impl Parked for Session {
    fn upstream(&self) -> &str {
        &self.upstream.name
    }

    fn owner(&self) -> &str {
        &self.owner
    }

    fn client(&self) -> &str {
        &self.client
    }

    fn expire(self: Arc<Self>) {
        tokio::spawn(async move { self.close().await });
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl tools::Host for Session {
    fn upstream_declares_tool_tasks(&self) -> bool {
        task_messages::server_has_tool_tasks(&self.sides.now().caps)
    }

    fn with_upstream_version<R>(&self, f: impl FnOnce(Option<ProtocolVersion>) -> R) -> R {
        let _held = self.state.lock().unwrap();
        f(self.sides.now().upstream_version)
    }
}
