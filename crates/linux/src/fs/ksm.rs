//! Kernel same-page merging: the counters and knobs of `/sys/kernel/mm/ksm/` (one value per file), a process's share in `/proc/PID/ksm_stat`, and the CPU time of the `ksmd` thread from `/proc/PID/stat`.
//!
//! Files appear with kernel versions (`pages_scanned` 6.7+, `ksm_zero_pages` and
//! `general_profit` 6.1+, `advisor_mode` 6.8+, `/proc/PID/ksm_stat` 6.1+): a file the kernel
//! lacks reads as `None`. A kernel built without KSM has no directory at all
//! ([`read_counters`] is then `None`). Documented in the kernel's
//! `Documentation/admin-guide/mm/ksm.rst`.

use super::error::FsError;
use super::read::{file_field, parse_u64, read_optional_text, read_text};
use super::write::write_bounded;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the KSM files are under `root` (`/` on a live host).
pub fn ksm_dir(root: &Path) -> PathBuf {
    root.join("sys/kernel/mm/ksm")
}

/// KSM's host-wide counters, in pages (a page is the kernel's base page).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KsmCounters {
    /// Distinct KSM pages in use (`pages_shared`).
    pub pages_shared: u64,
    /// Further mappings of those pages: what merging saves (`pages_sharing`).
    pub pages_sharing: u64,
    /// Pages scanned but not merged yet, whose contents seem stable (`pages_unshared`).
    pub pages_unshared: Option<u64>,
    /// Pages whose contents change too fast to merge (`pages_volatile`).
    pub pages_volatile: Option<u64>,
    /// Full passes over all mergeable memory (`full_scans`).
    pub full_scans: Option<u64>,
    /// Pages scanned since ksmd started (`pages_scanned`).
    pub pages_scanned: Option<u64>,
    /// Pages of zeros merged onto the kernel's zero page (`ksm_zero_pages`, counted only with
    /// `use_zero_pages`).
    pub zero_pages: Option<u64>,
    /// What merging saves net of KSM's own bookkeeping, in bytes (`general_profit`; it can be
    /// negative).
    pub general_profit: Option<i64>,
}

/// The knobs memtide sets, as found and as restored: `None` for one the kernel lacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KsmKnobs {
    /// 0: stopped (merged pages stay merged); 1: running; 2: stopped and everything unmerged.
    pub run: u64,
    /// Pages scanned per wake-up.
    pub pages_to_scan: u64,
    /// Sleep between wake-ups.
    pub sleep_millisecs: u64,
    /// Merge pages of zeros onto the kernel's zero page, counted apart.
    pub use_zero_pages: Option<u64>,
    /// The scan-time advisor (`none` or `scan-time`), which sets `pages_to_scan` itself.
    pub advisor_mode: Option<String>,
}

/// Reads the counters, or `None` when the kernel has no KSM.
pub fn read_counters(root: &Path) -> Result<Option<KsmCounters>, FsError> {
    let dir = ksm_dir(root);
    let Some(pages_shared) = read_optional_u64(&dir.join("pages_shared"))? else {
        return Ok(None);
    };
    Ok(Some(KsmCounters {
        pages_shared,
        pages_sharing: read_u64(&dir.join("pages_sharing"))?,
        pages_unshared: read_optional_u64(&dir.join("pages_unshared"))?,
        pages_volatile: read_optional_u64(&dir.join("pages_volatile"))?,
        full_scans: read_optional_u64(&dir.join("full_scans"))?,
        pages_scanned: read_optional_u64(&dir.join("pages_scanned"))?,
        zero_pages: read_optional_u64(&dir.join("ksm_zero_pages"))?,
        general_profit: read_optional_i64(&dir.join("general_profit"))?,
    }))
}

/// Reads the knobs memtide sets; every KSM kernel has the first three.
pub fn read_knobs(root: &Path) -> Result<KsmKnobs, FsError> {
    let dir = ksm_dir(root);
    let advisor_mode = match read_optional_text(&dir.join("advisor_mode"))? {
        Some(text) => Some(selected(&dir.join("advisor_mode"), &text)?),
        None => None,
    };
    Ok(KsmKnobs {
        run: read_u64(&dir.join("run"))?,
        pages_to_scan: read_u64(&dir.join("pages_to_scan"))?,
        sleep_millisecs: read_u64(&dir.join("sleep_millisecs"))?,
        use_zero_pages: read_optional_u64(&dir.join("use_zero_pages"))?,
        advisor_mode,
    })
}

