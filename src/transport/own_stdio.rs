//! This process's own stdin and stdout (`taskgate stdio`, `taskgate demo-server`): read and
//! written on tokio's reactor where the kernel can watch them, and the queue of lines for
//! the client, bounded in bytes.
//!
//! Non-blocking without touching what others share: O_NONBLOCK belongs to an open file
//! description, which the process that started us (a shell, a wrapper) may share, so it is
//! never set on fds 0 and 1 themselves.
//! - A pipe is opened again through `/proc/self/fd/N`: a description of our own, opened
//!   non-blocking, on the same pipe.
//! - A stream socket (Node clients hand their children socketpairs) is read and written
//!   with `MSG_DONTWAIT`, which makes the one call non-blocking.
//! - Anything else (a file, a terminal, /dev/null), or a reopen that fails, keeps tokio's
//!   blocking stdin/stdout: epoll cannot watch a file, and a terminal is shared.

use crate::locks::Mutex;
use bytes::Bytes;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::unix::pipe;
use tokio::sync::Notify;

/// Bytes queued for the client (and being written) past which nothing new is read from it:
/// what a client has not read yet bounds what the gateway produces for it.
pub const OUT_BOUND: usize = 1024 * 1024;

/// Our stdin.
pub enum Input {
    Pipe(pipe::Receiver),
    Socket(Socket),
    Blocking(tokio::io::Stdin),
}

/// Our stdout.
pub enum Output {
    Pipe(pipe::Sender),
    Socket(Socket),
    Blocking(tokio::io::Stdout),
}

#[derive(Debug, PartialEq)]
enum FdKind {
    Pipe,
    Socket,
    Other,
}

fn kind(fd: RawFd) -> FdKind {
    // SAFETY: fstat writes into a zeroed stat we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return FdKind::Other;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO => FdKind::Pipe,
        libc::S_IFSOCK => {
            let mut ty: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: getsockopt writes an int into `ty`, of the size given.
            let ok = unsafe {
                libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, (&mut ty as *mut libc::c_int).cast(), &mut len)
            } == 0;
            if ok && ty == libc::SOCK_STREAM { FdKind::Socket } else { FdKind::Other }
        }
        _ => FdKind::Other,
    }
}

/// Our stdin, non-blocking when it is a pipe or a stream socket (must run in a runtime).
pub fn stdin() -> Input {
    let input = match kind(0) {
        FdKind::Pipe => pipe::OpenOptions::new().open_receiver("/proc/self/fd/0").map(Input::Pipe),
        FdKind::Socket => Socket::new(0, Interest::READABLE).map(Input::Socket),
        FdKind::Other => return Input::Blocking(tokio::io::stdin()),
    };
    input.unwrap_or_else(|e| {
        tracing::debug!("stdin stays blocking: {e}");
        Input::Blocking(tokio::io::stdin())
    })
}

/// Our stdout, non-blocking when it is a pipe or a stream socket (must run in a runtime).
pub fn stdout() -> Output {
    let output = match kind(1) {
        FdKind::Pipe => pipe::OpenOptions::new().open_sender("/proc/self/fd/1").map(Output::Pipe),
        FdKind::Socket => Socket::new(1, Interest::WRITABLE).map(Output::Socket),
        FdKind::Other => return Output::Blocking(tokio::io::stdout()),
    };
    output.unwrap_or_else(|e| {
        tracing::debug!("stdout stays blocking: {e}");
        Output::Blocking(tokio::io::stdout())
    })
}

