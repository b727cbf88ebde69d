//! Errors of the Linux host: what went wrong, on which cgroup or file, with which value.

use crate::fs::FsError;
use crate::host::lock::LockError;

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
    #[error("page sharing needs the kernel's KSM, and {dir} does not exist (CONFIG_KSM)")]
    NoKsm { dir: String },
    #[error("KSM's original settings in {path}: {error}")]
    KsmSaved { path: String, error: String },
}