/// Writes `knobs`, each within `timeout`: the advisor first (it would overwrite
/// `pages_to_scan`), `run` last (so ksmd starts at the new pace). A knob that is `None`, or
/// that already holds the value in `current`, is not written.
pub fn write_knobs(
    root: &Path,
    knobs: &KsmKnobs,
    current: &KsmKnobs,
    timeout: Duration,
) -> Result<(), FsError> {
    let dir = ksm_dir(root);
    if let (Some(mode), false) = (
        &knobs.advisor_mode,
        knobs.advisor_mode == current.advisor_mode,
    ) {
        write_bounded(&dir.join("advisor_mode"), mode, timeout)?;
    }
    let numbers = [
        (
            "pages_to_scan",
            Some(knobs.pages_to_scan),
            Some(current.pages_to_scan),
        ),
        (
            "sleep_millisecs",
            Some(knobs.sleep_millisecs),
            Some(current.sleep_millisecs),
        ),
        (
            "use_zero_pages",
            knobs.use_zero_pages,
            current.use_zero_pages,
        ),
        ("run", Some(knobs.run), Some(current.run)),
    ];
    for (file, want, now) in numbers {
        if let (Some(value), false) = (want, want == now) {
            write_bounded(&dir.join(file), &value.to_string(), timeout)?;
        }
    }
    Ok(())
}

/// One process's share of merging, from `/proc/PID/ksm_stat`; a line the kernel does not
/// print is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessKsm {
    /// KSM's reverse-map items for the process: its bookkeeping, one per page scanned.
    pub rmap_items: Option<u64>,
    /// Of its pages, those merged onto the kernel's zero page.
    pub zero_pages: Option<u64>,
    /// Its pages merged with another page (`ksm_merging_pages`).
    pub merging_pages: Option<u64>,
    /// What merging saves it net of the rmap items, in bytes (can be negative).
    pub profit: Option<i64>,
    /// Merging was asked for the whole process (`prctl(PR_SET_MEMORY_MERGE)`).
    pub merge_any: Option<bool>,
}

/// Reads `/proc/<pid>/ksm_stat` under `root`; `None` when the process is gone or the kernel
/// has no such file.
pub fn read_process(root: &Path, pid: u32) -> Result<Option<ProcessKsm>, FsError> {
    let path = root.join(format!("proc/{pid}/ksm_stat"));
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_process(&path, &text).map(Some),
        // ESRCH while the process exits reads as gone, like a missing file.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ESRCH) =>
        {
            Ok(None)
        }
        Err(source) => Err(FsError::Read { path, source }),
    }
}

/// Parses `ksm_stat` text read from `path` (`key value` lines; `yes`/`no` for the flags).
pub fn parse_process(path: &Path, text: &str) -> Result<ProcessKsm, FsError> {
    let mut out = ProcessKsm::default();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let key = key.trim_end_matches(':');
        match key {
            "ksm_rmap_items" => out.rmap_items = Some(parse_u64(path, key, value)?),
            "ksm_zero_pages" => out.zero_pages = Some(parse_u64(path, key, value)?),
            "ksm_merging_pages" => out.merging_pages = Some(parse_u64(path, key, value)?),
            "ksm_process_profit" => out.profit = Some(parse_i64(path, key, value)?),
            "ksm_merge_any" => out.merge_any = Some(parse_yes_no(path, key, value)?),
            _ => {}
        }
    }
    Ok(out)
}

/// The pid of the `ksmd` kernel thread, found by name among the children of `kthreadd`
/// (pid 2); `None` when there is none (no KSM, or a fake tree without it).
pub fn find_ksmd(root: &Path) -> Option<u32> {
    let entries = std::fs::read_dir(root.join("proc")).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| {
            let stat = std::fs::read_to_string(root.join(format!("proc/{pid}/stat")));
            stat.ok()
                .and_then(|s| parse_stat(&s))
                .is_some_and(|st| st.comm == "ksmd" && st.ppid == 2)
        })
}

