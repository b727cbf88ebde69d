//! The agent an application links: it registers the application's pool with memtide over the balloon socket, answers targets by calling the application's shrink and grow callbacks, reports the pool's statistics, and reconnects with back-off until stopped.
//!
//! ```no_run
//! use memtide_balloon::agent::{Agent, PoolStats};
//! use memtide_balloon::protocol::{PoolInfo, PoolKind};
//!
//! let agent = Agent::builder(PoolInfo {
//!     app: "mycache".into(),
//!     kind: PoolKind::Cache,
//!     pool_bytes: 1 << 30,
//!     min_bytes: 64 << 20,
//!     max_bytes: 2 << 30,
//!     granule_bytes: 1 << 20,
//! })
//! .on_shrink(|bytes| { /* free memory down to `bytes` */ Ok(()) })
//! .on_grow(|bytes| { /* allocate up to `bytes` */ Ok(()) })
//! .stats(PoolStats::default)
//! .start()?;
//! // ... the application runs; the agent obeys memtide on its own threads ...
//! agent.stop();
//! # Ok::<(), memtide_balloon::agent::StartError>(())
//! ```
//!
//! # Threads
//!
//! The agent runs on its own thread (`memtide-balloon`), which owns the connection, and calls
//! the application's shrink and grow callbacks on a second thread (`memtide-balloon-resize`),
//! one call at a time, so that it keeps sending `stats` and `progress working` (about once a
//! second) while a callback runs. Each connection also has a thread that only reads lines. The
//! stats callback runs on the agent's thread and must not wait for a resize to finish (keep
//! the counters in atomics, or under a lock the resize does not hold for long).
//!
//! # Targets
//!
//! A target is checked before any callback: its `seq` above the last valid target's, its size
//! a multiple of `granule_bytes` within `[min_bytes, max_bytes]`. One that fails is answered
//! with a non-fatal `bad_field` error and otherwise ignored, so a resize in progress goes on. A
//! valid target below the pool's size calls the shrink callback, one above it the grow
//! callback, and one equal to it is `done` at once. A callback that returns `Ok` has put the
//! pool at the target, its memory given back to the OS when shrinking (`done`); one that
//! returns a [`Refusal`] has not (`failed`, with the refusal's reason). A newer valid target
//! supersedes an older one: the older is no longer answered, and the newer is worked on as soon
//! as the running callback returns (a callback is never interrupted).
//!
//! # Connection
//!
//! The socket is the one given to [`AgentBuilder::socket`], else `$MEMTIDE_BALLOON_SOCKET`,
//! else `/run/memtide/balloon.sock`. When the connection cannot be made, drops, memtide says
//! `bye` or sends a fatal error, or no `welcome` comes within 10 s of the `hello`, the agent
//! closes the connection and connects again after a back-off that starts at
//! 100 ms and doubles up to 30 s (each wait a random time between half and all of it), and
//! starts again at 100 ms once memtide welcomes it. [`Agent::stop`] (or dropping the [`Agent`])
//! says `bye` and closes.

mod backoff;
mod resize;
mod runner;

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::protocol::{CurvePoint, Durability, ErrorMessage, PoolInfo, ProtocolError};

/// The environment variable that names the balloon socket.
pub const SOCKET_ENV: &str = "MEMTIDE_BALLOON_SOCKET";

/// The balloon socket's path when neither the application nor the environment names one.
pub const DEFAULT_SOCKET: &str = "/run/memtide/balloon.sock";

