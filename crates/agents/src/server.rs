//! The balloon socket's event loop: one thread serves every agent connection with mio (epoll) — accepts, reads lines of at most 64 KiB, hands them to a [`Handler`], writes its answers, and wakes for its timers and for work queued from other threads.
//!
//! One thread and a few hundred bytes per idle connection: a connection keeps the unfinished
//! line it is reading (at most 64 KiB, `memtide_balloon::line`, and no buffer at all between
//! lines) and the answers not yet written (at most [`MAX_PENDING_OUT`], released once written;
//! an agent that stops reading is closed rather than buffered without end).
//!
//! Who may hold connections is bounded at accept, so that no one user can lock agents out:
//! at most [`ServerConfig::max_connections`] in all, at most [`ServerConfig::max_per_uid`]
//! from one user (the peer's uid, `SO_PEERCRED`), and each connection's two descriptors (its
//! socket and its peer's pidfd, [`Peer`]) counted in the process's descriptor budget
//! ([`Descriptors`]), so connections never take the descriptors the ticks need. A connection
//! past any of these is accepted and closed at once, so the backlog never fills with agents
//! that will not be served. A connection that never says hello is the handler's to close.
//! The handler runs on this thread; other threads reach it through the state they share with
//! it and wake the loop with [`Wake`].

use crate::error::ServerError;
use crate::socket::Peer;
use memtide_balloon::line::{Line, LineSplitter};
use memtide_files::socket::BoundSocket;
use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;
/// Answers waiting to be written to one connection, at most; past this it is closed.
pub const MAX_PENDING_OUT: usize = 1 << 20;
/// How long the loop sleeps at most, so the handler's timers are looked at this often.
const TIMER_SLICE: Duration = Duration::from_millis(50);
/// How long a stopping loop keeps writing its last answers (`bye`) before it closes.
const FLUSH_ON_STOP: Duration = Duration::from_millis(200);

/// One connection, as the handler knows it: stable while the connection lives; a number is
/// reused only after [`Handler::closed`] was called for it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub usize);

/// What the handler asks of the connections.
#[derive(Debug, Default)]
pub struct Outbox {
    pub(crate) lines: Vec<(ConnId, String)>,
    pub(crate) close: Vec<ConnId>,
}

impl Outbox {
    /// Writes `line` (without its newline) to `conn`.
    pub fn send(&mut self, conn: ConnId, line: String) {
        self.lines.push((conn, line));
    }

    /// Closes `conn` once what was sent to it before is written.
    pub fn close(&mut self, conn: ConnId) {
        self.close.push(conn);
    }
}

/// The protocol side of the loop. Every call gets the time it happens at and an [`Outbox`].
pub trait Handler: Send + 'static {
    /// A connection from `peer`, pinned at accept.
    fn opened(&mut self, conn: ConnId, peer: Peer, now: Instant);
    /// One line read from `conn` (or a line too long, or not UTF-8).
    fn line(&mut self, conn: ConnId, line: Line, now: Instant, out: &mut Outbox);
    /// `conn` is gone (the peer closed, a write failed, or the handler closed it).
    fn closed(&mut self, conn: ConnId, now: Instant);
    /// After every wake-up, and at least every 50 ms: timers, work queued by other threads.
    fn poll(&mut self, now: Instant, out: &mut Outbox);
    /// The loop is stopping: last words to every connection (they are written for up to
    /// 200 ms, then every connection is closed).
    fn stopping(&mut self, now: Instant, out: &mut Outbox);
}

/// The process's descriptor budget, as the loop counts its connections in it.
pub trait Descriptors: Send + Sync + fmt::Debug {
    /// Places for `n` descriptors, held until the box is dropped; `None` when fewer are left.
    fn take(&self, n: usize) -> Option<Box<dyn Send>>;
}

/// Descriptors one connection holds: its socket and its peer's pidfd.
const DESCRIPTORS_PER_CONNECTION: usize = 2;

/// How the loop serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub socket: PathBuf,
    /// Permission bits of the socket file.
    pub mode: u32,
    /// The socket file's group (`None`: root's). Its directory is made if missing and must be
    /// trusted (`memtide_files::socket`).
    pub group: Option<u32>,
    /// Connections served at once, at most.
    pub max_connections: usize,
    /// Connections served at once from one user (the peer's uid), at most.
    pub max_per_uid: usize,
    /// Where each connection's descriptors are counted (`None`: not counted).
    pub descriptors: Option<Arc<dyn Descriptors>>,
}

/// Wakes the loop from another thread (after queueing work for its handler).
#[derive(Clone, Debug)]
pub struct Wake(Arc<Waker>);

impl Wake {
    pub fn wake(&self) {
        let _ = self.0.wake();
    }
}

