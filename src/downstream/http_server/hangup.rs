//! A downstream connection's hang-up, seen while hyper is not reading.
//!
//! During a response hyper looks for the client's end of the connection only while its own
//! read buffer is empty. When the client followed its request with anything (a stray CRLF,
//! the next request pipelined), hyper reads nothing more until the response ends, and a
//! closed connection is found only by writes that fail: the second keep-alive after the
//! hang-up, up to 30 s later. For a 2026-07-28 client a closed response is its request's
//! cancellation, and a closed listen stream lets go of its subscriptions: both must happen at
//! once. So the connection is watched: [`Watched`] is the connection hyper is given, and
//! [`HangUp`] reads ahead what hyper does not ask for (at most [`READ_AHEAD`] bytes, which
//! hyper gets first when it reads) to see the client's side end.

use crate::locks::Mutex;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most a connection holds read ahead of hyper; past it, the hang-up is left to hyper
/// (a client that pipelines this much while its response runs is not waited on for more).
pub(super) const READ_AHEAD: usize = 64 * 1024;

/// How the client's side of the connection ended, once seen.
#[derive(Clone, Copy)]
enum Ended {
    Open,
    Eof,
    Failed(io::ErrorKind),
}

struct Inner<I> {
    io: I,
    /// Read ahead of hyper, in order: hyper's reads take these first.
    ahead: Vec<u8>,
    ended: Ended,
}

/// The connection as hyper sees it.
pub(super) struct Watched<I> {
    inner: Arc<Mutex<Inner<I>>>,
    /// Whether anything was written since the last flush that completed: hyper flushes after
    /// each step of a response, and a flush with nothing written is done without the lock.
    unflushed: bool,
    vectored: bool,
}

/// Watches a connection hyper is serving for the client's hang-up.
pub(super) struct HangUp<I>(Arc<Mutex<Inner<I>>>);

pub(super) fn watch<I: AsyncWrite>(io: I) -> (Watched<I>, HangUp<I>) {
    let vectored = io.is_write_vectored();
    let inner = Arc::new(Mutex::new(Inner { io, ahead: Vec::new(), ended: Ended::Open }));
    (Watched { inner: inner.clone(), unflushed: false, vectored }, HangUp(inner))
}

impl<I: AsyncRead + Unpin> HangUp<I> {
    /// Ready once the client's side of the connection has ended (or failed). Reads what is
    /// there, for hyper to have later; run beside the connection, in the same task, after
    /// it, so that hyper reads first what it wants.
    pub(super) async fn hung_up(&self) {
        std::future::poll_fn(|cx| self.poll_hung_up(cx)).await
    }

    fn poll_hung_up(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.0.lock().unwrap();
        let inner = &mut *inner;
        let mut read_any = false;
        let seen = loop {
            if !matches!(inner.ended, Ended::Open) {
                break Poll::Ready(());
            }
            let room = READ_AHEAD.saturating_sub(inner.ahead.len());
            if room == 0 {
                // Nothing is read any more: hyper's own reads (or its writes failing) will end it.
                break Poll::Pending;
            }
            // Not zeroed: most looks find nothing to read, and zeroing 4 KiB each time cost
            // more than the rest of the look.
            let mut chunk = [MaybeUninit::<u8>::uninit(); 4096];
            let mut buf = ReadBuf::uninit(&mut chunk[..room.min(4096)]);
            match Pin::new(&mut inner.io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => inner.ended = Ended::Eof,
                Poll::Ready(Ok(())) => {
                    inner.ahead.extend_from_slice(buf.filled());
                    read_any = true;
                }
                Poll::Ready(Err(e)) => inner.ended = Ended::Failed(e.kind()),
                Poll::Pending => break Poll::Pending,
            }
        };
        if read_any {
            // What was read may be what hyper waits for: the readiness it waited on is spent.
            cx.waker().wake_by_ref();
        }
        seen
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Watched<I> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut inner = self.inner.lock().unwrap();
        if !inner.ahead.is_empty() {
            let n = inner.ahead.len().min(buf.remaining());
            buf.put_slice(&inner.ahead[..n]);
            inner.ahead.drain(..n);
            return Poll::Ready(Ok(()));
        }
        match inner.ended {
            Ended::Open => Pin::new(&mut inner.io).poll_read(cx, buf),
            Ended::Eof => Poll::Ready(Ok(())),
            Ended::Failed(kind) => Poll::Ready(Err(kind.into())),
        }
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Watched<I> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        me.unflushed = true;
        Pin::new(&mut me.inner.lock().unwrap().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        me.unflushed = true;
        Pin::new(&mut me.inner.lock().unwrap().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.vectored
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.unflushed {
            return Poll::Ready(Ok(()));
        }
        let flushed = Pin::new(&mut me.inner.lock().unwrap().io).poll_flush(cx);
        if let Poll::Ready(Ok(())) = flushed {
            me.unflushed = false;
        }
        flushed
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner.lock().unwrap().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn what_is_read_ahead_comes_first_then_the_end() {
        let (mut client, server) = tokio::io::duplex(1024);
        let (mut watched, hang_up) = watch(server);
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        drop(client);
        hang_up.hung_up().await;
        let mut got = Vec::new();
        watched.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"GET / HTTP/1.1\r\n\r\n");
    }

    #[tokio::test]
    async fn an_open_connection_is_not_hung_up_and_reads_on() {
        let (mut client, server) = tokio::io::duplex(1024);
        let (mut watched, hang_up) = watch(server);
        client.write_all(b"ab").await.unwrap();
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), hang_up.hung_up()).await;
        assert!(waited.is_err(), "still open");
        client.write_all(b"cd").await.unwrap();
        let mut got = [0u8; 4];
        watched.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"abcd");
        watched.write_all(b"ok").await.unwrap();
        let mut back = [0u8; 2];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ok");
    }

    /// Counts the flushes that reach it; takes every write whole.
    struct Flushes(Arc<std::sync::atomic::AtomicUsize>);

    impl AsyncRead for Flushes {
        fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, _: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }

    impl AsyncWrite for Flushes {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_flush_reaches_the_connection_once_after_each_write() {
        let flushes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (mut watched, _hang_up) = watch(Flushes(flushes.clone()));
        let seen = || flushes.load(std::sync::atomic::Ordering::Relaxed);
        watched.flush().await.unwrap();
        assert_eq!(seen(), 0, "nothing written, nothing to flush");
        watched.write_all(b"HTTP/1.1 200 OK\r\n").await.unwrap();
        watched.flush().await.unwrap();
        watched.flush().await.unwrap();
        assert_eq!(seen(), 1, "one flush for one write");
        watched.write_all(b"\r\n").await.unwrap();
        watched.flush().await.unwrap();
        assert_eq!(seen(), 2, "a later write is flushed too");
    }

    #[tokio::test]
    async fn past_the_read_ahead_bound_nothing_more_is_read() {
        let (mut client, server) = tokio::io::duplex(2 * READ_AHEAD);
        let (mut watched, hang_up) = watch(server);
        client.write_all(&vec![7u8; READ_AHEAD + 10]).await.unwrap();
        drop(client);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), hang_up.hung_up()).await;
        assert!(waited.is_err(), "the end lies past the bound");
        let mut got = Vec::new();
        watched.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), READ_AHEAD + 10);
    }
}
