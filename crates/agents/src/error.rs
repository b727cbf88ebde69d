//! The agents layer's errors: each names the balloon socket's path and the cause.

use std::path::PathBuf;

/// Setting up the balloon socket's server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Its file could not be bound (`memtide_files::socket`: a live socket there, another
    /// file, an untrusted directory, ...).
    #[error(transparent)]
    Socket(#[from] memtide_files::socket::SocketError),
    #[error("balloon socket {}: cannot start its event loop: {source}", path.display())]
    EventLoop {
        path: PathBuf,
        source: std::io::Error,
    },
}
