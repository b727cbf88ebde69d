//! Errors of the Linux host: what went wrong, on which cgroup or file, with which value.

use crate::fs::FsError;
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
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(
        "disk I/O on cgroup v1 needs the blkio controller, and {mountinfo} lists no blkio mount"
    )]
    NoBlkio { mountinfo: String },
    #[error("disk I/O on cgroup v2 needs the io controller, and {path} does not list it")]
    NoIoController { path: String },
    #[error("device {device} runs the {scheduler} scheduler, and cgroup v1's blkio weights act only under BFQ; set [io] scheduler = \"bfq\"")]
    IoNeedsBfq { device: String, scheduler: String },
    #[error("the device's original scheduler in {path}: {error}")]
    IoSaved { path: String, error: String },
    #[error("there is no {what} cgroup at {dir}")]
    NoIoCgroup { dir: String, what: &'static str },
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
