//! DAMON access sampling for the ESX-style estimator: one kdamond per tenant watches the virtual address spaces of the tenant's processes and reports, per aggregation window, the bytes accessed.
//!
//! # How
//!
//! Everything goes through the DAMON sysfs interface under a root (`/sys/kernel/mm/damon/admin`
//! live, a fake tree in tests). For a tenant, [`AccessMonitor::start`] takes a kdamond slot
//! (`kdamonds/<N>`, see below) and writes:
//!
//! - `contexts/nr_contexts` = 1, then `contexts/0/operations` = `vaddr` (after checking
//!   `contexts/0/avail_operations` lists it);
//! - `contexts/0/monitoring_attrs/intervals/{sample_us,aggr_us,update_us}` and
//!   `monitoring_attrs/nr_regions/{min,max}` from [`DamonConfig`];
//! - `contexts/0/targets/nr_targets` and `targets/<i>/pid_target`, one target per pid;
//! - one scheme, `schemes/0`: `action` = `stat` (DAMON only counts, never acts), an
//!   `access_pattern` whose `sz`, `nr_accesses` and `age` ranges cover everything (so the
//!   scheme is tried on every monitored region), `apply_interval_us` = 0 (once per aggregation
//!   window), no quotas, watermark metric `none`; `quotas/reset_interval_ms` carries memtide's
//!   owner mark (unused by a quota-less `stat` scheme; see `sysfs::OWNER_TAG`);
//! - `state` = `on`.
//!
//! [`AccessMonitor::read`] writes `update_schemes_tried_regions` to `state` — the kernel returns
//! once the kdamond has applied the scheme at the end of the current aggregation window — and
//! sums `schemes/0/tried_regions/<n>/{start,end,nr_accesses}`: `accessed` is the bytes of
//! regions whose `nr_accesses` is at least 1 (DAMON saw the region's sampled page accessed in at
//! least one sampling interval of the window), `monitored` the bytes of all regions.
//! [`AccessMonitor::set_pids`] rewrites the targets and writes `commit`.
//!
//! # Figures
//!
//! vaddr regions cover the mapped ranges of each process (the three big areas DAMON finds, gaps
//! excluded), mapped-but-never-touched memory included, so `monitored` overstates what is
//! resident; the estimator should divide `accessed` by the cgroup's usage. DAMON checks one
//! random page per region per sampling interval and assumes the region's pages behave alike,
//! so `accessed` has the granularity of DAMON's regions (bounded by `max_regions`).
//! `nr_accesses` is reset every aggregation window, so a read describes exactly the last window.
//! `age` (windows a region's access frequency has stayed about the same) is not used: DAMON
//! resets it only when `nr_accesses` changes by more than a tenth of its maximum, so a region
//! going from lightly used to idle keeps its age and `age` cannot say "idle for N windows".
//!
//! Defaults ([`DamonConfig::default`]): 5 ms sampling, 2 s aggregation (so `nr_accesses` runs
//! 0..=400 and "accessed" means touched within a 2 s window), 1 s vaddr update (mappings are
//! re-read every second, so new processes' regions appear quickly), 10..=1000 regions.
//!
//! # Sharing DAMON
//!
//! Memtide never touches a kdamond it did not create (see `slots`): it reuses its own idle
//! slots, reclaims kdamonds marked by a memtide process that no longer exists, and grows
//! `nr_kdamonds` only when every other kdamond is off and blank (writing `nr_kdamonds`
//! recreates all kdamond directories, and the kernel refuses it while any kdamond is on). A
//! running kdamond of another user makes `start` fail with [`DamonError::NoFreeKdamond`].
//!
//! DAMON's sysfs files share one kernel lock taken with `mutex_trylock`, and a `state` command
//! keeps it until the kdamond has handled it — for `update_schemes_tried_regions`, until the
//! end of the aggregation window. Meanwhile other DAMON sysfs writes and `state` reads (ours or
//! another user's) get EBUSY; writes here retry for `busy_timeout`, reads for 10 s. So a read
//! blocks for up to one aggregation interval, reads of several monitors run one after another
//! in the kernel whatever the caller's threads do, and while one runs, other DAMON users see
//! EBUSY too.

mod error;
mod slots;
mod sysfs;

pub use error::DamonError;

use memtide_model::Bytes;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the kernel puts DAMON's sysfs interface for privileged users.
pub const SYSFS_ROOT: &str = "/sys/kernel/mm/damon/admin";

