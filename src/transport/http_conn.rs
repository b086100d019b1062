//! Upstream HTTP/1.1 connections, owned by one link each: no shared pool and no task per
//! connection. A connection is driven by whoever uses it (its I/O is polled together with the
//! request or body waiting on it), carries one request at a time, and goes back to its link's
//! idle list once its response body has been read to the end. TLS by rustls with the webpki
//! roots.

use crate::locks::Mutex;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::{TrySendError, http1};
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, MaybeHttpsStream};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

type Connector = HttpsConnector<HttpConnector>;
type Io = MaybeHttpsStream<TokioIo<TcpStream>>;
type Driver = Pin<Box<http1::Connection<Io, Full<Bytes>>>>;

/// Idle connections a link keeps; one released beyond this is closed.
const MAX_IDLE: usize = 4;

/// A connection idle longer than this is closed rather than reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a connection could not carry a request. The HTTP client says which URL it was.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The link's connections are closed for good.
    #[error("the upstream session is closed")]
    Closed,
    /// Dialing (TCP and TLS) took longer than `connect_timeout`.
    #[error("no connection within connect_timeout ({0:?})")]
    ConnectTimeout(Duration),
    /// Dialing failed: DNS, TCP, TLS or the HTTP/1.1 handshake.
    #[error("{}", error_chain(.0.as_ref()))]
    Connect(BoxError),
    /// The connection failed while the request was sent or its response head read.
    #[error("{}", error_chain(.0))]
    Http(hyper::Error),
    /// Every connection tried turned out closed before it took the request.
    #[error("the upstream closed every connection offered")]
    AllClosed,
}

/// What every link dials with: the TCP/TLS connector and the body limit.
#[derive(Clone)]
pub struct HttpClient {
    connector: Connector,
    pub(crate) max_body: usize,
}

impl HttpClient {
    /// `connect_timeout` bounds establishing a TCP connection to any upstream.
    pub fn new(max_body: usize, connect_timeout: Duration) -> HttpClient {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .expect("ring supports the default TLS versions")
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        HttpClient { connector, max_body }
    }

    async fn dial(&self, uri: &Uri) -> Result<Conn, ConnError> {
        use tower_service::Service;
        let mut connector = self.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx)).await.map_err(ConnError::Connect)?;
        let io = connector.call(uri.clone()).await.map_err(ConnError::Connect)?;
        let (tx, io) = http1::Builder::new().handshake(io).await.map_err(|e| ConnError::Connect(e.into()))?;
        Ok(Conn { tx, io: Some(Box::pin(io)) })
    }
}

/// One HTTP/1.1 connection: the request side and the I/O that the user polls.
struct Conn {
    tx: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection has ended. It is dropped then, as a spawned connection
    /// would be: that hands a request still queued on it back to its sender, unsent
    /// (kept, it would wait for a connection that is never polled again).
    io: Option<Driver>,
}

impl Conn {
    /// Moves the connection's I/O along; what waits on it is polled after this.
    fn poll_io(&mut self, cx: &mut Context<'_>) {
        if let Some(io) = self.io.as_mut()
            && let Poll::Ready(r) = io.as_mut().poll(cx)
        {
            self.io = None;
            if let Err(e) = r {
                tracing::debug!("upstream connection ended: {}", error_chain(&e));
            }
        }
    }

    /// Sends `req` and waits for the response head, driving the connection meanwhile. A
    /// request the connection did not start to write comes back in the error.
    async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, TrySendError<Request<Full<Bytes>>>> {
        let mut fut = pin!(self.tx.try_send_request(req));
        poll_fn(|cx| {
            self.poll_io(cx);
            fut.as_mut().poll(cx)
        })
        .await
    }

    async fn ready(&mut self) -> hyper::Result<()> {
        poll_fn(|cx| {
            self.poll_io(cx);
            self.tx.poll_ready(cx)
        })
        .await
    }

    /// Whether an idle connection can take a request now: not closed by the server, and done
    /// with the last response. One that cannot at once is not waited for.
    async fn ready_now(&mut self) -> bool {
        poll_fn(|cx| {
            self.poll_io(cx);
            Poll::Ready(matches!(self.tx.poll_ready(cx), Poll::Ready(Ok(()))))
        })
        .await
    }