/// The CPU time (user + system) `pid` has used, from `/proc/<pid>/stat`; `None` when the
/// process is gone.
pub fn read_cpu(root: &Path, pid: u32) -> Result<Option<Duration>, FsError> {
    let path = root.join(format!("proc/{pid}/stat"));
    let Some(text) = read_optional_text(&path)? else {
        return Ok(None);
    };
    let stat = parse_stat(&text).ok_or_else(|| FsError::Parse {
        path: path.clone(),
        field: "utime stime".to_string(),
        value: text.trim().chars().take(80).collect(),
        expected: "`pid (comm) state ppid ...` with utime and stime as fields 14 and 15",
    })?;
    Ok(Some(ticks_to_duration(stat.utime + stat.stime)))
}

/// The fields of `/proc/PID/stat` used here.
struct Stat {
    comm: String,
    ppid: u64,
    utime: u64,
    stime: u64,
}

/// Parses `/proc/PID/stat`: the command name is in parentheses and may hold spaces, so the
/// fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // Field 3 (state) is the first after the name; ppid is field 4, utime 14, stime 15.
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    Some(Stat {
        comm,
        ppid: rest.get(1)?.parse().ok()?,
        utime: rest.get(11)?.parse().ok()?,
        stime: rest.get(12)?.parse().ok()?,
    })
}

/// Clock ticks (`sysconf(_SC_CLK_TCK)`, 100 nearly everywhere) as a duration.
fn ticks_to_duration(ticks: u64) -> Duration {
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100);
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / hz)
}

/// The bracketed choice of a `[a] b` file (or its one word, as a plain file written with
/// the choice holds it).
fn selected(path: &Path, text: &str) -> Result<String, FsError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let bracketed = words
        .iter()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
    let only = match words.as_slice() {
        [one] => Some(*one),
        _ => None,
    };
    bracketed
        .or(only)
        .map(str::to_string)
        .ok_or_else(|| FsError::Parse {
            path: path.to_path_buf(),
            field: "advisor_mode".to_string(),
            value: text.trim().to_string(),
            expected: "the modes with the selected one in brackets",
        })
}

fn read_u64(path: &Path) -> Result<u64, FsError> {
    let text = read_text(path)?;
    parse_u64(path, &file_field(path), &text)
}

fn read_optional_u64(path: &Path) -> Result<Option<u64>, FsError> {
    match read_optional_text(path)? {
        Some(text) => parse_u64(path, &file_field(path), &text).map(Some),
        None => Ok(None),
    }
}

fn read_optional_i64(path: &Path) -> Result<Option<i64>, FsError> {
    match read_optional_text(path)? {
        Some(text) => parse_i64(path, &file_field(path), &text).map(Some),
        None => Ok(None),
    }
}

fn parse_i64(path: &Path, field: &str, value: &str) -> Result<i64, FsError> {
    value.trim().parse::<i64>().map_err(|_| FsError::Parse {
        path: path.to_path_buf(),
        field: field.to_string(),
        value: value.trim().to_string(),
        expected: "a decimal integer",
    })
}

