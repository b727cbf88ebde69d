//! Errors of the Linux host: what went wrong, on which cgroup or file, with which value.

use crate::fs::FsError;
use crate::host::io::DiskError;
use crate::host::ksm::KsmError;
use crate::host::lock::LockError;
use crate::io_cgroup::IoError;

#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("cgroup {cgroup:?} does not exist (looked for {dir})")]
    UnknownCgroup { cgroup: String, dir: String },
    #[error("cgroup {cgroup:?} is outside the configured parent {parent:?}")]
    OutsideParent { cgroup: String, parent: String },
    #[error("cannot create cgroup {dir}: {error}")]
    CreateCgroup { dir: String, error: std::io::Error },
    #[error(
        "the memory controller is not delegated to {dir} (its cgroup.controllers: {controllers:?}); enable +memory in its parent's cgroup.subtree_control, or run memtide under systemd with Delegate=yes"
    )]
    NotDelegated { dir: String, controllers: String },
    #[error(
        "cannot enable the memory controller for the children of {dir}: {error}; a cgroup that delegates it may hold no process (cgroup v2), so run memtide in a cgroup of its own or set [host] parent to an empty cgroup"
    )]
    Delegate {
        dir: String,
        error: crate::fs::FsError,
    },
    #[error("cannot start {program:?} for tenant {tenant:?}: {error}")]
    Launch {
        tenant: String,
        program: String,
        error: std::io::Error,
    },
    #[error("tenant {0:?} is already managed")]
    Duplicate(String),
    #[error("restoring a tenant's settings failed: {0}")]
    Restore(String),
    #[error("cgroup {cgroup:?}: {error}")]
    Lock { cgroup: String, error: LockError },
    #[error(transparent)]
    Ksm(#[from] KsmError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Disk(#[from] DiskError),
}

impl LinuxError {
    /// True when the cgroup (or a file of it) is gone.
    pub fn is_vanished(&self) -> bool {
        match self {
            LinuxError::Fs(e) | LinuxError::Io(IoError::Fs(e)) => e.is_vanished(),
            _ => false,
        }
    }
}
