//! The live task page (`[server.task_page]`): `GET /tasks` serves a static page (HTML, CSS
//! and a little JavaScript compiled into the binary, no task data, so no token needed);
//! `GET /tasks/events` streams snapshots of the tasks the caller may see (`events`);
//! `POST /tasks/{id}/cancel` cancels one, as `tasks/cancel` would, saying who did.
//!
//! The data routes have the MCP paths' guards: the `Host`/`Origin` check and `[server.auth]`
//! (401 with the metadata URL). Who sees what is `snapshot`'s: without authentication every
//! task (the operator on the box), with it the principal's own tasks on every upstream, and
//! every task for the principals listed in `operators`. A task the caller cannot see is
//! answered as one that does not exist (404). The cancel needs the header
//! `X-Taskgate-Page: cancel`, which a cross-site form cannot send (403 without it), and
//! `max_viewers` bounds the open streams (503 past it). Every viewer's stream shows the same
//! one listing per `refresh` (`listing`), filtered for it; one that does not read is
//! dropped after `unread_timeout` (`events`).

use crate::downstream::auth::Principal;
use crate::downstream::http_body::{Body, event_stream_response, plain};
use crate::downstream::http_guard;
use crate::gateway::Gateway;
use crate::mcp::task_messages::TaskStatus;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

mod events;
mod listing;
mod places;
mod snapshot;

use snapshot::Viewer;

/// The header a cancel must carry, and its value.
pub const CANCEL_HEADER: &str = "x-taskgate-page";
pub const CANCEL_HEADER_VALUE: &str = "cancel";

/// The longest task id a cancel path may name (the gateway's are 32 hex digits).
const MAX_ID_LEN: usize = 128;

const PAGE_HTML: &str = include_str!("task_page/page.html");
const PAGE_CSS: &str = include_str!("task_page/page.css");
const PAGE_JS: &str = include_str!("task_page/page.js");

/// The task page of one HTTP server.
pub(crate) struct TaskPage {
    gateway: Arc<Gateway>,
    auth: crate::downstream::auth::LiveAuth,
    /// One permit per open `/tasks/events` stream (`max_viewers`).
    viewers: Arc<tokio::sync::Semaphore>,
    /// The places each principal holds (`max_viewers_per_principal`).
    places: Arc<places::Places>,
    /// Cancelled when the server begins to shut down: every stream ends.
    stopping: CancellationToken,
    /// The one listing per refresh that every viewer's stream filters.
    listings: Arc<listing::Listings>,
}

impl TaskPage {
    pub(crate) fn new(
        gateway: &Arc<Gateway>,
        auth: crate::downstream::auth::LiveAuth,
        stopping: CancellationToken,
    ) -> Arc<TaskPage> {
        let viewers = Arc::new(tokio::sync::Semaphore::new(gateway.config.server.task_page.max_viewers));
        let listings = listing::Listings::new();
        Arc::new(TaskPage { gateway: gateway.clone(), auth, viewers, places: Default::default(), stopping, listings })
    }

    /// Whether `path` is the page's (and the page is enabled).
    pub(crate) fn owns(&self, path: &str) -> bool {
        self.gateway.config.server.task_page.enabled && (path == "/tasks" || path.starts_with("/tasks/"))
    }

    /// Answers a request for one of the page's paths (see [`TaskPage::owns`]).
    pub(crate) async fn serve(&self, req: Request<Incoming>, path: &str) -> Response<Body> {
        if let Err(refused) = http_guard::check_host_and_origin(self.gateway.limits(), req.headers()) {
            return refused.into_response();
        }
        let method = req.method().clone();
        let asset = match path {
            "/tasks" => Some((PAGE_HTML, "text/html; charset=utf-8")),
            "/tasks/page.css" => Some((PAGE_CSS, "text/css; charset=utf-8")),
            "/tasks/page.js" => Some((PAGE_JS, "text/javascript; charset=utf-8")),
            _ => None,
        };
        if let Some((text, content_type)) = asset {
            if method != Method::GET && method != Method::HEAD {
                return not_allowed("GET, HEAD");
            }
            return static_response(text, content_type);
        }
        let cancel_id = path.strip_prefix("/tasks/").and_then(|p| p.strip_suffix("/cancel"));
        if path != "/tasks/events" && cancel_id.is_none() {
            return error(
                StatusCode::NOT_FOUND,
                "not found: the task page serves /tasks, /tasks/events and POST /tasks/{id}/cancel",
            );
        }
        let (viewer, until) = match self.viewer(&req).await {
            Ok(v) => v,
            Err(refusal) => return refusal,
        };
        match cancel_id {
            None if method == Method::GET => self.events(viewer, until),
            None => not_allowed("GET"),
            Some(id) if method == Method::POST => self.cancel(&req, id, &viewer).await,
            Some(_) => not_allowed("POST"),
        }
    }