impl AsyncRead for Input {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut *self {
            Input::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Input::Socket(s) => s.poll_recv(cx, buf),
            Input::Blocking(b) => Pin::new(b).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut *self {
            Output::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            Output::Socket(s) => s.poll_send(cx, buf),
            Output::Blocking(b) => Pin::new(b).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut *self {
            Output::Pipe(p) => Pin::new(p).poll_flush(cx),
            Output::Socket(_) => Poll::Ready(Ok(())),
            Output::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Flushed only: fds 0 and 1 stay open until the process exits.
        match &mut *self {
            Output::Pipe(p) => Pin::new(p).poll_flush(cx),
            Output::Socket(_) => Poll::Ready(Ok(())),
            Output::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }
}

/// fd 0 or 1 when it is a stream socket, watched by the reactor (through a duplicate fd,
/// which shares the description and so its blocking mode) and used with `MSG_DONTWAIT`.
pub struct Socket(AsyncFd<OwnedFd>);

impl Socket {
    fn new(fd: RawFd, interest: Interest) -> io::Result<Socket> {
        // SAFETY: F_DUPFD_CLOEXEC returns a new fd (or -1), which we then own.
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        let owned = unsafe { OwnedFd::from_raw_fd(dup) };
        // SAFETY: the AsyncFd owns the fd, so it stays open and the same while registered.
        unsafe { AsyncFd::register_with_interest(owned, interest) }.map(Socket).map_err(|e| e.into_parts().1)
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let len = unfilled.len();
            let fd = self.0.get_ref().as_raw_fd();
            // SAFETY: recv writes at most `len` bytes into the initialized slice we hold.
            let got = guard.try_io(|_| {
                let n = unsafe { libc::recv(fd, unfilled.as_mut_ptr().cast(), len, libc::MSG_DONTWAIT) };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
            });
            match got {
                Ok(Ok(n)) => {
                    // A short read has emptied the socket buffer: the next read waits for epoll.
                    if 0 < n && n < len {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_send(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            let fd = self.0.get_ref().as_raw_fd();
            // SAFETY: send reads `data.len()` bytes from the slice we hold.
            let sent = guard.try_io(|_| {
                let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
                let n = unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), flags) };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
            });
            match sent {
                Ok(Ok(n)) => {
                    if n < data.len() {
                        guard.clear_ready();
                    }
                    return Poll::Ready(Ok(n));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl Output {
    /// Writes what the fd takes now, without waiting.
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Pipe(p) => p.try_write(buf),
            Output::Socket(s) => s.0.try_io(Interest::WRITABLE, |fd| {
                // SAFETY: send reads `buf.len()` bytes from the slice we hold.
                let n = unsafe {
                    libc::send(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
                };
                if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
            }),
            Output::Blocking(_) => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Waits until the fd may take more (a later `try_write` may still find it full).
    async fn writable(&self) -> io::Result<()> {
        match self {
            Output::Pipe(p) => p.writable().await,
            Output::Socket(s) => s.0.writable().await.map(drop),
            Output::Blocking(_) => Ok(()),
        }
    }

    async fn write_all_now(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.try_write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The lines for the client, bounded in bytes, and the task that writes them.
///
/// Why it loses nothing: [`OutQueue::push`] always queues (only once the client's end is
/// gone for good, when nothing can reach it, does it discard). Why it cannot grow without
/// bound: nothing that feeds it reads new input while it holds more than its bound. The
/// reader of the client's stdin waits in [`OutQueue::room`] before each line, so the answers
/// to the client's own requests stop at the bound plus what the lines already read produce;
/// the reader of a stdio upstream's stdout waits there too (see [`client_output`]), so the
/// upstream's pipe fills and the upstream itself blocks; so does the reader of an HTTP
/// upstream's event streams, whose TCP window then holds the server; and the demo server's `slow` tool
/// waits there before each progress step. A client that stops reading therefore stops what
/// is produced for it, and every queued line reaches it once it reads again.
///
/// On a non-blocking stdout, a line pushed while nothing is queued or being written is
/// written at once by the caller (what the pipe does not take is queued first in line): no
/// task hop, no thread wake-up.
pub struct OutQueue {
    st: Mutex<QueueState>,
    /// Bytes queued or being written (st.bytes, readable without the lock).
    bytes: AtomicUsize,
    bound: usize,
    /// Where `push` may write at once (a non-blocking stdout).
    direct: Option<Arc<Output>>,
    writer: Notify,
    /// Woken when written bytes leave the queue (or it closes).
    changed: Notify,
}

#[derive(Default)]
struct QueueState {
    lines: VecDeque<Bytes>,
    bytes: usize,
    /// A write is under way (by the writer task or a `push`): nobody else writes.
    writing: bool,
    /// The client's end is gone, or the queue was finished: nothing more can be written.
    closed: bool,
    /// [`OutQueue::finish`] was called: the writer ends once the queue is empty.
    finishing: bool,
    /// Someone waits in `room` or `drained`.
    waiting: bool,
}

impl OutQueue {
    /// Starts the task that writes the queue to our stdout (see [`stdout`]).
    pub fn spawn_stdout(bound: usize) -> Arc<OutQueue> {
        match stdout() {
            Output::Blocking(b) => OutQueue::spawn(b, bound),
            out => {
                let out = Arc::new(out);
                let q = OutQueue::new(bound, Some(out.clone()));
                tokio::spawn(write_queue(q.clone(), Writer::<Output>::Shared(out)));
                q
            }
        }
    }

    /// Starts the task that writes the queue to `out`.
    pub fn spawn<W: AsyncWrite + Unpin + Send + 'static>(out: W, bound: usize) -> Arc<OutQueue> {
        let q = OutQueue::new(bound, None);
        tokio::spawn(write_queue(q.clone(), Writer::Owned(out)));
        q
    }

    fn new(bound: usize, direct: Option<Arc<Output>>) -> Arc<OutQueue> {
        Arc::new(OutQueue {
            st: Mutex::new(QueueState::default()),
            bytes: AtomicUsize::new(0),
            bound,
            direct,
            writer: Notify::new(),
            changed: Notify::new(),
        })
    }

    /// Queues one message as a line (the newline is added). Never waits and never drops: see
    /// the type's documentation for what bounds the queue. False once the client's end is gone.
    pub fn push(&self, mut line: Vec<u8>) -> bool {
        line.push(b'\n');
        let mut st = self.st.lock().unwrap();
        if st.closed {
            return false;
        }
        if let Some(out) = &self.direct
            && st.lines.is_empty()
            && !st.writing
        {
            st.writing = true;
            drop(st);
            let sent = match out.try_write(&line) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                Err(e) => {
                    tracing::warn!("stdout is closed ({e}): nothing more reaches the client");
                    self.written(None);
                    return false;
                }
            };
            let mut st = self.st.lock().unwrap();
            st.writing = false;
            if sent < line.len() {
                st.bytes += line.len() - sent;
                self.bytes.store(st.bytes, Ordering::Relaxed);
                st.lines.push_front(Bytes::from(line).slice(sent..));
            }
            // Lines pushed meanwhile, or the rest of this one, are the writer's (as is the
            // end, if the queue was finished meanwhile).
            let wake = !st.lines.is_empty() || st.finishing;
            let waiting = std::mem::take(&mut st.waiting);
            drop(st);
            if wake {
                self.writer.notify_one();
            }
            if waiting {
                self.changed.notify_waiters();
            }
            return true;
        }
        st.bytes += line.len();
        self.bytes.store(st.bytes, Ordering::Relaxed);
        st.lines.push_back(Bytes::from(line));
        drop(st);
        // A stored permit if the writer is busy: it looks at the queue again before waiting.
        self.writer.notify_one();
        true
    }

    /// Whether more than the bound waits for the client.
    pub fn over(&self) -> bool {
        self.bytes.load(Ordering::Relaxed) > self.bound
    }

    /// Waits until the queue is within its bound (or the client's end is gone).
    pub async fn room(&self) {
        if !self.over() {
            return;
        }
        self.wait_for(|st| st.bytes <= self.bound).await
    }

    /// Waits until everything queued has been written (or the client's end is gone).
    pub async fn drained(&self) {
        self.wait_for(|st| st.bytes == 0 && !st.writing).await
    }

    /// No more lines will come: the writer writes what is queued (and what is pushed before
    /// it gets there), shuts its output down and ends; pushes after that are refused.
    pub fn finish(&self) {
        self.st.lock().unwrap().finishing = true;
        self.writer.notify_one();
    }

    async fn wait_for(&self, done: impl Fn(&QueueState) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut st = self.st.lock().unwrap();
                if st.closed || done(&st) {
                    return;
                }
                st.waiting = true;
            }
            changed.await;
        }
    }

    /// `written` bytes have left the queue, or (None) the client's end is gone.
    fn written(&self, written: Option<usize>) {
        let wake = {
            let mut st = self.st.lock().unwrap();
            st.writing = false;
            match written {
                Some(n) => st.bytes -= n,
                None => {
                    st.closed = true;
                    st.lines = VecDeque::new();
                    st.bytes = 0;
                }
            }
            self.bytes.store(st.bytes, Ordering::Relaxed);
            std::mem::take(&mut st.waiting)
        };
        if wake {
            self.changed.notify_waiters();
        }
        if written.is_none() {
            self.writer.notify_one();
        }
    }
}

enum Writer<W> {
    /// A non-blocking stdout, shared with `push`.
    Shared(Arc<Output>),
    Owned(W),
}

/// Writes everything queued at each turn in one write, until the client's end breaks. The
/// bytes count as queued until the write returns, so the bound covers this buffer too.
async fn write_queue<W: AsyncWrite + Unpin>(q: Arc<OutQueue>, mut out: Writer<W>) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let finished = {
            let mut st = q.st.lock().unwrap();
            if st.closed {
                return;
            }
            buf.clear();
            // While a `push` writes, what it leaves waits for its wake-up.
            if !st.writing {
                for line in st.lines.drain(..) {
                    buf.extend_from_slice(&line);
                }
                st.writing = !buf.is_empty();
            }
            // Finished, and all written: the end.
            st.closed = buf.is_empty() && !st.writing && st.finishing;
            st.closed
        };
        if finished {
            q.changed.notify_waiters();
            if let Writer::Owned(w) = &mut out {
                let _ = w.shutdown().await;
            }
            return;
        }
        if buf.is_empty() {
            q.writer.notified().await;
            continue;
        }
        let result = match &mut out {
            Writer::Shared(o) => o.write_all_now(&buf).await,
            Writer::Owned(w) => {
                async {
                    w.write_all(&buf).await?;
                    w.flush().await
                }
                .await
            }
        };
        if let Err(e) = result {
            tracing::warn!("stdout is closed ({e}): nothing more reaches the client");
            q.written(None);
            return;
        }
        q.written(Some(buf.len()));
        if buf.capacity() > 4 * 1024 * 1024 {
            buf = Vec::with_capacity(64 * 1024);
        }
    }
}

/// The queue for the client of `taskgate stdio`, once serving (one per process: it is our
/// stdout). Readers of upstream output wait for its room, so that a client that stops
/// reading stops its upstream too.
static CLIENT_OUTPUT: OnceLock<Arc<OutQueue>> = OnceLock::new();

pub fn set_client_output(q: Arc<OutQueue>) {
    let _ = CLIENT_OUTPUT.set(q);
}

pub fn client_output() -> Option<&'static Arc<OutQueue>> {
    CLIENT_OUTPUT.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let (r, w) = std::io::pipe().unwrap();
        assert_eq!(kind(r.as_raw_fd()), FdKind::Pipe);
        assert_eq!(kind(w.as_raw_fd()), FdKind::Pipe);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(kind(a.as_raw_fd()), FdKind::Socket);
        let f = tempfile::tempfile().unwrap();
        assert_eq!(kind(f.as_raw_fd()), FdKind::Other);
    }

    #[tokio::test]
    async fn a_full_queue_waits_for_the_reader_and_loses_nothing() {
        let (mut rx, tx) = tokio::io::duplex(1024);
        let q = OutQueue::spawn(tx, 10_000);
        for i in 0..2_000 {
            assert!(q.push(format!("{i:08}").into_bytes()));
        }
        assert!(q.over(), "nobody reads: the queue is past its bound");
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.room().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "room waits while the reader does not read");
        let mut all = Vec::new();
        let read = async {
            use tokio::io::AsyncReadExt;
            let mut chunk = [0u8; 4096];
            while all.len() < 2_000 * 9 {
                let n = rx.read(&mut chunk).await.unwrap();
                all.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), read).await.unwrap();
        waiter.await.unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), q.drained()).await.unwrap();
        let want: String = (0..2_000).map(|i| format!("{i:08}\n")).collect();
        assert_eq!(String::from_utf8(all).unwrap(), want);
    }

    #[tokio::test]
    async fn a_finished_queue_writes_what_it_holds_then_shuts_its_output_down() {
        use tokio::io::AsyncReadExt;
        let (mut rx, tx) = tokio::io::duplex(4);
        let q = OutQueue::spawn(tx, 10_000);
        assert!(q.push(b"one".to_vec()) && q.push(b"two".to_vec()));
        q.finish();
        let mut all = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(5), rx.read_to_end(&mut all)).await.unwrap().unwrap();
        assert_eq!(all, b"one\ntwo\n", "everything queued, then the end");
        assert!(!q.push(b"three".to_vec()), "nothing is taken after the end");
    }
}
