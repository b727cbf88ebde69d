//! One listener's event loop (mio) and its small pool of workers: connections are read without blocking until their request is whole, so an idle or slow connection costs a buffer, never a thread.
//!
//! The loop accepts, reads and parses; a whole request (or a refusal to answer) goes to a
//! worker, which answers it (a change waits for the daemon's loop there) and writes the reply;
//! the worker hands the connection back for lingering, which the loop does without blocking
//! too. Bounds:
//!
//! - each connection has [`ApiOptions::request_timeout`] to send its whole request (then 408)
//!   and a lingering one [`LINGER`];
//! - each peer (an IP address over TCP, a uid on the Unix socket) has at most
//!   [`ApiOptions::per_peer_connections`] waiting for their request; a new connection beyond
//!   that closes the peer's oldest. On loopback every local user is 127.0.0.1, so a user's
//!   flood of idle connections evicts its own oldest, and an operator's new connection, which
//!   sends its request at once, is read before the flood can push it out;
//! - [`ApiOptions::workers`] workers answer, with a queue of [`QUEUE`] behind them; when it is
//!   full the connection is closed (a change already waiting for the loop holds its worker
//!   for at most [`ApiOptions::reply_timeout`]).
//!
//! Each listener has its own loop and workers: a flood on TCP never delays the Unix socket.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Waker};

use super::auth::{self, PeerRule, Token};
use super::http::{self, HttpRequest, Limits, Parsed, ReadError, Reply};
use super::routes::Handler;

/// Requests waiting for a worker, beyond those being answered.
pub(crate) const QUEUE: usize = 64;
/// How long a connection that was answered is read and dropped, so that closing with unread
/// data does not reset it before the client has read the answer.
pub(crate) const LINGER: Duration = Duration::from_secs(1);
/// Most bytes drained from a lingering connection.
const LINGER_BYTES: usize = 256 * 1024;

const LISTENER: mio::Token = mio::Token(0);
const WAKER: mio::Token = mio::Token(1);
const FIRST_CONN: usize = 2;

/// What a listener's workers and loop share.
pub(crate) struct Server {
    pub(crate) handler: Handler,
    pub(crate) limits: Limits,
    pub(crate) request_timeout: Duration,
    pub(crate) io_timeout: Duration,
    pub(crate) per_peer: usize,
    /// TCP: the token that allows changes (none: read-only).
    pub(crate) token: Option<Token>,
}

/// The listening socket and what its peers may do.
pub(crate) enum Listener {
    /// Changes with the token only.
    Tcp(TcpListener),
    /// Changes by the peers the rule allows; others are answered 403 and closed.
    Unix(UnixListener, PeerRule),
}

/// A connection of either kind.
pub(crate) enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_nonblocking(on),
            Conn::Unix(s) => s.set_nonblocking(on),
        }
    }

    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_read_timeout(t).and(s.set_write_timeout(t)),
            Conn::Unix(s) => s.set_read_timeout(t).and(s.set_write_timeout(t)),
        }
    }

    fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Conn::Tcp(s) => s.shutdown(how),
            Conn::Unix(s) => s.shutdown(how),
        };
    }

    fn fd(&self) -> i32 {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

/// Whose connection it is, for the per-peer bound.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Peer {
    Ip(IpAddr),
    Uid(u32),
}

/// What a worker does with a connection.
enum Work {
    /// Answer the request; `may_change`: the peer has authority without a token.
    Answer(HttpRequest, bool),
    /// Send this refusal.
    Refuse(Reply),
}

struct Job {
    conn: Conn,
    work: Work,
}

/// A connection the loop is reading from.
struct Reading {
    conn: Conn,
    peer: Peer,
    buf: Vec<u8>,
    until: Instant,
    may_change: bool,
    continued: bool,
}

/// A connection answered, drained until it closes or [`LINGER`] passes.
struct Lingering {
    conn: Conn,
    until: Instant,
    drained: usize,
}

enum Slot {
    Reading(Reading),
    Lingering(Lingering),
}

/// Starts `workers` workers and the loop on threads of their own; the loop stops when `stop`
/// is set and the waker woken.
pub(crate) fn spawn(
    listener: Listener,
    server: Arc<Server>,
    workers: usize,
    stop: Arc<AtomicBool>,
) -> io::Result<(Arc<Waker>, thread::JoinHandle<()>)> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let (jobs, queue) = mpsc::sync_channel::<Job>(QUEUE);
    let queue = Arc::new(Mutex::new(queue));
    let (done, answered) = mpsc::channel::<Conn>();
    for _ in 0..workers.max(1) {
        let (queue, server, done, waker) = (
            Arc::clone(&queue),
            Arc::clone(&server),
            done.clone(),
            Arc::clone(&waker),
        );
        thread::Builder::new()
            .name("memtide-api-work".to_string())
            .spawn(move || work(&queue, &server, &done, &waker))?;
    }
    let mut event_loop = EventLoop {
        poll,
        listener,
        server,
        jobs,
        answered,
        slots: HashMap::new(),
        by_peer: HashMap::new(),
        next: FIRST_CONN,
    };
    let thread = thread::Builder::new()
        .name("memtide-api".to_string())
        .spawn(move || event_loop.run(&stop))?;
    Ok((waker, thread))
}

