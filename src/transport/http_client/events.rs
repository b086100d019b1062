//! Reading an upstream's event streams: a request's own response stream, and the GET stream.
//! Each event is taken apart into messages and delivered; an event that cannot be read on a
//! request's own stream fails that request at once.

use super::{Inner, MIN_RETRY, Resume};
use crate::jsonrpc::{self, Id, Kind};
use crate::transport::http_conn::UpBody;
use crate::transport::{Error, messages_of, sse};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Body;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

impl Inner {
    /// Reads an event stream; returns true once the response to `answer_to` has been seen.
    pub(super) async fn read_sse(&self, mut body: UpBody, answer_to: Option<&Id>, resume: &mut Resume) -> bool {
        let answered = self.read_events(&mut body, answer_to, resume).await;
        if answered {
            // The stream most often ends right after the answer: then its connection is kept.
            let _ = std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut body).poll_frame(cx).is_ready())).await;
        }
        answered
    }

    async fn read_events(&self, body: &mut UpBody, answer_to: Option<&Id>, resume: &mut Resume) -> bool {
        let mut decoder = sse::Decoder::new(self.max_body);
        let mut answered = false;
        loop {
            // In `taskgate stdio`, nothing more is read while the client has not read what it
            // was sent: the upstream is slowed by TCP instead of the queue growing.
            if let Some(out) = crate::transport::own_stdio::client_output() {
                out.room().await;
            }
            let frame = match body.frame().await {
                Some(Ok(f)) => f,
                Some(Err(_)) | None => return answered,
            };
            let Ok(data) = frame.into_data() else { continue };
            for decoded in decoder.decode(&data) {
                let ev = match decoded {
                    sse::Decoded::Event(ev) => ev,
                    sse::Decoded::TooLarge { id } => {
                        resume.got_event = true;
                        if id.is_some() {
                            resume.last_id = id;
                        }
                        let limit = self.max_body;
                        crate::warn_limit::warn_limited!(upstream = %self.name, "dropping an SSE event that exceeds max_body_bytes ({limit} bytes)");
                        // On a response stream it is most likely the response: fail the
                        // request now rather than at its timeout.
                        if let Some(want) = answer_to {
                            self.fail(want, Error::TooLarge { limit });
                            return true;
                        }
                        continue;
                    }
                };
                resume.got_event = true;
                if ev.id.is_some() {
                    resume.last_id.clone_from(&ev.id);
                }
                if let Some(ms) = ev.retry {
                    resume.retry = Some(Duration::from_millis(ms).max(MIN_RETRY));
                }
                if ev.data.is_empty() || !matches!(ev.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let data = Bytes::from(ev.data);
                let msgs = match messages_of(&self.name, data.clone(), self.max_batch) {
                    Ok(msgs) if !msgs.is_empty() => msgs,
                    outcome => {
                        // Not JSON at all, or not one JSON value (several objects run together,
                        // say); a malformed message that is one value was dropped, logged.
                        let (why, unreadable) = match outcome {
                            Err(e) => (e.message, e.code == jsonrpc::PARSE_ERROR),
                            Ok(_) => (
                                "it holds no JSON-RPC message".to_string(),
                                serde_json::from_slice::<serde::de::IgnoredAny>(&data).is_err(),
                            ),
                        };
                        crate::warn_limit::warn_limited!(upstream = %self.name, "skipping an SSE event: {why}");
                        // On a request's own stream such an event may well have been the
                        // answer: the request fails now, saying why, rather than waiting for an
                        // answer that will not come. (JSON that is no message, an empty batch
                        // say, is skipped, and what follows is read.)
                        if let Some(want) = answer_to
                            && unreadable
                        {
                            self.fail(want, Error::BadBody(format!("an event on the response stream: {why}")));
                            return true;
                        }
                        continue;
                    }
                };
                // A 2025-03-26 server may send a batch: each message is delivered on its own.
                for msg in msgs {
                    let msg = match msg {
                        Ok(m) => m,
                        // A response that cannot be used: its request fails now.
                        Err((id, why)) => {
                            answered |= answer_to == Some(&id);
                            self.sink.request_failed(id, why);
                            continue;
                        }
                    };
                    if let Some(want) = answer_to
                        && msg.kind() == Kind::Response
                        && msg.id() == Some(want)
                    {
                        answered = true;
                    }
                    match answer_to {
                        Some(id) => self.deliver(msg, id),
                        None => self.sink.message(msg, None),
                    }
                }
            }
            if answered {
                return true;
            }
        }
    }
}
