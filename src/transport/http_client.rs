//! Upstream Streamable HTTP: POSTs with JSON or SSE responses, the upstream's session id and
//! protocol-version headers, its GET stream, resumption of a broken SSE response with
//! `Last-Event-ID`, and DELETE when the link closes. Each session has connections of its
//! own (see [`http_conn`](crate::transport::http_conn)); a request is sent and its answer
//! read on the task that sends it, unless it takes long (see [`inline`](crate::transport::inline)).
//!
//! A message may also be sent with headers of its own ([`HttpConn::send_headed`]): then it
//! carries those instead of the session's id and version, and nothing of its answer (a
//! session id) is kept. That is how a stateless (2026-07-28) upstream is spoken to; which
//! headers a message needs is the caller's to say.

use crate::jsonrpc::{self, Id, Kind, Message};
use crate::transport::credential::Credential;
use crate::transport::http_conn::{Pool, UpBody};
use crate::transport::http_target::{HttpSettings, Target, parse_headers};
use crate::transport::redact::Secrets;
use crate::transport::up_body::{read_limited, read_prefix};
use crate::transport::{Error, InboundSink, inline, messages_of};
use bytes::Bytes;
use http_body_util::Full;

use crate::locks::Mutex;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode, Uri};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

mod events;

pub use crate::transport::http_conn::HttpClient;

/// How long a request is read on the task that sends it. An answer that takes longer (a
/// slow call, an event stream) is read in a task of its own, so the sender is not held.
const INLINE_BUDGET: Duration = Duration::from_millis(5);

/// Connections a session may have in use beyond its requests in flight (notifications,
/// responses to the server, the GET stream).
pub(crate) const EXTRA_CONNS: usize = 4;

/// How often in a row a broken SSE stream is resumed without receiving an event before the
/// request is failed. Every event received resets the count: a server may close the stream
/// after each event (SSE polling, SEP-1699), bounded in all by `max_request_time`.
const MAX_RESUMES: u32 = 5;

/// The shortest reconnection time taken from a server's `retry` field.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// What a broken event stream needs to be resumed: the last event id, the reconnection time
/// the server asked for (`retry`), and whether an event came since the last resumption.
#[derive(Default)]
struct Resume {
    last_id: Option<String>,
    retry: Option<Duration>,
    got_event: bool,
}

/// What the first POST of a connection said about the server, for `transport = "auto"`: a
/// refusal that a legacy HTTP+SSE server gives a POST on its SSE URL (400, 404 or 405, as
/// the spec's backwards-compatibility section lists them). Anything else, an answer, a 500,
/// a connection refused, is Streamable HTTP's to report as usual, and the probe is dropped
/// without a verdict.
pub(crate) struct Legacy(pub(crate) Error);

/// Where the verdict of a first POST goes.
pub(crate) type Probe = oneshot::Sender<Legacy>;

/// Headers of one message's POST, sent instead of the session's own.
type Headed = Option<Arc<[(HeaderName, HeaderValue)]>>;

/// A caller's header list, checked: a name or value HTTP cannot carry is refused.
fn headed(headers: &[(std::borrow::Cow<'static, str>, String)]) -> Result<Arc<[(HeaderName, HeaderValue)]>, Error> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| Error::BadHeader(e.into()))?;
            let value = HeaderValue::from_str(v).map_err(|e| Error::BadHeader(e.into()))?;
            Ok((name, value))
        })
        .collect()
}

fn legacy_refusal(status: StatusCode) -> bool {
    matches!(status, StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED)
}

