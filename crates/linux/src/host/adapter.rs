//! An application's adapter (`memtide-adapter`, a balloon agent for a server without one) kept running in its tenant's cgroup, so that memtide's identity check places it in that tenant: started once the tenant is managed, started again with back-off (1 s doubling to 60 s) when it exits, stopped (SIGTERM, then SIGKILL after 2 s) when memtide lets the tenant go.

use super::error::LinuxError;
use super::launch::spawn_in_cgroup;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One tenant's adapter process.
#[derive(Debug)]
pub(crate) struct Adapter {
    argv: Vec<String>,
    child: Option<Child>,
    next_start: Instant,
    backoff: Duration,
}

impl Adapter {
    pub(crate) fn new(argv: Vec<String>) -> Adapter {
        Adapter {
            argv,
            child: None,
            next_start: Instant::now(),
            backoff: FIRST_BACKOFF,
        }
    }

    /// Starts the adapter in the cgroup at `dir` unless it runs or its back-off has not
    /// passed. Says how it ended, when it exited since the last call (its status and the
    /// error line from its log, e.g. the server refusing its password), and, when it tried to
    /// start it, the new pid or why it could not start.
    pub(crate) fn keep_running(
        &mut self,
        tenant: &str,
        dir: &Path,
        log: Option<&Path>,
    ) -> (Option<String>, Option<Result<u32, LinuxError>>) {
        let mut exited = None;
        if let Some(c) = &mut self.child {
            match c.try_wait() {
                Ok(None) => return (None, None),
                Ok(Some(status)) => {
                    let said = log
                        .and_then(last_error)
                        .map_or_else(String::new, |l| format!(": {l}"));
                    exited = Some(format!("exited ({status}){said}"));
                    self.child = None;
                }
                Err(e) => {
                    exited = Some(format!("cannot be waited for: {e}"));
                    self.child = None;
                }
            }
        }
        let now = Instant::now();
        if now < self.next_start {
            return (exited, None);
        }
        self.next_start = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        let started = spawn_in_cgroup(tenant, &self.argv, dir, &[], log, false).map(|c| {
            let pid = c.id();
            self.child = Some(c);
            pid
        });
        (exited, Some(started))
    }

    /// Stops the adapter: SIGTERM (it says bye), SIGKILL after 2 s.
    pub(crate) fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        if let Ok(pid) = libc::pid_t::try_from(c.id()) {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The adapter's error line in its log: the last `Error: ...` line (how `memtide-adapter`
/// reports why it stopped), else the last non-empty line.
fn last_error(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("Error:"))
        .or(lines.last())
        .map(|l| l.chars().take(512).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adapter_that_exits_is_started_again_after_its_back_off_and_stopped_for_good() {
        let dir = tempfile::tempdir().unwrap();
        // A plain directory stands in for the cgroup: the child's write lands in a file.
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let mut a = Adapter::new(vec!["sleep".into(), "0".into()]);
        assert!(matches!(
            a.keep_running("t", dir.path(), None),
            (None, Some(Ok(_)))
        ));
        std::thread::sleep(Duration::from_millis(200));
        let (exited, started) = a.keep_running("t", dir.path(), None);
        assert!(started.is_none(), "within its back-off");
        assert_eq!(exited.as_deref(), Some("exited (exit status: 0)"));
        a.next_start = Instant::now();
        assert!(matches!(
            a.keep_running("t", dir.path(), None),
            (None, Some(Ok(_)))
        ));
        let mut long = Adapter::new(vec!["sleep".into(), "30".into()]);
        assert!(matches!(
            long.keep_running("t", dir.path(), None),
            (None, Some(Ok(_)))
        ));
        assert!(
            matches!(long.keep_running("t", dir.path(), None), (None, None)),
            "it runs"
        );
        let start = Instant::now();
        long.stop();
        assert!(long.child.is_none() && start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn an_adapter_that_fails_is_reported_with_the_error_line_from_its_log() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let log = dir.path().join("a.log");
        let mut a = Adapter::new(vec![
            "sh".into(),
            "-c".into(),
            "echo starting; echo 'Error: redis: redis at 127.0.0.1:1: WRONGPASS invalid password' >&2; echo bye; exit 1".into(),
        ]);
        assert!(matches!(
            a.keep_running("t", dir.path(), Some(&log)),
            (None, Some(Ok(_)))
        ));
        std::thread::sleep(Duration::from_millis(300));
        let (exited, _) = a.keep_running("t", dir.path(), Some(&log));
        assert_eq!(
            exited.as_deref(),
            Some("exited (exit status: 1): Error: redis: redis at 127.0.0.1:1: WRONGPASS invalid password")
        );
    }
}