    fn usable(&self) -> bool {
        self.io.is_some() && !self.tx.is_closed()
    }
}

/// The connections of one link: idle ones, and a bound on how many are in use at once.
pub(crate) struct Pool {
    client: HttpClient,
    /// Where to dial (scheme and authority).
    uri: Uri,
    /// Bounds dialing a connection, TLS handshake included.
    connect_timeout: Duration,
    idle: Mutex<Vec<(Conn, Instant)>>,
    busy: Arc<Semaphore>,
    /// Set by [`Pool::clear`]: a connection released after it is closed, not kept.
    cleared: AtomicBool,
}

impl Pool {
    /// At most `max_busy` connections carry a request or a stream at once; a new one is
    /// given `connect_timeout` to connect, TLS handshake included.
    pub(crate) fn new(client: &HttpClient, uri: Uri, max_busy: usize, connect_timeout: Duration) -> Arc<Pool> {
        Arc::new(Pool {
            client: client.clone(),
            uri,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
            busy: Arc::new(Semaphore::new(max_busy.max(1))),
            cleared: AtomicBool::new(false),
        })
    }

    /// A connection ready for one request: the most recently used idle one that is still
    /// open, else a new one.
    async fn lease(self: &Arc<Self>) -> Result<Lease, ConnError> {
        let permit = match self.busy.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => self.busy.clone().acquire_owned().await.map_err(|_| ConnError::Closed)?,
        };
        let now = Instant::now();
        for _ in 0..=MAX_IDLE {
            let Some((mut conn, since)) = self.idle.lock().unwrap().pop() else { break };
            if now.saturating_duration_since(since) < IDLE_TIMEOUT && conn.ready_now().await {
                return Ok(Lease { conn: Some(conn), pool: self.clone(), _permit: permit, reused: true });
            }
        }
        let mut conn = tokio::time::timeout(self.connect_timeout, self.client.dial(&self.uri))
            .await
            .map_err(|_| ConnError::ConnectTimeout(self.connect_timeout))??;
        conn.ready().await.map_err(ConnError::Http)?;
        Ok(Lease { conn: Some(conn), pool: self.clone(), _permit: permit, reused: false })
    }

    /// Sends `req` on a connection of this link and returns the response head, with a body
    /// that drives the connection as it is read. A request the connection did not take (it
    /// turned out closed) is sent once more on another.
    pub(crate) async fn send(self: &Arc<Self>, mut req: Request<Full<Bytes>>) -> Result<Response<UpBody>, ConnError> {
        for _ in 0..2 {
            let mut lease = self.lease().await?;
            let conn = lease.conn.as_mut().expect("a lease holds its connection");
            match conn.send(req).await {
                Ok(resp) => return Ok(resp.map(|body| UpBody { body, lease: Some(lease) })),
                Err(mut e) => match e.take_message() {
                    Some(r) if lease.reused => req = r,
                    _ => return Err(ConnError::Http(e.into_error())),
                },
            }
        }
        Err(ConnError::AllClosed)
    }

    /// Closes the idle connections, and any released from now on (the session has ended).
    pub(crate) fn clear(&self) {
        self.cleared.store(true, Ordering::Relaxed);
        self.idle.lock().unwrap().clear();
    }
}

/// A connection in use, with its place among the busy ones.
struct Lease {
    conn: Option<Conn>,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
    reused: bool,
}

impl Lease {
    /// The response was read to its end: the connection may carry the next request.
    fn release(mut self) {
        let Some(conn) = self.conn.take() else { return };
        if conn.usable() {
            let now = Instant::now();
            let mut idle = self.pool.idle.lock().unwrap();
            // Those idle too long go now rather than at the next lease that reaches them.
            idle.retain(|(_, since)| now.saturating_duration_since(*since) < IDLE_TIMEOUT);
            if idle.len() < MAX_IDLE && !self.pool.cleared.load(Ordering::Relaxed) {
                idle.push((conn, now));
            }
        }
    }
}