/// The pool's statistics as the application counts them; the agent adds the pool's size.
///
/// The agent keeps what it sends valid: `used_bytes` and `dirty_bytes` at most the pool's size,
/// every figure at most 2^53 − 1, the counters never lower than they were last sent, and a
/// curve that breaks the protocol's rules ([`check_curve`](crate::protocol::check_curve)) left out (and recorded as
/// [`AgentError::Curve`]) while the rest is sent; likewise durability figures
/// ([`check_durability`](crate::protocol::check_durability), [`AgentError::Durability`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// The part of the pool holding data.
    pub used_bytes: u64,
    /// Lookups the pool answered, since the application started.
    pub hits: u64,
    /// Lookups it could not answer.
    pub misses: u64,
    /// Entries it dropped to make room.
    pub evictions: u64,
    /// Pool memory not yet written back.
    pub dirty_bytes: u64,
    /// The pool's LRU miss-ratio curve, for an application that samples its pool's requests
    /// (SHARDS: a hash-chosen subset of the keys, their LRU stack distances scaled up, in
    /// constant memory): the miss ratio a pool of each size would have, 1 to
    /// [`MAX_CURVE_POINTS`](crate::protocol::MAX_CURVE_POINTS) points ascending by size, ratios never rising
    /// ([`CurvePoint::new`] makes a point of a ratio). memtide chooses cache sizes by it when
    /// the tenant has a latency objective. `None` (the default) sends no curve.
    pub curve: Option<Vec<CurvePoint>>,
    /// A database's durability settings and sync counters ([`Durability`]: each figure the
    /// server has, the counters since it started, which may fall back when it restarts):
    /// memtide reports them with advice on the settings (Lai et al.), and never changes them.
    /// `None` (the default) sends none.
    pub durability: Option<Durability>,
}

/// A shrink or grow callback's answer when it did not reach the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why, in one line (sent cut to 1,024 bytes).
    pub reason: String,
    /// Where the pool is now, when the callback moved it part of the way; `None` when it left
    /// the pool as it was.
    pub pool_bytes: Option<u64>,
}

impl Refusal {
    /// A refusal that left the pool as it was.
    pub fn new(reason: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason.into(),
            pool_bytes: None,
        }
    }

    /// The same refusal, the pool having moved to `pool_bytes` before the callback gave up.
    pub fn at(self, pool_bytes: u64) -> Refusal {
        Refusal {
            pool_bytes: Some(pool_bytes),
            ..self
        }
    }
}

impl From<&str> for Refusal {
    fn from(reason: &str) -> Refusal {
        Refusal::new(reason)
    }
}

impl From<String> for Refusal {
    fn from(reason: String) -> Refusal {
        Refusal::new(reason)
    }
}

/// Where the agent stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentState {
    /// Connecting to the socket.
    Connecting,
    /// Connected, the `hello` sent, waiting for the `welcome`.
    Registering,
    /// Welcomed: memtide manages the pool for this tenant.
    Registered { tenant: String },
    /// The last connection failed or ended; the agent connects again after a back-off.
    WaitingToReconnect,
    /// Stopped by the application.
    Stopped,
}

impl fmt::Display for AgentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentState::Connecting => f.write_str("connecting"),
            AgentState::Registering => f.write_str("registering"),
            AgentState::Registered { tenant } => write!(f, "registered for tenant {tenant}"),
            AgentState::WaitingToReconnect => f.write_str("waiting to reconnect"),
            AgentState::Stopped => f.write_str("stopped"),
        }
    }
}

/// What last went wrong, as [`Agent::last_error`] reports it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot connect to memtide at {}: {source}", socket.display())]
    Connect {
        socket: PathBuf,
        source: Arc<io::Error>,
    },

    #[error("the connection to memtide at {} failed: {source}", socket.display())]
    Connection {
        socket: PathBuf,
        source: Arc<io::Error>,
    },

    #[error("memtide at {} closed the connection", socket.display())]
    Closed { socket: PathBuf },

    #[error("memtide at {} sent no welcome within {within:?} of the hello", socket.display())]
    NoWelcome { socket: PathBuf, within: Duration },

    #[error("memtide said bye ({})", reason.as_deref().unwrap_or("no reason given"))]
    Bye { reason: Option<String> },

    #[error("memtide sent {} error {}: {}", if .0.fatal { "fatal" } else { "non-fatal" }, .0.code, .0.message)]
    Memtide(ErrorMessage),

    #[error("memtide sent a line the agent cannot read: {0}")]
    Unreadable(ProtocolError),

    #[error("the application did not resize its pool to {target} bytes (target {seq}): {reason}")]
    Refused {
        seq: u64,
        target: u64,
        reason: String,
    },

    #[error("the application's {0} callback panicked")]
    Panicked(&'static str),

    #[error("the application's miss-ratio curve is not sent: {0}")]
    Curve(ProtocolError),

    #[error("the application's durability figures are not sent: {0}")]
    Durability(ProtocolError),
}

/// Why an agent did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the pool cannot be registered: {0}")]
    Pool(ProtocolError),

    #[error("the agent needs a {0} callback")]
    Missing(&'static str),

    #[error("cannot start the agent's threads: {0}")]
    Spawn(io::Error),
}

