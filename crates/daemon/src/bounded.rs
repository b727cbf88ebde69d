//! `output_within`: a host command's output (`systemctl`, `virsh`) with a bound on the wait, so that a hung service manager (or D-Bus, or libvirtd) cannot hang the daemon's start, a reload or `memtide discover`.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The most of each stream kept (a host's unit list is some tens of KiB).
const MAX_STREAM: u64 = 4 << 20;

/// Runs `command` (stdin closed, stdout and stderr read as it runs, each up to 4 MiB) and
/// waits for it at most `deadline`; past it the command is killed. `Err` says why there is
/// no output, naming `what` (e.g. `systemctl show`); a command that ran and failed is `Ok`,
/// with its status.
pub fn output_within(
    command: &mut Command,
    what: &str,
    deadline: Duration,
) -> Result<Output, String> {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    // Each stream read on a thread of its own, so an answer longer than a pipe's buffer does
    // not block the command while it is waited for.
    let (sender, streams) = mpsc::channel();
    for (i, stream) in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .enumerate()
    {
        let sender = sender.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(s) = stream {
                let _ = s.take(MAX_STREAM).read_to_end(&mut bytes);
            }
            let _ = sender.send((i, bytes));
        });
    }
    drop(sender);
    let late = || {
        format!(
            "{what} did not answer within {:.1}s",
            deadline.as_secs_f64()
        )
    };
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            break status;
        }
        if started.elapsed() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(late());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A process the command left behind may hold its streams open: they too are waited for
    // only until the deadline.
    let mut out = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        let left = deadline.saturating_sub(started.elapsed());
        let (i, bytes) = streams.recv_timeout(left).map_err(|_| late())?;
        out[i] = bytes;
    }
    let [stdout, stderr] = out;
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_s_output_is_read_whole_even_beyond_a_pipe_s_buffer() {
        let out = output_within(
            Command::new("sh").args(["-c", "head -c 200000 /dev/zero; echo oops >&2; exit 3"]),
            "sh",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stdout.len(), 200_000);
        assert_eq!(out.stderr, b"oops\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn a_command_past_its_deadline_is_killed_and_says_so() {
        let started = Instant::now();
        let e = output_within(
            Command::new("sleep").arg("30"),
            "sleep 30",
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert_eq!(e, "sleep 30 did not answer within 0.2s");
        assert!(started.elapsed() < Duration::from_secs(5));
        let e = output_within(
            &mut Command::new("/nonexistent/memtide-no-such-program"),
            "none",
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.starts_with("none: "), "{e}");
    }
}
