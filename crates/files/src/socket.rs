//! The file of a Unix socket root serves (the balloon socket, the API's): bound only in a
//! trusted directory, never visible before its group and mode are set, never put over a live
//! socket or another file, and removed at the end only if it is still the one bound.
//!
//! Why one binder for every socket: a daemon that renamed its socket over whatever was at its
//! path would silently take a live daemon's socket from it (two daemons with different state
//! files but the same `[api] socket`), and one that set the mode by path could be led through a
//! planted link. So, in order:
//!
//! - the path fits a socket address (at most [`MAX_PATH_BYTES`]);
//! - its directory is made if missing and must be trusted ([`crate::trusted_dir`]: root's,
//!   writable by no one else, every directory above it too): root binds and renames there;
//! - what is at the path already is probed: a socket someone answers on is refused
//!   ([`SocketError::InUse`]), a stale one (connection refused: its server died) removed, a file
//!   of another kind refused and kept;
//! - the socket is bound in a fresh private directory beside it (`mkdtemp`, 0700, so on the same
//!   file system), reached through that directory's descriptor (`/proc/self/fd/N/s`, so any
//!   path that fits also fits there), listens with the system's largest backlog, gets its group
//!   and then its mode there, on the file bound and through a descriptor opened without
//!   following links (a link swapped in is refused, not followed), and only then is renamed into
//!   place with `RENAME_NOREPLACE`: a file that appeared meanwhile is refused, not replaced.
//!   Changing the umask instead would race with every other thread.
//!
//! Each error names the socket by the caller's label ("balloon socket", "API socket"), its
//! path and the cause.

use crate::FilesError;
use std::ffi::CString;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Longest socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
pub const MAX_PATH_BYTES: usize = 107;

