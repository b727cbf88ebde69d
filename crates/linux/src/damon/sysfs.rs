//! The DAMON sysfs tree: paths under a kdamond, reads and EBUSY-retrying writes, memtide's monitoring setup (vaddr targets, one `stat` scheme carrying the owner mark) and the scheme's tried regions.

use super::error::DamonError;
use super::DamonConfig;
use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// High 32 bits of `schemes/0/quotas/reset_interval_ms` on a kdamond memtide set up ("mtid");
/// the low 32 bits hold the owning process id. A `stat` scheme without a time or size quota
/// never uses the reset interval, so the mark changes nothing in what DAMON does, and lets a
/// later memtide process recognise (and reclaim) kdamonds left on by one that died.
pub(super) const OWNER_TAG: u64 = 0x6d74_6964;

/// The kdamond state command that refreshes every scheme's `tried_regions` directory. It returns
/// once the kdamond has applied its schemes once more, i.e. at the end of the current
/// aggregation window.
pub(super) const UPDATE_TRIED_REGIONS: &str = "update_schemes_tried_regions";

const BUSY_FIRST_PAUSE: Duration = Duration::from_millis(5);
const BUSY_MAX_PAUSE: Duration = Duration::from_millis(100);

pub(super) fn nr_kdamonds_path(root: &Path) -> PathBuf {
    root.join("kdamonds").join("nr_kdamonds")
}

pub(super) fn kdamond_dir(root: &Path, index: usize) -> PathBuf {
    root.join("kdamonds").join(index.to_string())
}

pub(super) fn state_path(kdamond: &Path) -> PathBuf {
    kdamond.join("state")
}

pub(super) fn context_dir(kdamond: &Path) -> PathBuf {
    kdamond.join("contexts").join("0")
}

pub(super) fn scheme_dir(kdamond: &Path) -> PathBuf {
    context_dir(kdamond).join("schemes").join("0")
}

/// How long a read keeps retrying while the kernel answers EBUSY (`state` takes DAMON's global
/// sysfs lock with `mutex_trylock` on read too).
pub(super) const READ_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `op` until it succeeds, fails other than with EBUSY, or `busy_timeout` has passed;
/// `Err(None)` means still EBUSY at the time limit.
fn retry_busy<T>(
    busy_timeout: Duration,
    mut op: impl FnMut() -> io::Result<T>,
) -> Result<T, Option<io::Error>> {
    let start = Instant::now();
    let mut pause = BUSY_FIRST_PAUSE;
    loop {
        match op() {
            Ok(value) => return Ok(value),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                if start.elapsed() >= busy_timeout {
                    return Err(None);
                }
                thread::sleep(pause);
                pause = (pause * 2).min(BUSY_MAX_PAUSE);
            }
            Err(e) => return Err(Some(e)),
        }
    }
}

/// Reads a file that a kdamond only has once configured (or that a fake tree may lack): a
/// missing file is `None`. The trailing newline is trimmed.
pub(super) fn read_optional_value(path: &Path) -> Result<Option<String>, DamonError> {
    match retry_busy(READ_BUSY_TIMEOUT, || std::fs::read_to_string(path)) {
        Ok(text) => Ok(Some(text.trim().to_string())),
        Err(Some(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DamonError::Read {
            path: path.to_path_buf(),
            source: source.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EBUSY)),
        }),
    }
}

/// Reads a whole file and trims the trailing newline.
pub(super) fn read_value(path: &Path) -> Result<String, DamonError> {
    read_optional_value(path)?.ok_or_else(|| DamonError::Read {
        path: path.to_path_buf(),
        source: io::Error::from(io::ErrorKind::NotFound),
    })
}

pub(super) fn parse_number(path: &Path, text: &str) -> Result<u64, DamonError> {
    text.parse().map_err(|_| DamonError::Parse {
        path: path.to_path_buf(),
        value: text.to_string(),
        expected: "a decimal number",
    })
}

pub(super) fn read_number(path: &Path) -> Result<u64, DamonError> {
    parse_number(path, &read_value(path)?)
}

/// Writes `value` in one write, retrying while the kernel answers EBUSY (DAMON's sysfs files
/// take one global lock with `mutex_trylock`, and a `state` command holds it until the kdamond
/// has handled it — up to an aggregation interval) for at most `busy_timeout`.
pub(super) fn write_value(
    path: &Path,
    value: &str,
    busy_timeout: Duration,
) -> Result<(), DamonError> {
    retry_busy(busy_timeout, || std::fs::write(path, value)).map_err(|source| match source {
        Some(source) => DamonError::Write {
            path: path.to_path_buf(),
            value: value.to_string(),
            source,
        },
        None => DamonError::Busy {
            path: path.to_path_buf(),
            value: value.to_string(),
            after: busy_timeout,
        },
    })
}

