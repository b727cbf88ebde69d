//! Errors from reading and writing cgroupfs and procfs files: each names the file, and the field or value concerned.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong with a kernel file. Every message names the path, and the field, value or
/// time limit involved, so a log line is enough to find the file and the input.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },

    /// A field's value is not what the kernel documents.
    #[error("{}: field `{field}` has value {value:?}, expected {expected}", path.display())]
    Parse {
        path: PathBuf,
        field: String,
        value: String,
        expected: &'static str,
    },

    /// A field the reader needs is absent from the file.
    #[error("{}: required field `{field}` is missing", path.display())]
    Missing { path: PathBuf, field: String },

    /// Writing a value failed for a reason other than those below.
    #[error("cannot write {value:?} to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },

    /// The kernel refused the value with EBUSY or EAGAIN: it could not reclaim enough memory to
    /// meet a lower limit (or, for `memory.reclaim`, to reclaim the amount asked).
    #[error("kernel could not reclaim enough to accept {value:?} in {} (EBUSY/EAGAIN)", path.display())]
    Busy { path: PathBuf, value: String },

    /// The write did not return within the time limit; it goes on in a detached thread.
    #[error("writing {value:?} to {} did not return within {after:?}", path.display())]
    Timeout {
        path: PathBuf,
        value: String,
        after: Duration,
    },

    /// An earlier write to this file timed out and has not returned yet.
    #[error("an earlier write to {} has not returned yet", path.display())]
    InFlight { path: PathBuf },

    /// No mounted hierarchy has the memory controller.
    #[error("no cgroup hierarchy with the memory controller in {}", mountinfo.display())]
    NoMemoryController { mountinfo: PathBuf },

    /// The cgroup (or the file's parent directory) no longer exists: the tenant is gone.
    #[error("{} vanished: its cgroup no longer exists", path.display())]
    Vanished { path: PathBuf },

    /// The cgroup was removed and another made under its path (a service restarted): the
    /// tenant that was adopted is gone, and what is there now is a new cgroup.
    #[error("{} was removed and made again: a new cgroup under the same path", path.display())]
    Replaced { path: PathBuf },
}

impl FsError {
    /// True when the cgroup went away (removed, or removed and made again), so the caller can
    /// drop the tenant instead of failing.
    pub fn is_vanished(&self) -> bool {
        matches!(self, FsError::Vanished { .. } | FsError::Replaced { .. })
    }

    /// True when the kernel could not reclaim enough to meet the value written.
    pub fn is_busy(&self) -> bool {
        matches!(self, FsError::Busy { .. })
    }

    /// The file the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            FsError::Read { path, .. }
            | FsError::Parse { path, .. }
            | FsError::Missing { path, .. }
            | FsError::Write { path, .. }
            | FsError::Busy { path, .. }
            | FsError::Timeout { path, .. }
            | FsError::InFlight { path }
            | FsError::Vanished { path }
            | FsError::Replaced { path } => path,
            FsError::NoMemoryController { mountinfo } => mountinfo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_path_field_value_and_limit() {
        let cases: Vec<(FsError, Vec<&str>)> = vec![
            (
                FsError::Parse {
                    path: PathBuf::from("/cg/memory.max"),
                    field: "memory.max".into(),
                    value: "lots".into(),
                    expected: "a byte count or \"max\"",
                },
                vec!["/cg/memory.max", "memory.max", "\"lots\"", "byte count"],
            ),
            (
                FsError::Timeout {
                    path: PathBuf::from("/cg/memory.high"),
                    value: "1048576".into(),
                    after: Duration::from_millis(250),
                },
                vec!["/cg/memory.high", "1048576", "250ms"],
            ),
            (
                FsError::Busy {
                    path: PathBuf::from("/cg/memory.limit_in_bytes"),
                    value: "4096".into(),
                },
                vec!["/cg/memory.limit_in_bytes", "4096", "EBUSY"],
            ),
            (
                FsError::Missing {
                    path: PathBuf::from("/proc/meminfo"),
                    field: "MemTotal".into(),
                },
                vec!["/proc/meminfo", "MemTotal"],
            ),
        ];
        for (err, wants) in cases {
            let msg = err.to_string();
            for want in wants {
                assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            }
        }
    }

    #[test]
    fn only_vanished_is_vanished() {
        let gone = FsError::Vanished {
            path: PathBuf::from("/cg/memory.current"),
        };
        let busy = FsError::Busy {
            path: PathBuf::from("/cg/memory.high"),
            value: "0".into(),
        };
        assert!(gone.is_vanished());
        assert!(!busy.is_vanished());
        assert!(busy.is_busy());
        assert_eq!(gone.path(), std::path::Path::new("/cg/memory.current"));
    }
}
