//! The narrow contexts the session lends its strategies: what every strategy may reach of
//! it ([`Reach`]), and what each strategy that names no session type says, as a trait of its
//! own on top of that, it needs besides. The session is each of them here.

use super::bridged_calls::{self, BridgedCalls};
use super::input_rounds::{self, InputRounds};
use super::long_calls::{self, state::LongCalls};
use super::reach::Reach;
use super::*;
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

    fn client_is_modern(&self) -> bool {
        self.modern.is_some()
    }

    fn weak(&self) -> Weak<Session> {
        self.me.clone()
    }
}

impl input_rounds::Host for Session {
    fn rounds(&self) -> &InputRounds {
        &self.rounds
    }

    fn versions(&self) -> Option<(ProtocolVersion, ProtocolVersion)> {
        Session::versions(self)
    }

    fn client_init(&self) -> Option<Arc<Value>> {
        self.sides.now().init_params.clone()
    }

    fn next_client_side_id(&self) -> Id {
        Session::next_client_side_id(self)
    }

    fn current_link(&self) -> Option<Arc<Link>> {
        self.link.load_full()
    }
}

impl bridged_calls::Host for Session {
    fn bridged_calls(&self) -> &BridgedCalls {
        &self.bridged_calls
    }

    fn while_open<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let st = self.state.lock().unwrap();
        (!st.closed).then(f)
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

    fn hosts_tool(&self, name: &str) -> impl Future<Output = Result<bool, RpcError>> + Send {
        self.tools.hosts(self, name)
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
}
