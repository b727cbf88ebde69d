//! The daemon's JSON HTTP API and `/metrics`: serves the latest published `Snapshot` and passes run-time changes to the loop over a channel.
//!
//! The loop publishes a new [`Snapshot`] into the [`SharedSnapshot`] after every tick (see
//! [`publish`]) and drains the command channel with `try_recv` between ticks, answering each
//! [`Request`] on its `reply` sender. The API checks every change for type and range first: a
//! request that fails those checks gets a 400 and never reaches the loop. A change the loop does
//! not answer within [`ApiOptions::reply_timeout`] gets a 503.
//!
//! **Authority** (`auth.rs`). Over TCP ([`ApiServer`]) the API is read-only: a change gets 403
//! unless it carries the `[api] token_file` token (`Authorization: Bearer`). The Unix socket
//! ([`SocketServer`]) takes changes from root and the members of `[api] group`, checked with
//! `SO_PEERCRED`; anyone else gets 403 (and cannot connect at all through the file's mode).
//!
//! The server is our own small HTTP/1.1 implementation on `std::net` and a mio event loop
//! (`event.rs`: one request per connection, `Connection: close`), not `tiny_http`: tiny_http
//! 0.12 sizes a buffer from the declared `Content-Length` of any body it has to skip, so one
//! request announcing a huge body aborts the process on allocation failure
//! (tiny-http/tiny-http#290). Here a declared body over the limit is refused before anything is
//! read, every connection has a deadline, idle connections hold no thread and each peer's are
//! bounded. Endpoints: see docs/api.md.

mod auth;
mod body;
mod dashboard;
mod event;
mod http;
mod routes;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::command::Request;
use crate::history::History;
pub use auth::{group_id, Token};
use event::{Listener, Server};
use http::Limits;
use memtide_api::Snapshot;
use memtide_files::socket::{BoundSocket, SocketError};
use routes::Handler;

/// What the loop publishes and the API reads: the latest snapshot, and the dashboard's
/// history of them. Locks poisoned by a panicking holder are taken over: what they hold is
/// whole either way.
#[derive(Debug, Default)]
pub struct Published {
    snapshot: RwLock<Snapshot>,
    history: RwLock<History>,
}

impl Published {
    /// `snapshot` published, with no history yet.
    pub fn new(snapshot: Snapshot) -> Published {
        Published {
            snapshot: RwLock::new(snapshot),
            history: RwLock::default(),
        }
    }

    /// The latest snapshot.
    pub fn snapshot(&self) -> RwLockReadGuard<'_, Snapshot> {
        self.snapshot.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The recent past, for the dashboard.
    pub fn history(&self) -> RwLockReadGuard<'_, History> {
        self.history.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the snapshot with what `make` builds from the one it replaces (taking what
    /// it reuses from it), and records the new one in the history at the wall clock's time.
    pub fn publish_with(&self, make: impl FnOnce(&mut Snapshot) -> Snapshot) {
        let mut snapshot = self.snapshot.write().unwrap_or_else(|p| p.into_inner());
        *snapshot = make(&mut snapshot);
        let at_s = crate::log::now_ms() as f64 / 1000.0;
        self.history
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .record(&snapshot, at_s);
    }
}

/// What the loop publishes and the API reads, shared.
pub type SharedSnapshot = Arc<Published>;

/// Replaces the published snapshot (for the loop, after each tick).
pub fn publish(shared: &SharedSnapshot, snapshot: Snapshot) {
    shared.publish_with(|_| snapshot);
}

/// Tunables of the API server; [`ApiOptions::default`] suits the daemon.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// Longest wait for the loop's answer to a change before replying 503 (default 5 s).
    pub reply_timeout: Duration,
    /// Longest time a client may take to send its whole request (default 3 s); a client that
    /// sends nothing in that time gets 408.
    pub request_timeout: Duration,
    /// Longest time a client may take to take the response (default 10 s).
    pub io_timeout: Duration,
    /// Largest request body accepted; larger ones get 413 (default 64 KiB).
    pub body_limit_bytes: usize,
    /// Largest request line plus headers; larger ones get 431 (default 16 KiB).
    pub head_limit_bytes: usize,
    /// Connections of one peer (IP address, or uid on the Unix socket) waiting for their
    /// request; a new one beyond that closes the peer's oldest (default 128).
    pub per_peer_connections: usize,
    /// Threads answering requests (default 4 on TCP; the socket has its own).
    pub workers: usize,
    /// TCP only: the token that allows changes (none: read-only).
    pub token: Option<Token>,
}

