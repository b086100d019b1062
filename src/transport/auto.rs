//! `transport = "auto"`: Streamable HTTP, or the legacy HTTP+SSE transport for a server that
//! refuses it, told apart the way the specification's backwards-compatibility section says
//! a client should. The first message (an MCP client's is its `initialize` request) is
//! POSTed to the URL; if that POST is answered 400, 404 or 405, a GET on the same URL opens
//! the legacy event stream and the message is sent again there. Any other outcome (an
//! answer, a 500, a connection refused, no answer within `connect_timeout`) is Streamable
//! HTTP's, and is reported as it would be without auto-detection. Messages sent while the
//! first is decided wait for the decision (bounded by twice `connect_timeout`).
//!
//! A message sent with headers of its own ([`AutoConn::send_headed`]) before anything is
//! decided goes over Streamable HTTP without deciding: a stateless POST says nothing about
//! whether the server is a legacy HTTP+SSE one. Its sender settles the transport with
//! [`AutoConn::settle_streamable`] when the answer shows Streamable HTTP.

use crate::jsonrpc::{Kind, Message};
use crate::transport::http_client::{HttpClient, HttpConn, Legacy};
use crate::transport::http_target::HttpSettings;
use crate::transport::sse_client::SseConn;
use crate::transport::{Error, InboundSink};
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

/// An upstream connection whose transport is decided by its first message.
pub struct AutoConn {
    inner: Arc<Inner>,
}

struct Inner {
    http: HttpConn,
    client: HttpClient,
    settings: HttpSettings,
    sink: Arc<dyn InboundSink>,
    phase: watch::Sender<Phase>,
    /// Cancelled on close: a legacy stream still opening is given up.
    stopped: CancellationToken,
}

#[derive(Clone)]
enum Phase {
    /// Nothing sent yet.
    Unprobed,
    /// The first message is on its way; what else is sent waits.
    Probing,
    Streamable,
    Legacy(Arc<SseConn>),
    /// Neither transport worked (the sink was told), or the connection is closed.
    Over,
}

impl AutoConn {
    /// Nothing is sent yet.
    pub fn new(http: &HttpClient, settings: HttpSettings, sink: Arc<dyn InboundSink>) -> Result<AutoConn, Error> {
        Ok(AutoConn {
            inner: Arc::new(Inner {
                http: HttpConn::new(http, &settings, sink.clone())?,
                client: http.clone(),
                settings,
                sink,
                phase: watch::Sender::new(Phase::Unprobed),
                stopped: CancellationToken::new(),
            }),
        })
    }

    /// Whether the first message went over Streamable HTTP (`Some(false)`: the legacy
    /// transport; `None`: not decided yet).
    pub fn is_streamable(&self) -> Option<bool> {
        match &*self.inner.phase.borrow() {
            Phase::Streamable => Some(true),
            Phase::Legacy(_) => Some(false),
            _ => None,
        }
    }

    /// The Streamable HTTP connection, once the first message settled on it: sent through
    /// directly, so that a settled connection's sends cost what a plain one's do.
    pub fn streamable(&self) -> Option<&HttpConn> {
        matches!(&*self.inner.phase.borrow(), Phase::Streamable).then_some(&self.inner.http)
    }

    pub async fn send(&self, msg: Message) -> Result<(), Error> {
        let mut phase = self.inner.phase.subscribe();
        loop {
            let now = phase.borrow_and_update().clone();
            match now {
                Phase::Streamable => return self.inner.http.send(msg).await,
                Phase::Legacy(c) => return c.send(msg).await,
                Phase::Over => return Err(Error::SessionClosed),
                Phase::Unprobed => {
                    let first = self.inner.phase.send_if_modified(|p| {
                        let unprobed = matches!(p, Phase::Unprobed);
                        if unprobed {
                            *p = Phase::Probing;
                        }
                        unprobed
                    });
                    if first {
                        // Boxed: sent once per connection, and large; every other send's
                        // future would carry its state.
                        return Box::pin(self.probe(msg)).await;
                    }
                }
                Phase::Probing => {
                    if phase.changed().await.is_err() {
                        return Err(Error::SessionClosed);
                    }
                }
            }
        }
    }

