//! The balloon socket's file: bound with the configured mode, a stale socket left by a memtide that died replaced, a live one or any other file refused, and removed when memtide stops, only if it is still the one it bound.
//!
//! The socket is never visible before its owner, group and mode are set: it is bound in a
//! private directory (`.memtide-<pid>`, 0700, beside the socket), given its group (`[balloon]
//! group`) and mode there, and only then renamed into place (`RENAME_NOREPLACE`: a file that
//! appeared there meanwhile is refused, not replaced). Changing the umask instead would race
//! with every other thread. The mode is set on the file bound, through a descriptor opened
//! without following links, never by path: a link swapped in since the bind is refused, not
//! followed. Whether the directory itself can be trusted is the daemon's to check
//! (`memtide_files`), before it binds.

use crate::error::SocketError;
use std::io::ErrorKind;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Longest socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
pub const MAX_PATH_BYTES: usize = 107;

/// A bound, listening balloon socket; its file goes when this is dropped.
#[derive(Debug)]
pub struct BoundSocket {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the file bound, so that a socket someone else put there since is
    /// left alone.
    id: (u64, u64),
}

impl BoundSocket {
    /// Binds `path` with permission bits `mode` and group `group` (`None`: root's), creating
    /// its directory (0755) if missing. A socket file nobody listens on is replaced; a live
    /// socket or a file of another kind is an error, and nothing is changed.
    pub fn bind(path: &Path, mode: u32, group: Option<u32>) -> Result<BoundSocket, SocketError> {
        let len = path.as_os_str().len();
        if len > MAX_PATH_BYTES {
            return Err(SocketError::PathTooLong {
                path: path.to_path_buf(),
                len,
            });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::create_dir_all(dir).map_err(|source| SocketError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => match UnixStream::connect(path) {
                Ok(_) => {
                    return Err(SocketError::InUse {
                        path: path.to_path_buf(),
                    })
                }
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(|source| SocketError::RemoveStale {
                        path: path.to_path_buf(),
                        source,
                    })?;
                }
                Err(source) => {
                    return Err(SocketError::Probe {
                        path: path.to_path_buf(),
                        source,
                    })
                }
            },
            Ok(_) => {
                return Err(SocketError::NotASocket {
                    path: path.to_path_buf(),
                })
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(source) => {
                return Err(SocketError::Probe {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        let private = private_dir(path);
        let _ = std::fs::remove_file(private.join("s"));
        let _ = std::fs::remove_dir(&private);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .map_err(|source| SocketError::Bind {
                path: private.clone(),
                source,
            })?;
        let placed = bind_private(&private.join("s"), path, mode, group);
        let _ = std::fs::remove_file(private.join("s"));
        let _ = std::fs::remove_dir(&private);
        let bound = placed?;
        bound
            .listener
            .set_nonblocking(true)
            .map_err(|source| SocketError::Bind {
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

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd for the process that connected, taken by the kernel at
/// `connect`. Not in the `libc` crate yet; 77 on x86_64 and aarch64.
const SO_PEERPIDFD: libc::c_int = 77;

/// The process at the other end of a connection, pinned when it was accepted: its pid and uid
/// (`SO_PEERCRED`, as the kernel recorded them at `connect`) and a pidfd on it.
///
/// A pid names a process only while that process lives; once it has exited and been reaped
/// the pid may be given to another, in another cgroup. So the peer's cgroup, read from
/// `/proc/<pid>/cgroup`, is the connecting process's only if the pidfd shows it still alive
/// after the read ([`Peer::alive`]). The pidfd is `SO_PEERPIDFD`'s, the kernel's own from
/// `connect`; on a kernel without it (before 6.5: `ENOPROTOOPT`) it is opened with
/// `pidfd_open` at accept, which pins whatever process has the pid then: a process that
/// connected and exited before the accept, its pid already reused, is not caught there.
#[derive(Debug)]
pub struct Peer {
    /// `None`: the credentials could not be read.
    pub pid: Option<u32>,
    pub uid: Option<u32>,
    pidfd: Option<OwnedFd>,
}

impl Peer {
    /// The peer of a connected Unix socket, pinned now.
    pub fn of(stream: &impl AsRawFd) -> Peer {
        let Some(cred) = peer_cred(stream) else {
            return Peer {
                pid: None,
                uid: None,
                pidfd: None,
            };
        };
        let pid = u32::try_from(cred.pid).ok().filter(|&p| p > 0);
        let pidfd = match peer_pidfd(stream) {
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => pid.and_then(pidfd_open),
            other => other.ok(),
        };
        Peer {
            pid,
            uid: Some(cred.uid),
            pidfd,
        }
    }

    /// True while the process pinned has not exited (its pidfd is not readable): its pid
    /// still names it. False without a pidfd.
    pub fn alive(&self) -> bool {
        let Some(fd) = &self.pidfd else {
            return false;
        };
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own, for a descriptor alive for this call; no wait.
        let rc = unsafe { libc::poll(&mut poll, 1, 0) };
        rc == 0
    }

    /// A peer with the given figures (tests: the hub's without a socket).
    #[cfg(test)]
    pub(crate) fn from_parts(pid: Option<u32>, uid: Option<u32>, pidfd: Option<OwnedFd>) -> Peer {
        Peer { pid, uid, pidfd }
    }
}

/// The pid of the process at the other end of a connected Unix socket (`SO_PEERCRED`: the
/// process that connected, as the kernel recorded it), or `None` if it cannot be read.
pub fn peer_pid(stream: &impl AsRawFd) -> Option<i32> {
    peer_cred(stream).map(|c| c.pid).filter(|&p| p > 0)
}

/// `SO_PEERCRED` of a connected Unix socket, or `None` if it cannot be read (the API's
/// socket reads its peer's uid and groups here too).
pub fn peer_cred(stream: &impl AsRawFd) -> Option<libc::ucred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes passed; the descriptor is
    // borrowed from a live socket.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(cred)
}

/// `SO_PEERPIDFD` of a connected Unix socket.
fn peer_pidfd(stream: &impl AsRawFd) -> std::io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` and `len` are valid for writes of the sizes passed; the descriptor is
    // borrowed from a live socket.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just made this descriptor for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A pidfd on the process that has `pid` now (`pidfd_open`), or `None` if there is none.
pub(crate) fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    let fd = libc::c_int::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    // SAFETY: a new descriptor nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The private directory a socket for `path` is bound in before it is renamed into place.
fn private_dir(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    dir.join(format!(".memtide-{}", std::process::id()))
}

/// Binds `tmp` (in the private directory), sets its group and mode, listens and renames it
/// to `path` unless something is there.
fn bind_private(
    tmp: &Path,
    path: &Path,
    mode: u32,
    group: Option<u32>,
) -> Result<BoundSocket, SocketError> {
    let len = tmp.as_os_str().len();
    if len > MAX_PATH_BYTES {
        return Err(SocketError::PathTooLong {
            path: tmp.to_path_buf(),
            len,
        });
    }
    let bind_err = |source| SocketError::Bind {
        path: path.to_path_buf(),
        source,
    };
    let listener = UnixListener::bind(tmp).map_err(bind_err)?;
    // std listens with a backlog of 128; a burst of agents connecting at once (a host
    // starting its services) gets the system's maximum instead.
    // SAFETY: the descriptor is the listener's own, alive for this call.
    unsafe { libc::listen(listener.as_raw_fd(), libc::SOMAXCONN) };
    let meta = std::fs::symlink_metadata(tmp).map_err(|source| SocketError::Probe {
        path: tmp.to_path_buf(),
        source,
    })?;
    let id = (meta.dev(), meta.ino());
    if let Some(gid) = group {
        std::os::unix::fs::lchown(tmp, None, Some(gid)).map_err(|source| SocketError::Group {
            path: path.to_path_buf(),
            gid,
            source,
        })?;
    }
    set_mode(tmp, id, mode).map_err(|source| SocketError::Mode {
        path: path.to_path_buf(),
        mode,
        source,
    })?;
    rename_no_replace(tmp, path).map_err(|source| match source.kind() {
        ErrorKind::AlreadyExists => SocketError::InUse {
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
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
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
    use std::os::unix::fs::OpenOptionsExt;
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

    #[test]
    fn binds_with_the_mode_and_removes_its_file_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/balloon.sock");
        let s = BoundSocket::bind(&path, 0o660, None).unwrap();
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
        // SAFETY: getegid has no preconditions.
        let gid = if unsafe { libc::geteuid() } == 0 {
            4242
        } else {
            unsafe { libc::getegid() }
        };
        let _s = BoundSocket::bind(&path, 0o660, Some(gid)).unwrap();
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
        let s = BoundSocket::bind(&path, 0o600, None).unwrap();
        let id = s.id;
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
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
    fn a_stale_socket_is_replaced_and_a_live_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        drop(UnixListener::bind(&path).unwrap()); // the file stays, nobody listens
        let live = BoundSocket::bind(&path, 0o600, None).unwrap();
        let err = BoundSocket::bind(&path, 0o600, None).unwrap_err();
        assert!(matches!(err, SocketError::InUse { .. }), "{err}");
        assert!(path.exists(), "a refused bind leaves the live socket alone");
        drop(live);
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        std::fs::write(&path, "precious").unwrap();
        let err = BoundSocket::bind(&path, 0o660, None).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
    }

    #[test]
    fn a_path_too_long_for_the_kernel_is_refused() {
        let path = PathBuf::from(format!("/tmp/{}", "x".repeat(120)));
        let err = BoundSocket::bind(&path, 0o660, None).unwrap_err();
        assert!(err.to_string().contains("107"), "{err}");
    }

    #[test]
    fn a_socket_put_there_by_someone_else_is_not_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        let ours = BoundSocket::bind(&path, 0o660, None).unwrap();
        std::fs::remove_file(&path).unwrap();
        let theirs = UnixListener::bind(&path).unwrap();
        drop(ours);
        assert!(path.exists());
        drop(theirs);
    }

    #[test]
    fn the_peer_is_the_connecting_process_pinned_alive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        let s = BoundSocket::bind(&path, 0o660, None).unwrap();
        let _client = UnixStream::connect(&path).unwrap();
        s.listener().set_nonblocking(false).unwrap();
        let (server_end, _) = s.listener().accept().unwrap();
        let peer = Peer::of(&server_end);
        assert_eq!(peer.pid, Some(std::process::id()));
        // SAFETY: geteuid has no preconditions.
        assert_eq!(peer.uid, Some(unsafe { libc::geteuid() }));
        assert!(
            peer.pidfd.is_some(),
            "SO_PEERPIDFD or pidfd_open gave a pidfd"
        );
        assert!(peer.alive());
    }

    #[test]
    fn a_peer_that_exited_is_not_alive_though_its_pid_was_read() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let peer = Peer::from_parts(Some(pid), Some(0), pidfd_open(pid));
        child.wait().unwrap();
        assert!(!peer.alive(), "the process has exited and been reaped");
        assert!(!Peer::from_parts(Some(pid), Some(0), None).alive());
    }
}
