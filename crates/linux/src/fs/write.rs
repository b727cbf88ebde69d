//! Bounded-time writes to kernel files: a cgroup limit write can block in reclaim, so each write runs on a writer thread and the caller waits at most a timeout; a file whose write timed out takes no new write until that one returns.
//!
//! Writer threads are kept and reused: a write goes to an idle writer, and a new one is started
//! only when none is idle (the first write, or while earlier writes are stuck in the kernel).
//! Starting a thread per write cost about 120 µs, more than the write of a small limit change.
//! Hand-rolled on `std::sync::mpsc` rather than a thread-pool crate: a pool of fixed size would
//! let stuck writes starve the others, and this one grows instead.

use super::error::FsError;
use super::read::{is_gone, parent_gone};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Duration;

/// Files with a write under way, process-wide.
fn in_flight_set() -> MutexGuard<'static, HashSet<PathBuf>> {
    static SET: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    SET.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// True while a write to `path` (typically one that timed out) has not returned.
pub fn is_in_flight(path: &Path) -> bool {
    in_flight_set().contains(path)
}

/// Marks a path in flight; unmarks it when dropped, however the writer ends.
struct InFlight(PathBuf);

impl InFlight {
    fn claim(path: &Path) -> Result<InFlight, FsError> {
        if in_flight_set().insert(path.to_path_buf()) {
            Ok(InFlight(path.to_path_buf()))
        } else {
            Err(FsError::InFlight {
                path: path.to_path_buf(),
            })
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        in_flight_set().remove(&self.0);
    }
}

/// A write, run on a writer thread.
type Job = Box<dyn FnOnce() + Send>;

/// The writer threads, process-wide: a queue of jobs, and how many writers wait for one.
struct Writers {
    jobs: Sender<Job>,
    queue: Arc<Mutex<Receiver<Job>>>,
    idle: AtomicUsize,
    started: AtomicUsize,
}

fn writers() -> &'static Writers {
    static WRITERS: OnceLock<Writers> = OnceLock::new();
    WRITERS.get_or_init(|| {
        let (jobs, queue) = mpsc::channel();
        Writers {
            jobs,
            queue: Arc::new(Mutex::new(queue)),
            idle: AtomicUsize::new(0),
            started: AtomicUsize::new(0),
        }
    })
}

impl Writers {
    /// Hands `job` to an idle writer, or to a new one when none is idle. Every job queued has
    /// a writer of its own (one idle claimed, or one started), so no write waits behind a
    /// stuck one. A job must call [`Writers::idle_again`] when its write has returned.
    fn run(&self, job: Job) -> io::Result<()> {
        let claimed = self
            .idle
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        if !claimed {
            let queue = Arc::clone(&self.queue);
            thread::Builder::new()
                .name("memtide-kernel-write".to_string())
                .spawn(move || loop {
                    let job = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    let Ok(job) = job else { return };
                    // A panicking write must not take the writer with it.
                    let _ = panic::catch_unwind(AssertUnwindSafe(job));
                })?;
            self.started.fetch_add(1, Ordering::Relaxed);
        }
        self.jobs
            .send(job)
            .map_err(|_| io::Error::other("the writer queue is closed"))
    }

    /// The calling writer takes jobs again. Called by a job before it reports its result, so
    /// a caller writing again at once finds it idle.
    fn idle_again(&self) {
        self.idle.fetch_add(1, Ordering::AcqRel);
    }
}

/// Writer threads started so far, process-wide.
pub fn writers_started() -> usize {
    writers().started.load(Ordering::Relaxed)
}

/// Writes `value` to the existing file `path` on a writer thread, waiting at most `timeout`.
/// The file is opened write-only with `O_TRUNC` as a shell's `>` does (kernfs and procfs ignore
/// the truncation; a plain file in a fake tree then holds just the value) and never created;
/// the value goes in one `write` call unless the kernel takes less.
///
/// Errors: EBUSY/EAGAIN → `Busy` (the kernel could not reclaim enough); the cgroup gone →
/// `Vanished`; no return within `timeout` → `Timeout`, and the write goes on in its writer
/// (the next write takes another), during which any write to the same path returns `InFlight` at once. Two writes to
/// one path at the same time are refused the same way. EINTR is retried.
pub fn write_bounded(path: &Path, value: &str, timeout: Duration) -> Result<(), FsError> {
    let claim = InFlight::claim(path)?;
    let (tx, rx) = mpsc::sync_channel(1);
    let (thread_path, thread_value) = (path.to_path_buf(), value.to_string());
    writers()
        .run(Box::new(move || {
            let result = write_now(&thread_path, &thread_value);
            // Unmark before reporting, so a caller that got the result can write again at once.
            drop(claim);
            writers().idle_again();
            let _ = tx.send(result);
        }))
        .map_err(|source| FsError::Write {
            path: path.to_path_buf(),
            value: value.to_string(),
            source,
        })?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => Err(FsError::Timeout {
            path: path.to_path_buf(),
            value: value.to_string(),
            after: timeout,
        }),
        Err(RecvTimeoutError::Disconnected) => Err(FsError::Write {
            path: path.to_path_buf(),
            value: value.to_string(),
            source: io::Error::other("the writer thread ended without a result"),
        }),
    }
}

