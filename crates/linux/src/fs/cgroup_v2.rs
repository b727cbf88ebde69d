//! cgroup v2 memory controller readers: each takes the cgroup's directory (e.g. /sys/fs/cgroup/a/b) and reads one file.

use super::error::FsError;
use super::keyed::KeyedValues;
use super::limit::{read_optional_v2_limit, read_v2_limit, Limit};
use super::pressure::{parse_pressure, Pressure};
use super::read::{
    read_cgroup_bytes, read_cgroup_file, read_optional_cgroup_file, read_optional_cgroup_u64,
};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// memory.current: memory charged to the cgroup and its descendants.
pub fn read_current(dir: &Path) -> Result<Bytes, FsError> {
    read_cgroup_bytes(&dir.join("memory.current"))
}

/// memory.max: the hard limit (reclaim, then OOM kill).
pub fn read_max(dir: &Path) -> Result<Limit, FsError> {
    read_v2_limit(&dir.join("memory.max"))
}

/// memory.high: the throttle limit (reclaim and slow down, never OOM kill).
pub fn read_high(dir: &Path) -> Result<Limit, FsError> {
    read_v2_limit(&dir.join("memory.high"))
}

/// memory.low: best-effort protection from reclaim.
pub fn read_low(dir: &Path) -> Result<Limit, FsError> {
    read_v2_limit(&dir.join("memory.low"))
}

/// memory.min: hard protection from reclaim.
pub fn read_min(dir: &Path) -> Result<Limit, FsError> {
    read_v2_limit(&dir.join("memory.min"))
}

/// memory.swap.current; `None` when the kernel does not account swap.
pub fn read_swap_current(dir: &Path) -> Result<Option<Bytes>, FsError> {
    Ok(read_optional_cgroup_u64(&dir.join("memory.swap.current"))?.map(Bytes))
}

/// memory.swap.max; `None` when the kernel does not account swap.
pub fn read_swap_max(dir: &Path) -> Result<Option<Limit>, FsError> {
    read_optional_v2_limit(&dir.join("memory.swap.max"))
}

/// True when the kernel accounts swap per cgroup (memory.swap.max exists).
pub fn has_swap_accounting(dir: &Path) -> bool {
    dir.join("memory.swap.max").is_file()
}

/// True when the kernel has memory.reclaim (5.19+) in this cgroup.
pub fn has_reclaim(dir: &Path) -> bool {
    dir.join("memory.reclaim").is_file()
}

/// memory.stat figures (hierarchical in v2). Byte amounts and cumulative event counts; a key
/// the kernel does not print is `None`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatV2 {
    pub anon: Option<Bytes>,
    pub file: Option<Bytes>,
    pub kernel: Option<Bytes>,
    pub shmem: Option<Bytes>,
    pub file_mapped: Option<Bytes>,
    pub file_dirty: Option<Bytes>,
    pub file_writeback: Option<Bytes>,
    pub swapcached: Option<Bytes>,
    pub active_anon: Option<Bytes>,
    pub inactive_anon: Option<Bytes>,
    pub active_file: Option<Bytes>,
    pub inactive_file: Option<Bytes>,
    pub unevictable: Option<Bytes>,
    pub slab_reclaimable: Option<Bytes>,
    pub slab_unreclaimable: Option<Bytes>,
    pub workingset_refault_anon: Option<u64>,
    pub workingset_refault_file: Option<u64>,
    pub workingset_activate_anon: Option<u64>,
    pub workingset_activate_file: Option<u64>,
    pub workingset_restore_anon: Option<u64>,
    pub workingset_restore_file: Option<u64>,
    pub pgfault: Option<u64>,
    pub pgmajfault: Option<u64>,
    pub pgscan: Option<u64>,
    pub pgsteal: Option<u64>,
}

/// Reads memory.stat.
pub fn read_stat(dir: &Path) -> Result<StatV2, FsError> {
    let path = dir.join("memory.stat");
    let text = read_cgroup_file(&path)?;
    parse_stat(&path, &text)
}

