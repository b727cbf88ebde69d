//! The balloon socket's peers: who is at the other end of a connection (`SO_PEERCRED`), pinned
//! at accept by a pidfd so that a pid reused after the peer exited proves nothing.
//!
//! The socket's file itself (a trusted directory, its group and mode set before it appears, a
//! stale socket replaced, a live one refused, removed only if still ours) is
//! `memtide_files::socket`'s, shared with the daemon's API socket; this is what the balloon
//! socket adds to it.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::io::AsRawFd;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    #[test]
    fn the_peer_is_the_connecting_process_pinned_alive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let _client = UnixStream::connect(&path).unwrap();
        let (server_end, _) = listener.accept().unwrap();
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