/// A response body from an upstream. Reading it drives its connection; once read to the end
/// the connection goes back to its link. Dropped before its end, it closes the connection.
pub(crate) struct UpBody {
    body: Incoming,
    lease: Option<Lease>,
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some(conn) = this.lease.as_mut().and_then(|l| l.conn.as_mut()) {
            conn.poll_io(cx);
        }
        let r = Pin::new(&mut this.body).poll_frame(cx);
        if matches!(r, Poll::Ready(None))
            && let Some(lease) = this.lease.take()
        {
            lease.release();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for UpBody {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take()
            && self.body.is_end_stream()
        {
            lease.release();
        }
    }
}

pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_queued_on_a_connection_that_ends_comes_back_unsent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
        let client = HttpClient::new(1 << 20, Duration::from_secs(5));
        let (conn, accepted) = tokio::join!(client.dial(&uri), listener.accept());
        let mut conn = conn.unwrap();
        conn.ready().await.unwrap();
        // The server closes the connection while it is idle, and the client learns it only
        // as it sends the next request: the request must come back, not wait forever on a
        // connection nobody polls any more.
        drop(accepted.unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let req = Request::post("/").header("host", "x").body(Full::new(Bytes::from_static(b"{}"))).unwrap();
        let sent = tokio::time::timeout(Duration::from_secs(10), conn.send(req)).await.expect("the send ends");
        let Err(mut e) = sent else { panic!("a closed connection answered") };
        assert!(e.take_message().is_some(), "the request was not written, so it is handed back: {}", e.error());
        assert!(!conn.usable());
    }

    #[tokio::test]
    async fn a_connection_the_server_closes_at_once_fails_instead_of_waiting() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
        let client = HttpClient::new(1 << 20, Duration::from_secs(5));
        let (conn, accepted) = tokio::join!(client.dial(&uri), listener.accept());
        let mut conn = conn.unwrap();
        // Closed by the server (one at its connection limit, say) before the client used it.
        drop(accepted.unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let ready = tokio::time::timeout(Duration::from_secs(10), conn.ready()).await.expect("an answer, not a wait");
        assert!(ready.is_err(), "a closed connection is not ready");
    }

    #[tokio::test]
    async fn a_port_nobody_listens_on_is_a_connect_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let uri: Uri = format!("http://127.0.0.1:{port}/mcp").parse().unwrap();
        let pool = Pool::new(&HttpClient::new(1 << 20, Duration::from_secs(5)), uri, 4, Duration::from_secs(5));
        let req = Request::post("/mcp").header("host", "x").body(Full::new(Bytes::from_static(b"{}"))).unwrap();
        let sent = tokio::time::timeout(Duration::from_secs(10), pool.send(req)).await.expect("bounded");
        assert!(matches!(sent, Err(ConnError::Connect(_))), "{:?}", sent.err());
    }

    #[tokio::test]
    async fn a_tls_handshake_that_never_ends_fails_the_request_at_connect_timeout() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: Uri = format!("https://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
        // Accepts, reads what the client says first, then says nothing until it goes away.
        let server = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut first = [0u8; 1];
            tcp.read_exact(&mut first).await.unwrap();
            while tcp.read(&mut [0; 4096]).await.is_ok_and(|n| n > 0) {}
            first[0]
        });
        let client = HttpClient::new(1 << 20, Duration::from_secs(5));
        let pool = Pool::new(&client, uri, 4, Duration::from_millis(200));
        let req = Request::post("/mcp").header("host", "x").body(Full::new(Bytes::from_static(b"{}"))).unwrap();
        let sent = tokio::time::timeout(Duration::from_secs(10), pool.send(req)).await.expect("bounded");
        let Err(e) = sent else { panic!("a silent server answered") };
        assert!(matches!(e, ConnError::ConnectTimeout(d) if d == Duration::from_millis(200)), "{e}");
        let first = tokio::time::timeout(Duration::from_secs(10), server).await.unwrap().unwrap();
        assert_eq!(first, 0x16, "https is spoken with TLS: a handshake record comes first");
    }
}