/// The memory.stat keys read; their places in the array `parse_stat` fills.
const STAT_KEYS: [&str; 25] = [
    "anon",
    "file",
    "kernel",
    "shmem",
    "file_mapped",
    "file_dirty",
    "file_writeback",
    "swapcached",
    "active_anon",
    "inactive_anon",
    "active_file",
    "inactive_file",
    "unevictable",
    "slab_reclaimable",
    "slab_unreclaimable",
    "workingset_refault_anon",
    "workingset_refault_file",
    "workingset_activate_anon",
    "workingset_activate_file",
    "workingset_restore_anon",
    "workingset_restore_file",
    "pgfault",
    "pgmajfault",
    "pgscan",
    "pgsteal",
];

/// The place of `key` in [`STAT_KEYS`] (a `match`, which the compiler turns into a few
/// comparisons; memory.stat has some 70 lines to look up).
fn stat_index(key: &str) -> Option<usize> {
    match key {
        "anon" => Some(0),
        "file" => Some(1),
        "kernel" => Some(2),
        "shmem" => Some(3),
        "file_mapped" => Some(4),
        "file_dirty" => Some(5),
        "file_writeback" => Some(6),
        "swapcached" => Some(7),
        "active_anon" => Some(8),
        "inactive_anon" => Some(9),
        "active_file" => Some(10),
        "inactive_file" => Some(11),
        "unevictable" => Some(12),
        "slab_reclaimable" => Some(13),
        "slab_unreclaimable" => Some(14),
        "workingset_refault_anon" => Some(15),
        "workingset_refault_file" => Some(16),
        "workingset_activate_anon" => Some(17),
        "workingset_activate_file" => Some(18),
        "workingset_restore_anon" => Some(19),
        "workingset_restore_file" => Some(20),
        "pgfault" => Some(21),
        "pgmajfault" => Some(22),
        "pgscan" => Some(23),
        "pgsteal" => Some(24),
        _ => None,
    }
}

/// Parses memory.stat text read from `path`, in one pass with no allocation (it is read for
/// every tenant every tick): a key the reader does not use is checked and skipped. The first
/// of duplicate keys wins, as in `KeyedValues`.
pub fn parse_stat(path: &Path, text: &str) -> Result<StatV2, FsError> {
    let mut values = [None::<u64>; STAT_KEYS.len()];
    super::keyed::for_each_value(path, text, |key, value| {
        if let Some(i) = stat_index(key) {
            values[i].get_or_insert(value);
        }
    })?;
    let get = |key: &str| stat_index(key).and_then(|i| values[i]);
    let bytes = |key: &str| get(key).map(Bytes);
    Ok(StatV2 {
        anon: bytes("anon"),
        file: bytes("file"),
        kernel: bytes("kernel"),
        shmem: bytes("shmem"),
        file_mapped: bytes("file_mapped"),
        file_dirty: bytes("file_dirty"),
        file_writeback: bytes("file_writeback"),
        swapcached: bytes("swapcached"),
        active_anon: bytes("active_anon"),
        inactive_anon: bytes("inactive_anon"),
        active_file: bytes("active_file"),
        inactive_file: bytes("inactive_file"),
        unevictable: bytes("unevictable"),
        slab_reclaimable: bytes("slab_reclaimable"),
        slab_unreclaimable: bytes("slab_unreclaimable"),
        workingset_refault_anon: get("workingset_refault_anon"),
        workingset_refault_file: get("workingset_refault_file"),
        workingset_activate_anon: get("workingset_activate_anon"),
        workingset_activate_file: get("workingset_activate_file"),
        workingset_restore_anon: get("workingset_restore_anon"),
        workingset_restore_file: get("workingset_restore_file"),
        pgfault: get("pgfault"),
        pgmajfault: get("pgmajfault"),
        pgscan: get("pgscan"),
        pgsteal: get("pgsteal"),
    })
}

/// memory.pressure (PSI for this cgroup); `None` when the kernel has no PSI.
pub fn read_pressure(dir: &Path) -> Result<Option<Pressure>, FsError> {
    let path = dir.join("memory.pressure");
    match read_optional_cgroup_file(&path)? {
        Some(text) => parse_pressure(&path, &text).map(Some),
        None => Ok(None),
    }
}