    /// Sends one message with headers of its own (see [`HttpConn::send_headed`]); before the
    /// transport is decided, over Streamable HTTP, deciding nothing.
    pub async fn send_headed(
        &self,
        msg: Message,
        headers: &[(std::borrow::Cow<'static, str>, String)],
    ) -> Result<(), Error> {
        let now = self.inner.phase.borrow().clone();
        match now {
            Phase::Legacy(c) => c.send(msg).await,
            Phase::Over => Err(Error::SessionClosed),
            Phase::Streamable | Phase::Unprobed | Phase::Probing => self.inner.http.send_headed(msg, headers).await,
        }
    }

    /// Streamable HTTP it is: a stateless POST was answered over it.
    pub fn settle_streamable(&self) {
        self.inner.phase.send_if_modified(|p| {
            let unprobed = matches!(p, Phase::Unprobed);
            if unprobed {
                *p = Phase::Streamable;
            }
            unprobed
        });
    }

    /// Sends the first message over Streamable HTTP, and over the legacy transport if the
    /// server refuses it as a legacy one would. A request returns once it is on its way (its
    /// answer, or why it failed, reaches the sink); a notification once it is delivered.
    async fn probe(&self, msg: Message) -> Result<(), Error> {
        let (tx, verdict) = oneshot::channel();
        let again = msg.clone();
        let is_request = msg.kind() == Kind::Request;
        let sent = self.inner.http.send_probing(msg, tx).await;
        if !is_request {
            return match verdict.await {
                Ok(Legacy(refusal)) => self.inner.fall_back(refusal, again).await,
                Err(_) => {
                    self.inner.settle(Phase::Streamable);
                    sent
                }
            };
        }
        let inner = self.inner.clone();
        tokio::spawn(async move {
            match verdict.await {
                Ok(Legacy(refusal)) => {
                    let id = again.id().cloned();
                    match inner.fall_back(refusal, again).await {
                        Ok(()) => {}
                        // The legacy stream is open but refused the request: it alone fails.
                        Err(why) if matches!(*inner.phase.borrow(), Phase::Legacy(_)) => {
                            if let Some(id) = id {
                                inner.sink.request_failed(id, why);
                            }
                        }
                        Err(why) => inner.sink.closed(why),
                    }
                }
                Err(_) => {
                    inner.settle(Phase::Streamable);
                }
            }
        });
        sent
    }

    /// Ends whichever transport was chosen.
    pub async fn close(&self) {
        let was = self.inner.phase.send_replace(Phase::Over);
        self.inner.stopped.cancel();
        if let Phase::Legacy(c) = was {
            c.close();
        }
        self.inner.http.close().await;
    }
}

impl Inner {
    /// Leaves `Probing` for `to`; false if the connection closed meanwhile.
    fn settle(&self, to: Phase) -> bool {
        self.phase.send_if_modified(|p| {
            let probing = matches!(p, Phase::Probing);
            if probing {
                *p = to.clone();
            }
            probing
        })
    }

    /// The first POST was refused as by a legacy server: opens the legacy stream at the same
    /// URL and sends the first message again there.
    async fn fall_back(&self, refusal: Error, first: Message) -> Result<(), Error> {
        let name = &self.settings.name;
        tracing::info!(upstream = %name, "not Streamable HTTP ({refusal}); trying the legacy HTTP+SSE transport at the same URL");
        let opened = tokio::select! {
            c = SseConn::connect(&self.client, &self.settings, self.sink.clone()) => c,
            _ = self.stopped.cancelled() => return Err(Error::SessionClosed),
        };
        match opened {
            Ok(conn) => {
                let conn = Arc::new(conn);
                if !self.settle(Phase::Legacy(conn.clone())) {
                    conn.close();
                    return Err(Error::SessionClosed);
                }
                tracing::info!(upstream = %name, "using the legacy HTTP+SSE transport");
                // Nothing of the Streamable HTTP attempt is kept (no session was made).
                self.http.close().await;
                conn.send(first).await
            }
            Err(sse) => {
                self.settle(Phase::Over);
                let why = Error::NoTransport { post: Box::new(refusal), sse: Box::new(sse) };
                tracing::warn!(upstream = %name, "{why}");
                Err(why)
            }
        }
    }
}
