//! Errors from driving DAMON through its sysfs interface: each names the file and the value concerned.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// What went wrong with DAMON. Every message names the sysfs path and the value involved, so a
/// log line is enough to find the file and the input.
#[derive(Debug, thiserror::Error)]
pub enum DamonError {
    /// The sysfs interface, or the `vaddr` operations set, is not there.
    #[error("DAMON unavailable under {}: {reason}", root.display())]
    Unavailable { root: PathBuf, reason: String },

    /// A setting is out of the range DAMON accepts.
    #[error("DAMON setting `{field}` is {value}, expected {expected}")]
    Config {
        field: &'static str,
        value: String,
        expected: &'static str,
    },

    /// No processes were given to monitor.
    #[error("no processes to monitor: the pid list is empty")]
    NoPids,

    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },

    /// A file holds a value the kernel does not document.
    #[error("{}: value {value:?}, expected {expected}", path.display())]
    Parse {
        path: PathBuf,
        value: String,
        expected: &'static str,
    },

    /// Writing a value failed for a reason other than those below.
    #[error("cannot write {value:?} to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },

    /// The kernel kept answering EBUSY: another DAMON sysfs command (ours or another user's)
    /// held DAMON's global sysfs lock for the whole time limit.
    #[error("writing {value:?} to {} still EBUSY after {after:?}: another DAMON sysfs command holds the interface", path.display())]
    Busy {
        path: PathBuf,
        value: String,
        after: Duration,
    },

    /// No kdamond can be had without disturbing one memtide did not create.
    #[error("no kdamond free for memtide at {}: {reason}", path.display())]
    NoFreeKdamond { path: PathBuf, reason: String },

    /// The monitored processes are gone: the kernel refused them when turning the kdamond on or
    /// committing targets, or the kdamond stopped by itself (DAMON stops once every monitored
    /// process has exited). Restart monitoring with the tenant's current pids (`set_pids`).
    #[error("monitored processes gone ({}): {detail}", path.display())]
    TargetsGone {
        path: PathBuf,
        /// The monitored pids that no longer exist, as far as `kill(pid, 0)` can tell.
        gone: Vec<u32>,
        detail: String,
    },
}

impl DamonError {
    /// True when the monitored processes are gone and monitoring should restart with new pids.
    pub fn is_targets_gone(&self) -> bool {
        matches!(self, DamonError::TargetsGone { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_path_and_value() {
        let cases: Vec<(DamonError, Vec<&str>)> = vec![
            (
                DamonError::Write {
                    path: PathBuf::from("/d/kdamonds/0/state"),
                    value: "on".into(),
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                },
                vec!["/d/kdamonds/0/state", "\"on\"", "os error 22"],
            ),
            (
                DamonError::Busy {
                    path: PathBuf::from("/d/kdamonds/nr_kdamonds"),
                    value: "2".into(),
                    after: Duration::from_secs(5),
                },
                vec!["/d/kdamonds/nr_kdamonds", "\"2\"", "EBUSY", "5s"],
            ),
            (
                DamonError::Parse {
                    path: PathBuf::from("/d/x/nr_accesses"),
                    value: "many".into(),
                    expected: "a count",
                },
                vec!["/d/x/nr_accesses", "\"many\"", "a count"],
            ),
            (
                DamonError::TargetsGone {
                    path: PathBuf::from("/d/kdamonds/1/state"),
                    gone: vec![42],
                    detail: "pids [42] no longer exist".into(),
                },
                vec!["/d/kdamonds/1/state", "[42]"],
            ),
            (
                DamonError::Config {
                    field: "max_regions",
                    value: "2".into(),
                    expected: "at least min_regions",
                },
                vec!["max_regions", "2", "min_regions"],
            ),
        ];
        for (error, needles) in cases {
            let message = error.to_string();
            for needle in needles {
                assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            }
        }
    }

    #[test]
    fn only_targets_gone_asks_for_a_restart() {
        let gone = DamonError::TargetsGone {
            path: PathBuf::from("/d"),
            gone: vec![],
            detail: String::new(),
        };
        assert!(gone.is_targets_gone());
        assert!(!DamonError::NoPids.is_targets_gone());
    }
}
