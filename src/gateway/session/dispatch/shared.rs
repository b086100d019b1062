//! What a session does differently on a shared link (`share = true`): it joins the link the
//! gateway holds for its upstream instead of opening one (`relink`), counts its resource
//! subscriptions there (`subscriptions`), and sees only the upstream tasks
//! its own requests created (`tasks/get|result|cancel` of any other is an unknown task, and
//! `tasks/list` is served from its own, never passed upstream, where it would list every
//! session's).

use super::Dispatch;
use crate::gateway::session::CURSOR_UPSTREAM;
use crate::jsonrpc::{self, Id, RpcError};
use crate::mcp::paging;
use serde_json::{Value, json};

impl Dispatch<'_> {
    /// Whether the session may ask the upstream about upstream task `task_id`: on a shared
    /// link, only about one its own request created on the live link (joined first: a new
    /// link forgets the last one's tasks).
    pub(super) async fn may_ask_about(&self, task_id: &str) -> Result<bool, RpcError> {
        let s = self.s;
        if !s.shared {
            return Ok(true);
        }
        s.link().await?;
        Ok(s.state.lock().unwrap().known_tasks.iter().any(|t| t == task_id))
    }

    /// A page of the upstream tasks this session created, read with `tasks/get` (those the
    /// upstream no longer knows are left out), from the `start`-th on, for a shared link's
    /// `tasks/list`; its cursor goes on with `up:<n>`.
    pub(super) async fn own_upstream_tasks(&self, id: Id, start: &str) -> Result<(), RpcError> {
        let s = self.s;
        let start: usize = match start {
            "" => 0,
            s => s.parse().map_err(|_| paging::invalid_cursor())?,
        };
        let page = s.gateway.config.tasks.list_page_size;
        // Joined first: a new link forgets the last one's tasks.
        let link = s.link().await?;
        // The client's cursor may be any number: past the end, the page is empty.
        let end = start.saturating_add(page);
        let (ids, more) = {
            let st = s.state.lock().unwrap();
            let ids: Vec<String> = st.known_tasks.iter().skip(start).take(page).cloned().collect();
            (ids, st.known_tasks.len() > end)
        };
        let got = futures_util::future::join_all(
            ids.iter().map(|t| link.request(crate::jsonrpc::Method::TasksGet, json!({"taskId": t}))),
        )
        .await;
        let tasks: Vec<Value> = got.into_iter().filter_map(|r| r.ok()?.get("result").cloned()).collect();
        let mut result = jsonrpc::object([("tasks", Value::Array(tasks))]);
        if more {
            result["nextCursor"] = format!("{CURSOR_UPSTREAM}{end}").into();
        }
        s.answer(id.clone(), jsonrpc::result_response(&id, result), None);
        Ok(())
    }
}