    /// Who asks, and so what they see, and when their credential expires; the 401 if they
    /// cannot be told.
    async fn viewer(&self, req: &Request<Incoming>) -> Result<(Viewer, Option<tokio::time::Instant>), Response<Body>> {
        let auth = self.auth.load_full();
        let principal = match auth.principal(req.headers()).await {
            Ok(p) => p,
            Err(why) => return Err(auth.refusal(&why, req.headers())),
        };
        let operators = &self.gateway.config.server.task_page.operators;
        let until = principal.as_ref().and_then(Principal::stream_deadline);
        let viewer = match principal {
            None => Viewer::Everyone { operator: None },
            Some(Principal { name, .. }) if operators.iter().any(|o| **o == *name) => {
                Viewer::Everyone { operator: Some(name) }
            }
            Some(Principal { name, .. }) => Viewer::Principal(name),
        };
        Ok((viewer, until))
    }

    /// `GET /tasks/events`: a snapshot at once, then each time it changed; it ends at
    /// `until`, when the viewer's credential expires.
    fn events(&self, viewer: Viewer, until: Option<tokio::time::Instant>) -> Response<Body> {
        let cfg = &self.gateway.config.server.task_page;
        let place = match viewer.principal() {
            Some(p) => match self.places.take(p, cfg.max_viewers_per_principal) {
                Some(place) => Some(place),
                None => {
                    let max = cfg.max_viewers_per_principal;
                    return error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!(
                            "service unavailable: {p} already watches the task page {max} times (max_viewers_per_principal)"
                        ),
                    );
                }
            },
            None => None,
        };
        let Ok(permit) = self.viewers.clone().try_acquire_owned() else {
            let max = self.gateway.config.server.task_page.max_viewers;
            tracing::info!("task page: refused a viewer, {max} already watch (max_viewers)");
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("service unavailable: {max} viewers already watch the task page (max_viewers)"),
            );
        };
        let listings = self.listings.watch(&self.gateway, &self.stopping);
        // The places (among all viewers, and the principal's) are held as long as the stream is.
        let held = Box::new((permit, place));
        let mut stream = events::stream(self.gateway.clone(), self.stopping.clone(), viewer, listings, held);
        if let Some(d) = until {
            stream = Box::pin(futures_util::StreamExt::take_until(stream, tokio::time::sleep_until(d)));
        }
        event_stream_response(Body::Frames(stream), None)
    }

    /// `POST /tasks/{id}/cancel`.
    async fn cancel(&self, req: &Request<Incoming>, id: &str, viewer: &Viewer) -> Response<Body> {
        let header = req.headers().get(CANCEL_HEADER).and_then(|v| v.to_str().ok());
        if header != Some(CANCEL_HEADER_VALUE) {
            return error(
                StatusCode::FORBIDDEN,
                &format!(
                    "forbidden: a cancel from the task page carries the header {CANCEL_HEADER}: {CANCEL_HEADER_VALUE}"
                ),
            );
        }
        let hosted = &self.gateway.hosted;
        let unknown =
            || error(StatusCode::NOT_FOUND, "not found: no such task (it ended and expired, or never existed)");
        if id.is_empty() || id.len() > MAX_ID_LEN {
            return unknown();
        }
        let rec = match hosted.store().get(id).await {
            Ok(Some(rec)) if viewer.sees(&rec) => rec,
            Ok(_) => return unknown(),
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        };
        let already =
            |s: TaskStatus| error(StatusCode::CONFLICT, &format!("conflict: the task is already {}", s.as_str()));
        if rec.status.is_terminal() {
            return already(rec.status);
        }
        let message = format!("cancelled from the task page by {}", viewer.name());
        if let Err(e) = hosted.cancel_saying(id, &message).await {
            // It ended meanwhile, or the store failed.
            return match hosted.store().get(id).await {
                Ok(Some(rec)) if rec.status.is_terminal() => already(rec.status),
                _ => error(StatusCode::INTERNAL_SERVER_ERROR, &e.message),
            };
        }
        tracing::info!(task = %id, "{message}");
        match hosted.store().get(id).await {
            Ok(Some(rec)) => json(StatusCode::OK, snapshot::row(&rec, None).to_string()),
            _ => unknown(),
        }
    }
}

fn static_response(text: &'static str, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(Bytes::from_static(text.as_bytes()))));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    // Same-origin scripts, styles and fetches only, and never in a frame.
    h.insert(
        "content-security-policy",
        HeaderValue::from_static("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

fn json(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(Bytes::from(text))));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// An error of the page's data routes: `{"error": message}`.
fn error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, serde_json::json!({ "error": message }).to_string())
}

fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
    r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}