/// One upstream MCP session over Streamable HTTP.
pub struct HttpConn {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    pool: Arc<Pool>,
    max_body: usize,
    max_batch: usize,
    /// The request target (origin form: path and query) and the `Host` header.
    target: Uri,
    host: HeaderValue,
    /// The URL as errors and logs show it: without user-info or query, which may hold secrets.
    shown: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The client's `Authorization`, where the upstream receives it.
    credential: Option<Arc<Credential>>,
    /// Masked in the upstream's error text.
    secrets: Secrets,
    connect_timeout: Duration,
    /// The longest a request may take; bounds resuming (polling) its response stream.
    max_request_time: Duration,
    /// The upstream's session id and the negotiated version, each learned once and sent
    /// with every request after (read without a lock).
    session_id: OnceLock<HeaderValue>,
    version: OnceLock<HeaderValue>,
    sink: Arc<dyn InboundSink>,
    closed: AtomicBool,
    /// Cancelled when the session closes: what still runs for it (a request handed to a task
    /// of its own, a response stream) stops, and its connection closes.
    stopped: CancellationToken,
    /// The requests still running, by the id they were sent with: a request the link gives
    /// up on (it sends `notifications/cancelled` for it: a client's cancel, a timeout, an
    /// abandoned internal request) stops here too, and frees its connection. At most one
    /// entry per request in flight; each job removes its own.
    running: Mutex<HashMap<Id, CancellationToken>>,
    get_stream: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl HttpConn {
    /// `settings.max_in_flight` bounds the session's requests in flight, and so its
    /// connections. Nothing is sent yet.
    pub fn new(http: &HttpClient, settings: &HttpSettings, sink: Arc<dyn InboundSink>) -> Result<HttpConn, Error> {
        let Target { uri, path, host, shown } = Target::parse(&settings.url)?;
        let connect_timeout = settings.connect_timeout;
        Ok(HttpConn {
            inner: Arc::new(Inner {
                name: settings.name.as_str().into(),
                pool: Pool::new(http, uri, settings.max_in_flight.saturating_add(EXTRA_CONNS), connect_timeout),
                max_body: http.max_body,
                max_batch: settings.max_batch,
                target: path,
                host,
                shown,
                headers: parse_headers(&settings.headers)?,
                credential: settings.credential.clone(),
                secrets: Secrets::of(&settings.url, &settings.headers),
                connect_timeout,
                max_request_time: settings.max_request_time,
                session_id: OnceLock::new(),
                version: OnceLock::new(),
                sink,
                closed: AtomicBool::new(false),
                stopped: CancellationToken::new(),
                running: Mutex::new(HashMap::new()),
                get_stream: Mutex::new(None),
            }),
        })
    }

    /// Sends one message. A request is POSTed in the background and its answer arrives at
    /// the sink; a notification or response is POSTed before this returns.
    pub async fn send(&self, msg: Message) -> Result<(), Error> {
        self.send_with(msg, None, None).await
    }

    /// Sends one message with `headers` of its own, instead of the session's id and
    /// version header; nothing of its answer is kept for the session (a stateless POST).
    pub async fn send_headed(
        &self,
        msg: Message,
        headers: &[(std::borrow::Cow<'static, str>, String)],
    ) -> Result<(), Error> {
        let headers = headed(headers)?;
        self.send_with(msg, None, Some(headers)).await
    }

    /// Sends the connection's first message, and tells `probe` if its POST was refused as a
    /// legacy HTTP+SSE server would refuse it; then nothing else is made of the refusal (the
    /// request does not fail, the notification is not an error): the caller sends the
    /// message again over the legacy transport. For a request the verdict comes once the
    /// response head is in, within `connect_timeout` (past it the request fails as usual).
    pub(crate) async fn send_probing(&self, msg: Message, probe: Probe) -> Result<(), Error> {
        self.send_with(msg, Some(probe), None).await
    }

    async fn send_with(&self, msg: Message, probe: Option<Probe>, headed: Headed) -> Result<(), Error> {
        if self.inner.closed.load(Ordering::Relaxed) {
            return Err(Error::SessionClosed);
        }
        if msg.kind() == Kind::Request {
            let id = msg.id().cloned().expect("requests have ids");
            let body = msg.into_bytes();
            // Past max_request_time the link has answered the request itself: a stream still
            // open a little later is dropped, and its connection with it.
            let inner = self.inner.clone();
            let stop = self.inner.stopped.child_token();
            self.inner.running.lock().unwrap().insert(id.clone(), stop.clone());
            let job = Box::pin(async move {
                tokio::select! {
                    _ = inner.clone().request(body, id.clone(), probe, headed) => {}
                    _ = stop.cancelled() => {}
                }
                // The link numbers its requests afresh on each connection: the id is this job's.
                inner.running.lock().unwrap().remove(&id);
            });
            let limit = self.inner.max_request_time.saturating_add(Duration::from_secs(5));
            inline::run(job, INLINE_BUDGET, limit).await;
            Ok(())
        } else {
            let method = msg.method();
            if method == crate::jsonrpc::Method::Cancelled
                && let Some(id) = msg.request_id_param()
                && let Some(stop) = self.inner.running.lock().unwrap().remove(&id)
            {
                stop.cancel();
            }
            let initialized = method == crate::jsonrpc::Method::Initialized;
            let stateless = headed.is_some();
            let resp = self.inner.post(msg.into_bytes(), Some(self.inner.connect_timeout), headed).await?;
            let status = resp.status();
            let challenge = resp.headers().get(header::WWW_AUTHENTICATE).cloned();
            let body = tokio::time::timeout(self.inner.connect_timeout, read_prefix(resp.into_body(), 2048))
                .await
                .unwrap_or_default();
            if let Some(probe) = probe
                && legacy_refusal(status)
            {
                let _ = probe.send(Legacy(self.inner.http_error(status, challenge.as_ref(), &body)));
                return Ok(());
            }
            if !status.is_success() {
                let why = self.inner.http_error(status, challenge.as_ref(), &body);
                tracing::warn!(upstream = %self.inner.name, "a message was refused: {why}");
                return Err(why);
            }
            if initialized && !stateless {
                // One GET stream per session, however often the client repeats itself; it
                // ends with the session.
                let mut slot = self.inner.get_stream.lock().unwrap();
                if slot.as_ref().is_none_or(|t| t.is_finished()) {
                    let inner = self.inner.clone();
                    let stopped = self.inner.stopped.clone();
                    *slot = Some(tokio::spawn(async move {
                        tokio::select! {
                            _ = inner.get_stream() => {}
                            _ = stopped.cancelled() => {}
                        }
                    }));
                }
            }
            Ok(())
        }
    }

    /// Ends the upstream session with DELETE (bounded by a short timeout).
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        self.inner.stopped.cancel();
        if let Some(t) = self.inner.get_stream.lock().unwrap().take() {
            t.abort();
        }
        let sid = self.inner.session_id.get().cloned();
        if let Some(sid) = sid {
            let mut req = self.inner.builder(Method::DELETE, None);
            req = req.header(crate::transport::mcp_http::SESSION_HEADER, sid);
            if let Ok(req) = req.body(Full::new(Bytes::new())) {
                let _ = tokio::time::timeout(Duration::from_secs(2), self.inner.pool.send(req)).await;
            }
        }
        self.inner.pool.clear();
    }
}

impl Drop for HttpConn {
    /// A session dropped without [`HttpConn::close`] stops too: what still runs for it (a
    /// request handed to a task of its own, the GET stream) holds a connection, and nothing
    /// is left to deliver its answers to. (No DELETE: that needs an await.)
    fn drop(&mut self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        self.inner.stopped.cancel();
        if let Some(t) = self.inner.get_stream.lock().unwrap().take() {
            t.abort();
        }
    }
}

impl Inner {
    fn builder(&self, method: Method, headed: Option<&[(HeaderName, HeaderValue)]>) -> hyper::http::request::Builder {
        let mut b = Request::builder().method(method).uri(self.target.clone()).header(header::HOST, self.host.clone());
        for (k, v) in &self.headers {
            b = b.header(k, v);
        }
        if let Some(v) = self.credential.as_ref().and_then(|c| c.get()) {
            b = b.header(header::AUTHORIZATION, v);
        }
        if let Some(own) = headed {
            for (k, v) in own {
                b = b.header(k, v);
            }
            return b;
        }
        if let Some(v) = self.version.get().cloned() {
            b = b.header(crate::transport::mcp_http::VERSION_HEADER, v);
        }
        if let Some(s) = self.session_id.get().cloned() {
            b = b.header(crate::transport::mcp_http::SESSION_HEADER, s);
        }
        b
    }

    /// POSTs `body`. `wait` bounds the time to the response headers: short for notifications
    /// and responses; none for requests, whose answer may take as long as the tool runs.
    async fn post(
        &self,
        body: Bytes,
        wait: Option<Duration>,
        headed: Headed,
    ) -> Result<hyper::Response<UpBody>, Error> {
        let stateless = headed.is_some();
        let req = self
            .builder(Method::POST, headed.as_deref())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(Full::new(body))
            .map_err(Error::Request)?;
        let sent = match wait {
            Some(wait) => tokio::time::timeout(wait, self.pool.send(req))
                .await
                .map_err(|_| Error::NoResponse { url: self.shown.clone(), wait })?,
            None => self.pool.send(req).await,
        };
        let resp = sent.map_err(|cause| Error::Unreachable { url: self.shown.clone(), cause })?;
        if let Some(sid) = resp.headers().get(crate::transport::mcp_http::SESSION_HEADER).filter(|_| !stateless) {
            // The first one the upstream gave is kept.
            if self.session_id.get().is_none() {
                let _ = self.session_id.set(sid.clone());
            }
        }
        Ok(resp)
    }

    /// POSTs a request and delivers everything that answers it.
    /// A first request (`probe`) gets its response head within `connect_timeout`, and a
    /// refusal such as a legacy server gives is told to `probe` instead of failing it.
    async fn request(self: Arc<Self>, body: Bytes, id: Id, probe: Option<Probe>, headed: Headed) {
        let deadline = tokio::time::Instant::now().checked_add(self.max_request_time);
        let stateless = headed.is_some();
        let resp = match self.post(body, probe.as_ref().map(|_| self.connect_timeout), headed).await {
            Ok(r) => r,
            Err(e) => return self.fail(&id, e),
        };
        let status = resp.status();
        if let Some(probe) = probe
            && legacy_refusal(status)
        {
            let challenge = resp.headers().get(header::WWW_AUTHENTICATE).cloned();
            let body = tokio::time::timeout(self.connect_timeout, read_prefix(resp.into_body(), 2048))
                .await
                .unwrap_or_default();
            let _ = probe.send(Legacy(self.http_error(status, challenge.as_ref(), &body)));
            return;
        }
        let content_type =
            resp.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        if status == StatusCode::NOT_FOUND && !stateless && self.session_id.get().is_some() {
            self.sink.closed(Error::SessionExpired { url: self.shown.clone() });
            return;
        }
        if !status.is_success() {
            let challenge = resp.headers().get(header::WWW_AUTHENTICATE).cloned();
            let body = tokio::time::timeout(self.connect_timeout, read_prefix(resp.into_body(), 2048))
                .await
                .unwrap_or_default();
            let body = self.secrets.redact_bytes(body, self.credential.as_ref().and_then(|c| c.get()).as_ref());
            // Many servers put a JSON-RPC error in the body of an HTTP error; pass it on.
            // Anything else (an OAuth error object, HTML, nothing) fails the request now.
            if let Ok(m) = Message::parse(Bytes::from(body.clone()))
                && m.kind() == Kind::Response
                && m.is_error()
            {
                return self.deliver(m.with_id(&id), &id);
            }
            return self.fail(&id, self.http_error(status, challenge.as_ref(), &body));
        }
        if status == StatusCode::ACCEPTED {
            return self.fail(&id, Error::Unanswered);
        }
        if content_type.starts_with("text/event-stream") {
            let mut resume = Resume::default();
            let mut answered = self.read_sse(resp.into_body(), Some(&id), &mut resume).await;
            let mut tries = 0;
            while !answered && !self.closed.load(Ordering::Relaxed) {
                let Some(from) = resume.last_id.clone() else { break };
                if std::mem::take(&mut resume.got_event) {
                    tries = 0;
                }
                tries += 1;
                if tries > MAX_RESUMES {
                    break;
                }
                let wait = resume.retry.unwrap_or(Duration::from_millis(100 * u64::from(tries)));
                let resume_at = tokio::time::Instant::now().checked_add(wait);
                if deadline.is_some_and(|d| resume_at.is_none_or(|r| r >= d)) {
                    // Out of time: answered as the link's own timeout would be.
                    let why = Error::Unresumable { max_request_time: self.max_request_time };
                    tracing::warn!(upstream = %self.name, "stopped resuming a response stream: {why}");
                    return self.sink.request_failed(id, why);
                }
                tokio::time::sleep(wait).await;
                match self.open_get(Some(&from)).await {
                    Ok(Some(body)) => answered = self.read_sse(body, Some(&id), &mut resume).await,
                    Ok(None) | Err(_) => continue,
                }
            }
            if !answered && !self.closed.load(Ordering::Relaxed) {
                self.fail(&id, Error::StreamEnded);
            }
        } else {
            let body = match read_limited(resp.into_body(), self.max_body).await {
                Ok(b) => b,
                Err(e) => return self.fail(&id, e),
            };
            let msgs = match messages_of(&self.name, body, self.max_batch) {
                Ok(msgs) => msgs,
                Err(e) => return self.fail(&id, Error::BadBody(e.message)),
            };
            // A JSON body is the request's answer: one that holds none (several objects run
            // together, something that is not JSON-RPC) fails the request now.
            let mut answered = false;
            for m in msgs {
                match m {
                    // An error without an id in the body of the request's answer is its
                    // answer (as in the body of an HTTP error).
                    Ok(m) if !answered && m.kind() == Kind::Response && m.is_error() && m.id().is_none() => {
                        answered = true;
                        self.deliver(m.with_id(&id), &id);
                    }
                    Ok(m) => {
                        answered |= m.kind() == Kind::Response && m.id() == Some(&id);
                        self.deliver(m, &id);
                    }
                    Err((failed, why)) => {
                        answered |= failed == id;
                        self.sink.request_failed(failed, why);
                    }
                }
            }
            if !answered {
                self.fail(&id, Error::BadBody("the JSON body holds no response to the request".into()));
            }
        }
    }

    fn deliver(&self, msg: Message, related: &Id) {
        self.note_version(&msg);
        self.sink.message(msg, Some(related.clone()));
    }

    /// Learns the negotiated version from the initialize result, for the header.
    fn note_version(&self, msg: &Message) {
        if self.version.get().is_none()
            && msg.kind() == Kind::Response
            && let Some(pv) = msg.result_field(jsonrpc::Key::ProtocolVersion).and_then(jsonrpc::as_str)
            && let Ok(v) = HeaderValue::from_str(&pv)
        {
            let _ = self.version.set(v);
        }
    }

    /// An HTTP error answer: the status, the `WWW-Authenticate` challenge if any (what an
    /// operator needs to fix credentials), and the start of the body; secrets masked in both.
    fn http_error(&self, status: StatusCode, challenge: Option<&HeaderValue>, body: &[u8]) -> Error {
        let credential = self.credential.as_ref().and_then(|c| c.get());
        let mask = |b: &[u8]| self.secrets.redact(&String::from_utf8_lossy(b), credential.as_ref());
        let (url, challenge, body) = (self.shown.clone(), challenge.map(|c| mask(c.as_bytes())), mask(body));
        Error::Status { url, status, challenge, body }
    }

    fn fail(&self, id: &Id, why: Error) {
        tracing::warn!(upstream = %self.name, "request failed: {why}");
        self.sink.request_failed(id.clone(), why);
    }

    /// GET on the endpoint: `Ok(None)` when the server offers no stream (405 and friends).
    async fn open_get(&self, last_event_id: Option<&str>) -> Result<Option<UpBody>, Error> {
        let mut b = self.builder(Method::GET, None).header(header::ACCEPT, "text/event-stream");
        if let Some(l) = last_event_id {
            b = b.header("last-event-id", l);
        }
        let req = b.body(Full::new(Bytes::new())).map_err(Error::Request)?;
        let wait = self.connect_timeout;
        let resp = match tokio::time::timeout(wait, self.pool.send(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(cause)) => return Err(Error::Unreachable { url: self.shown.clone(), cause }),
            Err(_) => return Err(Error::NoResponse { url: self.shown.clone(), wait }),
        };
        if resp.status().is_success()
            && resp
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            Ok(Some(resp.into_body()))
        } else {
            Ok(None)
        }
    }

    /// The upstream's standalone GET stream, reopened (resuming) when it breaks.
    async fn get_stream(self: Arc<Self>) {
        let mut resume = Resume::default();
        let mut failures = 0u32;
        while !self.closed.load(Ordering::Relaxed) && failures < MAX_RESUMES {
            match self.open_get(resume.last_id.as_deref()).await {
                Ok(Some(body)) => {
                    failures = 0;
                    self.read_sse(body, None, &mut resume).await;
                }
                Ok(None) => return,
                Err(e) => {
                    failures += 1;
                    tracing::debug!(upstream = %self.name, "GET stream failed: {e}");
                }
            }
            tokio::time::sleep(resume.retry.unwrap_or(Duration::from_millis(500))).await;
        }
    }
}
