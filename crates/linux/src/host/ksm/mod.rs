//! Page sharing on Linux: memtide drives the kernel's same-page merging (KSM) at the scan rate the policy decides, reads what it saves host-wide and per tenant, and gives KSM's settings back when it exits.
//!
//! **Taking over.** At start memtide reads KSM's knobs (`run`, `pages_to_scan`,
//! `sleep_millisecs`, `use_zero_pages`, `advisor_mode`) and keeps them in a small file next to
//! the state file before changing any: a daemon that crashed leaves that file behind, and the
//! next start restores from it instead of taking the crashed run's settings for the
//! original. It then switches the scan-time advisor off (it would set `pages_to_scan` itself)
//! and turns `use_zero_pages` on where the kernel counts such pages (`ksm_zero_pages`), so that
//! pages of zeros are counted apart, as ESX counts them.
//!
//! **Pace.** A scan rate of r pages a second becomes `sleep_millisecs = 20` (KSM's default
//! wake-up) and `pages_to_scan = r / 50`; a rate under 50 pages a second wakes less often
//! (one page a wake-up), and a rate of 0 stops ksmd with `run = 0` (merged pages stay merged).
//! The real pace is lower by the time ksmd spends scanning; the CPU budget is kept by the
//! policy from what ksmd measurably used (its thread's CPU time), not from this arithmetic.
//!
//! **Accounting.** Host-wide from `/sys/kernel/mm/ksm/` (`shared` = `pages_shared` +
//! `pages_sharing` + `ksm_zero_pages`, `frames` = `pages_shared`, KSM's own memory = what its
//! `general_profit` leaves out), per tenant the sum of `/proc/PID/ksm_stat` over the cgroup's
//! processes. A merged page is charged to one memory cgroup only, so a tenant's usage already
//! falls when its pages merge: no allocation adds sharing back on Linux.
//!
//! **Restoring.** At exit the knobs found at start are written back and the file removed.
//! Pages merged meanwhile stay merged (`run = 0` keeps them; unmerging all at once, `run = 2`,
//! would make the host find that memory again in one go).

mod actuator;

