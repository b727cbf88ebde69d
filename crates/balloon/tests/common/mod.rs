//! The memtide side of the integration tests: a listener on a socket in a temporary directory, connections accepted within 5 s as a `Player`, and an agent whose pool complies or refuses as a vector's `app` says.

use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use memtide_balloon::agent::{Agent, AgentBuilder, PoolStats, Refusal};
use memtide_balloon::protocol::PoolInfo;
use memtide_balloon::vectors::{App, Player};
use tempfile::TempDir;

/// How long a test waits for the agent to connect or to say a line.
pub const WITHIN: Duration = Duration::from_secs(5);

/// A socket in a temporary directory that a test accepts agents on.
pub struct Memtide {
    _dir: TempDir,
    pub path: PathBuf,
    listener: UnixListener,
}

impl Memtide {
    pub fn listen() -> Memtide {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("balloon.sock");
        let listener = UnixListener::bind(&path).expect("a socket in the temporary directory");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        Memtide {
            _dir: dir,
            path,
            listener,
        }
    }

    /// The next connection within [`WITHIN`], blocking with reads timing out after
    /// [`WITHIN`], played as memtide.
    pub fn accept(&self) -> Player<UnixStream> {
        let since = Instant::now();
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).expect("a blocking stream");
                    stream
                        .set_read_timeout(Some(WITHIN))
                        .expect("a read timeout");
                    return Player::memtide(stream);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && since.elapsed() < WITHIN => {
                    thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!(
                    "no agent connected to {} within {WITHIN:?}: {e}",
                    self.path.display()
                ),
            }
        }
    }
}

/// An agent for `pool` on `socket` whose callbacks behave as `app` says; the pool's size is
/// shared with the test.
pub fn agent(pool: PoolInfo, app: App, socket: &Path) -> (AgentBuilder, Arc<AtomicU64>) {
    let size = Arc::new(AtomicU64::new(pool.pool_bytes));
    let resize = |size: Arc<AtomicU64>| {
        move |to: u64| match app {
            App::Comply => {
                size.store(to, Ordering::Relaxed);
                Ok(())
            }
            App::Refuse => Err(Refusal::new("the test pool refuses")),
        }
    };
    let stats = {
        let size = size.clone();
        move || PoolStats {
            used_bytes: size.load(Ordering::Relaxed),
            hits: 10,
            misses: 2,
            ..PoolStats::default()
        }
    };
    let builder = Agent::builder(pool)
        .socket(socket)
        .on_shrink(resize(size.clone()))
        .on_grow(resize(size.clone()))
        .stats(stats);
    (builder, size)
}