/// Why a socket could not be bound; each names the socket (`what`, the caller's label), its
/// path and the cause.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{what} {}: path is {len} bytes, at most {MAX_PATH_BYTES} fit in a Unix socket address", path.display())]
    PathTooLong {
        what: &'static str,
        path: PathBuf,
        len: usize,
    },
    /// Its directory could not be made or is not trusted.
    #[error("{what} {}: {source}", path.display())]
    Directory {
        what: &'static str,
        path: PathBuf,
        source: FilesError,
    },
    #[error("{what} {}: another process is serving it (is memtide already running?)", path.display())]
    InUse { what: &'static str, path: PathBuf },
    #[error("{what} {}: exists and is not a socket; not replaced", path.display())]
    NotASocket { what: &'static str, path: PathBuf },
    #[error("{what} {}: cannot remove the stale socket: {source}", path.display())]
    RemoveStale {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {}: cannot check it: {source}", path.display())]
    Probe {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {}: cannot make a private directory beside it: {source}", path.display())]
    PrivateDir {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {}: cannot bind: {source}", path.display())]
    Bind {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {}: cannot give it group {gid}: {source}", path.display())]
    Group {
        what: &'static str,
        path: PathBuf,
        gid: u32,
        source: std::io::Error,
    },
    #[error("{what} {}: cannot set mode {mode:04o}: {source}", path.display())]
    Mode {
        what: &'static str,
        path: PathBuf,
        mode: u32,
        source: std::io::Error,
    },
}

/// A bound, listening (non-blocking) socket; its file goes when this is dropped, if it is
/// still the one bound.
#[derive(Debug)]
pub struct BoundSocket {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the file bound, so that a socket someone else put there since is
    /// left alone.
    id: (u64, u64),
}

impl BoundSocket {
    /// Binds `path` (named `what` in errors) with permission bits `mode` and group `group`
    /// (`None`: left as the process's), making its directory (0755) if missing and refusing it
    /// unless trusted. A socket file nobody listens on is replaced; a live socket or a file of
    /// another kind is an error, and nothing is changed.
    pub fn bind(
        path: &Path,
        what: &'static str,
        mode: u32,
        group: Option<u32>,
    ) -> Result<BoundSocket, SocketError> {
        let len = path.as_os_str().len();
        if len > MAX_PATH_BYTES {
            return Err(SocketError::PathTooLong {
                what,
                path: path.to_path_buf(),
                len,
            });
        }
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(Path::new("."));
        crate::trusted_dir(dir, "its directory").map_err(|source| SocketError::Directory {
            what,
            path: path.to_path_buf(),
            source,
        })?;
        clear(path, what)?;
        let private = Private::make(dir).map_err(|source| SocketError::PrivateDir {
            what,
            path: path.to_path_buf(),
            source,
        })?;
        let bound = place(&private, path, what, mode, group)?;
        drop(private);
        bound
            .listener
            .set_nonblocking(true)
            .map_err(|source| SocketError::Bind {
                what,
                path: path.to_path_buf(),
                source,
            })?;
        Ok(bound)
    }

    /// The listening socket (non-blocking).
    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }

    /// Where it is bound.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .map(|m| (m.dev(), m.ino()) == self.id)
            .unwrap_or(false);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Makes room at `path`: nothing there, or a stale socket (removed); a live socket or any
/// other file is refused.
fn clear(path: &Path, what: &'static str) -> Result<(), SocketError> {
    let probe = |source| SocketError::Probe {
        what,
        path: path.to_path_buf(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => Err(SocketError::InUse {
                what,
                path: path.to_path_buf(),
            }),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => std::fs::remove_file(path)
                .map_err(|source| SocketError::RemoveStale {
                    what,
                    path: path.to_path_buf(),
                    source,
                }),
            Err(source) => Err(probe(source)),
        },
        Ok(_) => Err(SocketError::NotASocket {
            what,
            path: path.to_path_buf(),
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(probe(source)),
    }
}

/// A fresh directory only root can enter (`mkdtemp`, 0700), beside the socket, held by a
/// descriptor; removed with what is left in it when dropped.
struct Private {
    path: PathBuf,
    dir: OwnedFd,
}

impl Private {
    /// The entry the socket is bound at.
    const NAME: &'static str = "s";

    fn make(beside: &Path) -> std::io::Result<Private> {
        let template = CString::new(beside.join(".memtide-XXXXXX").into_os_string().into_vec())
            .map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))?;
        let mut template = template.into_bytes_with_nul();
        // SAFETY: `template` is NUL-terminated and writable; mkdtemp fills in the X's.
        let made = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        template.pop();
        let path = PathBuf::from(std::ffi::OsString::from_vec(template));
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(&path);
        match opened {
            Ok(file) => Ok(Private {
                path,
                dir: file.into(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&path);
                Err(e)
            }
        }
    }

    /// The socket's name inside, through the directory's descriptor: at most 25 bytes, so it
    /// fits a socket address whatever the directory's path.
    fn entry(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/self/fd/{}/{}",
            self.dir.as_raw_fd(),
            Private::NAME
        ))
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path.join(Private::NAME));
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Binds in `private`, listens, sets the group and mode and renames the file to `path` unless
/// something is there.
fn place(
    private: &Private,
    path: &Path,
    what: &'static str,
    mode: u32,
    group: Option<u32>,
) -> Result<BoundSocket, SocketError> {
    let tmp = private.entry();
    let bind_err = |source| SocketError::Bind {
        what,
        path: path.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(&tmp).map_err(bind_err)?;
    // std listens with a backlog of 128; a burst of clients connecting at once (a host
    // starting its services) gets the system's maximum instead.
    // SAFETY: the descriptor is the listener's own, alive for this call.
    if unsafe { libc::listen(listener.as_raw_fd(), libc::SOMAXCONN) } != 0 {
        return Err(bind_err(std::io::Error::last_os_error()));
    }
    let meta = std::fs::symlink_metadata(&tmp).map_err(|source| SocketError::Probe {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    let id = (meta.dev(), meta.ino());
    if let Some(gid) = group {
        std::os::unix::fs::lchown(&tmp, None, Some(gid)).map_err(|source| SocketError::Group {
            what,
            path: path.to_path_buf(),
            gid,
            source,
        })?;
    }
    set_mode(&tmp, id, mode).map_err(|source| SocketError::Mode {
        what,
        path: path.to_path_buf(),
        mode,
        source,
    })?;
    rename_no_replace(&tmp, path).map_err(|source| match source.kind() {
        ErrorKind::AlreadyExists => SocketError::InUse {
            what,
            path: path.to_path_buf(),
        },
        _ => bind_err(source),
    })?;
    Ok(BoundSocket {
        listener,
        path: path.to_path_buf(),
        id,
    })
}

/// `renameat2(from, to, RENAME_NOREPLACE)`: `AlreadyExists` when `to` exists.
fn rename_no_replace(from: &Path, to: &Path) -> std::io::Result<()> {
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths alive for the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the mode of the socket file bound at `path`, known by its device and inode `id`,
/// without following a link: the file is opened `O_PATH | O_NOFOLLOW` (a link put there since
/// the bind is opened as the link, and refused), checked to be that socket, and changed through
/// its descriptor's `/proc/self/fd` entry (`fchmod` on a socket's descriptor would change the
/// socket, not the file).
fn set_mode(path: &Path, id: (u64, u64), mode: u32) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_socket() || (meta.dev(), meta.ino()) != id {
        return Err(std::io::Error::other(
            "the file there is no longer the socket memtide bound",
        ));
    }
    let by_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    std::fs::set_permissions(by_fd, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn binds_with_the_mode_and_removes_its_file_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/balloon.sock");
        let s = BoundSocket::bind(&path, "balloon socket", 0o660, None).unwrap();
        assert!(
            dir.path().join("run").is_dir(),
            "its missing directory is made"
        );
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);
        drop(s);
        assert!(!path.exists());
    }

    #[test]
    fn the_socket_appears_with_its_group_and_mode_and_no_private_directory_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        // Root may give any group; another user only its own.
        // SAFETY: geteuid and getegid have no preconditions.
        let gid = if unsafe { libc::geteuid() } == 0 {
            4242
        } else {
            unsafe { libc::getegid() }
        };
        let _s = BoundSocket::bind(&path, "balloon socket", 0o660, Some(gid)).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.gid(), gid);
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the socket: {left:?}");
        UnixStream::connect(&path).expect("the renamed socket still listens");
    }

    #[test]
    fn a_link_swapped_in_after_the_bind_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        let s = BoundSocket::bind(&path, "balloon socket", 0o600, None).unwrap();
        let id = s.id;
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "").unwrap();
        chmod(&victim, 0o600);
        std::fs::rename(&path, dir.path().join("moved.sock")).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert!(set_mode(&path, id, 0o666).is_err());
        let mode = std::fs::metadata(&victim).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // The socket itself, where it is now, takes the mode.
        set_mode(&dir.path().join("moved.sock"), id, 0o640).unwrap();
        let moved = std::fs::symlink_metadata(dir.path().join("moved.sock")).unwrap();
        assert_eq!(moved.permissions().mode() & 0o777, 0o640);
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_refused_naming_the_label() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        drop(UnixListener::bind(&path).unwrap()); // the file stays, nobody listens
        let live = BoundSocket::bind(&path, "API socket", 0o600, None).unwrap();
        let err = BoundSocket::bind(&path, "API socket", 0o600, None).unwrap_err();
        assert!(matches!(err, SocketError::InUse { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("API socket {}: another process", path.display())),
            "{msg}"
        );
        assert!(path.exists(), "a refused bind leaves the live socket alone");
        UnixStream::connect(&path).expect("the live socket still answers");
        drop(live);
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        std::fs::write(&path, "precious").unwrap();
        let err = BoundSocket::bind(&path, "balloon socket", 0o660, None).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    }

    #[test]
    fn a_path_too_long_for_the_kernel_is_refused() {
        let path = PathBuf::from(format!("/tmp/{}", "x".repeat(120)));
        let err = BoundSocket::bind(&path, "balloon socket", 0o660, None).unwrap_err();
        assert!(err.to_string().contains("107"), "{err}");
    }

    #[test]
    fn a_path_of_the_longest_length_binds() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().as_os_str().len() + 1;
        let path = dir.path().join("x".repeat(MAX_PATH_BYTES - base));
        assert_eq!(path.as_os_str().len(), MAX_PATH_BYTES);
        let _s = BoundSocket::bind(&path, "balloon socket", 0o660, None).unwrap();
        UnixStream::connect(&path).expect("it listens");
    }

    #[test]
    fn a_socket_put_there_by_someone_else_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        let ours = BoundSocket::bind(&path, "balloon socket", 0o660, None).unwrap();
        std::fs::remove_file(&path).unwrap();
        let theirs = UnixListener::bind(&path).unwrap();
        drop(ours);
        assert!(path.exists());
        drop(theirs);
    }

    #[test]
    fn a_socket_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        chmod(&open, 0o777);
        let path = open.join("api.sock");
        let msg = BoundSocket::bind(&path, "API socket", 0o600, None)
            .unwrap_err()
            .to_string();
        assert!(
            msg.starts_with(&format!("API socket {}: its directory", path.display()))
                && msg.contains("writable by others"),
            "{msg}"
        );
        assert!(!path.exists());
        let left: Vec<_> = std::fs::read_dir(&open).unwrap().collect();
        assert!(left.is_empty(), "nothing made there: {left:?}");
    }
}