use super::error::LinuxError;
use crate::fs::ksm::{self, KsmCounters, KsmKnobs};
use crate::fs::FsError;
pub use actuator::Sharing;
use memtide_model::{Bytes, HostSharing, Pages, ScanRate, SharingLever};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What can go wrong taking KSM over (the host's `LinuxError::Ksm`).
#[derive(Debug, thiserror::Error)]
pub enum KsmError {
    #[error("page sharing needs the kernel's KSM, and {dir} does not exist (CONFIG_KSM)")]
    Missing { dir: String },
    #[error("KSM's original settings in {path}: {error}")]
    Saved { path: String, error: String },
}

/// KSM's default wake-up interval, which memtide keeps for every rate of 50 pages/s or more.
const SLEEP_MS: u64 = 20;

/// KSM under memtide's control.
#[derive(Debug)]
pub struct KsmDriver {
    root: PathBuf,
    write_timeout: Duration,
    dry_run: bool,
    /// The knobs found before memtide changed any (or those a crashed run saved).
    original: KsmKnobs,
    /// The knobs as last written (or found).
    current: KsmKnobs,
    /// Where `original` is kept while memtide holds KSM.
    saved: Option<PathBuf>,
    ksmd: Option<u32>,
    last_scanned: Option<u64>,
    last_cpu: Option<Duration>,
    /// `prctl(PR_SET_MEMORY_MERGE)` works here (Linux 6.4 and later).
    merge_any: bool,
}

impl KsmDriver {
    /// Takes KSM over: reads its knobs (or the original a crashed run saved in `saved`), keeps
    /// them in `saved`, then sets the advisor off and zero pages apart. Nothing is written in a
    /// dry run.
    pub fn take_over(
        root: &Path,
        saved: Option<&Path>,
        write_timeout: Duration,
        dry_run: bool,
    ) -> Result<KsmDriver, LinuxError> {
        let Some(counters) = ksm::read_counters(root)? else {
            return Err(LinuxError::Ksm(KsmError::Missing {
                dir: ksm::ksm_dir(root).display().to_string(),
            }));
        };
        let current = ksm::read_knobs(root)?;
        let original = match saved.map(load_saved).transpose()?.flatten() {
            Some(left) => left,
            None => current.clone(),
        };
        if let (Some(path), false) = (saved, dry_run) {
            store_saved(path, &original)?;
        }
        let counts_zero_pages = counters.zero_pages.is_some();
        let mut driver = KsmDriver {
            root: root.to_path_buf(),
            write_timeout,
            dry_run,
            ksmd: ksm::find_ksmd(root),
            last_scanned: counters.pages_scanned,
            last_cpu: None,
            merge_any: merge_any_supported(),
            saved: saved.map(Path::to_path_buf),
            original,
            current,
        };
        driver.last_cpu = driver.ksmd_cpu()?;
        let want = KsmKnobs {
            advisor_mode: driver
                .current
                .advisor_mode
                .as_ref()
                .map(|_| "none".to_string()),
            use_zero_pages: driver
                .current
                .use_zero_pages
                .map(|z| u64::from(counts_zero_pages) | z),
            ..driver.current.clone()
        };
        driver.write(want)?;
        Ok(driver)
    }

    /// Launched tenants can be asked to merge (`prctl(PR_SET_MEMORY_MERGE)`, Linux 6.4+).
    pub fn merge_any(&self) -> bool {
        self.merge_any
    }

    /// The knobs found at start, which `restore` writes back.
    pub fn original(&self) -> &KsmKnobs {
        &self.original
    }

    /// Sets ksmd's pace to `rate` (see the module docs).
    pub fn set_rate(&mut self, rate: ScanRate) -> Result<(), FsError> {
        let want = knobs_for(rate, &self.current);
        self.write(want)
    }

    /// What merging saves host-wide, with the pages scanned and ksmd's CPU time since the
    /// previous call.
    pub fn observe(&mut self) -> Result<HostSharing, FsError> {
        let c = ksm::read_counters(&self.root)?.unwrap_or_default();
        let scanned = match (c.pages_scanned, self.last_scanned) {
            (Some(now), Some(before)) => Some(now.saturating_sub(before)),
            _ => None,
        };
        self.last_scanned = c.pages_scanned;
        let cpu_now = self.ksmd_cpu()?;
        let cpu = match (cpu_now, self.last_cpu) {
            (Some(now), Some(before)) => Some(now.saturating_sub(before)),
            _ => None,
        };
        self.last_cpu = cpu_now;
        Ok(host_sharing(&c, scanned, cpu))
    }

    /// A tenant's share of merging: the sum of its processes' `ksm_stat`; `None` when no
    /// process has one (all gone, or a kernel without the file).
    pub fn tenant(&self, pids: &[u32]) -> Result<Option<SharingLever>, FsError> {
        let mut any = false;
        let (mut merging, mut zero, mut profit) = (0u64, None::<u64>, None::<i64>);
        for &pid in pids {
            let Some(p) = ksm::read_process(&self.root, pid)? else {
                continue;
            };
            any = true;
            merging += p.merging_pages.unwrap_or(0);
            if let Some(z) = p.zero_pages {
                zero = Some(zero.unwrap_or(0) + z);
            }
            if let Some(x) = p.profit {
                profit = Some(profit.unwrap_or(0) + x);
            }
        }
        Ok(any.then(|| SharingLever {
            shared: Pages(merging + zero.unwrap_or(0)),
            // KSM merges what it finds on its own schedule; no page waits on the policy's word.
            shareable: Pages::ZERO,
            zero: zero.map(Pages),
            profit,
        }))
    }

    /// Writes the original knobs back and removes the saved copy.
    pub fn restore(&mut self) -> Result<(), FsError> {
        self.write(self.original.clone())?;
        if let (Some(path), false) = (&self.saved, self.dry_run) {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(FsError::Write {
                        path: path.clone(),
                        value: "(remove)".to_string(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, want: KsmKnobs) -> Result<(), FsError> {
        // Each tick sets the rate: most ticks it is the one already set.
        if self.dry_run || want == self.current {
            return Ok(());
        }
        // What was written stays known even when a later knob fails.
        let result = ksm::write_knobs(&self.root, &want, &self.current, self.write_timeout);
        self.current = ksm::read_knobs(&self.root).unwrap_or(want);
        result
    }

    fn ksmd_cpu(&self) -> Result<Option<Duration>, FsError> {
        match self.ksmd {
            Some(pid) => ksm::read_cpu(&self.root, pid),
            None => Ok(None),
        }
    }
}

/// The knobs that give `rate` pages a second, other knobs as in `current`.
fn knobs_for(rate: ScanRate, current: &KsmKnobs) -> KsmKnobs {
    let r = rate.pages_per_sec;
    let (run, pages_to_scan, sleep_millisecs) = if r == 0 {
        (0, current.pages_to_scan, current.sleep_millisecs)
    } else if r < 1000 / SLEEP_MS {
        (1, 1, 1000 / r)
    } else {
        (1, r * SLEEP_MS / 1000, SLEEP_MS)
    };
    KsmKnobs {
        run,
        pages_to_scan,
        sleep_millisecs,
        ..current.clone()
    }
}

/// The host's sharing from KSM's counters.
fn host_sharing(c: &KsmCounters, scanned: Option<u64>, cpu: Option<Duration>) -> HostSharing {
    let zero = c.zero_pages.unwrap_or(0);
    let saved_bytes = (c.pages_sharing + zero) * Pages(1).to_bytes().0;
    HostSharing {
        shared: Pages(c.pages_shared + c.pages_sharing + zero),
        frames: Pages(c.pages_shared),
        zero: c.zero_pages.map(Pages),
        // general_profit = saved pages' bytes − rmap items' bytes.
        metadata: c
            .general_profit
            .map(|p| Bytes(u64::try_from(saved_bytes as i64 - p).unwrap_or(0))),
        scanned,
        cpu,
    }
}

/// `prctl(PR_GET_MEMORY_MERGE)` answers (Linux 6.4+; older kernels say EINVAL).
fn merge_any_supported() -> bool {
    // SAFETY: PR_GET_MEMORY_MERGE reads a flag of the calling process; no pointers.
    unsafe { libc::prctl(PR_GET_MEMORY_MERGE, 0, 0, 0, 0) >= 0 }
}

/// `PR_SET_MEMORY_MERGE` and `PR_GET_MEMORY_MERGE` from linux/prctl.h (6.4).
pub(crate) const PR_SET_MEMORY_MERGE: libc::c_int = 67;
const PR_GET_MEMORY_MERGE: libc::c_int = 68;

fn load_saved(path: &Path) -> Result<Option<KsmKnobs>, LinuxError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            LinuxError::Ksm(KsmError::Saved {
                path: path.display().to_string(),
                error: e.to_string(),
            })
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LinuxError::Ksm(KsmError::Saved {
            path: path.display().to_string(),
            error: e.to_string(),
        })),
    }
}

fn store_saved(path: &Path, knobs: &KsmKnobs) -> Result<(), LinuxError> {
    crate::host::saved::store(path, knobs).map_err(|error| {
        LinuxError::Ksm(KsmError::Saved {
            path: path.display().to_string(),
            error,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(root: &Path) {
        let dir = ksm::ksm_dir(root);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, value) in [
            ("run", "0"),
            ("pages_to_scan", "100"),
            ("sleep_millisecs", "20"),
            ("use_zero_pages", "0"),
            ("advisor_mode", "none"),
            ("pages_shared", "10"),
            ("pages_sharing", "90"),
            ("ksm_zero_pages", "20"),
            ("general_profit", "450000"),
            ("pages_scanned", "1000"),
        ] {
            std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
        }
    }

    fn knob(root: &Path, name: &str) -> String {
        std::fs::read_to_string(ksm::ksm_dir(root).join(name))
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn rates_become_pages_per_wake_up_and_zero_stops_ksmd() {
        let cur = KsmKnobs {
            run: 1,
            pages_to_scan: 100,
            sleep_millisecs: 20,
            use_zero_pages: None,
            advisor_mode: None,
        };
        let k = |r| knobs_for(ScanRate { pages_per_sec: r }, &cur);
        assert_eq!(
            (k(20_000).pages_to_scan, k(20_000).sleep_millisecs),
            (400, 20)
        );
        assert_eq!((k(1_000).pages_to_scan, k(1_000).sleep_millisecs), (20, 20));
        assert_eq!((k(10).pages_to_scan, k(10).sleep_millisecs), (1, 100));
        assert_eq!(k(0).run, 0);
        assert_eq!(k(5).run, 1);
    }

    #[test]
    fn host_sharing_keeps_shared_and_reclaimed_apart_and_derives_ksm_memory() {
        let c = KsmCounters {
            pages_shared: 10,
            pages_sharing: 90,
            zero_pages: Some(20),
            general_profit: Some(110 * 4096 - 6400),
            ..KsmCounters::default()
        };
        let s = host_sharing(&c, Some(5), None);
        assert_eq!(s.shared, Pages(120));
        assert_eq!(s.frames, Pages(10));
        assert_eq!(s.reclaimed(), Pages(110));
        assert_eq!(s.zero, Some(Pages(20)));
        assert_eq!(s.metadata, Some(Bytes(6400)));
        let old = host_sharing(&KsmCounters::default(), None, None);
        assert_eq!(
            (old.zero, old.metadata),
            (None, None),
            "missing counters stay unknown"
        );
    }

    #[test]
    fn taking_over_saves_the_original_and_restoring_writes_it_back() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path());
        let saved = tmp.path().join("state/ksm.json");
        let t = Duration::from_secs(2);
        let mut d = KsmDriver::take_over(tmp.path(), Some(&saved), t, false).unwrap();
        assert!(saved.is_file());
        assert_eq!(
            knob(tmp.path(), "use_zero_pages"),
            "1",
            "zero pages counted apart"
        );
        d.set_rate(ScanRate {
            pages_per_sec: 20_000,
        })
        .unwrap();
        assert_eq!(knob(tmp.path(), "run"), "1");
        assert_eq!(knob(tmp.path(), "pages_to_scan"), "400");
        d.restore().unwrap();
        assert_eq!(knob(tmp.path(), "run"), "0");
        assert_eq!(knob(tmp.path(), "pages_to_scan"), "100");
        assert_eq!(knob(tmp.path(), "use_zero_pages"), "0");
        assert!(!saved.exists());
    }

    #[test]
    fn a_crashed_run_s_saved_original_wins_over_what_it_left_on_the_knobs() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path());
        let saved = tmp.path().join("ksm.json");
        let t = Duration::from_secs(2);
        let mut first = KsmDriver::take_over(tmp.path(), Some(&saved), t, false).unwrap();
        first
            .set_rate(ScanRate {
                pages_per_sec: 5_000,
            })
            .unwrap();
        drop(first); // a crash: nothing restored, the saved file stays
        let mut second = KsmDriver::take_over(tmp.path(), Some(&saved), t, false).unwrap();
        assert_eq!(second.original().run, 0);
        assert_eq!(second.original().pages_to_scan, 100);
        second.restore().unwrap();
        assert_eq!(knob(tmp.path(), "run"), "0");
    }

    #[test]
    fn a_dry_run_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path());
        let saved = tmp.path().join("ksm.json");
        let mut d =
            KsmDriver::take_over(tmp.path(), Some(&saved), Duration::from_secs(2), true).unwrap();
        d.set_rate(ScanRate {
            pages_per_sec: 20_000,
        })
        .unwrap();
        assert_eq!(knob(tmp.path(), "run"), "0");
        assert!(!saved.exists());
    }

    #[test]
    fn a_kernel_without_ksm_is_refused_naming_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let err = KsmDriver::take_over(tmp.path(), None, Duration::from_secs(1), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sys/kernel/mm/ksm"), "{err}");
    }

    #[test]
    fn the_scan_since_the_last_look_is_a_difference() {
        let tmp = tempfile::tempdir().unwrap();
        fake(tmp.path());
        let mut d = KsmDriver::take_over(tmp.path(), None, Duration::from_secs(2), false).unwrap();
        std::fs::write(ksm::ksm_dir(tmp.path()).join("pages_scanned"), "1600\n").unwrap();
        assert_eq!(d.observe().unwrap().scanned, Some(600));
    }
}
