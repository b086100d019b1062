//! The narrow contexts the session lends its strategies: each strategy that names no session
//! type says, as a trait of its own, what it needs of one, and the session is that here.

use super::input_rounds::{self, InputRounds};
use super::*;

impl input_rounds::Host for Session {
    fn rounds(&self) -> &InputRounds {
        &self.rounds
    }

    fn upstream(&self) -> &UpstreamConfig {
        &self.upstream
    }

    fn max_in_flight(&self) -> usize {
        self.gateway.limits().max_in_flight
    }

    fn client_ref(&self, id: Id) -> ClientRef {
        Session::client_ref(self, id)
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

    fn to_client(&self, msg: Message, route: Route) {
        Session::to_client(self, msg, route)
    }

    fn abandon(&self, id: &Id) {
        self.sink.abandon(id)
    }

    fn link(&self) -> impl std::future::Future<Output = Result<Arc<Link>, RpcError>> + Send {
        Session::link(self)
    }

    fn current_link(&self) -> Option<Arc<Link>> {
        self.link.load_full()
    }

    fn weak(&self) -> Weak<Session> {
        self.me.clone()
    }
}