/// The running loop. Dropping it stops it (see [`Server::stop`]).
#[derive(Debug)]
pub struct Server {
    stop: Arc<AtomicBool>,
    wake: Wake,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Server {
    /// Binds the socket and starts the loop's thread with `handler`.
    pub fn start<H: Handler>(config: &ServerConfig, handler: H) -> Result<Server, ServerError> {
        let bound = BoundSocket::bind(&config.socket, "balloon socket", config.mode, config.group)?;
        let loop_err = |source| ServerError::EventLoop {
            path: config.socket.clone(),
            source,
        };
        let poll = Poll::new().map_err(loop_err)?;
        let std_listener = bound.listener().try_clone().map_err(loop_err)?;
        let mut listener = UnixListener::from_std(std_listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(loop_err)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(loop_err)?);
        let stop = Arc::new(AtomicBool::new(false));
        let mut state = Loop {
            poll,
            listener,
            _bound: bound,
            conns: Vec::new(),
            free: Vec::new(),
            handler,
            max_connections: config.max_connections,
            max_per_uid: config.max_per_uid,
            per_uid: BTreeMap::new(),
            descriptors: config.descriptors.clone(),
            accept_pending: false,
            touched: Vec::new(),
        };
        let stop_flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("memtide-balloon".into())
            .spawn(move || state.run(&stop_flag))
            .map_err(loop_err)?;
        Ok(Server {
            stop,
            wake: Wake(waker),
            thread: Some(thread),
            path: config.socket.clone(),
        })
    }

    /// Wakes the loop from another thread.
    pub fn waker(&self) -> Wake {
        self.wake.clone()
    }

    /// Where the socket is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the loop: the handler says its last words, connections close, the socket file
    /// goes. Returns once the thread has ended.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

struct Conn {
    stream: UnixStream,
    uid: u32,
    /// This connection's places in the descriptor budget.
    _places: Option<Box<dyn Send>>,
    splitter: LineSplitter,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    written: usize,
    /// Close once `out` is written.
    closing: bool,
    writable: bool,
}

struct Loop<H> {
    poll: Poll,
    listener: UnixListener,
    /// Kept for its file's removal when the loop ends.
    _bound: BoundSocket,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    handler: H,
    max_connections: usize,
    max_per_uid: usize,
    /// Connections served now, by the peer's uid.
    per_uid: BTreeMap<u32, usize>,
    descriptors: Option<Arc<dyn Descriptors>>,
    /// `accept` ran out of descriptors: try again on the next turn rather than wait for an
    /// edge that will not come.
    accept_pending: bool,
    /// Connections with output or a close delivered since the last flush (kept to reuse its
    /// allocation).
    touched: Vec<ConnId>,
}

impl<H: Handler> Loop<H> {
    fn run(&mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(1024);
        let mut out = Outbox::default();
        while !stop.load(Ordering::SeqCst) {
            if let Err(e) = self.poll.poll(&mut events, Some(TIMER_SLICE)) {
                if e.kind() != ErrorKind::Interrupted {
                    break;
                }
            }
            let now = Instant::now();
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(now),
                    WAKER => {}
                    Token(t) => {
                        let id = ConnId(t - FIRST_CONN);
                        if event.is_readable() || event.is_read_closed() {
                            self.read(id, event.is_read_closed(), now, &mut out);
                        }
                        if event.is_writable() {
                            self.flush(id, now);
                        }
                    }
                }
            }
            if self.accept_pending {
                self.accept(now);
            }
            self.handler.poll(now, &mut out);
            self.deliver(&mut out, now);
        }
        let now = Instant::now();
        self.handler.stopping(now, &mut out);
        self.deliver(&mut out, now);
        let until = now + FLUSH_ON_STOP;
        while Instant::now() < until && self.conns.iter().flatten().any(|c| c.written < c.out.len())
        {
            let _ = self.poll.poll(&mut events, Some(Duration::from_millis(10)));
            for i in 0..self.conns.len() {
                self.flush(ConnId(i), Instant::now());
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        self.accept_pending = false;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let live = self.conns.len() - self.free.len();
                    if live >= self.max_connections {
                        continue;
                    }
                    let peer = Peer::of(&stream);
                    let Some(uid) = peer.uid else {
                        continue;
                    };
                    if self.per_uid.get(&uid).copied().unwrap_or(0) >= self.max_per_uid {
                        continue;
                    }
                    let places = match &self.descriptors {
                        Some(d) => match d.take(DESCRIPTORS_PER_CONNECTION) {
                            Some(places) => Some(places),
                            None => continue,
                        },
                        None => None,
                    };
                    self.add(stream, peer, uid, places, now);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    // Out of descriptors (EMFILE/ENFILE) or memory: retry next turn.
                    self.accept_pending = true;
                    return;
                }
            }
        }
    }

    fn add(
        &mut self,
        mut stream: UnixStream,
        peer: Peer,
        uid: u32,
        places: Option<Box<dyn Send>>,
        now: Instant,
    ) {
        let idx = self.free.pop().unwrap_or(self.conns.len());
        let token = Token(idx + FIRST_CONN);
        if self
            .poll
            .registry()
            .register(&mut stream, token, Interest::READABLE)
            .is_err()
        {
            self.free.push(idx);
            return;
        }
        *self.per_uid.entry(uid).or_insert(0) += 1;
        let conn = Conn {
            stream,
            uid,
            _places: places,
            splitter: LineSplitter::new(),
            out: Vec::new(),
            written: 0,
            closing: false,
            writable: false,
        };
        if idx == self.conns.len() {
            self.conns.push(Some(conn));
        } else {
            self.conns[idx] = Some(conn);
        }
        self.handler.opened(ConnId(idx), peer, now);
    }

    /// Reads what `id` has and hands its lines to the handler. A read shorter than the buffer
    /// took everything there was, so the loop stops there (one syscall per event, not two;
    /// more data is a new edge), unless the peer has closed (`closed`): then it reads on to
    /// the end of the stream, since no edge will come for that.
    fn read(&mut self, id: ConnId, closed: bool, now: Instant, out: &mut Outbox) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let Some(conn) = self.conns.get_mut(id.0).and_then(Option::as_mut) else {
                return;
            };
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    self.drop_conn(id, now);
                    return;
                }
                Ok(n) => {
                    for line in conn.splitter.feed(&buf[..n]) {
                        self.handler.line(id, line, now, out);
                    }
                    if n < buf.len() && !closed {
                        self.deliver(out, now);
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.drop_conn(id, now);
                    return;
                }
            }
            // Answers go out as lines are read, so a fast agent's pipeline cannot pile up.
            self.deliver(out, now);
        }
    }

    /// Moves the handler's answers into the connections' buffers and writes them.
    fn deliver(&mut self, out: &mut Outbox, now: Instant) {
        for (id, line) in out.lines.drain(..) {
            let Some(conn) = self.conns.get_mut(id.0).and_then(Option::as_mut) else {
                continue;
            };
            if conn.closing {
                continue;
            }
            self.touched.push(id);
            conn.out.extend_from_slice(line.as_bytes());
            conn.out.push(b'\n');
            if conn.out.len() - conn.written > MAX_PENDING_OUT {
                conn.out.clear();
                conn.written = 0;
                conn.closing = true;
            }
        }
        for id in out.close.drain(..) {
            if let Some(conn) = self.conns.get_mut(id.0).and_then(Option::as_mut) {
                conn.closing = true;
                self.touched.push(id);
            }
        }
        // Only the connections just written to or closed: a loop over all of them for each
        // line read would cost O(connections) a line.
        self.touched.sort_unstable();
        self.touched.dedup();
        let touched = std::mem::take(&mut self.touched);
        for &id in &touched {
            self.flush(id, now);
        }
        self.touched = touched;
        self.touched.clear();
    }

    /// Writes what `id` has pending; closes it when it is closing and everything is out, or
    /// when writing fails.
    fn flush(&mut self, id: ConnId, now: Instant) {
        let Some(conn) = self.conns.get_mut(id.0).and_then(Option::as_mut) else {
            return;
        };
        while conn.written < conn.out.len() {
            match conn.stream.write(&conn.out[conn.written..]) {
                Ok(0) => {
                    self.drop_conn(id, now);
                    return;
                }
                Ok(n) => conn.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.drop_conn(id, now);
                    return;
                }
            }
        }
        if conn.written == conn.out.len() {
            // Released, not kept: an idle connection holds no buffer.
            conn.out = Vec::new();
            conn.written = 0;
            if conn.closing {
                self.drop_conn(id, now);
                return;
            }
        }
        let want_write = conn.written < conn.out.len();
        if want_write != conn.writable {
            let interest = if want_write {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let token = Token(id.0 + FIRST_CONN);
            if self
                .poll
                .registry()
                .reregister(&mut conn.stream, token, interest)
                .is_ok()
            {
                conn.writable = want_write;
            }
        }
    }

    fn drop_conn(&mut self, id: ConnId, now: Instant) {
        if let Some(mut conn) = self.conns.get_mut(id.0).and_then(Option::take) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if let Some(n) = self.per_uid.get_mut(&conn.uid) {
                *n -= 1;
                if *n == 0 {
                    self.per_uid.remove(&conn.uid);
                }
            }
            self.free.push(id.0);
            self.handler.closed(id, now);
        }
    }
}