/// DAMON's monitoring attributes for one tenant's kdamond.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DamonConfig {
    /// How often DAMON checks one page per region for an access (`sample_us`).
    pub sample_interval: Duration,
    /// The window over which accesses are counted and reported (`aggr_us`); a read returns at
    /// the end of the current window.
    pub aggregation_interval: Duration,
    /// How often DAMON re-reads the processes' mappings (`update_us`).
    pub update_interval: Duration,
    /// Fewest regions DAMON keeps across all targets (DAMON requires at least 3).
    pub min_regions: u32,
    /// Most regions DAMON keeps across all targets: the resolution of `accessed`.
    pub max_regions: u32,
    /// How long a write keeps retrying while the kernel answers EBUSY (another DAMON sysfs
    /// command holds the interface, for up to its kdamond's aggregation interval).
    pub busy_timeout: Duration,
}

impl Default for DamonConfig {
    fn default() -> Self {
        DamonConfig {
            sample_interval: Duration::from_millis(5),
            aggregation_interval: Duration::from_secs(2),
            update_interval: Duration::from_secs(1),
            min_regions: 10,
            max_regions: 1000,
            busy_timeout: Duration::from_secs(10),
        }
    }
}

impl DamonConfig {
    /// Checks the ranges DAMON enforces when the kdamond is turned on, so a bad setting is
    /// reported by name before any file is written.
    pub fn validate(&self) -> Result<(), DamonError> {
        let config = |field, value: String, expected| DamonError::Config {
            field,
            value,
            expected,
        };
        if self.sample_interval.is_zero() {
            return Err(config(
                "sample_interval",
                format!("{:?}", self.sample_interval),
                "above zero",
            ));
        }
        if self.aggregation_interval < self.sample_interval {
            return Err(config(
                "aggregation_interval",
                format!("{:?}", self.aggregation_interval),
                "at least sample_interval",
            ));
        }
        if self.update_interval.is_zero() {
            return Err(config(
                "update_interval",
                format!("{:?}", self.update_interval),
                "above zero",
            ));
        }
        if self.min_regions < 3 {
            return Err(config(
                "min_regions",
                self.min_regions.to_string(),
                "at least 3",
            ));
        }
        if self.max_regions < self.min_regions {
            return Err(config(
                "max_regions",
                self.max_regions.to_string(),
                "at least min_regions",
            ));
        }
        Ok(())
    }
}

/// One aggregation window of a tenant's processes, as DAMON saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessWindow {
    /// Bytes of the regions DAMON saw accessed in at least one sampling interval of the window.
    pub accessed: Bytes,
    /// Bytes of all monitored regions: the processes' mapped ranges, untouched mappings
    /// included, so more than what is resident.
    pub monitored: Bytes,
    /// How many regions DAMON reported.
    pub regions: u32,
    /// Monitored pids that no longer exist. DAMON keeps monitoring the others; their regions
    /// linger in `monitored` without accesses until `set_pids` drops them.
    pub exited: Vec<u32>,
}

/// One tenant's monitor: one kdamond monitoring the virtual address spaces of the tenant's
/// processes. Stops its kdamond when dropped (best effort; `stop` reports errors).
#[derive(Debug)]
pub struct AccessMonitor {
    root: PathBuf,
    slots: Arc<slots::RootSlots>,
    index: usize,
    busy_timeout: Duration,
    released: bool,
}

impl AccessMonitor {
    /// Starts monitoring `pids` under the DAMON sysfs root (normally [`SYSFS_ROOT`]). Reuses an
    /// idle kdamond slot of this process, reclaims one left by a dead memtide process, or grows
    /// `nr_kdamonds` when that disturbs no one else's kdamond (this process's running monitors
    /// are stopped and restarted around the growth, losing their current window).
    pub fn start(
        sysfs_root: &Path,
        pids: &[u32],
        config: &DamonConfig,
    ) -> Result<AccessMonitor, DamonError> {
        config.validate()?;
        let pids = normalize_pids(pids)?;
        availability(sysfs_root).map_err(|reason| DamonError::Unavailable {
            root: sysfs_root.to_path_buf(),
            reason,
        })?;
        let root_slots = slots::for_root(sysfs_root);
        let mut slots = root_slots.write();
        let busy = config.busy_timeout;
        let index = slots::claim(sysfs_root, &mut slots, &pid_alive, busy)?;
        if let Err(error) = slots::start_kdamond(sysfs_root, index, &pids, config) {
            let kdamond = sysfs::kdamond_dir(sysfs_root, index);
            if slots::turn_off(&kdamond, busy).is_ok() {
                let _ = clear_setup(&kdamond, busy);
                slots.free.insert(index);
                let _ = slots::shrink(sysfs_root, &mut slots, &pid_alive, busy);
            }
            return Err(error);
        }
        slots.held.insert(
            index,
            slots::Held {
                pids,
                config: config.clone(),
            },
        );
        drop(slots);
        Ok(AccessMonitor {
            root: sysfs_root.to_path_buf(),
            slots: root_slots,
            index,
            busy_timeout: busy,
            released: false,
        })
    }

