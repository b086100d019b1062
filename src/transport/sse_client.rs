//! Upstream legacy HTTP+SSE, the 2024-11-05 transport. A GET on the SSE URL opens the event
//! stream that carries every server message (`message` events). Its first event, `endpoint`,
//! names the URI that each client message is POSTed to (answered 202 or 200, the answer
//! itself coming on the stream). That URI is resolved against the SSE URL and must be on the
//! same origin (see [`Target::resolve`]). The transport has no resumption: when the stream
//! breaks, the connection is over. It does not say which request a server message serves.

use crate::jsonrpc::Message;
use crate::transport::credential::Credential;
use crate::transport::http_client::{EXTRA_CONNS, HttpClient};
use crate::transport::http_conn::{Pool, UpBody, error_chain};
use crate::transport::http_target::{HttpSettings, Target, parse_headers};
use crate::transport::redact::Secrets;
use crate::transport::up_body::read_prefix;
use crate::transport::{Error, InboundSink, deliver, messages_of, sse};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One upstream connection over legacy HTTP+SSE.
pub struct SseConn {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    pool: Arc<Pool>,
    /// Where messages are POSTed.
    endpoint: Target,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The client's `Authorization`, where the upstream receives it: the stream opens
    /// with it, and each POST carries the latest.
    credential: Option<Arc<Credential>>,
    /// Masked in the upstream's error text.
    secrets: Secrets,
    /// Bounds each POST's answer.
    connect_timeout: Duration,
    closed: AtomicBool,
    /// Cancelled when the connection closes: the event stream is dropped, and its
    /// connection closes, which ends the server's session.
    stopped: CancellationToken,
}

impl SseConn {
    /// Opens the event stream and waits, at most `connect_timeout` in all, for its `endpoint`
    /// event. From then on what the server sends goes to `sink` (and any message it sent
    /// before that event too), until the stream ends, which closes the connection
    /// ([`InboundSink::closed`]).
    pub async fn connect(
        http: &HttpClient,
        settings: &HttpSettings,
        sink: Arc<dyn InboundSink>,
    ) -> Result<SseConn, Error> {
        let url = Target::parse(&settings.url)?;
        let headers = parse_headers(&settings.headers)?;
        let mut opening = headers.clone();
        if let Some(v) = settings.credential.as_ref().and_then(|c| c.get()) {
            opening.push((header::AUTHORIZATION, v));
        }
        let secrets = Secrets::of(&settings.url, &settings.headers);
        let wait = settings.connect_timeout;
        let pool = Pool::new(http, url.uri.clone(), settings.max_in_flight.saturating_add(EXTRA_CONNS), wait);
        let reader = Reader {
            name: settings.name.as_str().into(),
            max_body: http.max_body,
            max_batch: settings.max_batch,
            sink,
        };
        let mut decoder = sse::Decoder::new(http.max_body);
        let (body, endpoint) = tokio::time::timeout(wait, open(&pool, &url, &opening, &secrets, &reader, &mut decoder))
            .await
            .map_err(|_| Error::NoEndpoint { url: url.shown.clone(), wait })??;
        let endpoint = url.resolve(&endpoint)?;
        tracing::info!(upstream = %reader.name, "legacy HTTP+SSE stream open at {}; messages go to {}", url.shown, endpoint.shown);
        let inner = Arc::new(Inner {
            name: reader.name.clone(),
            pool,
            endpoint,
            headers,
            credential: settings.credential.clone(),
            secrets,
            connect_timeout: wait,
            closed: AtomicBool::new(false),
            stopped: CancellationToken::new(),
        });
        let stopped = inner.stopped.clone();
        tokio::spawn(async move {
            let cause = tokio::select! {
                cause = reader.read(body, decoder) => cause,
                _ = stopped.cancelled() => return,
            };
            reader.sink.closed(Error::EventStreamEnded { url: url.shown, cause });
        });
        Ok(SseConn { inner })
    }

    /// POSTs one message to the endpoint; its answer, if it has one, comes on the stream.
    /// A refusal (a status other than 2xx) is the error, whatever the message.
    pub async fn send(&self, msg: Message) -> Result<(), Error> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Relaxed) {
            return Err(Error::SessionClosed);
        }
        let shown = || inner.endpoint.shown.clone();
        let mut b = Request::builder()
            .method(Method::POST)
            .uri(inner.endpoint.path.clone())
            .header(header::HOST, inner.endpoint.host.clone());
        for (k, v) in &inner.headers {
            b = b.header(k, v);
        }
        if let Some(v) = inner.credential.as_ref().and_then(|c| c.get()) {
            b = b.header(header::AUTHORIZATION, v);
        }
        let req = b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(msg.into_bytes()))
            .map_err(Error::Request)?;
        let wait = inner.connect_timeout;
        let resp = match tokio::time::timeout(wait, inner.pool.send(req)).await {
            Ok(Ok(r)) => r,
            Ok(Err(cause)) => return Err(Error::Unreachable { url: shown(), cause }),
            Err(_) => return Err(Error::NoResponse { url: shown(), wait }),
        };
        let status = resp.status();
        let credential = inner.credential.as_ref().and_then(|c| c.get());
        let mask = |b: &[u8]| inner.secrets.redact(&String::from_utf8_lossy(b), credential.as_ref());
        let challenge = resp.headers().get(header::WWW_AUTHENTICATE).map(|c| mask(c.as_bytes()));
        // Most often "Accepted" or nothing: read to its end, the connection is kept.
        let body = tokio::time::timeout(wait, read_prefix(resp.into_body(), 2048)).await.unwrap_or_default();
        if status.is_success() {
            return Ok(());
        }
        let why = Error::Status { url: shown(), status, challenge, body: mask(&body) };
        tracing::warn!(upstream = %inner.name, "a message was refused: {why}");
        Err(why)
    }

    /// Ends the connection: the event stream is closed (the server sees its client go).
    pub fn close(&self) {
        if self.inner.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        self.inner.stopped.cancel();
        self.inner.pool.clear();
    }
}

