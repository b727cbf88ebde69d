//! The daemon's JSON HTTP API and `/metrics`: serves the latest published `Snapshot` and passes run-time changes to the loop over a channel.
//!
//! The loop publishes a new [`Snapshot`] into the [`SharedSnapshot`] after every tick (see
//! [`publish`]) and drains the command channel with `try_recv` between ticks, answering each
//! [`Request`] on its `reply` sender. The API checks every change for type and range first: a
//! request that fails those checks gets a 400 and never reaches the loop. A change the loop does
//! not answer within [`ApiOptions::reply_timeout`] gets a 503.
//!
//! The server is our own small HTTP/1.1 implementation on `std::net` (one request per
//! connection, `Connection: close`), not `tiny_http`: tiny_http 0.12 sizes a buffer from the
//! declared `Content-Length` of any body it has to skip, so one request announcing a huge body
//! aborts the process on allocation failure (tiny-http/tiny-http#290). Here a declared body over
//! the limit is refused before anything is read, every connection has a deadline, and the
//! number of connections served at once is bounded. Endpoints: see docs/api.md.

mod body;
mod http;
mod routes;

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::command::Request;
use http::{Limits, ReadError, Reply};
use memtide_api::Snapshot;
use routes::Handler;

/// The snapshot the loop publishes and the API reads.
pub type SharedSnapshot = Arc<RwLock<Snapshot>>;

/// Replaces the published snapshot (for the loop, after each tick). A lock poisoned by a
/// panicking holder is taken over: the new snapshot is whole either way.
pub fn publish(shared: &SharedSnapshot, snapshot: Snapshot) {
    let mut guard = shared
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *guard = snapshot;
}

/// Tunables of the API server; [`ApiOptions::default`] suits the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiOptions {
    /// Longest wait for the loop's answer to a change before replying 503 (default 5 s).
    pub reply_timeout: Duration,
    /// Longest time a client may take to send its whole request (default 3 s); a client that
    /// sends nothing in that time gets 408. Short, so idle connections cannot hold the
    /// connection slots for long.
    pub request_timeout: Duration,
    /// Longest time a client may take to take the response (default 10 s).
    pub io_timeout: Duration,
    /// Largest request body accepted; larger ones get 413 (default 64 KiB).
    pub body_limit_bytes: usize,
    /// Largest request line plus headers; larger ones get 431 (default 16 KiB).
    pub head_limit_bytes: usize,
    /// Connections served at once, each on its own thread; more are answered 503 at once
    /// (default 512: with the short request timeout, a burst of idle connections neither locks
    /// out `memtide status` nor costs more than their threads' untouched stacks).
    pub max_connections: usize,
}

impl Default for ApiOptions {
    fn default() -> ApiOptions {
        ApiOptions {
            reply_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(3),
            io_timeout: Duration::from_secs(10),
            body_limit_bytes: 64 * 1024,
            head_limit_bytes: 16 * 1024,
            max_connections: 512,
        }
    }
}