fn work(queue: &Mutex<Receiver<Job>>, server: &Server, done: &Sender<Conn>, waker: &Waker) {
    loop {
        // The lock is held only while waiting: one idle worker waits, the others queue on it.
        let job = match queue.lock() {
            Ok(q) => q.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(Job { mut conn, work }) = job else {
            return;
        };
        let (reply, head_only) = match work {
            Work::Answer(req, may_change) => {
                let may_change = may_change
                    || server
                        .token
                        .as_ref()
                        .zip(req.bearer.as_deref())
                        .is_some_and(|(token, given)| token.matches(given));
                let reply = server
                    .handler
                    .handle(&req.method, &req.target, &req.body, may_change);
                (reply, req.method == "HEAD")
            }
            Work::Refuse(reply) => (reply, false),
        };
        if conn.set_nonblocking(false).is_err()
            || conn.set_timeouts(Some(server.io_timeout)).is_err()
        {
            continue;
        }
        if http::write_response(&mut conn, &reply, head_only).is_err() {
            continue;
        }
        conn.shutdown(Shutdown::Write);
        if conn.set_nonblocking(true).is_ok() && done.send(conn).is_ok() {
            let _ = waker.wake();
        }
    }
}

struct EventLoop {
    poll: Poll,
    listener: Listener,
    server: Arc<Server>,
    jobs: SyncSender<Job>,
    answered: Receiver<Conn>,
    slots: HashMap<usize, Slot>,
    /// Each peer's connections still reading, oldest first.
    by_peer: HashMap<Peer, VecDeque<usize>>,
    next: usize,
}

impl EventLoop {
    fn run(&mut self, stop: &AtomicBool) {
        let fd = match &self.listener {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l, _) => l.as_raw_fd(),
        };
        if self
            .poll
            .registry()
            .register(&mut SourceFd(&fd), LISTENER, Interest::READABLE)
            .is_err()
        {
            return;
        }
        let mut events = Events::with_capacity(1024);
        while !stop.load(Ordering::SeqCst) {
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()) + Duration::from_millis(1));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    mio::Token(id) => self.ready(id),
                }
            }
            while let Ok(conn) = self.answered.try_recv() {
                self.add(
                    Slot::Lingering(Lingering {
                        conn,
                        until: Instant::now() + LINGER,
                        drained: 0,
                    }),
                    None,
                );
            }
            self.expire(Instant::now());
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.slots
            .values()
            .map(|s| match s {
                Slot::Reading(r) => r.until,
                Slot::Lingering(l) => l.until,
            })
            .min()
    }

    fn accept_all(&mut self) {
        loop {
            let accepted = match &self.listener {
                Listener::Tcp(l) => l.accept().map(|(s, addr)| (Conn::Tcp(s), Ok(addr.ip()))),
                Listener::Unix(l, _) => l.accept().map(|(s, _)| {
                    let cred = auth::peer_cred(&s);
                    (Conn::Unix(s), Err(cred))
                }),
            };
            let (conn, who) = match accepted {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors or an aborted handshake: try again at the next event.
                Err(_) => return,
            };
            if conn.set_nonblocking(true).is_err() {
                continue;
            }
            let (peer, may_change) = match who {
                Ok(ip) => (Peer::Ip(ip), false),
                Err(Ok(cred)) => {
                    let Listener::Unix(_, rule) = &self.listener else {
                        continue;
                    };
                    if !rule.allows(cred, || auth::proc_status(cred.pid)) {
                        self.refuse(
                            conn,
                            Reply::error(
                                403,
                                &format!(
                                    "uid {} may not use this socket: it takes changes from root \
                                     and the members of [api] group only (see docs/api.md)",
                                    cred.uid
                                ),
                            ),
                        );
                        continue;
                    }
                    (Peer::Uid(cred.uid), true)
                }
                Err(Err(_)) => continue,
            };
            self.make_room_for(peer);
            let until = Instant::now() + self.server.request_timeout;
            self.add(
                Slot::Reading(Reading {
                    conn,
                    peer,
                    buf: Vec::new(),
                    until,
                    may_change,
                    continued: false,
                }),
                Some(peer),
            );
        }
    }

    /// Closes the peer's oldest connections still reading until it has room for one more.
    fn make_room_for(&mut self, peer: Peer) {
        let per_peer = self.server.per_peer.max(1);
        while self.by_peer.get(&peer).is_some_and(|q| q.len() >= per_peer) {
            let oldest = self.by_peer.get_mut(&peer).and_then(VecDeque::pop_front);
            if let Some(id) = oldest {
                self.remove(id);
            }
        }
    }

    fn add(&mut self, slot: Slot, peer: Option<Peer>) {
        let id = self.next;
        self.next += 1;
        let fd = match &slot {
            Slot::Reading(r) => r.conn.fd(),
            Slot::Lingering(l) => l.conn.fd(),
        };
        if self
            .poll
            .registry()
            .register(&mut SourceFd(&fd), mio::Token(id), Interest::READABLE)
            .is_err()
        {
            return;
        }
        if let Some(peer) = peer {
            self.by_peer.entry(peer).or_default().push_back(id);
        }
        self.slots.insert(id, slot);
    }

    /// Forgets a connection (the caller keeps or drops it).
    fn remove(&mut self, id: usize) -> Option<Slot> {
        let slot = self.slots.remove(&id)?;
        let fd = match &slot {
            Slot::Reading(r) => {
                if let Some(q) = self.by_peer.get_mut(&r.peer) {
                    q.retain(|&other| other != id);
                    if q.is_empty() {
                        self.by_peer.remove(&r.peer);
                    }
                }
                r.conn.fd()
            }
            Slot::Lingering(l) => l.conn.fd(),
        };
        let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
        Some(slot)
    }

    fn ready(&mut self, id: usize) {
        match self.slots.get_mut(&id) {
            Some(Slot::Reading(r)) => {
                let outcome = read_more(r, &self.server.limits);
                match outcome {
                    Step::Wait => {}
                    Step::Close => {
                        self.remove(id);
                    }
                    Step::Hand(work) => {
                        if let Some(Slot::Reading(r)) = self.remove(id) {
                            self.hand(r.conn, work);
                        }
                    }
                }
            }
            Some(Slot::Lingering(l)) => {
                let open = drain(l);
                if !open {
                    self.remove(id);
                }
            }
            None => {}
        }
    }

    fn hand(&mut self, conn: Conn, work: Work) {
        if let Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) =
            self.jobs.try_send(Job { conn, work })
        {
            // Every worker busy and the queue full: close rather than wait.
            job.conn.shutdown(Shutdown::Both);
        }
    }

    fn refuse(&mut self, conn: Conn, reply: Reply) {
        self.hand(conn, Work::Refuse(reply));
    }

    fn expire(&mut self, now: Instant) {
        let due: Vec<usize> = self
            .slots
            .iter()
            .filter(|(_, s)| match s {
                Slot::Reading(r) => r.until <= now,
                Slot::Lingering(l) => l.until <= now,
            })
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            if let Some(Slot::Reading(r)) = self.remove(id) {
                let ReadError::Reject { status, message } =
                    http::timed_out(&r.buf, &self.server.limits)
                else {
                    continue;
                };
                self.refuse(r.conn, Reply::error(status, &message));
            }
        }
    }
}

