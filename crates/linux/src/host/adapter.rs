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
    /// passed; `Some` when it tried: the new pid, or why it could not start.
    pub(crate) fn keep_running(
        &mut self,
        tenant: &str,
        dir: &Path,
        log: Option<&Path>,
    ) -> Option<Result<u32, LinuxError>> {
        if let Some(c) = &mut self.child {
            match c.try_wait() {
                Ok(None) => return None,
                _ => self.child = None,
            }
        }
        let now = Instant::now();
        if now < self.next_start {
            return None;
        }
        self.next_start = now + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        Some(spawn_in_cgroup(tenant, &self.argv, dir, log).map(|c| {
            let pid = c.id();
            self.child = Some(c);
            pid
        }))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adapter_that_exits_is_started_again_after_its_back_off_and_stopped_for_good() {
        let dir = tempfile::tempdir().unwrap();
        // A plain directory stands in for the cgroup: the child's write lands in a file.
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        let mut a = Adapter::new(vec!["sleep".into(), "0".into()]);
        assert!(matches!(a.keep_running("t", dir.path(), None), Some(Ok(_))));
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            a.keep_running("t", dir.path(), None).is_none(),
            "within its back-off"
        );
        a.next_start = Instant::now();
        assert!(matches!(a.keep_running("t", dir.path(), None), Some(Ok(_))));
        let mut long = Adapter::new(vec!["sleep".into(), "30".into()]);
        assert!(matches!(
            long.keep_running("t", dir.path(), None),
            Some(Ok(_))
        ));
        assert!(
            long.keep_running("t", dir.path(), None).is_none(),
            "it runs"
        );
        let start = Instant::now();
        long.stop();
        assert!(long.child.is_none() && start.elapsed() < Duration::from_secs(3));
    }
}
