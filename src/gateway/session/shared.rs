//! What a session does differently on a shared link (`share = true`): it joins the link the
//! gateway holds for its upstream instead of opening one, counts its resource subscriptions
//! there (the upstream hears each uri once), and sees only the upstream tasks its own
//! requests created (`tasks/get|result|cancel` of any other is an unknown task, and
//! `tasks/list` is served from its own, never passed upstream, where it would list every
//! session's).

use super::*;
use crate::upstream::link::Negotiated;

impl Session {
    /// Joins the shared link of the session's upstream (opened if none is live): what it
    /// negotiated becomes the session's view of the upstream. Called with `relink` held.
    pub(super) async fn join_shared(&self) -> Result<Negotiated, RpcError> {
        let (link, negotiated) = self.gateway.shared_link(&self.upstream).await?;
        let events: Weak<dyn LinkEvents> = self.me.clone();
        link.attach(self.tag, events, self.share_key());
        self.adopt(&negotiated);
        // The upstream tasks its requests created on a link that died are no longer its to
        // ask about: on this one, their ids may be another session's tasks (a restarted
        // server, or a new upstream session, numbers them again).
        self.state.lock().unwrap().known_tasks.clear();
        *self.link.lock().unwrap() = Some(link);
        Ok(negotiated)
    }

    /// Whose share of a shared link's requests in flight the session's count against: its
    /// principal's, else its own.
    pub(super) fn share_key(&self) -> Arc<str> {
        if self.client.starts_with(PRINCIPAL_PREFIX) {
            self.client.as_str().into()
        } else {
            format!("session:{}", self.tag).into()
        }
    }

    /// Whether the session may ask the upstream about upstream task `task_id`: on a shared
    /// link, only about one its own request created on the live link (joined first: a new
    /// link forgets the last one's tasks).
    pub(super) async fn may_ask_about(&self, task_id: &str) -> Result<bool, RpcError> {
        if !self.shared {
            return Ok(true);
        }
        self.link().await?;
        Ok(self.state.lock().unwrap().known_tasks.iter().any(|t| t == task_id))
    }

    /// `resources/subscribe` or `resources/unsubscribe` on a shared link: the upstream is
    /// asked only for the first session to subscribe to a uri and when the last lets go;
    /// the others are answered at once.
    pub(super) async fn shared_subscription(&self, id: Id, frame: Message) -> Result<(), RpcError> {
        let uri = frame.value().pointer("/params/uri").and_then(Value::as_str).map(str::to_string);
        let Some(uri) = uri else {
            return Err(RpcError::new(INVALID_PARAMS, format!("{}: params.uri must be a string", frame.method_name())));
        };
        let link = self.link().await?;
        // Decided once the upstream answered the last subscribe or unsubscribe of the uri: a
        // session that came meanwhile is not told it holds what the upstream then refused,
        // and a subscribe never overtakes the unsubscribe before it.
        let gate = link.subscription_gate(&uri);
        let _decided = gate.lock().await;
        let subscribe = frame.method() == Method::ResourcesSubscribe;
        let ask_upstream = if subscribe {
            link.subscribe(self.tag, &uri, self.gateway.limits().max_in_flight)?
        } else {
            link.unsubscribe(self.tag, &uri)
        };
        if !ask_upstream {
            self.to_client(Message::made(jsonrpc::result_response(&id, json!({}))), Route::Response(id));
            return Ok(());
        }
        let method = frame.method();
        let Some(msg) = self.upward_request(frame)? else {
            return Err(RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                "the upstream's protocol version has no such request",
            ));
        };
        let params = msg.value().get("params").cloned().unwrap_or(json!({}));
        let mut resp = match link.request(method, params).await {
            Ok(r) => r,
            Err(e) => {
                if subscribe {
                    link.unsubscribe(self.tag, &uri);
                }
                return Err(e);
            }
        };
        if subscribe && resp.get("error").is_some() {
            // Refused: the session holds nothing.
            link.unsubscribe(self.tag, &uri);
        }
        jsonrpc::set_id(&mut resp, &id);
        self.answer(id, resp, None);
        Ok(())
    }

    /// A page of the upstream tasks this session created, read with `tasks/get` (those the
    /// upstream no longer knows are left out), from the `start`-th on, for a shared link's
    /// `tasks/list`; its cursor goes on with `up:<n>`.
    pub(super) async fn own_upstream_tasks(&self, id: Id, start: &str) -> Result<(), RpcError> {
        let start: usize = match start {
            "" => 0,
            s => s.parse().map_err(|_| RpcError::new(INVALID_PARAMS, "invalid cursor"))?,
        };
        let page = self.gateway.config.tasks.list_page_size;
        // Joined first: a new link forgets the last one's tasks.
        let link = self.link().await?;
        // The client's cursor may be any number: past the end, the page is empty.
        let end = start.saturating_add(page);
        let (ids, more) = {
            let st = self.state.lock().unwrap();
            let ids: Vec<String> = st.known_tasks.iter().skip(start).take(page).cloned().collect();
            (ids, st.known_tasks.len() > end)
        };
        let got = futures_util::future::join_all(
            ids.iter().map(|t| link.request(crate::jsonrpc::Method::TasksGet, json!({"taskId": t}))),
        )
        .await;
        let tasks: Vec<Value> = got.into_iter().filter_map(|r| r.ok()?.get("result").cloned()).collect();
        let mut result = json!({"tasks": tasks});
        if more {
            result["nextCursor"] = format!("{CURSOR_UPSTREAM}{end}").into();
        }
        self.answer(id.clone(), jsonrpc::result_response(&id, result), None);
        Ok(())
    }
}