/// What reading a connection led to.
enum Step {
    Wait,
    Close,
    Hand(Work),
}

/// Reads what the connection has sent and parses it.
fn read_more(r: &mut Reading, limits: &Limits) -> Step {
    let most = limits.head_bytes + limits.body_bytes + 1;
    let mut chunk = [0u8; 4096];
    let mut eof = false;
    loop {
        let room = most.saturating_sub(r.buf.len()).min(chunk.len());
        if room == 0 {
            break;
        }
        match r.conn.read(&mut chunk[..room]) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => r.buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return Step::Close,
        }
    }
    match http::parse(&r.buf, eof, limits) {
        Ok(Parsed::Request(req)) => Step::Hand(Work::Answer(req, r.may_change)),
        Ok(Parsed::Incomplete { expect_continue }) => {
            if expect_continue && !r.continued {
                r.continued = true;
                // A fresh connection's send buffer takes these 25 bytes at once.
                let _ = r.conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            Step::Wait
        }
        Err(ReadError::Closed) => Step::Close,
        Err(ReadError::Reject { status, message }) => {
            Step::Hand(Work::Refuse(Reply::error(status, &message)))
        }
    }
}

/// Reads and drops what a lingering connection sends; false once it is done with.
fn drain(l: &mut Lingering) -> bool {
    let mut buf = [0u8; 8192];
    loop {
        match l.conn.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                l.drained += n;
                if l.drained >= LINGER_BYTES {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}