/// The write itself, on the calling thread.
fn write_now(path: &Path, value: &str) -> Result<(), FsError> {
    let file: File = loop {
        match OpenOptions::new().write(true).truncate(true).open(path) {
            Ok(f) => break f,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(classify(path, value, e)),
        }
    };
    let bytes = value.as_bytes();
    let mut written = 0;
    while written < bytes.len() {
        match (&file).write(&bytes[written..]) {
            Ok(0) => {
                return Err(FsError::Write {
                    path: path.to_path_buf(),
                    value: value.to_string(),
                    source: io::Error::from(io::ErrorKind::WriteZero),
                })
            }
            Ok(n) => written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(classify(path, value, e)),
        }
    }
    Ok(())
}

/// Turns a failed open or write into the error the caller acts on.
fn classify(path: &Path, value: &str, e: io::Error) -> FsError {
    let errno = e.raw_os_error();
    if errno == Some(libc::EBUSY) || errno == Some(libc::EAGAIN) {
        FsError::Busy {
            path: path.to_path_buf(),
            value: value.to_string(),
        }
    } else if errno == Some(libc::ENODEV) || (is_gone(&e) && parent_gone(path)) {
        FsError::Vanished {
            path: path.to_path_buf(),
        }
    } else {
        FsError::Write {
            path: path.to_path_buf(),
            value: value.to_string(),
            source: e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::time::Instant;

    #[test]
    fn write_to_a_plain_file_replaces_its_contents() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memory.high");
        std::fs::write(&path, "9223372036854771712\n").unwrap();
        write_bounded(&path, "268435456", Duration::from_secs(5)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "268435456");
        assert!(!is_in_flight(&path));
        // The path is free again at once for the next write.
        write_bounded(&path, "max", Duration::from_secs(5)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "max");
    }

    #[test]
    fn write_does_not_create_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memory.reclaim");
        let err = write_bounded(&path, "1", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(err, FsError::Write { .. }), "{err}");
        assert!(!path.exists());
    }

    #[test]
    fn write_into_a_removed_cgroup_is_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("gone/memory.max");
        let err = write_bounded(&path, "max", Duration::from_secs(5)).unwrap_err();
        assert!(err.is_vanished(), "{err}");
    }

    #[test]
    fn kernel_refusals_map_to_busy_vanished_or_write() {
        let p = Path::new("/nonexistent-memtide/cg/memory.limit_in_bytes");
        let cases = [
            (libc::EBUSY, "Busy"),
            (libc::EAGAIN, "Busy"),
            (libc::ENODEV, "Vanished"),
            (libc::ENOENT, "Vanished"),
            (libc::EINVAL, "Write"),
        ];
        for (errno, want) in cases {
            let got = match classify(p, "4096", io::Error::from_raw_os_error(errno)) {
                FsError::Busy { .. } => "Busy",
                FsError::Vanished { .. } => "Vanished",
                FsError::Write { .. } => "Write",
                other => panic!("unexpected {other}"),
            };
            assert_eq!(got, want, "errno {errno}");
        }
    }

    #[test]
    fn blocked_write_times_out_then_refuses_new_writes_until_it_returns() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        let c_path = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: c_path is a valid NUL-terminated path; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);

        // Opening a FIFO write-only blocks until a reader opens it.
        let err = write_bounded(&fifo, "1", Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, FsError::Timeout { .. }), "{err}");
        assert!(is_in_flight(&fifo));
        let err = write_bounded(&fifo, "2", Duration::from_millis(100)).unwrap_err();
        assert!(matches!(err, FsError::InFlight { .. }), "{err}");

        // A reader releases the blocked writer, which then leaves the in-flight set.
        let mut reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while is_in_flight(&fifo) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!is_in_flight(&fifo));
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "1");
    }

    #[test]
    fn writes_one_after_another_reuse_a_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memory.limit_in_bytes");
        std::fs::write(&path, "").unwrap();
        write_bounded(&path, "0", Duration::from_secs(5)).unwrap();
        let before = writers_started();
        for i in 0..50 {
            write_bounded(&path, &i.to_string(), Duration::from_secs(5)).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "49");
        // Other tests write at the same time and may start writers of their own.
        let started = writers_started() - before;
        assert!(started < 10, "{started} writers started for 50 writes");
    }
}