/// Why the API server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("cannot listen for the API on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the API thread for {addr}: {source}")]
    Spawn {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// A running API server. Stops on [`ApiServer::shutdown`] or when dropped.
#[derive(Debug)]
pub struct ApiServer {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl ApiServer {
    /// Binds `listen` and serves the API on its own threads with [`ApiOptions::default`].
    pub fn start(
        listen: SocketAddr,
        shared: SharedSnapshot,
        commands: Sender<Request>,
    ) -> Result<ApiServer, ApiError> {
        ApiServer::start_with(listen, shared, commands, ApiOptions::default())
    }

    /// Binds `listen` and serves the API on its own threads.
    pub fn start_with(
        listen: SocketAddr,
        shared: SharedSnapshot,
        commands: Sender<Request>,
        options: ApiOptions,
    ) -> Result<ApiServer, ApiError> {
        let bind_error = |source| ApiError::Bind {
            addr: listen,
            source,
        };
        let listener = TcpListener::bind(listen).map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        let server = Arc::new(Server {
            handler: Handler {
                shared,
                commands,
                reply_timeout: options.reply_timeout,
            },
            limits: Limits {
                head_bytes: options.head_limit_bytes,
                body_bytes: options.body_limit_bytes,
            },
            request_timeout: options.request_timeout,
            io_timeout: options.io_timeout,
            max_connections: options.max_connections.max(1),
            active: AtomicUsize::new(0),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("memtide-api".to_string())
                .spawn(move || accept_loop(&listener, &server, &stop))
                .map_err(|source| ApiError::Spawn {
                    addr: local_addr,
                    source,
                })?
        };
        Ok(ApiServer {
            local_addr,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and closes the listener. Requests already being served
    /// finish on their own threads.
    pub fn shutdown(mut self) {
        self.stop_accepting();
    }

    fn stop_accepting(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let wake = SocketAddr::new(reachable_ip(self.local_addr.ip()), self.local_addr.port());
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok() {
            let _ = acceptor.join();
        }
        // Otherwise the thread stops at its next connection; there is nothing to wait for.
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}

/// An address to connect to for a listener bound to `ip` (the unspecified address means loopback).
fn reachable_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        other => other,
    }
}

/// State shared by the accept thread and the connection threads.
struct Server {
    handler: Handler,
    limits: Limits,
    request_timeout: Duration,
    io_timeout: Duration,
    max_connections: usize,
    active: AtomicUsize,
}

/// Counts a connection as served until dropped.
struct Active(Arc<Server>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

fn accept_loop(listener: &TcpListener, server: &Arc<Server>, stop: &AtomicBool) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(stream) => stream,
            Err(_) => {
                // Out of file descriptors or an aborted handshake: back off briefly.
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if server.active.fetch_add(1, Ordering::SeqCst) >= server.max_connections {
            server.active.fetch_sub(1, Ordering::SeqCst);
            refuse_busy(stream, server.max_connections);
            continue;
        }
        let active = Active(Arc::clone(server));
        // If the thread cannot start, the closure (stream and count) is dropped: the
        // connection closes and the count goes back down.
        let _ = thread::Builder::new()
            .name("memtide-api-conn".to_string())
            .spawn(move || serve_connection(stream, &active.0));
    }
}

fn refuse_busy(mut stream: TcpStream, max: usize) {
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let reply = Reply::error(
        503,
        &format!("the API is serving {max} connections already; retry shortly"),
    );
    let _ = http::write_response(&mut stream, &reply, false);
    let _ = stream.shutdown(Shutdown::Both);
}

fn serve_connection(stream: TcpStream, server: &Server) {
    let _ = stream.set_nodelay(true);
    let mut io = Deadline {
        stream: &stream,
        until: Instant::now() + server.request_timeout,
    };
    let (reply, head_only) = match http::read_request(&mut io, &server.limits) {
        Ok(req) => (
            server.handler.handle(&req.method, &req.target, &req.body),
            req.method == "HEAD",
        ),
        Err(ReadError::Closed) => return,
        Err(ReadError::Reject { status, message }) => (Reply::error(status, &message), false),
    };
    io.until = Instant::now() + server.io_timeout;
    let _ = http::write_response(&mut io, &reply, head_only);
    let _ = stream.shutdown(Shutdown::Write);
    linger(&stream);
}

/// Reads and drops what the client still sends (briefly), so that closing with unread data
/// does not reset the connection before the client has read the response.
fn linger(stream: &TcpStream) {
    let mut io = Deadline {
        stream,
        until: Instant::now() + Duration::from_secs(1),
    };
    let mut buf = [0u8; 8192];
    let mut drained = 0usize;
    while drained < 256 * 1024 {
        match io.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// A stream whose reads and writes fail with `TimedOut` once `until` has passed.
struct Deadline<'a> {
    stream: &'a TcpStream,
    until: Instant,
}

impl Deadline<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
        } else {
            Ok(left)
        }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.set_read_timeout(Some(self.left()?))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.set_write_timeout(Some(self.left()?))?;
        let mut stream = self.stream;
        stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut stream = self.stream;
        stream.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn start_on(addr: SocketAddr) -> Result<ApiServer, ApiError> {
        let (tx, _rx) = mpsc::channel();
        ApiServer::start(addr, SharedSnapshot::default(), tx)
    }

    #[test]
    fn bind_errors_name_the_address() {
        let first = start_on("127.0.0.1:0".parse().unwrap()).unwrap();
        let taken = first.local_addr();
        let err = start_on(taken).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&taken.to_string()), "{text}");
        assert!(text.starts_with("cannot listen for the API on"), "{text}");
    }

    #[test]
    fn shutdown_closes_the_listener() {
        let server = start_on("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr();
        server.shutdown();
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn dropping_the_server_stops_it() {
        let addr = {
            let server = start_on("127.0.0.1:0".parse().unwrap()).unwrap();
            server.local_addr()
        };
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn the_unspecified_address_is_woken_through_loopback() {
        assert_eq!(
            reachable_ip("0.0.0.0".parse().unwrap()),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert_eq!(
            reachable_ip("::".parse().unwrap()),
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        );
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(reachable_ip(ip), ip);
    }

    #[test]
    fn publish_replaces_the_snapshot_even_after_a_poisoning_panic() {
        let shared = SharedSnapshot::default();
        let poisoner = Arc::clone(&shared);
        let _ = thread::spawn(move || {
            let _guard = poisoner.write().unwrap();
            panic!("poison the lock");
        })
        .join();
        publish(
            &shared,
            Snapshot {
                ticks: 7,
                ..Default::default()
            },
        );
        let ticks = shared.read().unwrap_or_else(|p| p.into_inner()).ticks;
        assert_eq!(ticks, 7);
    }
}