/// memory.events: cumulative counts of limit events in this cgroup and its descendants.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EventsV2 {
    /// Reclaimed despite being under memory.low.
    pub low: Option<u64>,
    /// Throttled for being over memory.high.
    pub high: Option<u64>,
    /// Reached memory.max.
    pub max: Option<u64>,
    /// The OOM killer was invoked (whether or not it killed).
    pub oom: Option<u64>,
    /// Processes OOM-killed.
    pub oom_kill: Option<u64>,
    pub oom_group_kill: Option<u64>,
}

/// Reads memory.events.
pub fn read_events(dir: &Path) -> Result<EventsV2, FsError> {
    let path = dir.join("memory.events");
    let text = read_cgroup_file(&path)?;
    parse_events(&path, &text)
}

/// Parses memory.events text read from `path`.
pub fn parse_events(path: &Path, text: &str) -> Result<EventsV2, FsError> {
    let kv = KeyedValues::parse(path, text)?;
    Ok(EventsV2 {
        low: kv.get("low"),
        high: kv.get("high"),
        max: kv.get("max"),
        oom: kv.get("oom"),
        oom_kill: kv.get("oom_kill"),
        oom_group_kill: kv.get("oom_group_kill"),
    })
}

/// True when `dir` looks like a v2 cgroup with the memory controller (has memory.current).
pub fn is_memory_cgroup(dir: &Path) -> bool {
    dir.join("memory.current").is_file()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// memory.stat as a 6.x kernel prints it, trimmed.
    pub(crate) const STAT: &str = "anon 104857600\nfile 52428800\nkernel 2097152\n\
kernel_stack 65536\npagetables 262144\nshmem 0\nfile_mapped 4096\nfile_dirty 0\n\
file_writeback 0\nswapcached 0\nanon_thp 0\ninactive_anon 100000000\nactive_anon 4857600\n\
inactive_file 30000000\nactive_file 22428800\nunevictable 8192\nslab_reclaimable 1000\n\
slab_unreclaimable 2000\nworkingset_refault_anon 7\nworkingset_refault_file 11\n\
workingset_activate_anon 1\nworkingset_activate_file 2\nworkingset_restore_anon 3\n\
workingset_restore_file 4\nworkingset_nodereclaim 0\npgscan 100\npgsteal 90\n\
pgfault 5000\npgmajfault 13\n";

    /// Writes a v2 memory cgroup as the kernel shows it, with or without the swap files.
    pub(crate) fn fake_v2(dir: &Path, swap: bool) {
        fs::create_dir_all(dir).unwrap();
        let files = [
            ("memory.current", "157286400\n"),
            ("memory.max", "max\n"),
            ("memory.high", "max\n"),
            ("memory.low", "0\n"),
            ("memory.min", "0\n"),
            ("memory.stat", STAT),
            (
                "memory.pressure",
                "some avg10=0.50 avg60=0.10 avg300=0.00 total=1234\n\
                 full avg10=0.25 avg60=0.00 avg300=0.00 total=567\n",
            ),
            (
                "memory.events",
                "low 0\nhigh 4\nmax 1\noom 1\noom_kill 1\noom_group_kill 0\n",
            ),
            ("memory.reclaim", ""),
            ("cgroup.procs", "77\n"),
        ];
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
        if swap {
            fs::write(dir.join("memory.swap.current"), "4096\n").unwrap();
            fs::write(dir.join("memory.swap.max"), "max\n").unwrap();
        }
    }

    #[test]
    fn limits_read_max_literal_and_byte_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_v2(d, true);
        fs::write(d.join("memory.high"), "268435456\n").unwrap();
        fs::write(d.join("memory.low"), "1048576\n").unwrap();
        assert_eq!(read_current(d).unwrap(), Bytes(157286400));
        assert_eq!(read_max(d).unwrap(), Limit::Max);
        assert_eq!(read_high(d).unwrap(), Limit::Bytes(Bytes::from_mib(256)));
        assert_eq!(read_low(d).unwrap(), Limit::Bytes(Bytes::from_mib(1)));
        assert_eq!(read_min(d).unwrap(), Limit::Bytes(Bytes(0)));
        assert_eq!(read_swap_current(d).unwrap(), Some(Bytes(4096)));
        assert_eq!(read_swap_max(d).unwrap(), Some(Limit::Max));
        assert!(has_swap_accounting(d));
        assert!(has_reclaim(d));
        assert!(is_memory_cgroup(d));
    }

    #[test]
    fn swap_files_absent_read_none() {
        let tmp = tempfile::tempdir().unwrap();
        fake_v2(tmp.path(), false);
        assert_eq!(read_swap_current(tmp.path()).unwrap(), None);
        assert_eq!(read_swap_max(tmp.path()).unwrap(), None);
        assert!(!has_swap_accounting(tmp.path()));
    }

    #[test]
    fn stat_reads_sizes_and_counters() {
        let s = parse_stat(Path::new("/cg/memory.stat"), STAT).unwrap();
        assert_eq!(s.anon, Some(Bytes::from_mib(100)));
        assert_eq!(s.file, Some(Bytes::from_mib(50)));
        assert_eq!(s.unevictable, Some(Bytes(8192)));
        assert_eq!(s.workingset_refault_anon, Some(7));
        assert_eq!(s.workingset_refault_file, Some(11));
        assert_eq!(s.workingset_restore_anon, Some(3));
        assert_eq!(s.workingset_restore_file, Some(4));
        assert_eq!(s.pgmajfault, Some(13));
        let old = parse_stat(Path::new("/cg/memory.stat"), "anon 1\nfile 2\n").unwrap();
        assert_eq!(old.workingset_refault_anon, None);
        assert_eq!(old.pgmajfault, None);
    }

    #[test]
    fn pressure_and_events_read_and_missing_pressure_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fake_v2(d, true);
        let p = read_pressure(d).unwrap().unwrap();
        assert_eq!(p.some.avg10_pct, 0.5);
        assert_eq!(p.full.unwrap().total_stall_us, 567);
        let e = read_events(d).unwrap();
        assert_eq!((e.high, e.oom, e.oom_kill), (Some(4), Some(1), Some(1)));
        fs::remove_file(d.join("memory.pressure")).unwrap();
        assert_eq!(read_pressure(d).unwrap(), None);
        let old = parse_events(
            Path::new("/cg/memory.events"),
            "low 0\nhigh 0\nmax 0\noom 0\n",
        )
        .unwrap();
        assert_eq!(old.oom_kill, None);
    }

    #[test]
    fn malformed_values_name_path_and_value() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let cases = [
            ("memory.current", "lots\n"),
            ("memory.max", "infinity\n"),
            ("memory.swap.max", "-1\n"),
            ("memory.stat", "anon 1.5\n"),
            ("memory.events", "oom many\n"),
        ];
        for (file, value) in cases {
            fake_v2(d, true);
            fs::write(d.join(file), value).unwrap();
            let err = match file {
                "memory.current" => read_current(d).unwrap_err(),
                "memory.max" => read_max(d).unwrap_err(),
                "memory.swap.max" => read_swap_max(d).unwrap_err(),
                "memory.stat" => read_stat(d).unwrap_err(),
                _ => read_events(d).unwrap_err(),
            };
            let msg = err.to_string();
            let shown = value.trim().rsplit(' ').next().unwrap();
            assert!(msg.contains(file) && msg.contains(shown), "{msg}");
        }
    }

    #[test]
    fn removed_cgroup_reads_as_vanished() {
        let gone = Path::new("/nonexistent-memtide-test/cg");
        assert!(read_current(gone).unwrap_err().is_vanished());
        assert!(read_pressure(gone).unwrap_err().is_vanished());
        assert!(read_swap_max(gone).unwrap_err().is_vanished());
    }

    #[test]
    fn stat_index_agrees_with_the_key_list() {
        for (i, key) in STAT_KEYS.iter().enumerate() {
            assert_eq!(stat_index(key), Some(i), "{key}");
        }
        assert_eq!(stat_index("total_rss"), None);
    }
}
