//! cgroup v1 OOM notifications: an eventfd registered on a cgroup's `memory.oom_control` through `cgroup.event_control`, which the kernel signals each time the cgroup (or an ancestor) enters OOM, at registration when it is already in OOM, and when the cgroup is removed; an epoll set over many of them answers "which of them fired?" in one system call.
//!
//! This replaces reading every guarded tenant's `memory.oom_control` twenty times a second.
//! Hand-rolled on `libc` (eventfd, epoll): the registration is specific to cgroup v1 and no
//! crate wraps it.

use super::error::FsError;
use super::kept::Slot;
use super::write::write_bounded;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// An epoll set of OOM eventfds; each carries the key it was watched under.
#[derive(Debug)]
pub struct OomEvents {
    /// Shared with the watches, which take themselves out of it when dropped.
    epoll: Arc<OwnedFd>,
    ready: Vec<libc::epoll_event>,
}

impl OomEvents {
    pub fn new() -> io::Result<OomEvents> {
        // SAFETY: epoll_create1 takes no pointers; the descriptor it returns is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(OomEvents {
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            epoll: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
            ready: Vec::new(),
        })
    }

    /// Registers a new eventfd on the v1 cgroup `dir`'s memory.oom_control (a write to its
    /// cgroup.event_control, bounded by `timeout`) and adds it to the set under `key`. Dropping
    /// the returned watch takes it out of the set and closes the eventfd, which ends the
    /// registration.
    pub fn watch(&self, key: u64, dir: &Path, timeout: Duration) -> Result<OomWatch, FsError> {
        let control_path = dir.join("memory.oom_control");
        let error = |source: io::Error| FsError::Read {
            path: control_path.clone(),
            source,
        };
        let slot = Slot::take().ok_or_else(|| error(io::Error::other("no descriptor left")))?;
        let control = File::open(&control_path).map_err(|e| {
            if super::read::is_gone(&e) && super::read::parent_gone(&control_path) {
                FsError::Vanished {
                    path: control_path.clone(),
                }
            } else {
                error(e)
            }
        })?;
        // SAFETY: eventfd takes no pointers; the descriptor it returns is owned below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(error(io::Error::last_os_error()));
        }
        // SAFETY: `efd` is a new descriptor that nothing else owns.
        let event = unsafe { OwnedFd::from_raw_fd(efd) };
        // The kernel looks both descriptors up when it takes the line; memory.oom_control may
        // be closed afterwards.
        let line = format!("{} {}", event.as_raw_fd(), control.as_raw_fd());
        write_bounded(&dir.join("cgroup.event_control"), &line, timeout)?;
        drop(control);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: key,
        };
        // SAFETY: both descriptors are open; `ev` is an epoll_event that we own.
        let rc = unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                event.as_raw_fd(),
                &mut ev,
            )
        };
        if rc != 0 {
            return Err(error(io::Error::last_os_error()));
        }
        Ok(OomWatch {
            event,
            epoll: Arc::clone(&self.epoll),
            _slot: slot,
        })
    }

    /// The keys of the watches that fired and were not cleared yet (at most 256), without
    /// waiting, into `out` (cleared first). The wait is level-triggered and the kernel rotates
    /// its ready list, so watches beyond 256 are reported by a later call once these are
    /// cleared. A failed wait reports none: the caller's per-tick check catches up.
    pub fn fired(&mut self, out: &mut Vec<u64>) {
        const BATCH: usize = 256;
        out.clear();
        self.ready
            .resize(BATCH, libc::epoll_event { events: 0, u64: 0 });
        // SAFETY: `ready` holds BATCH writable epoll_events.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.ready.as_mut_ptr(),
                BATCH as i32,
                0,
            )
        };
        if let Ok(n) = usize::try_from(n) {
            out.extend(self.ready[..n].iter().map(|e| e.u64));
        }
    }
}

/// One cgroup's registration: its eventfd (the kernel drops the registration when it closes).
#[derive(Debug)]
pub struct OomWatch {
    event: OwnedFd,
    epoll: Arc<OwnedFd>,
    _slot: Slot,
}

impl Drop for OomWatch {
    /// Takes the eventfd out of the set before it closes: closing alone removes it only once
    /// every copy is closed, and a process forked meanwhile (a launched command before its
    /// exec) holds a copy, which would keep a dropped watch reporting.
    fn drop(&mut self) {
        // SAFETY: both descriptors are open; EPOLL_CTL_DEL takes no event.
        unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                self.event.as_raw_fd(),
                std::ptr::null_mut(),
            );
        }
    }
}