    /// The kdamond directory this monitor drives (for logs).
    pub fn kdamond_dir(&self) -> PathBuf {
        sysfs::kdamond_dir(&self.root, self.index)
    }

    /// Bytes seen accessed in the latest aggregation window and the bytes of all monitored
    /// regions. Blocks until the current window ends (up to one aggregation interval).
    /// `TargetsGone` when the kdamond has stopped by itself (every monitored process exited).
    pub fn read(&mut self) -> Result<AccessWindow, DamonError> {
        let slots = self.slots.read();
        let pids = slots
            .held
            .get(&self.index)
            .map(|held| held.pids.clone())
            .unwrap_or_default();
        let kdamond = self.kdamond_dir();
        ensure_running(&kdamond, &pids)?;
        let state = sysfs::state_path(&kdamond);
        if let Err(error) =
            sysfs::write_value(&state, sysfs::UPDATE_TRIED_REGIONS, self.busy_timeout)
        {
            ensure_running(&kdamond, &pids)?;
            return Err(error);
        }
        let regions = sysfs::read_tried_regions(&kdamond)?;
        if regions.is_empty() {
            // The kernel cancels the walk, leaving no regions, when the kdamond stops meanwhile.
            ensure_running(&kdamond, &pids)?;
        }
        drop(slots);
        let exited = pids.into_iter().filter(|&pid| !pid_alive(pid)).collect();
        Ok(summarize(&regions, exited))
    }

    /// Changes the monitored processes (the tenant's pid set changed): writes the new targets
    /// and commits them to the running kdamond, or turns it back on if it had stopped.
    pub fn set_pids(&mut self, pids: &[u32]) -> Result<(), DamonError> {
        let pids = normalize_pids(pids)?;
        let mut slots = self.slots.write();
        let kdamond = self.kdamond_dir();
        let state = sysfs::state_path(&kdamond);
        let busy = self.busy_timeout;
        sysfs::write_targets(&kdamond, &pids, busy)?;
        let turn_on = || {
            sysfs::write_value(&state, "on", busy)
                .map_err(|e| slots::targets_gone_or(e, &pids, &pid_alive))
        };
        if sysfs::is_on(&kdamond)? {
            if let Err(error) = sysfs::write_value(&state, "commit", busy) {
                let error = slots::targets_gone_or(error, &pids, &pid_alive);
                if error.is_targets_gone() {
                    return Err(error);
                }
                // A kernel that cannot change targets online: restart with the new ones.
                slots::turn_off(&kdamond, busy)?;
                turn_on()?;
            }
        } else {
            turn_on()?;
        }
        if let Some(held) = slots.held.get_mut(&self.index) {
            held.pids = pids;
        }
        Ok(())
    }

    /// Turns the kdamond off and releases its slot (shrinking `nr_kdamonds` back when nothing
    /// of this process runs and only idle slots of its own would go).
    pub fn stop(mut self) -> Result<(), DamonError> {
        self.release()
    }

    fn release(&mut self) -> Result<(), DamonError> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        let mut slots = self.slots.write();
        slots.held.remove(&self.index);
        let kdamond = self.kdamond_dir();
        let busy = self.busy_timeout;
        slots::turn_off(&kdamond, busy)?;
        // Dropping the setup drops the owner mark too: an idle slot looks blank to others.
        let _ = clear_setup(&kdamond, busy);
        slots.free.insert(self.index);
        let _ = slots::shrink(&self.root, &mut slots, &pid_alive, busy);
        Ok(())
    }
}

impl Drop for AccessMonitor {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// Whether DAMON can monitor processes under `sysfs_root`: the sysfs interface is there and
/// `avail_operations` lists `vaddr`.
pub fn available(sysfs_root: &Path) -> bool {
    availability(sysfs_root).is_ok()
}

/// Like [`available`], with the reason when not. With no kdamond context to ask yet, the
/// operations are checked when a monitor starts.
pub fn availability(sysfs_root: &Path) -> Result<(), String> {
    let nr_path = sysfs::nr_kdamonds_path(sysfs_root);
    if !nr_path.is_file() {
        return Err(format!(
            "{} is missing: kernel without CONFIG_DAMON_SYSFS, or sysfs not mounted",
            nr_path.display()
        ));
    }
    let count = sysfs::read_number(&nr_path).map_err(|e| e.to_string())?;
    for index in 0..count as usize {
        let kdamond = sysfs::kdamond_dir(sysfs_root, index);
        if let Ok(Some(ops)) = sysfs::avail_operations(&kdamond) {
            if ops.iter().any(|op| op == "vaddr") {
                return Ok(());
            }
            return Err(format!(
                "{} lists {:?}, without \"vaddr\" (kernel built without CONFIG_DAMON_VADDR)",
                sysfs::context_dir(&kdamond)
                    .join("avail_operations")
                    .display(),
                ops.join(" ")
            ));
        }
    }
    Ok(())
}

/// `TargetsGone` when the kdamond is off: DAMON stops a kdamond once all its targets are gone.
fn ensure_running(kdamond: &Path, pids: &[u32]) -> Result<(), DamonError> {
    if sysfs::is_on(kdamond)? {
        return Ok(());
    }
    let gone: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|&pid| !pid_alive(pid))
        .collect();
    Err(DamonError::TargetsGone {
        path: sysfs::state_path(kdamond),
        detail: format!(
            "the kdamond is off: DAMON stops once every monitored process has exited (gone: {gone:?} of {pids:?})"
        ),
        gone,
    })
}