/// The longest an agent waits for the `welcome` after its `hello` (docs/balloon-protocol.md).
const WELCOME_WITHIN: Duration = Duration::from_secs(10);

/// The longest back-off [`AgentBuilder::reconnect`] takes.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

type ResizeFn = Box<dyn FnMut(u64) -> Result<(), Refusal> + Send>;
type StatsFn = Box<dyn FnMut() -> PoolStats + Send>;

/// Sets up an [`Agent`]: the pool, its three callbacks, and optionally the socket and the
/// back-off.
pub struct AgentBuilder {
    pool: PoolInfo,
    socket: Option<PathBuf>,
    shrink: Option<ResizeFn>,
    grow: Option<ResizeFn>,
    stats: Option<StatsFn>,
    first_backoff: Duration,
    max_backoff: Duration,
    welcome_timeout: Duration,
}

impl AgentBuilder {
    /// Connects to this socket instead of `$MEMTIDE_BALLOON_SOCKET` or the default.
    pub fn socket(mut self, path: impl Into<PathBuf>) -> AgentBuilder {
        self.socket = Some(path.into());
        self
    }

    /// Shrinks the pool to the given size, giving the memory back to the OS (required).
    pub fn on_shrink(
        mut self,
        shrink: impl FnMut(u64) -> Result<(), Refusal> + Send + 'static,
    ) -> AgentBuilder {
        self.shrink = Some(Box::new(shrink));
        self
    }

    /// Grows the pool to the given size (required).
    pub fn on_grow(
        mut self,
        grow: impl FnMut(u64) -> Result<(), Refusal> + Send + 'static,
    ) -> AgentBuilder {
        self.grow = Some(Box::new(grow));
        self
    }

    /// Reports the pool's statistics (required); called on the agent's thread at every
    /// `stats`.
    pub fn stats(mut self, stats: impl FnMut() -> PoolStats + Send + 'static) -> AgentBuilder {
        self.stats = Some(Box::new(stats));
        self
    }

    /// The back-off between connections: `first` after a failure, doubling up to `max`
    /// (100 ms and 30 s unless set; both are kept between 1 ms and an hour, `max` at least
    /// `first`).
    pub fn reconnect(mut self, first: Duration, max: Duration) -> AgentBuilder {
        self.first_backoff = first.clamp(Duration::from_millis(1), MAX_BACKOFF);
        self.max_backoff = max.clamp(self.first_backoff, MAX_BACKOFF);
        self
    }

    /// How long to wait for the `welcome` after the `hello` before closing and trying again
    /// later: 10 s unless set, which is also the most the protocol allows (and at least 1 ms).
    pub fn welcome_timeout(mut self, timeout: Duration) -> AgentBuilder {
        self.welcome_timeout = timeout.clamp(Duration::from_millis(1), WELCOME_WITHIN);
        self
    }

    /// Checks the pool and starts the agent's threads; the agent connects at once.
    pub fn start(self) -> Result<Agent, StartError> {
        self.pool.check().map_err(StartError::Pool)?;
        let shrink = self.shrink.ok_or(StartError::Missing("shrink"))?;
        let grow = self.grow.ok_or(StartError::Missing("grow"))?;
        let stats = self.stats.ok_or(StartError::Missing("stats"))?;
        let socket = socket_path(self.socket, std::env::var_os(SOCKET_ENV));
        let shared = Arc::new(Shared {
            status: Mutex::new(Status {
                state: AgentState::Connecting,
                last_error: None,
            }),
            pool_bytes: AtomicU64::new(self.pool.pool_bytes),
        });
        let (events, thread) = runner::spawn(runner::Setup {
            pool: self.pool,
            socket: socket.clone(),
            shared: shared.clone(),
            shrink,
            grow,
            stats,
            backoff: backoff::Backoff::new(self.first_backoff, self.max_backoff),
            welcome_timeout: self.welcome_timeout,
        })
        .map_err(StartError::Spawn)?;
        Ok(Agent {
            socket,
            shared,
            events,
            thread: Some(thread),
        })
    }
}