fn parse_yes_no(path: &Path, field: &str, value: &str) -> Result<bool, FsError> {
    match value {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(FsError::Parse {
            path: path.to_path_buf(),
            field: field.to_string(),
            value: value.to_string(),
            expected: "yes or no",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_ksm(root: &Path, files: &[(&str, &str)]) {
        let dir = ksm_dir(root);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, value) in files {
            std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
        }
    }

    const KNOBS: [(&str, &str); 5] = [
        ("run", "0"),
        ("pages_to_scan", "100"),
        ("sleep_millisecs", "20"),
        ("use_zero_pages", "0"),
        ("advisor_mode", "[none] scan-time"),
    ];

    #[test]
    fn counters_read_and_missing_files_are_none() {
        let tmp = tempfile::tempdir().unwrap();
        fake_ksm(
            tmp.path(),
            &[
                ("pages_shared", "10"),
                ("pages_sharing", "90"),
                ("general_profit", "-4096"),
                ("ksm_zero_pages", "5"),
            ],
        );
        let c = read_counters(tmp.path()).unwrap().unwrap();
        assert_eq!((c.pages_shared, c.pages_sharing), (10, 90));
        assert_eq!(c.general_profit, Some(-4096));
        assert_eq!(c.zero_pages, Some(5));
        assert_eq!(
            c.pages_scanned, None,
            "an older kernel's missing counter is not 0"
        );
    }

    #[test]
    fn a_kernel_without_ksm_has_no_counters() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read_counters(tmp.path()).unwrap(), None);
    }

    #[test]
    fn knobs_read_with_the_selected_advisor() {
        let tmp = tempfile::tempdir().unwrap();
        fake_ksm(tmp.path(), &KNOBS);
        let k = read_knobs(tmp.path()).unwrap();
        assert_eq!(k.run, 0);
        assert_eq!(k.pages_to_scan, 100);
        assert_eq!(k.use_zero_pages, Some(0));
        assert_eq!(k.advisor_mode.as_deref(), Some("none"));
    }

    #[test]
    fn only_changed_knobs_are_written_and_run_last() {
        let tmp = tempfile::tempdir().unwrap();
        fake_ksm(tmp.path(), &KNOBS);
        let current = read_knobs(tmp.path()).unwrap();
        let want = KsmKnobs {
            run: 1,
            pages_to_scan: 400,
            ..current.clone()
        };
        // A file that must not be written is made unwritable by turning it into a directory.
        let dir = ksm_dir(tmp.path());
        std::fs::remove_file(dir.join("sleep_millisecs")).unwrap();
        std::fs::create_dir(dir.join("sleep_millisecs")).unwrap();
        write_knobs(tmp.path(), &want, &current, Duration::from_secs(2)).unwrap();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("run").trim(), "1");
        assert_eq!(read("pages_to_scan").trim(), "400");
    }

    #[test]
    fn a_malformed_counter_names_the_file_and_value() {
        let tmp = tempfile::tempdir().unwrap();
        fake_ksm(
            tmp.path(),
            &[("pages_shared", "many"), ("pages_sharing", "1")],
        );
        let msg = read_counters(tmp.path()).unwrap_err().to_string();
        assert!(
            msg.contains("pages_shared") && msg.contains("many"),
            "{msg}"
        );
    }

    const KSM_STAT: &str = "ksm_rmap_items 51200\nksm_zero_pages 0\nksm_merging_pages 51190\n\
ksm_process_profit 206528000\nksm_merge_any: yes\nksm_mergeable: yes\n";

    #[test]
    fn a_process_share_reads_its_flags_and_signed_profit() {
        let p = parse_process(Path::new("/proc/1/ksm_stat"), KSM_STAT).unwrap();
        assert_eq!(p.merging_pages, Some(51190));
        assert_eq!(p.profit, Some(206528000));
        assert_eq!(p.merge_any, Some(true));
        let neg = parse_process(Path::new("x"), "ksm_process_profit -3200\n").unwrap();
        assert_eq!(neg.profit, Some(-3200));
        assert_eq!(
            neg.merging_pages, None,
            "a line the kernel did not print is None"
        );
    }

    #[test]
    fn a_gone_process_has_no_share() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read_process(tmp.path(), 4242).unwrap(), None);
    }

    #[test]
    fn ksmd_is_found_by_name_under_kthreadd_and_its_cpu_read() {
        let tmp = tempfile::tempdir().unwrap();
        let stat = |pid: u32, comm: &str, ppid: u32, utime: u64, stime: u64| {
            let dir = tmp.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("stat"),
                format!("{pid} ({comm}) S {ppid} 0 0 0 -1 2097216 0 0 0 0 {utime} {stime} 0 0 25 5 1 0 27\n"),
            )
            .unwrap();
        };
        stat(1, "init", 0, 1, 1);
        stat(77, "ksmd", 1, 0, 0); // a user process named ksmd is not the thread
        stat(37, "ksmd", 2, 150, 50);
        assert_eq!(find_ksmd(tmp.path()), Some(37));
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        assert_eq!(
            read_cpu(tmp.path(), 37).unwrap(),
            Some(Duration::from_nanos(200 * 1_000_000_000 / hz))
        );
        assert_eq!(read_cpu(tmp.path(), 38).unwrap(), None);
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped_whole() {
        let s = parse_stat("9 (a (b) c) S 2 0 0 0 -1 0 0 0 0 0 7 8 0\n").unwrap();
        assert_eq!(s.comm, "a (b) c");
        assert_eq!((s.ppid, s.utime, s.stime), (2, 7, 8));
    }
}