/// Whether the kdamond is running: its `state` file reads `on` or `off`.
pub(super) fn is_on(kdamond: &Path) -> Result<bool, DamonError> {
    let path = state_path(kdamond);
    let value = read_value(&path)?;
    match value.as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(DamonError::Parse {
            path,
            value,
            expected: "\"on\" or \"off\"",
        }),
    }
}

/// The kdamond's `contexts/nr_contexts` (0 when the file is absent).
pub(super) fn nr_contexts(kdamond: &Path) -> Result<u64, DamonError> {
    let path = kdamond.join("contexts").join("nr_contexts");
    match read_optional_value(&path)? {
        Some(text) => parse_number(&path, &text),
        None => Ok(0),
    }
}

/// The owner mark memtide writes into its scheme, built from a process id.
pub(super) fn owner_mark(pid: u32) -> u64 {
    (OWNER_TAG << 32) | u64::from(pid)
}

/// The process id in a kdamond's owner mark, or `None` if the kdamond carries none.
pub(super) fn owner(kdamond: &Path) -> Result<Option<u32>, DamonError> {
    if nr_contexts(kdamond)? == 0 {
        return Ok(None);
    }
    let nr_schemes_path = context_dir(kdamond).join("schemes").join("nr_schemes");
    match read_optional_value(&nr_schemes_path)? {
        Some(text) if parse_number(&nr_schemes_path, &text)? >= 1 => {}
        _ => return Ok(None),
    }
    let path = scheme_dir(kdamond).join("quotas").join("reset_interval_ms");
    let Some(text) = read_optional_value(&path)? else {
        return Ok(None);
    };
    let mark = parse_number(&path, &text)?;
    Ok((mark >> 32 == OWNER_TAG).then_some((mark & 0xffff_ffff) as u32))
}

/// The operations sets the kernel offers, from the context's `avail_operations` file (one per
/// line), or `None` if the kdamond has no context yet.
pub(super) fn avail_operations(kdamond: &Path) -> Result<Option<Vec<String>>, DamonError> {
    let path = context_dir(kdamond).join("avail_operations");
    Ok(read_optional_value(&path)?
        .map(|text| text.split_whitespace().map(str::to_string).collect()))
}

/// Writes memtide's whole setup into an off kdamond: one context with the vaddr operations,
/// the monitoring attributes, one target per pid, and one `stat` scheme whose access pattern
/// matches every region (so its tried regions are all monitored regions), carrying the owner
/// mark. Writing `nr_contexts` first recreates the context with kernel defaults, so nothing a
/// previous user left behind survives.
pub(super) fn write_setup(
    root: &Path,
    kdamond: &Path,
    pids: &[u32],
    config: &DamonConfig,
    owner_pid: u32,
) -> Result<(), DamonError> {
    let busy = config.busy_timeout;
    write_value(&kdamond.join("contexts").join("nr_contexts"), "1", busy)?;
    let context = context_dir(kdamond);
    if let Some(ops) = avail_operations(kdamond)? {
        if !ops.iter().any(|op| op == "vaddr") {
            return Err(DamonError::Unavailable {
                root: root.to_path_buf(),
                reason: format!(
                    "{} lists {:?}, without \"vaddr\" (kernel built without CONFIG_DAMON_VADDR)",
                    context.join("avail_operations").display(),
                    ops.join(" ")
                ),
            });
        }
    }
    write_value(&context.join("operations"), "vaddr", busy)?;

    let attrs = context.join("monitoring_attrs");
    let intervals = attrs.join("intervals");
    write_value(
        &intervals.join("sample_us"),
        &micros(config.sample_interval),
        busy,
    )?;
    write_value(
        &intervals.join("aggr_us"),
        &micros(config.aggregation_interval),
        busy,
    )?;
    write_value(
        &intervals.join("update_us"),
        &micros(config.update_interval),
        busy,
    )?;
    let nr_regions = attrs.join("nr_regions");
    write_value(
        &nr_regions.join("min"),
        &config.min_regions.to_string(),
        busy,
    )?;
    write_value(
        &nr_regions.join("max"),
        &config.max_regions.to_string(),
        busy,
    )?;

    write_targets(kdamond, pids, busy)?;

    write_value(&context.join("schemes").join("nr_schemes"), "1", busy)?;
    let scheme = scheme_dir(kdamond);
    write_value(&scheme.join("action"), "stat", busy)?;
    let pattern = scheme.join("access_pattern");
    for (range, max) in [
        ("sz", u64::MAX),
        ("nr_accesses", u64::from(u32::MAX)),
        ("age", u64::from(u32::MAX)),
    ] {
        write_value(&pattern.join(range).join("min"), "0", busy)?;
        write_value(&pattern.join(range).join("max"), &max.to_string(), busy)?;
    }
    // 0: apply (and record tried regions) once per aggregation interval.
    write_value(&scheme.join("apply_interval_us"), "0", busy)?;
    let quotas = scheme.join("quotas");
    write_value(&quotas.join("ms"), "0", busy)?;
    write_value(&quotas.join("bytes"), "0", busy)?;
    write_value(
        &quotas.join("reset_interval_ms"),
        &owner_mark(owner_pid).to_string(),
        busy,
    )?;
    write_value(&scheme.join("watermarks").join("metric"), "none", busy)?;
    Ok(())
}