/// The socket: the one given, else the environment's (when set and not empty), else the
/// default.
fn socket_path(given: Option<PathBuf>, environment: Option<OsString>) -> PathBuf {
    given
        .or_else(|| {
            environment
                .filter(|path| !path.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

/// A running agent. Stopping it (or dropping it) says `bye` to memtide and waits for its
/// threads, a running callback included.
pub struct Agent {
    socket: PathBuf,
    shared: Arc<Shared>,
    events: SyncSender<runner::Event>,
    thread: Option<JoinHandle<()>>,
}

impl Agent {
    /// Starts setting up an agent for this pool.
    pub fn builder(pool: PoolInfo) -> AgentBuilder {
        AgentBuilder {
            pool,
            socket: None,
            shrink: None,
            grow: None,
            stats: None,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(30),
            welcome_timeout: WELCOME_WITHIN,
        }
    }

    /// The socket the agent connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn state(&self) -> AgentState {
        self.shared.status().state.clone()
    }

    /// What last went wrong: a failed connection, an error or bye from memtide, a line it
    /// could not read, a refused resize. Kept until something else goes wrong.
    pub fn last_error(&self) -> Option<AgentError> {
        self.shared.status().last_error.clone()
    }

    /// The pool's size as the agent knows it: the registered size, moved by each resize.
    pub fn pool_bytes(&self) -> u64 {
        self.shared.pool_bytes.load(Ordering::Relaxed)
    }

    /// Says `bye` to memtide, closes the connection and waits for the agent's threads (a
    /// running callback returns first, so a callback must not be what stops the agent).
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(thread) = self.thread.take() {
            // The agent's thread holds the receiver until it ends; a failed send means it
            // has already ended.
            let _ = self.events.send(runner::Event::Stop);
            let _ = thread.join();
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// What the agent's thread publishes for [`Agent`]'s getters.
struct Shared {
    status: Mutex<Status>,
    pool_bytes: AtomicU64,
}

struct Status {
    state: AgentState,
    last_error: Option<AgentError>,
}

impl Shared {
    fn status(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_state(&self, state: AgentState) {
        self.status().state = state;
    }

    fn record(&self, error: AgentError) {
        self.status().last_error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::PoolKind;

    #[test]
    fn the_socket_is_the_given_one_else_the_environment_s_else_the_default() {
        let given = Some(PathBuf::from("/tmp/given.sock"));
        let environment = Some(OsString::from("/tmp/env.sock"));
        assert_eq!(
            socket_path(given.clone(), environment.clone()),
            Path::new("/tmp/given.sock")
        );
        assert_eq!(socket_path(None, environment), Path::new("/tmp/env.sock"));
        assert_eq!(
            socket_path(None, Some(OsString::new())),
            Path::new(DEFAULT_SOCKET)
        );
        assert_eq!(socket_path(None, None), Path::new(DEFAULT_SOCKET));
    }

    #[test]
    fn the_back_off_is_kept_between_a_millisecond_and_an_hour() {
        let builder = Agent::builder(PoolInfo {
            app: "x".into(),
            kind: PoolKind::Other,
            pool_bytes: 0,
            min_bytes: 0,
            max_bytes: 0,
            granule_bytes: 1,
        });
        let builder = builder.reconnect(Duration::ZERO, Duration::MAX);
        assert_eq!(builder.first_backoff, Duration::from_millis(1));
        assert_eq!(builder.max_backoff, MAX_BACKOFF);
        let builder = builder.reconnect(Duration::from_secs(10), Duration::from_secs(1));
        assert_eq!(builder.max_backoff, Duration::from_secs(10));
    }

    #[test]
    fn the_welcome_timeout_is_at_most_the_protocol_s_10_s() {
        let builder = Agent::builder(PoolInfo {
            app: "x".into(),
            kind: PoolKind::Other,
            pool_bytes: 0,
            min_bytes: 0,
            max_bytes: 0,
            granule_bytes: 1,
        });
        assert_eq!(builder.welcome_timeout, Duration::from_secs(10));
        let builder = builder.welcome_timeout(Duration::from_secs(60));
        assert_eq!(builder.welcome_timeout, Duration::from_secs(10));
        let builder = builder.welcome_timeout(Duration::from_millis(250));
        assert_eq!(builder.welcome_timeout, Duration::from_millis(250));
    }

    #[test]
    fn states_read_as_words_for_logs() {
        let registered = AgentState::Registered {
            tenant: "db".into(),
        };
        assert_eq!(registered.to_string(), "registered for tenant db");
        assert_eq!(
            AgentState::WaitingToReconnect.to_string(),
            "waiting to reconnect"
        );
    }
}
