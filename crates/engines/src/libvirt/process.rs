//! One virsh child: started without a shell in its own process group with the C locale, its stdout and stderr read as they come (`poll(2)`, so neither pipe can fill and stall it), bounded in size and, for a call, in time; a child that overruns is killed with its whole group.
//!
//! The group is killed only before the child is reaped, while its pid (the group's id) is
//! still the child's: the id cannot name anyone else then.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The most of a call's stdout, and of its stderr, read.
pub(crate) const MAX_OUTPUT: usize = 1 << 20;
/// The longest wait in `poll(2)`, so that a stop or a deadline is seen soon.
const SLICE: Duration = Duration::from_millis(50);

/// Why reading a child stopped before both its pipes ended.
#[derive(Debug)]
pub(crate) enum Stop {
    /// The deadline passed.
    Timeout,
    /// The stream (`"stdout"` or `"stderr"`) went past [`MAX_OUTPUT`].
    TooLong(&'static str),
    /// The holder asked to stop.
    Stopped,
    /// Reading a pipe failed.
    Io(io::Error),
}

/// A call that ran to its end.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: Vec<u8>,
}

/// Why a call has no [`Finished`].
#[derive(Debug)]
pub(crate) enum Failed {
    /// It could not be started.
    Spawn(io::Error),
    /// It was killed, for this.
    Stopped(Stop),
}

/// A started child and its two pipes.
pub(crate) struct Started {
    pub(crate) child: Child,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
}

/// Starts `program args…` (no shell: each argument is one argv entry) with stdin from
/// /dev/null, stdout and stderr piped, in a process group of its own, with messages in
/// English (virsh's are translated otherwise, and are parsed here).
pub(crate) fn spawn(program: &Path, args: &[String]) -> io::Result<Started> {
    let mut child = Command::new(program)
        .args(args)
        .env("LC_ALL", "C")
        .env_remove("LANGUAGE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    match (child.stdout.take(), child.stderr.take()) {
        (Some(stdout), Some(stderr)) => Ok(Started {
            child,
            stdout,
            stderr,
        }),
        _ => {
            kill(&mut child);
            Err(io::Error::other("the child's pipes are missing"))
        }
    }
}

/// Runs `program args…` to its end within `timeout`, reading at most [`MAX_OUTPUT`] of each
/// stream; past either bound it is killed.
pub(crate) fn run(program: &Path, args: &[String], timeout: Duration) -> Result<Finished, Failed> {
    let deadline = Instant::now() + timeout;
    let Started {
        mut child,
        mut stdout,
        mut stderr,
    } = spawn(program, args).map_err(Failed::Spawn)?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let read = pump(
        &mut stdout,
        &mut stderr,
        || slice_until(deadline),
        |data| keep(&mut out, data, "stdout"),
        |data| keep(&mut err, data, "stderr"),
    );
    if let Err(stop) = read {
        kill(&mut child);
        return Err(Failed::Stopped(stop));
    }
    match reap(&mut child, deadline) {
        Some(status) => Ok(Finished {
            status,
            stdout: out,
            stderr: err,
        }),
        None => Err(Failed::Stopped(Stop::Timeout)),
    }
}

/// The wait until `deadline`, at most one slice; [`Stop::Timeout`] once it passed.
fn slice_until(deadline: Instant) -> Result<Duration, Stop> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(Stop::Timeout)
    } else {
        Ok(left.min(SLICE))
    }
}

/// Appends `data` to `buf` within [`MAX_OUTPUT`].
fn keep(buf: &mut Vec<u8>, data: &[u8], stream: &'static str) -> Result<(), Stop> {
    if buf.len() + data.len() > MAX_OUTPUT {
        return Err(Stop::TooLong(stream));
    }
    buf.extend_from_slice(data);
    Ok(())
}

/// Reads both pipes as data comes, handing each read to `on_out` or `on_err`, until both
/// ended. Before each wait `next_wait` gives its length, or why to stop instead.
pub(crate) fn pump(
    stdout: &mut ChildStdout,
    stderr: &mut ChildStderr,
    mut next_wait: impl FnMut() -> Result<Duration, Stop>,
    mut on_out: impl FnMut(&[u8]) -> Result<(), Stop>,
    mut on_err: impl FnMut(&[u8]) -> Result<(), Stop>,
) -> Result<(), Stop> {
    let mut fds = [stdout.as_raw_fd(), stderr.as_raw_fd()].map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    let mut buf = vec![0u8; 16 << 10];
    while fds.iter().any(|p| p.fd >= 0) {
        let wait = next_wait()?;
        let ms = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `fds` is a live array of pollfd for the whole call, its length passed with
        // it; poll only writes their `revents`. An ended pipe's fd is -1, which poll skips.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Stop::Io(e));
        }
        for (i, p) in fds.iter_mut().enumerate() {
            if p.fd < 0 || p.revents == 0 {
                continue;
            }
            // Ready: data, its end or an error, so this read does not wait.
            let got = if i == 0 {
                stdout.read(&mut buf)
            } else {
                stderr.read(&mut buf)
            };
            match got {
                Ok(0) => p.fd = -1,
                Ok(n) if i == 0 => on_out(&buf[..n])?,
                Ok(n) => on_err(&buf[..n])?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
    }
    Ok(())
}

/// Waits for the child to exit until `deadline`; past it, kills its group and gives `None`.
pub(crate) fn reap(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                kill(child);
                return None;
            }
        }
    }
}

/// Kills the child's whole process group (it is its leader) and reaps the child. Only for a
/// child not reaped yet (see the module docs).
pub(crate) fn kill(child: &mut Child) {
    if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) takes a process group id and a signal, no pointers; the group is
        // the unreaped child's own, so its id names no one else.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::PathBuf;

    fn sh(script: &str) -> (PathBuf, Vec<String>) {
        (
            PathBuf::from("/bin/sh"),
            vec!["-c".to_string(), script.to_string()],
        )
    }

    #[test]
    fn a_call_gives_its_status_stdout_and_stderr_in_the_c_locale() {
        let (p, a) = sh("echo \"out $LC_ALL\"; echo err >&2; exit 3");
        let f = run(&p, &a, Duration::from_secs(10)).unwrap();
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(f.stdout, b"out C\n");
        assert_eq!(f.stderr, b"err\n");
    }

    #[test]
    fn a_call_past_its_time_is_killed_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("survived");
        // The shell's child holds the pipes: only killing the group ends the call.
        let (p, a) = sh(&format!("sleep 2; touch {}", mark.display()));
        let start = Instant::now();
        let e = run(&p, &a, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, Failed::Stopped(Stop::Timeout)), "{e:?}");
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!mark.exists(), "the group's sleep was not killed");
    }

    #[test]
    fn output_past_the_bound_stops_the_call_naming_the_stream() {
        let (p, a) = sh("head -c 1100000 /dev/zero >&2; sleep 5");
        let start = Instant::now();
        let e = run(&p, &a, Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(e, Failed::Stopped(Stop::TooLong("stderr"))),
            "{e:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn a_program_that_is_not_there_cannot_be_started() {
        let e = run(Path::new("/nonexistent/virsh"), &[], Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, Failed::Spawn(_)), "{e:?}");
    }
}
