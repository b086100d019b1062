//! The session running its plan (`plan`): each request of an initialized session goes to
//! its client's era first (a modern client's own checks, or the by-token dialects), then
//! [`Session::dispatch`] hands it, by its method, to the strategy the plan chose for it
//! (`calls`, `task_requests`), and what is left goes up the link ([`Session::forward_up`]: on
//! a modern link, a legacy client's request is kept by its input rounds, `input_rounds`).

use super::*;

mod calls;
use super::plan::{CallRoute, FirstStep};
mod task_requests;

/// A session running its plan for one request.
pub(super) struct Planned<'a> {
    pub(super) s: &'a Session,
    pub(super) plan: Plan,
}

/// What became of a request the plan was handed: passed on to the link with the shape its
/// response needs, or answered (or being answered) by the gateway. Moved once per request,
/// never kept: boxing the message would cost every request an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Step {
    Up(Message, Shape),
    Done,
}

impl Session {
    /// A request of an initialized session: the client's era has its say first, then the
    /// plan (decided when the link negotiated) serves it, or it is forwarded.
    pub(super) async fn dispatch(&self, id: Id, frame: Message) -> Result<(), RpcError> {
        let frame = match self.first_step {
            FirstStep::None => frame,
            // Boxed: a plain legacy request's future must not carry the modern paths' state.
            FirstStep::Modern | FirstStep::ByToken => {
                let Some(frame) = Box::pin(self.client_step(&id, frame)).await? else { return Ok(()) };
                frame
            }
        };
        let run = Planned { s: self, plan: self.plan() };
        let frame = run.plain_for_client(frame);
        let step = match frame.method() {
            Method::ToolsList => Step::Up(frame, run.listing_shape()),
            Method::ToolsCall => match run.call_route(&id, &frame) {
                CallRoute::Up(shape) => Step::Up(frame, shape),
                CallRoute::ByListing => match run.listed_call(&id, &frame).await? {
                    Some(shape) => Step::Up(frame, shape),
                    None => Step::Done,
                },
                // Boxed, as every rare path here: each request's future would carry its state.
                CallRoute::CoreTask => Box::pin(run.core_task_call(id.clone(), frame)).await?,
                CallRoute::Translated => {
                    Box::pin(self.ext_core_call(id.clone(), frame)).await?;
                    Step::Done
                }
            },
            Method::TasksGet | Method::TasksResult | Method::TasksCancel => {
                Box::pin(run.task_request(id.clone(), frame)).await?
            }
            Method::TasksList => Box::pin(run.tasks_list(id.clone(), frame)).await?,
            Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                Box::pin(run.subscription(id.clone(), frame)).await?
            }
            _ => Step::Up(frame, Shape::AsIs),
        };
        match step {
            Step::Up(frame, shape) => self.forward(id, frame, shape).await,
            Step::Done => Ok(()),
        }
    }

    /// What the client's era makes of a request first (see [`FirstStep`]). `None`: answered.
    async fn client_step(&self, id: &Id, frame: Message) -> Result<Option<Message>, RpcError> {
        match self.first_step {
            FirstStep::Modern => self.modern_request(id, frame).await,
            FirstStep::ByToken => match self.by_token_request(id, &frame).await {
                Some(answered) => answered.map(|()| None),
                None => Ok(Some(frame)),
            },
            FirstStep::None => Ok(Some(frame)),
        }
    }

    /// A request for the link, translated for the link's version (which a restart may have
    /// changed).
    async fn forward(&self, id: Id, frame: Message, shape: Shape) -> Result<(), RpcError> {
        let link = self.link().await?;
        if let Some(answered) = self.removed_by_modern(&link, &id, &frame) {
            return answered;
        }
        let frame = match &self.modern {
            Some(_) => self.modern_upward(&link, frame),
            None => self.legacy_upward(&link, frame)?,
        };
        let frame = self.upward_request(frame)?.ok_or_else(|| {
            RpcError::new(jsonrpc::METHOD_NOT_FOUND, "the upstream's protocol version has no such request")
        })?;
        if !link.is_modern() {
            return link.forward(self.client_ref(id), frame, shape).await;
        }
        // Boxed: a legacy request's future must not carry the modern path's state.
        Box::pin(self.forward_up(&link, id, frame, shape)).await
    }

    /// Forwards a client request to its link: a modern link declares this session's client's
    /// capabilities for it, and for a legacy client the request is kept by its input rounds
    /// (`input_rounds`), as it may be answered with input requests.
    pub(super) async fn forward_up(
        &self,
        link: &Arc<Link>,
        id: Id,
        frame: Message,
        shape: Shape,
    ) -> Result<(), RpcError> {
        if !link.is_modern() {
            return link.forward(self.client_ref(id), frame, shape).await;
        }
        // Boxed: a legacy link's every request future would otherwise carry this path's state.
        Box::pin(self.forward_modern(link, id, frame, shape)).await
    }

    /// [`Session::forward_up`] on a modern link.
    async fn forward_modern(&self, link: &Arc<Link>, id: Id, frame: Message, shape: Shape) -> Result<(), RpcError> {
        if let Some(m) = &self.modern {
            // A modern client answers its own input requests (the results pass to it as they
            // are): its request declares the client's own capabilities.
            let capabilities = Some(m.meta.capabilities.clone());
            let params = self.client_param_headers();
            return link.forward_declaring(self.client_ref(id), frame, shape, capabilities, &params).await;
        }
        // A legacy client's: kept by its input rounds, which ask it what the upstream asks.
        self.rounds.send(self, link, id, frame, shape).await
    }
}