impl Drop for SseConn {
    fn drop(&mut self) {
        self.close();
    }
}

/// GETs the event stream and reads it up to its `endpoint` event; returns the stream and
/// the event's data.
async fn open(
    pool: &Arc<Pool>,
    url: &Target,
    headers: &[(HeaderName, HeaderValue)],
    secrets: &Secrets,
    reader: &Reader,
    decoder: &mut sse::Decoder,
) -> Result<(UpBody, String), Error> {
    let mut b = Request::builder().method(Method::GET).uri(url.path.clone()).header(header::HOST, url.host.clone());
    for (k, v) in headers {
        b = b.header(k, v);
    }
    let req = b
        .header(header::ACCEPT, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Full::new(Bytes::new()))
        .map_err(Error::Request)?;
    let resp = pool.send(req).await.map_err(|cause| Error::Unreachable { url: url.shown.clone(), cause })?;
    let status = resp.status();
    let content_type =
        resp.headers().get(header::CONTENT_TYPE).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if !status.is_success() {
        // The opening headers carry the client's token, if any, as the last `Authorization`.
        let credential = headers.iter().rev().find(|(k, _)| k == header::AUTHORIZATION).map(|(_, v)| v);
        let mask = |b: &[u8]| secrets.redact(&String::from_utf8_lossy(b), credential);
        let challenge = resp.headers().get(header::WWW_AUTHENTICATE).map(|c| mask(c.as_bytes()));
        let body = mask(&read_prefix(resp.into_body(), 2048).await);
        return Err(Error::Status { url: url.shown.clone(), status, challenge, body });
    }
    let content_type = content_type.unwrap_or_default();
    if !content_type.to_ascii_lowercase().starts_with("text/event-stream") {
        return Err(Error::NotEventStream { url: url.shown.clone(), content_type });
    }
    let mut body = resp.into_body();
    loop {
        let ended = |cause: String| Error::EventStreamEnded { url: url.shown.clone(), cause: Some(cause) };
        let data = match body.frame().await {
            Some(Ok(f)) => match f.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Some(Err(e)) => return Err(ended(error_chain(&e))),
            None => return Err(ended("before its `endpoint` event".into())),
        };
        let mut endpoint = None;
        for decoded in decoder.decode(&data) {
            // What follows the endpoint in the same read is the server's first messages.
            match (reader.event(decoded), &endpoint) {
                (Some(e), None) => endpoint = Some(e),
                (Some(_), Some(_)) => tracing::debug!(upstream = %reader.name, "ignoring a second `endpoint` event"),
                (None, _) => {}
            }
        }
        if let Some(e) = endpoint {
            return Ok((body, e));
        }
    }
}

/// What reads the event stream and hands its messages on.
struct Reader {
    name: Arc<str>,
    max_body: usize,
    max_batch: usize,
    sink: Arc<dyn InboundSink>,
}

impl Reader {
    /// Reads the stream to its end: `Some` cause if it broke off rather than ended.
    async fn read(&self, mut body: UpBody, mut decoder: sse::Decoder) -> Option<String> {
        loop {
            // In `taskgate stdio`, nothing more is read while the client has not read what it
            // was sent (as for the other transports).
            if let Some(out) = crate::transport::own_stdio::client_output() {
                out.room().await;
            }
            match body.frame().await {
                Some(Ok(f)) => {
                    let Ok(data) = f.into_data() else { continue };
                    for decoded in decoder.decode(&data) {
                        if self.event(decoded).is_some() {
                            tracing::debug!(upstream = %self.name, "ignoring a second `endpoint` event");
                        }
                    }
                }
                Some(Err(e)) => return Some(error_chain(&e)),
                None => return None,
            }
        }
    }

    /// Hands the messages of a `message` event (one, or a batch) to the sink; returns the
    /// data of an `endpoint` event. Other events are skipped.
    fn event(&self, decoded: sse::Decoded) -> Option<String> {
        let ev = match decoded {
            sse::Decoded::Event(ev) => ev,
            sse::Decoded::TooLarge { .. } => {
                let limit = self.max_body;
                crate::warn_limit::warn_limited!(upstream = %self.name, "dropping an SSE event that exceeds max_body_bytes ({limit} bytes)");
                return None;
            }
        };
        match ev.event.as_deref() {
            Some("endpoint") => return Some(ev.data),
            None | Some("message") if !ev.data.is_empty() => {}
            _ => return None,
        }
        match messages_of(&self.name, Bytes::from(ev.data), self.max_batch) {
            Ok(msgs) => msgs.into_iter().for_each(|m| deliver(&*self.sink, m, None)),
            Err(e) => crate::warn_limit::warn_limited!(upstream = %self.name, "skipping an SSE event: {}", e.message),
        }
        None
    }
}