impl OomWatch {
    /// Clears the eventfd; true when it had fired since the last call.
    pub fn take_fired(&self) -> bool {
        let mut count = 0u64;
        // SAFETY: reads at most 8 bytes into `count`, which we own; the eventfd is non-blocking.
        let n = unsafe {
            libc::read(
                self.event.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        n == 8 && count > 0
    }

    /// Signals the eventfd as the kernel does (tests).
    #[cfg(test)]
    pub(crate) fn signal(&self) {
        let one = 1u64;
        // SAFETY: writes 8 bytes from `one`, which we own, to an open eventfd.
        let n = unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
        assert_eq!(n, 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory that takes the registration line as a plain file (no kernel behind it).
    fn fake_cgroup(dir: &Path) {
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 1\nunder_oom 0\n",
        )
        .unwrap();
        std::fs::write(dir.join("cgroup.event_control"), "").unwrap();
    }

    #[test]
    fn a_watch_writes_its_registration_and_fires_only_when_signalled() {
        let tmp = tempfile::tempdir().unwrap();
        fake_cgroup(tmp.path());
        let mut events = OomEvents::new().unwrap();
        let a = events.watch(7, tmp.path(), Duration::from_secs(5)).unwrap();
        let b = events.watch(9, tmp.path(), Duration::from_secs(5)).unwrap();
        let line = std::fs::read_to_string(tmp.path().join("cgroup.event_control")).unwrap();
        let fds: Vec<i32> = line.split(' ').map(|n| n.parse().unwrap()).collect();
        assert_eq!(fds.len(), 2, "{line:?}: eventfd and memory.oom_control");
        assert_eq!(fds[0], b.event.as_raw_fd());

        let mut fired = Vec::new();
        events.fired(&mut fired);
        assert!(fired.is_empty());
        assert!(!a.take_fired());

        b.signal();
        events.fired(&mut fired);
        assert_eq!(fired, vec![9]);
        // Level-triggered: fired until cleared.
        events.fired(&mut fired);
        assert_eq!(fired, vec![9]);
        assert!(b.take_fired());
        events.fired(&mut fired);
        assert!(fired.is_empty());

        // A dropped watch leaves the set.
        a.signal();
        drop(a);
        events.fired(&mut fired);
        assert!(fired.is_empty());
    }

    #[test]
    fn a_cgroup_without_event_control_cannot_be_watched() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("memory.oom_control"), "under_oom 0\n").unwrap();
        let events = OomEvents::new().unwrap();
        let err = events
            .watch(1, tmp.path(), Duration::from_secs(5))
            .unwrap_err();
        assert!(err.to_string().contains("cgroup.event_control"), "{err}");
        let gone = tmp.path().join("gone");
        let err = events.watch(1, &gone, Duration::from_secs(5)).unwrap_err();
        assert!(err.is_vanished(), "{err}");
    }

    /// Against the live v1 memory controller, in a child of this process's own cgroup: a
    /// process that fills a 16 MiB limit with the OOM killer off stalls, and the kernel signals.
    #[test]
    fn live_v1_a_stall_at_the_limit_is_signalled() {
        use crate::fs::hierarchy::{self, CgroupVersion};
        use std::process::{Command, Stdio};
        use std::time::Instant;

        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: creating a cgroup needs root");
            return;
        }
        let h = match hierarchy::detect(Path::new("/")) {
            Ok(h) if h.version == CgroupVersion::V1 => h,
            other => {
                eprintln!("skipped: no v1 memory controller ({other:?})");
                return;
            }
        };
        let dir = h
            .own_dir()
            .join(format!("memtide-oom-test-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let write = |name: &str, value: &str| {
            write_bounded(&dir.join(name), value, Duration::from_secs(5)).unwrap()
        };
        write("memory.limit_in_bytes", "16777216");
        // No way out through swap either.
        write("memory.swappiness", "0");
        if dir.join("memory.memsw.limit_in_bytes").exists() {
            write("memory.memsw.limit_in_bytes", "16777216");
        }
        write("memory.oom_control", "1");
        let mut events = OomEvents::new().unwrap();
        let watch = events.watch(5, &dir, Duration::from_secs(5)).unwrap();
        let mut fired = Vec::new();
        events.fired(&mut fired);
        assert!(fired.is_empty(), "nothing stalled yet");

        // awk doubles a string until the limit stops it (written in user space: a fault in a
        // system call's copy would fail the call instead of waiting in OOM).
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$1/cgroup.procs\" && exec awk 'BEGIN { s = \"x\"; while (1) s = s s }'")
            .arg("sh")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while fired.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            events.fired(&mut fired);
        }
        let under_oom = std::fs::read_to_string(dir.join("memory.oom_control")).unwrap();
        // SIGKILL wakes a task waiting in OOM; every process in the cgroup gets one.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = crate::fs::procs::read_procs(&dir).unwrap_or_default();
            for &pid in &pids {
                // SAFETY: kill takes a pid and a signal, no pointers.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
            let _ = child.try_wait();
            if (pids.is_empty() && std::fs::remove_dir(&dir).is_ok()) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.wait();
        drop(watch);
        assert!(!dir.exists(), "test cgroup {} left behind", dir.display());
        assert_eq!(fired, vec![5], "signalled; memory.oom_control: {under_oom}");
        assert!(under_oom.contains("under_oom 1"), "{under_oom}");
    }
}
