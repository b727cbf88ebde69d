//! `EngineError`: what went wrong asking a container engine, naming the engine, its socket and the request.

use crate::EngineKind;
use std::path::PathBuf;

/// Why an engine's answer could not be had.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The socket is missing, refuses, or the exchange broke or timed out.
    #[error("{engine} at {}: {request}: {error}", socket.display())]
    Transport {
        engine: EngineKind,
        socket: PathBuf,
        request: String,
        error: String,
    },
    /// The engine answered with an error status (its message, as it gave it).
    #[error("{engine} at {}: {request} answered {status}: {message}", socket.display())]
    Status {
        engine: EngineKind,
        socket: PathBuf,
        request: String,
        status: u16,
        message: String,
    },
    /// The answer is not what the API says it is (not JSON of that shape, or too large).
    #[error("{engine} at {}: {request}: the answer {why}", socket.display())]
    Answer {
        engine: EngineKind,
        socket: PathBuf,
        request: String,
        why: String,
    },
}

impl EngineError {
    /// The engine is not there to answer (no socket, or no one listening on it): a tenant
    /// waits for it as for a cgroup not made yet.
    pub fn is_absent(&self) -> bool {
        matches!(self, EngineError::Transport { .. })
    }
}