/// Drops the context of an idle slot (and with it the owner mark).
fn clear_setup(kdamond: &Path, busy: Duration) -> Result<(), DamonError> {
    sysfs::write_value(&kdamond.join("contexts").join("nr_contexts"), "0", busy)
}

fn summarize(regions: &[sysfs::TriedRegion], exited: Vec<u32>) -> AccessWindow {
    let accessed = regions
        .iter()
        .filter(|region| region.nr_accesses > 0)
        .map(sysfs::TriedRegion::size_bytes)
        .sum();
    let monitored = regions.iter().map(sysfs::TriedRegion::size_bytes).sum();
    AccessWindow {
        accessed: Bytes(accessed),
        monitored: Bytes(monitored),
        regions: u32::try_from(regions.len()).unwrap_or(u32::MAX),
        exited,
    }
}

/// Sorted, deduplicated pids; empty or 0 is an error.
fn normalize_pids(pids: &[u32]) -> Result<Vec<u32>, DamonError> {
    if pids.is_empty() {
        return Err(DamonError::NoPids);
    }
    if pids.contains(&0) {
        return Err(DamonError::Config {
            field: "pids",
            value: format!("{pids:?}"),
            expected: "process ids above 0",
        });
    }
    let mut pids = pids.to_vec();
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// Whether a process exists (`kill(pid, 0)` succeeds or is refused for permission).
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;
    use std::time::Instant;
    use tempfile::TempDir;

    /// Kdamond directories every fake tree has, whatever `nr_kdamonds` says: writing to a fake
    /// `nr_kdamonds` creates nothing, so the directories a kernel would create are there
    /// beforehand.
    const FAKE_SLOTS: usize = 4;

    fn put(root: &Path, relative: &str, value: &str) {
        let path = root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, value).unwrap();
    }

    fn get(root: &Path, relative: &str) -> String {
        fs::read_to_string(root.join(relative))
            .unwrap()
            .trim()
            .to_string()
    }

    /// A fake DAMON sysfs root with `nr_kdamonds` kdamonds, all off and blank.
    fn fake_root(nr_kdamonds: usize) -> TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        put(root, "kdamonds/nr_kdamonds", &nr_kdamonds.to_string());
        for index in 0..FAKE_SLOTS {
            let kdamond = format!("kdamonds/{index}");
            put(root, &format!("{kdamond}/state"), "off");
            put(root, &format!("{kdamond}/contexts/nr_contexts"), "0");
            let context = format!("{kdamond}/contexts/0");
            put(
                root,
                &format!("{context}/avail_operations"),
                "vaddr\nfvaddr\npaddr\n",
            );
            for dir in [
                "monitoring_attrs/intervals",
                "monitoring_attrs/nr_regions",
                "targets/0",
                "targets/1",
                "targets/2",
                "schemes/0/access_pattern/sz",
                "schemes/0/access_pattern/nr_accesses",
                "schemes/0/access_pattern/age",
                "schemes/0/quotas",
                "schemes/0/watermarks",
                "schemes/0/tried_regions",
            ] {
                fs::create_dir_all(root.join(&context).join(dir)).unwrap();
            }
            put(
                root,
                &format!("{context}/schemes/0/tried_regions/total_bytes"),
                "0",
            );
        }
        dir
    }

    /// Makes kdamond `index` another user's: set up, and `on` or not.
    fn foreign_kdamond(root: &Path, index: usize, on: bool) {
        put(root, &format!("kdamonds/{index}/contexts/nr_contexts"), "1");
        put(
            root,
            &format!("kdamonds/{index}/state"),
            if on { "on" } else { "off" },
        );
    }

    /// Makes kdamond `index` look set up by memtide process `owner`.
    fn memtide_kdamond(root: &Path, index: usize, owner: u32, on: bool) {
        foreign_kdamond(root, index, on);
        let context = format!("kdamonds/{index}/contexts/0");
        put(root, &format!("{context}/schemes/nr_schemes"), "1");
        put(
            root,
            &format!("{context}/schemes/0/quotas/reset_interval_ms"),
            &sysfs::owner_mark(owner).to_string(),
        );
    }

    /// What the kernel does after a state command: the kdamond stays on. (A fake `state` file
    /// keeps the last command written.)
    fn kernel_keeps_running(root: &Path, index: usize) {
        put(root, &format!("kdamonds/{index}/state"), "on");
    }

    fn tried_region(root: &Path, index: usize, n: usize, start: u64, end: u64, nr_accesses: u64) {
        let dir = format!("kdamonds/{index}/contexts/0/schemes/0/tried_regions/{n}");
        put(root, &format!("{dir}/start"), &start.to_string());
        put(root, &format!("{dir}/end"), &end.to_string());
        put(
            root,
            &format!("{dir}/nr_accesses"),
            &nr_accesses.to_string(),
        );
        put(root, &format!("{dir}/age"), "3");
    }

    fn config() -> DamonConfig {
        DamonConfig {
            busy_timeout: Duration::from_millis(100),
            ..DamonConfig::default()
        }
    }

    fn me() -> u32 {
        std::process::id()
    }

    /// The pid of a child that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn start_writes_a_vaddr_context_with_one_stat_scheme_over_everything() {
        let dir = fake_root(0);
        let root = dir.path();
        let monitor = AccessMonitor::start(root, &[me(), 1, me()], &config()).unwrap();
        assert_eq!(monitor.kdamond_dir(), root.join("kdamonds/0"));
        let context = "kdamonds/0/contexts/0";
        let expected = [
            ("kdamonds/nr_kdamonds", "1".to_string()),
            ("kdamonds/0/contexts/nr_contexts", "1".to_string()),
            ("kdamonds/0/state", "on".to_string()),
            (&format!("{context}/operations"), "vaddr".to_string()),
            (
                &format!("{context}/monitoring_attrs/intervals/sample_us"),
                "5000".to_string(),
            ),
            (
                &format!("{context}/monitoring_attrs/intervals/aggr_us"),
                "2000000".to_string(),
            ),
            (
                &format!("{context}/monitoring_attrs/intervals/update_us"),
                "1000000".to_string(),
            ),
            (
                &format!("{context}/monitoring_attrs/nr_regions/min"),
                "10".to_string(),
            ),
            (
                &format!("{context}/monitoring_attrs/nr_regions/max"),
                "1000".to_string(),
            ),
            (&format!("{context}/targets/nr_targets"), "2".to_string()),
            (&format!("{context}/targets/0/pid_target"), "1".to_string()),
            (&format!("{context}/targets/1/pid_target"), me().to_string()),
            (&format!("{context}/schemes/nr_schemes"), "1".to_string()),
            (&format!("{context}/schemes/0/action"), "stat".to_string()),
            (
                &format!("{context}/schemes/0/access_pattern/sz/min"),
                "0".to_string(),
            ),
            (
                &format!("{context}/schemes/0/access_pattern/sz/max"),
                u64::MAX.to_string(),
            ),
            (
                &format!("{context}/schemes/0/access_pattern/nr_accesses/min"),
                "0".to_string(),
            ),
            (
                &format!("{context}/schemes/0/access_pattern/nr_accesses/max"),
                u32::MAX.to_string(),
            ),
            (
                &format!("{context}/schemes/0/access_pattern/age/max"),
                u32::MAX.to_string(),
            ),
            (
                &format!("{context}/schemes/0/apply_interval_us"),
                "0".to_string(),
            ),
            (&format!("{context}/schemes/0/quotas/ms"), "0".to_string()),
            (
                &format!("{context}/schemes/0/quotas/bytes"),
                "0".to_string(),
            ),
            (
                &format!("{context}/schemes/0/quotas/reset_interval_ms"),
                sysfs::owner_mark(me()).to_string(),
            ),
            (
                &format!("{context}/schemes/0/watermarks/metric"),
                "none".to_string(),
            ),
        ];
        for (file, value) in expected {
            assert_eq!(get(root, file), value, "{file}");
        }
        assert_eq!(sysfs::owner(&root.join("kdamonds/0")).unwrap(), Some(me()));
        drop(monitor);
    }

    #[test]
    fn read_counts_regions_accessed_in_the_window_and_all_monitored_bytes() {
        let dir = fake_root(0);
        let root = dir.path();
        let mut monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        tried_region(root, 0, 0, 0x1000, 0x5000, 3);
        tried_region(root, 0, 1, 0x5000, 0x9000, 0);
        tried_region(root, 0, 2, 0x10_0000, 0x20_0000, 400);
        let window = monitor.read().unwrap();
        assert_eq!(
            get(root, "kdamonds/0/state"),
            "update_schemes_tried_regions"
        );
        assert_eq!(
            window,
            AccessWindow {
                accessed: Bytes(0x4000 + 0x10_0000),
                monitored: Bytes(0x4000 + 0x4000 + 0x10_0000),
                regions: 3,
                exited: vec![],
            }
        );
        kernel_keeps_running(root, 0);
        monitor.stop().unwrap();
    }

    #[test]
    fn read_reports_targets_gone_when_the_kdamond_turned_itself_off() {
        let dir = fake_root(0);
        let root = dir.path();
        let mut monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        put(root, "kdamonds/0/state", "off");
        let error = monitor.read().unwrap_err();
        assert!(error.is_targets_gone(), "{error}");
        assert!(error.to_string().contains("kdamonds/0/state"), "{error}");
        // Nothing was asked of a kdamond that is off.
        assert_eq!(get(root, "kdamonds/0/state"), "off");
        monitor.stop().unwrap();
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn read_lists_monitored_pids_that_exited() {
        let dir = fake_root(0);
        let root = dir.path();
        let gone = dead_pid();
        let mut monitor = AccessMonitor::start(root, &[me(), gone], &config()).unwrap();
        tried_region(root, 0, 0, 0, 0x1000, 1);
        let window = monitor.read().unwrap();
        assert_eq!(window.exited, vec![gone]);
        assert_eq!(window.accessed, Bytes(0x1000));
        kernel_keeps_running(root, 0);
    }

    #[test]
    fn a_tried_region_ending_before_it_starts_is_a_parse_error_naming_the_file() {
        let dir = fake_root(0);
        let root = dir.path();
        let mut monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        tried_region(root, 0, 0, 0x9000, 0x1000, 1);
        let message = monitor.read().unwrap_err().to_string();
        assert!(message.contains("tried_regions/0/end"), "{message}");
        assert!(message.contains("4096"), "{message}");
        kernel_keeps_running(root, 0);
    }

    #[test]
    fn stop_turns_the_kdamond_off_drops_its_setup_and_restores_nr_kdamonds() {
        let dir = fake_root(0);
        let root = dir.path();
        let monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
        monitor.stop().unwrap();
        assert_eq!(get(root, "kdamonds/0/state"), "off");
        assert_eq!(get(root, "kdamonds/0/contexts/nr_contexts"), "0");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn dropping_a_monitor_turns_its_kdamond_off() {
        let dir = fake_root(0);
        let root = dir.path();
        drop(AccessMonitor::start(root, &[me()], &config()).unwrap());
        assert_eq!(get(root, "kdamonds/0/state"), "off");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn a_second_monitor_grows_the_slots_and_restarts_the_first_with_its_setup() {
        let dir = fake_root(0);
        let root = dir.path();
        let first = AccessMonitor::start(root, &[me()], &config()).unwrap();
        // Growing recreates every kdamond directory; the kernel would leave slot 0 blank.
        put(root, "kdamonds/0/contexts/0/targets/0/pid_target", "0");
        let second = AccessMonitor::start(root, &[1], &config()).unwrap();
        assert_eq!(second.kdamond_dir(), root.join("kdamonds/1"));
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "2");
        assert_eq!(get(root, "kdamonds/0/state"), "on");
        assert_eq!(
            get(root, "kdamonds/0/contexts/0/targets/0/pid_target"),
            me().to_string()
        );
        assert_eq!(get(root, "kdamonds/1/state"), "on");
        assert_eq!(get(root, "kdamonds/1/contexts/0/targets/0/pid_target"), "1");
        // The first still runs: the count stays until both are gone.
        second.stop().unwrap();
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "2");
        first.stop().unwrap();
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn a_released_slot_is_reused_before_growing() {
        let dir = fake_root(0);
        let root = dir.path();
        let first = AccessMonitor::start(root, &[me()], &config()).unwrap();
        let second = AccessMonitor::start(root, &[me()], &config()).unwrap();
        first.stop().unwrap();
        assert_eq!(get(root, "kdamonds/0/state"), "off");
        let third = AccessMonitor::start(root, &[me()], &config()).unwrap();
        assert_eq!(third.kdamond_dir(), root.join("kdamonds/0"));
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "2");
        drop(second);
        drop(third);
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn a_running_kdamond_of_another_user_blocks_growth_and_is_left_alone() {
        let dir = fake_root(1);
        let root = dir.path();
        foreign_kdamond(root, 0, true);
        let error = AccessMonitor::start(root, &[me()], &config()).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, DamonError::NoFreeKdamond { .. }),
            "{message}"
        );
        assert!(message.contains("kdamonds/0 is on"), "{message}");
        assert!(message.contains("nr_kdamonds"), "{message}");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
        assert_eq!(get(root, "kdamonds/0/state"), "on");
        assert!(!root.join("kdamonds/0/contexts/0/operations").exists());
    }

    #[test]
    fn an_idle_kdamond_set_up_by_another_user_blocks_growth() {
        let dir = fake_root(1);
        let root = dir.path();
        foreign_kdamond(root, 0, false);
        let message = AccessMonitor::start(root, &[me()], &config())
            .unwrap_err()
            .to_string();
        assert!(message.contains("erase its setup"), "{message}");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
    }

    #[test]
    fn a_blank_kdamond_of_another_user_is_never_used_only_recreated_blank() {
        let dir = fake_root(1);
        let root = dir.path();
        let monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        assert_eq!(monitor.kdamond_dir(), root.join("kdamonds/1"));
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "2");
        assert_eq!(get(root, "kdamonds/0/state"), "off");
        assert_eq!(get(root, "kdamonds/0/contexts/nr_contexts"), "0");
        monitor.stop().unwrap();
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
    }

    #[test]
    fn a_kdamond_left_on_by_a_dead_memtide_is_turned_off_and_reused() {
        let dir = fake_root(1);
        let root = dir.path();
        memtide_kdamond(root, 0, dead_pid(), true);
        let monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        assert_eq!(monitor.kdamond_dir(), root.join("kdamonds/0"));
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
        assert_eq!(get(root, "kdamonds/0/state"), "on");
        assert_eq!(sysfs::owner(&root.join("kdamonds/0")).unwrap(), Some(me()));
        monitor.stop().unwrap();
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn a_kdamond_of_a_live_memtide_process_is_left_alone() {
        let dir = fake_root(1);
        let root = dir.path();
        memtide_kdamond(root, 0, 1, false);
        let message = AccessMonitor::start(root, &[me()], &config())
            .unwrap_err()
            .to_string();
        assert!(message.contains("memtide process 1"), "{message}");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
    }

    #[test]
    fn set_pids_commits_new_targets_to_the_running_kdamond() {
        let dir = fake_root(0);
        let root = dir.path();
        let mut monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        monitor.set_pids(&[me(), 1]).unwrap();
        let targets = "kdamonds/0/contexts/0/targets";
        assert_eq!(get(root, &format!("{targets}/nr_targets")), "2");
        assert_eq!(get(root, &format!("{targets}/0/pid_target")), "1");
        assert_eq!(
            get(root, &format!("{targets}/1/pid_target")),
            me().to_string()
        );
        assert_eq!(get(root, "kdamonds/0/state"), "commit");
        kernel_keeps_running(root, 0);
    }

    #[test]
    fn set_pids_turns_a_kdamond_that_stopped_by_itself_back_on() {
        let dir = fake_root(0);
        let root = dir.path();
        let mut monitor = AccessMonitor::start(root, &[me()], &config()).unwrap();
        put(root, "kdamonds/0/state", "off");
        monitor.set_pids(&[1]).unwrap();
        assert_eq!(get(root, "kdamonds/0/state"), "on");
        assert_eq!(get(root, "kdamonds/0/contexts/0/targets/0/pid_target"), "1");
    }

    #[test]
    fn a_refused_on_or_commit_while_a_pid_is_gone_is_targets_gone() {
        let refused = || DamonError::Write {
            path: PathBuf::from("/d/kdamonds/0/state"),
            value: "commit".into(),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        };
        let error = slots::targets_gone_or(refused(), &[7, 8], &|pid| pid != 8);
        match &error {
            DamonError::TargetsGone { path, gone, detail } => {
                assert_eq!(path, Path::new("/d/kdamonds/0/state"));
                assert_eq!(gone, &vec![8]);
                assert!(detail.contains("\"commit\""), "{detail}");
            }
            other => panic!("expected TargetsGone, got {other}"),
        }
        let error = slots::targets_gone_or(refused(), &[7, 8], &|_| true);
        assert!(matches!(error, DamonError::Write { .. }), "{error}");
    }

    #[test]
    fn start_refuses_a_kernel_without_vaddr_and_names_the_file() {
        let dir = fake_root(1);
        let root = dir.path();
        put(root, "kdamonds/0/contexts/0/avail_operations", "paddr\n");
        let reason = availability(root).unwrap_err();
        assert!(reason.contains("avail_operations"), "{reason}");
        assert!(reason.contains("vaddr"), "{reason}");
        assert!(!available(root));
        let error = AccessMonitor::start(root, &[me()], &config()).unwrap_err();
        assert!(matches!(error, DamonError::Unavailable { .. }), "{error}");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "1");
    }

    #[test]
    fn a_missing_sysfs_tree_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let reason = availability(dir.path()).unwrap_err();
        assert!(reason.contains("nr_kdamonds"), "{reason}");
        let error = AccessMonitor::start(dir.path(), &[me()], &config()).unwrap_err();
        assert!(matches!(error, DamonError::Unavailable { .. }), "{error}");
        assert!(available(fake_root(0).path()));
    }

    #[test]
    fn pids_must_be_given_and_above_zero() {
        let dir = fake_root(0);
        let root = dir.path();
        assert!(matches!(
            AccessMonitor::start(root, &[], &config()),
            Err(DamonError::NoPids)
        ));
        assert!(matches!(
            AccessMonitor::start(root, &[0, 5], &config()),
            Err(DamonError::Config { field: "pids", .. })
        ));
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), "0");
    }

    #[test]
    fn config_outside_damons_ranges_is_refused_by_field() {
        let cases = [
            (
                DamonConfig {
                    aggregation_interval: Duration::from_millis(1),
                    ..DamonConfig::default()
                },
                "aggregation_interval",
            ),
            (
                DamonConfig {
                    sample_interval: Duration::ZERO,
                    ..DamonConfig::default()
                },
                "sample_interval",
            ),
            (
                DamonConfig {
                    min_regions: 2,
                    ..DamonConfig::default()
                },
                "min_regions",
            ),
            (
                DamonConfig {
                    max_regions: 5,
                    ..DamonConfig::default()
                },
                "max_regions",
            ),
        ];
        for (config, field) in cases {
            match config.validate() {
                Err(DamonError::Config { field: got, .. }) => assert_eq!(got, field),
                other => panic!("{field}: expected a Config error, got {other:?}"),
            }
        }
        DamonConfig::default().validate().unwrap();
    }

    /// Reads the live DAMON tree, writing nothing, and prints how memtide sees each kdamond.
    #[test]
    fn live_survey_only_reads() {
        let root = Path::new(SYSFS_ROOT);
        if unsafe { libc::geteuid() } != 0 || !sysfs::nr_kdamonds_path(root).is_file() {
            eprintln!("live DAMON survey skipped: needs root and {SYSFS_ROOT}");
            return;
        }
        let view = slots::survey(root, &slots::Slots::default(), &pid_alive).unwrap();
        eprintln!(
            "live DAMON kdamonds: {view:?}; availability: {:?}",
            availability(root)
        );
    }

    /// Monitors this test process: a thread keeps writing a hot 64 MiB buffer while a cold
    /// 64 MiB buffer, filled once, stays untouched.
    #[test]
    fn live_hot_memory_counts_as_accessed_and_cold_memory_does_not() {
        const REGION_BYTES: usize = 64 << 20;
        let root = Path::new(SYSFS_ROOT);
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("live DAMON test skipped: not root");
            return;
        }
        if let Err(reason) = availability(root) {
            eprintln!("live DAMON test skipped: {reason}");
            return;
        }
        let nr_before = get(root, "kdamonds/nr_kdamonds");
        let cold = vec![1u8; REGION_BYTES];
        std::hint::black_box(&cold);
        let stop = Arc::new(AtomicBool::new(false));
        let hot_thread = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut hot = vec![0u8; REGION_BYTES];
                while !stop.load(Ordering::Relaxed) {
                    for page in hot.chunks_mut(4096) {
                        page[0] = page[0].wrapping_add(1);
                    }
                    std::hint::black_box(&mut hot);
                }
            })
        };
        let config = DamonConfig {
            aggregation_interval: Duration::from_secs(1),
            ..DamonConfig::default()
        };
        let mut monitor = match AccessMonitor::start(root, &[me()], &config) {
            Ok(monitor) => monitor,
            Err(error @ DamonError::NoFreeKdamond { .. }) => {
                stop.store(true, Ordering::Relaxed);
                hot_thread.join().unwrap();
                eprintln!("live DAMON test skipped: {error}");
                return;
            }
            Err(error) => panic!("{error}"),
        };
        let kdamond = monitor.kdamond_dir();
        let mut windows = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(12);
        while Instant::now() < deadline {
            let window = monitor.read().unwrap();
            eprintln!(
                "window: accessed {:.1} MiB of {:.1} MiB monitored in {} regions",
                window.accessed.as_mib_f64(),
                window.monitored.as_mib_f64(),
                window.regions
            );
            windows.push(window);
        }
        stop.store(true, Ordering::Relaxed);
        hot_thread.join().unwrap();
        monitor.stop().unwrap();
        assert_eq!(get(&kdamond, "state"), "off");
        assert_eq!(get(root, "kdamonds/nr_kdamonds"), nr_before);

        let settled = &windows[windows.len().saturating_sub(3)..];
        let hot = REGION_BYTES as u64;
        assert!(
            settled.iter().any(|w| w.accessed.0 >= hot / 2),
            "hot region not seen: {settled:?}"
        );
        assert!(
            settled.iter().all(|w| w.accessed.0 < hot + hot / 2),
            "cold region counted as accessed: {settled:?}"
        );
        drop(cold);
    }
}
