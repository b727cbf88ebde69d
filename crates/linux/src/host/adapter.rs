//! An application's adapter (`memtide-adapter`, a balloon agent for a server without one) kept running in its tenant's cgroup, so that memtide's identity check places it in that tenant: started once the tenant is managed, killed with memtide (its parent-death signal), started again with back-off (1 s doubling to 60 s) when it exits, and stopped when memtide lets the tenant go: SIGTERM once the tenant's limits are given back (the adapter gives its pool back too), SIGKILL when they are not. An adapter an earlier memtide left in the cgroup is killed when the tenant is adopted.

use super::error::LinuxError;
use super::launch::{spawn_in_cgroup, Asks};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How long a stopped adapter has to say bye and give its pool back (a shrink under way
/// finishes first) before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// One tenant's adapter process.
#[derive(Debug)]
pub(crate) struct Adapter {
    argv: Vec<String>,
    /// Where its output goes (appended), if anywhere.
    log: Option<PathBuf>,
    child: Option<Child>,
    next_start: Instant,
    backoff: Duration,
}

impl Adapter {
    pub(crate) fn new(argv: Vec<String>, log: Option<PathBuf>) -> Adapter {
        Adapter {
            argv,
            log,
            child: None,
            next_start: Instant::now(),
            backoff: FIRST_BACKOFF,
        }
    }

    /// The running adapter's pid.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts the adapter in the cgroup at `dir` unless it runs or its back-off has not
    /// passed. Says how it ended, when it exited since the last call (its status and the
    /// error line from its log, e.g. the server refusing its password), and, when it tried to
    /// start it, the new pid or why it could not start.
    pub(crate) fn keep_running(
        &mut self,
        tenant: &str,
        dir: &Path,
    ) -> (Option<String>, Option<Result<u32, LinuxError>>) {
        let mut exited = None;
        if let Some(c) = &mut self.child {
            match c.try_wait() {
                Ok(None) => return (None, None),
                Ok(Some(status)) => {
                    exited = Some(self.ended(status));
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
        let asks = Asks {
            dies_with_memtide: true,
            ..Asks::default()
        };
        let started =
            spawn_in_cgroup(tenant, &self.argv, dir, &[], self.log.as_deref(), asks).map(|c| {
                let pid = c.id();
                self.child = Some(c);
                pid
            });
        (exited, Some(started))
    }

    /// How it ended: its status and the error line from its log.
    fn ended(&self, status: std::process::ExitStatus) -> String {
        let said = self
            .log
            .as_deref()
            .and_then(last_error)
            .map_or_else(String::new, |l| format!(": {l}"));
        format!("exited ({status}){said}")
    }

    /// Stops the adapter. With `give_back` (the tenant's limits are given back): SIGTERM, so
    /// that it says bye and gives its pool back to its size at start, and SIGKILL after
    /// [`STOP_GRACE`]; says how it ended when that failed. Without: SIGKILL, the pool left
    /// where memtide's limit holds it, and its record for the next memtide to give back.
    pub(crate) fn stop(&mut self, give_back: bool) -> Option<String> {
        let mut c = self.child.take()?;
        if give_back {
            if let Ok(pid) = libc::pid_t::try_from(c.id()) {
                // SAFETY: kill(2) has no memory-safety preconditions.
                unsafe { libc::kill(pid, libc::SIGTERM) };
            }
            let until = Instant::now() + STOP_GRACE;
            while Instant::now() < until {
                match c.try_wait() {
                    Ok(Some(status)) if status.success() => return None,
                    Ok(Some(status)) => return Some(self.ended(status)),
                    _ => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        let _ = c.kill();
        let _ = c.wait();
        give_back.then(|| format!("killed after {STOP_GRACE:?} without giving its pool back"))
    }

    /// Kills (SIGKILL) the processes among `pids` running this adapter's program but not
    /// its child: adapters an earlier memtide left in the cgroup (one killed before its
    /// adapters had a parent-death signal), which would keep a server's tenant from ever
    /// looking empty and answer for it beside the new one. Killed, not stopped: they give
    /// no pool back under memtide's limit, and leave its record to the new one. Returns the
    /// pids killed.
    pub(crate) fn kill_strays(&self, pids: &[u32], proc_root: &Path) -> Vec<u32> {
        let Some(program) = self.argv.first().and_then(|p| resolve(p)) else {
            return Vec::new();
        };
        let own = self.pid();
        pids.iter()
            .copied()
            .filter(|&pid| Some(pid) != own)
            .filter(|&pid| executable(proc_root, pid).is_some_and(|exe| exe == program))
            .filter(|&pid| {
                // SAFETY: kill(2) has no memory-safety preconditions.
                libc::pid_t::try_from(pid)
                    .is_ok_and(|p| unsafe { libc::kill(p, libc::SIGKILL) } == 0)
            })
            .collect()
    }
}

/// The program `name` runs: itself when it names a path, else the first executable file of
/// that name on `PATH`; its links resolved.
fn resolve(name: &str) -> Option<PathBuf> {
    let found = if name.contains('/') {
        PathBuf::from(name)
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(name))
            .find(|p| p.is_file())?
    };
    found.canonicalize().ok()
}

/// The executable `pid` runs, as `/proc/PID/exe` names it (a file replaced since, such as a
/// rebuilt adapter, named as it was).
fn executable(proc_root: &Path, pid: u32) -> Option<PathBuf> {
    let link = std::fs::read_link(proc_root.join(format!("proc/{pid}/exe"))).ok()?;
    let text = link.to_str()?;
    Some(PathBuf::from(
        text.strip_suffix(" (deleted)").unwrap_or(text),
    ))
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

    /// A plain directory standing in for the cgroup: the child's write lands in a file.
    fn fake_cgroup() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        dir
    }

    #[test]
    fn an_adapter_that_exits_is_started_again_after_its_back_off_and_stopped_for_good() {
        let dir = fake_cgroup();
        let mut a = Adapter::new(vec!["sleep".into(), "0".into()], None);
        assert!(matches!(
            a.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        std::thread::sleep(Duration::from_millis(200));
        let (exited, started) = a.keep_running("t", dir.path());
        assert!(started.is_none(), "within its back-off");
        assert_eq!(exited.as_deref(), Some("exited (exit status: 0)"));
        a.next_start = Instant::now();
        assert!(matches!(
            a.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        let mut long = Adapter::new(vec!["sleep".into(), "30".into()], None);
        assert!(matches!(
            long.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        assert!(
            matches!(long.keep_running("t", dir.path()), (None, None)),
            "it runs"
        );
        let start = Instant::now();
        assert_eq!(
            long.stop(true).as_deref(),
            Some("exited (signal: 15 (SIGTERM))"),
            "sleep dies of SIGTERM: not how an adapter that gave its pool back ends"
        );
        assert!(long.child.is_none() && start.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn an_adapter_that_stops_cleanly_on_sigterm_is_not_reported() {
        let dir = fake_cgroup();
        let argv = ["sh", "-c", "trap 'exit 0' TERM; sleep 30 & wait"]
            .map(String::from)
            .to_vec();
        let mut a = Adapter::new(argv, None);
        assert!(matches!(
            a.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        // Its trap set.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(a.stop(true), None);
    }

    #[test]
    fn an_adapter_stopped_without_giving_back_is_killed_at_once() {
        let dir = fake_cgroup();
        // It would take SIGTERM for as long as it likes.
        let argv = ["sh", "-c", "trap '' TERM; sleep 30"]
            .map(String::from)
            .to_vec();
        let mut a = Adapter::new(argv, None);
        assert!(matches!(
            a.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        let start = Instant::now();
        assert_eq!(a.stop(false), None);
        assert!(start.elapsed() < Duration::from_secs(2), "no grace waited");
    }

    #[test]
    fn an_adapter_that_fails_is_reported_with_the_error_line_from_its_log() {
        let dir = fake_cgroup();
        let log = dir.path().join("a.log");
        let mut a = Adapter::new(vec![
            "sh".into(),
            "-c".into(),
            "echo starting; echo 'Error: redis: redis at 127.0.0.1:1: WRONGPASS invalid password' >&2; echo bye; exit 1".into(),
        ], Some(log));
        assert!(matches!(
            a.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        std::thread::sleep(Duration::from_millis(300));
        let (exited, _) = a.keep_running("t", dir.path());
        assert_eq!(
            exited.as_deref(),
            Some("exited (exit status: 1): Error: redis: redis at 127.0.0.1:1: WRONGPASS invalid password")
        );
    }

    #[test]
    fn a_stray_of_the_same_program_is_killed_and_other_programs_and_its_own_child_are_not() {
        let dir = fake_cgroup();
        let mut stray = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sh")
            .args(["-c", "sleep 30"])
            .spawn()
            .unwrap();
        let mut a = Adapter::new(vec!["sleep".into(), "30".into()], None);
        assert!(matches!(
            a.keep_running("t", dir.path()),
            (None, Some(Ok(_)))
        ));
        let own = a.pid().unwrap();
        let pids = [stray.id(), other.id(), own];
        assert_eq!(a.kill_strays(&pids, Path::new("/")), vec![stray.id()]);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(stray.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(
            other.try_wait().unwrap().is_none(),
            "another program runs on"
        );
        assert!(
            a.keep_running("t", dir.path()).0.is_none(),
            "its own runs on"
        );
        let _ = other.kill();
        let _ = other.wait();
        a.stop(false);
    }
}
