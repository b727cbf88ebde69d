//! The agents layer's errors: each names the socket path, the value and what it must be.

use std::path::PathBuf;

/// Setting up or serving the balloon socket.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("balloon socket {}: path is {len} bytes, at most 107 fit in a Unix socket address", path.display())]
    PathTooLong { path: PathBuf, len: usize },
    #[error("balloon socket {}: cannot create its directory: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("balloon socket {}: another process is serving it (is memtide already running?)", path.display())]
    InUse { path: PathBuf },
    #[error("balloon socket {}: exists and is not a socket; not replaced", path.display())]
    NotASocket { path: PathBuf },
    #[error("balloon socket {}: cannot remove the stale socket: {source}", path.display())]
    RemoveStale {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("balloon socket {}: cannot check it: {source}", path.display())]
    Probe {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("balloon socket {}: cannot bind: {source}", path.display())]
    Bind {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("balloon socket {}: cannot set mode {mode:04o}: {source}", path.display())]
    Mode {
        path: PathBuf,
        mode: u32,
        source: std::io::Error,
    },
    #[error("balloon socket {}: cannot give it group {gid}: {source}", path.display())]
    Group {
        path: PathBuf,
        gid: u32,
        source: std::io::Error,
    },
    #[error("balloon socket {}: cannot start its event loop: {source}", path.display())]
    EventLoop {
        path: PathBuf,
        source: std::io::Error,
    },
}