impl Default for ApiOptions {
    fn default() -> ApiOptions {
        ApiOptions {
            reply_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(3),
            io_timeout: Duration::from_secs(10),
            body_limit_bytes: 64 * 1024,
            head_limit_bytes: 16 * 1024,
            per_peer_connections: 128,
            workers: 4,
            token: None,
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
    #[error("cannot start the API threads for {at}: {source}")]
    Spawn {
        at: String,
        #[source]
        source: io::Error,
    },
    /// The socket's file could not be bound (a live daemon's socket there, another file, an
    /// untrusted directory, ...).
    #[error(transparent)]
    Socket(#[from] SocketError),
    #[error("[api] token_file {}: {why}", path.display())]
    TokenFile { path: PathBuf, why: String },
    #[error("[api] group {name:?}: {why}")]
    Group { name: String, why: String },
}

/// A listener's loop, stopped when dropped.
#[derive(Debug)]
struct Running {
    stop: Arc<AtomicBool>,
    waker: Arc<mio::Waker>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(
        listener: Listener,
        handler: Handler,
        options: ApiOptions,
        at: String,
    ) -> Result<Running, ApiError> {
        let server = Arc::new(Server {
            handler,
            limits: Limits {
                head_bytes: options.head_limit_bytes,
                body_bytes: options.body_limit_bytes,
            },
            request_timeout: options.request_timeout,
            io_timeout: options.io_timeout,
            per_peer: options.per_peer_connections,
            token: options.token,
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (waker, thread) = event::spawn(listener, server, options.workers, Arc::clone(&stop))
            .map_err(|source| ApiError::Spawn { at, source })?;
        Ok(Running {
            stop,
            waker,
            thread: Some(thread),
        })
    }

    /// Stops the loop and closes the listener; answers being written finish on their workers.
    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::SeqCst);
        if self.waker.wake().is_ok() {
            let _ = thread.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

fn handler(shared: SharedSnapshot, commands: Sender<Request>, options: &ApiOptions) -> Handler {
    Handler {
        shared,
        commands,
        reply_timeout: options.reply_timeout,
    }
}

/// The API on TCP: reads for anyone, changes with the token. Stops on
/// [`ApiServer::shutdown`] or when dropped.
#[derive(Debug)]
pub struct ApiServer {
    local_addr: SocketAddr,
    running: Running,
}

impl ApiServer {
    /// Binds `listen` and serves the API, read-only, with [`ApiOptions::default`].
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
        listener.set_nonblocking(true).map_err(bind_error)?;
        let handler = handler(shared, commands, &options);
        let running = Running::start(
            Listener::Tcp(listener),
            handler,
            options,
            local_addr.to_string(),
        )?;
        Ok(ApiServer {
            local_addr,
            running,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting connections and closes the listener. Requests already being answered
    /// finish on their workers.
    pub fn shutdown(mut self) {
        self.running.stop();
    }
}

/// The API on a Unix socket, for changes by root and the members of a group, with its own
/// loop and workers. Removes the socket file when stopped, if it is still the one bound.
#[derive(Debug)]
pub struct SocketServer {
    running: Running,
    /// The socket's file, removed when dropped if it is still the one bound.
    bound: BoundSocket,
}

impl SocketServer {
    /// Binds the socket at `path` (mode 0660 owned by root and `group`; 0600 without one) and
    /// serves the API there. `options.token` is not used: the peer's identity is the authority.
    ///
    /// The file is bound by `memtide_files::socket`: its directory made if missing and refused
    /// unless trusted, a stale socket replaced, and a live one (another daemon's) or a file of
    /// another kind refused ([`SocketError::InUse`], [`SocketError::NotASocket`]), never
    /// replaced.
    pub fn start(
        path: &Path,
        group: Option<u32>,
        shared: SharedSnapshot,
        commands: Sender<Request>,
        options: ApiOptions,
    ) -> Result<SocketServer, ApiError> {
        let mode = if group.is_some() { 0o660 } else { 0o600 };
        let bound = BoundSocket::bind(path, "API socket", mode, group)?;
        let listener = bound
            .listener()
            .try_clone()
            .map_err(|source| ApiError::Spawn {
                at: path.display().to_string(),
                source,
            })?;
        let handler = handler(shared, commands, &options);
        let options = ApiOptions {
            token: None,
            ..options
        };
        let rule = auth::PeerRule { group };
        let running = Running::start(
            Listener::Unix(listener, rule),
            handler,
            options,
            path.display().to_string(),
        )?;
        Ok(SocketServer { running, bound })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        self.bound.path()
    }
}

impl Drop for SocketServer {
    /// Stops the loop; the file goes after, with `bound`.
    fn drop(&mut self) {
        self.running.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::sync::mpsc;
    use std::thread;

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
    fn the_socket_file_goes_with_its_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        let (tx, _rx) = mpsc::channel();
        let server = SocketServer::start(
            &path,
            None,
            SharedSnapshot::default(),
            tx,
            ApiOptions::default(),
        )
        .unwrap();
        assert_eq!(server.path(), path);
        assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
        drop(server);
        assert!(!path.exists());
    }

    /// A raw `GET /healthz` over the socket at `path`: the answer's status line.
    fn healthz(path: &Path) -> String {
        use std::io::{Read, Write};
        let mut stream = std::os::unix::net::UnixStream::connect(path).unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or_default().to_string()
    }

    #[test]
    fn a_live_daemon_s_socket_is_refused_and_a_stale_one_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        let start = || {
            let (tx, _rx) = mpsc::channel();
            SocketServer::start(
                &path,
                None,
                SharedSnapshot::default(),
                tx,
                ApiOptions::default(),
            )
        };
        // A daemon that died left its socket: nobody answers there.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let first = start().expect("the stale socket is replaced");
        assert!(healthz(&path).contains(" 200 "), "{}", healthz(&path));

        // A second daemon (another state file, the same socket) is refused, naming it.
        let err = start().unwrap_err();
        assert!(
            matches!(err, ApiError::Socket(SocketError::InUse { .. })),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "API socket {}: another process is serving it",
                path.display()
            )),
            "{msg}"
        );
        assert!(healthz(&path).contains(" 200 "), "the first still serves");
        drop(first);
        assert!(!path.exists());
    }

    #[test]
    fn publish_replaces_the_snapshot_even_after_a_poisoning_panic() {
        let shared = SharedSnapshot::default();
        let poisoner = Arc::clone(&shared);
        let _ = thread::spawn(move || {
            let _guard = poisoner.snapshot.write().unwrap();
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
        assert_eq!(shared.snapshot().ticks, 7);
        assert_eq!(shared.history().host().len(), 1, "recorded in the history");
    }
}