/// Writes one vaddr target per pid (`nr_targets` recreates the target directories).
pub(super) fn write_targets(
    kdamond: &Path,
    pids: &[u32],
    busy_timeout: Duration,
) -> Result<(), DamonError> {
    let targets = context_dir(kdamond).join("targets");
    write_value(
        &targets.join("nr_targets"),
        &pids.len().to_string(),
        busy_timeout,
    )?;
    for (i, pid) in pids.iter().enumerate() {
        write_value(
            &targets.join(i.to_string()).join("pid_target"),
            &pid.to_string(),
            busy_timeout,
        )?;
    }
    Ok(())
}

fn micros(duration: Duration) -> String {
    duration.as_micros().to_string()
}

/// One region the scheme was tried on in the last aggregation window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TriedRegion {
    pub(super) start: u64,
    pub(super) end: u64,
    /// Sampling intervals of the window in which the region's sampled page was accessed.
    pub(super) nr_accesses: u64,
    /// Aggregation windows the region's access frequency has stayed about the same.
    pub(super) age: u64,
}

impl TriedRegion {
    pub(super) fn size_bytes(&self) -> u64 {
        self.end - self.start
    }
}

/// Parses `schemes/0/tried_regions/<n>/{start,end,nr_accesses,age}` (the directory also holds
/// `total_bytes`, which is not a region).
pub(super) fn read_tried_regions(kdamond: &Path) -> Result<Vec<TriedRegion>, DamonError> {
    let dir = scheme_dir(kdamond).join("tried_regions");
    let entries = std::fs::read_dir(&dir).map_err(|source| DamonError::Read {
        path: dir.clone(),
        source,
    })?;
    let mut indices = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DamonError::Read {
            path: dir.clone(),
            source,
        })?;
        if let Some(index) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<usize>().ok())
        {
            indices.push(index);
        }
    }
    indices.sort_unstable();
    indices
        .into_iter()
        .map(|index| {
            let region = dir.join(index.to_string());
            let start = read_number(&region.join("start"))?;
            let end_path = region.join("end");
            let end = read_number(&end_path)?;
            if end < start {
                return Err(DamonError::Parse {
                    path: end_path,
                    value: end.to_string(),
                    expected: "an end address not below the region's start",
                });
            }
            Ok(TriedRegion {
                start,
                end,
                nr_accesses: read_number(&region.join("nr_accesses"))?,
                age: read_number(&region.join("age"))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ebusy() -> io::Error {
        io::Error::from_raw_os_error(libc::EBUSY)
    }

    #[test]
    fn ebusy_is_retried_until_the_lock_is_free() {
        let mut calls = 0;
        let result = retry_busy(Duration::from_secs(5), || {
            calls += 1;
            if calls < 3 {
                Err(ebusy())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(result.unwrap(), 3);
    }

    #[test]
    fn ebusy_past_the_time_limit_gives_up() {
        let result = retry_busy(Duration::from_millis(20), || Err::<(), _>(ebusy()));
        assert!(matches!(result, Err(None)));
    }

    #[test]
    fn other_errors_are_not_retried() {
        let mut calls = 0;
        let result = retry_busy(Duration::from_secs(5), || {
            calls += 1;
            Err::<(), _>(io::Error::from_raw_os_error(libc::EINVAL))
        });
        assert_eq!(calls, 1);
        assert_eq!(
            result.unwrap_err().unwrap().raw_os_error(),
            Some(libc::EINVAL)
        );
    }

    #[test]
    fn the_owner_mark_names_a_pid_and_other_reset_intervals_name_none() {
        let dir = tempfile::tempdir().unwrap();
        let kdamond = dir.path().join("kdamonds/0");
        let reset = scheme_dir(&kdamond).join("quotas/reset_interval_ms");
        std::fs::create_dir_all(reset.parent().unwrap()).unwrap();
        std::fs::write(kdamond.join("contexts/nr_contexts"), "1\n").unwrap();
        std::fs::write(context_dir(&kdamond).join("schemes/nr_schemes"), "1\n").unwrap();
        std::fs::write(&reset, format!("{}\n", owner_mark(4242))).unwrap();
        assert_eq!(owner(&kdamond).unwrap(), Some(4242));
        std::fs::write(&reset, "1000\n").unwrap();
        assert_eq!(owner(&kdamond).unwrap(), None);
        std::fs::write(kdamond.join("contexts/nr_contexts"), "0\n").unwrap();
        std::fs::write(&reset, format!("{}\n", owner_mark(4242))).unwrap();
        assert_eq!(owner(&kdamond).unwrap(), None, "no context, no mark");
    }
}
