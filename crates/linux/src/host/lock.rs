//! One memtide per cgroup: an exclusive `flock(2)` on the cgroup's directory, held while the cgroup is managed and dropped by the kernel when the holder exits, even by SIGKILL.
//!
//! cgroupfs (kernfs) has no lock method of its own, so the VFS's generic flock applies to its
//! directories like any other. A second daemon that tries to manage the same cgroup finds the
//! lock taken and refuses, instead of recording the first daemon's lowered limit as the
//! cgroup's "original". No file is created anywhere, so there is nothing to clean up.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Why a cgroup could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock: another memtide manages this cgroup.
    #[error("{dir} is already managed by another memtide (its directory lock is held)")]
    Held { dir: String },
    #[error("cannot lock {dir}: {error}")]
    Io { dir: String, error: std::io::Error },
}

/// An exclusive lock on a cgroup directory; released when dropped.
#[derive(Debug)]
pub struct CgroupLock {
    _dir: File,
}

impl CgroupLock {
    /// Takes the lock on `dir` without waiting.
    pub fn take(dir: &Path) -> Result<CgroupLock, LockError> {
        let io = |error| LockError::Io {
            dir: dir.display().to_string(),
            error,
        };
        let file = File::open(dir).map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(CgroupLock { _dir: file });
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Err(LockError::Held {
                dir: dir.display().to_string(),
            })
        } else {
            Err(io(error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let first = CgroupLock::take(tmp.path()).unwrap();
        let err = CgroupLock::take(tmp.path()).unwrap_err();
        assert!(matches!(err, LockError::Held { .. }), "{err}");
        assert!(err.to_string().contains("another memtide"));
        drop(first);
        assert!(CgroupLock::take(tmp.path()).is_ok());
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_it() {
        let err = CgroupLock::take(Path::new("/no/such/cgroup/dir")).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }));
        assert!(err.to_string().contains("/no/such/cgroup/dir"));
    }
}
