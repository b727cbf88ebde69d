//! cgroup v1 memory controller readers: each takes the cgroup's directory (e.g. /sys/fs/cgroup/memory/a/b) and reads one file.

use super::error::FsError;
use super::keyed::KeyedValues;
use super::limit::{read_optional_v1_limit, read_v1_limit, Limit};
use super::read::{read_cgroup_bytes, read_cgroup_file, read_optional_cgroup_u64};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// memory.usage_in_bytes: memory charged to the cgroup and its descendants.
pub fn read_usage(dir: &Path) -> Result<Bytes, FsError> {
    read_cgroup_bytes(&dir.join("memory.usage_in_bytes"))
}

/// memory.limit_in_bytes.
pub fn read_limit(dir: &Path) -> Result<Limit, FsError> {
    read_v1_limit(&dir.join("memory.limit_in_bytes"))
}

/// memory.soft_limit_in_bytes.
pub fn read_soft_limit(dir: &Path) -> Result<Limit, FsError> {
    read_v1_limit(&dir.join("memory.soft_limit_in_bytes"))
}

/// memory.memsw.usage_in_bytes (memory + swap); `None` when swap accounting is off.
pub fn read_memsw_usage(dir: &Path) -> Result<Option<Bytes>, FsError> {
    Ok(read_optional_cgroup_u64(&dir.join("memory.memsw.usage_in_bytes"))?.map(Bytes))
}

/// memory.memsw.limit_in_bytes (memory + swap); `None` when swap accounting is off.
pub fn read_memsw_limit(dir: &Path) -> Result<Option<Limit>, FsError> {
    read_optional_v1_limit(&dir.join("memory.memsw.limit_in_bytes"))
}

/// True when the kernel accounts swap per cgroup (the memsw files exist).
pub fn has_swap_accounting(dir: &Path) -> bool {
    dir.join("memory.memsw.limit_in_bytes").is_file()
}

/// memory.swappiness (0..=100); `None` when the file is absent.
pub fn read_swappiness(dir: &Path) -> Result<Option<u64>, FsError> {
    read_optional_cgroup_u64(&dir.join("memory.swappiness"))
}

/// memory.stat figures. Each is the hierarchical `total_*` value when the kernel prints one
/// (so a cgroup with children counts them), else the cgroup's own; `None` when neither is
/// printed (e.g. `swap` without swap accounting, refaults before kernel 5.9).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct StatV1 {
    /// Anonymous and swap-cache memory (`rss`).
    pub rss: Option<Bytes>,
    /// Page cache, including tmpfs/shmem (`cache`).
    pub cache: Option<Bytes>,
    pub shmem: Option<Bytes>,
    pub mapped_file: Option<Bytes>,
    pub swap: Option<Bytes>,
    pub unevictable: Option<Bytes>,
    pub active_anon: Option<Bytes>,
    pub inactive_anon: Option<Bytes>,
    pub active_file: Option<Bytes>,
    pub inactive_file: Option<Bytes>,
    /// Cumulative refault events.
    pub workingset_refault_anon: Option<u64>,
    pub workingset_refault_file: Option<u64>,
    /// Cumulative major faults.
    pub pgmajfault: Option<u64>,
    pub pgfault: Option<u64>,
    /// The tightest memory limit among this cgroup and its ancestors.
    pub hierarchical_memory_limit: Option<Limit>,
    /// The tightest memory+swap limit among this cgroup and its ancestors.
    pub hierarchical_memsw_limit: Option<Limit>,
}

/// Reads memory.stat.
pub fn read_stat(dir: &Path) -> Result<StatV1, FsError> {
    let path = dir.join("memory.stat");
    let text = read_cgroup_file(&path)?;
    parse_stat(&path, &text)
}

/// The memory.stat keys read, each also with its hierarchical `total_` twin (the two limits
/// have none). Their places in the arrays `parse_stat` fills.
const STAT_KEYS: [&str; 16] = [
    "rss",
    "cache",
    "shmem",
    "mapped_file",
    "swap",
    "unevictable",
    "active_anon",
    "inactive_anon",
    "active_file",
    "inactive_file",
    "workingset_refault_anon",
    "workingset_refault_file",
    "pgmajfault",
    "pgfault",
    "hierarchical_memory_limit",
    "hierarchical_memsw_limit",
];

/// The place of `key` in [`STAT_KEYS`] (a `match`, which the compiler turns into a few
/// comparisons; memory.stat has some 70 lines to look up).
fn stat_index(key: &str) -> Option<usize> {
    match key {
        "rss" => Some(0),
        "cache" => Some(1),
        "shmem" => Some(2),
        "mapped_file" => Some(3),
        "swap" => Some(4),
        "unevictable" => Some(5),
        "active_anon" => Some(6),
        "inactive_anon" => Some(7),
        "active_file" => Some(8),
        "inactive_file" => Some(9),
        "workingset_refault_anon" => Some(10),
        "workingset_refault_file" => Some(11),
        "pgmajfault" => Some(12),
        "pgfault" => Some(13),
        "hierarchical_memory_limit" => Some(14),
        "hierarchical_memsw_limit" => Some(15),
        _ => None,
    }
}

/// Parses memory.stat text read from `path`, in one pass with no allocation (it is read for
/// every tenant every tick): a key the reader does not use is checked and skipped. The first
/// of duplicate keys wins, as in `KeyedValues`.
pub fn parse_stat(path: &Path, text: &str) -> Result<StatV1, FsError> {
    let mut own = [None::<u64>; STAT_KEYS.len()];
    let mut total = [None::<u64>; STAT_KEYS.len()];
    super::keyed::for_each_value(path, text, |key, value| {
        let (slots, name) = match key.strip_prefix("total_") {
            Some(name) => (&mut total, name),
            None => (&mut own, key),
        };
        if let Some(i) = stat_index(name) {
            slots[i].get_or_insert(value);
        }
    })?;
    // The hierarchical total where the kernel gives one, else the cgroup's own figure.
    let count = |key: &str| stat_index(key).and_then(|i| total[i].or(own[i]));
    let bytes = |key: &str| count(key).map(Bytes);
    let limit = |key: &str| {
        stat_index(key)
            .and_then(|i| own[i])
            .map(Limit::from_v1_bytes)
    };
    Ok(StatV1 {
        rss: bytes("rss"),
        cache: bytes("cache"),
        shmem: bytes("shmem"),
        mapped_file: bytes("mapped_file"),
        swap: bytes("swap"),
        unevictable: bytes("unevictable"),
        active_anon: bytes("active_anon"),
        inactive_anon: bytes("inactive_anon"),
        active_file: bytes("active_file"),
        inactive_file: bytes("inactive_file"),
        workingset_refault_anon: count("workingset_refault_anon"),
        workingset_refault_file: count("workingset_refault_file"),
        pgmajfault: count("pgmajfault"),
        pgfault: count("pgfault"),
        hierarchical_memory_limit: limit("hierarchical_memory_limit"),
        hierarchical_memsw_limit: limit("hierarchical_memsw_limit"),
    })
}

/// memory.oom_control.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq)]
pub struct OomControl {
    /// The OOM killer is disabled: tasks wait at the limit instead.
    pub oom_kill_disable: bool,
    /// The cgroup is at its limit with the OOM killer disabled.
    pub under_oom: bool,
    /// Cumulative OOM kills in this cgroup; printed by kernels 4.13+.
    pub oom_kill: Option<u64>,
}

/// Reads memory.oom_control.
pub fn read_oom_control(dir: &Path) -> Result<OomControl, FsError> {
    let path = dir.join("memory.oom_control");
    let text = read_cgroup_file(&path)?;
    parse_oom_control(&path, &text)
}

/// Parses memory.oom_control text read from `path`.
pub fn parse_oom_control(path: &Path, text: &str) -> Result<OomControl, FsError> {
    let kv = KeyedValues::parse(path, text)?;
    let flag = |key: &str| -> Result<bool, FsError> {
        match kv.require(key)? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(FsError::Parse {
                path: path.to_path_buf(),
                field: key.to_string(),
                value: n.to_string(),
                expected: "0 or 1",
            }),
        }
    };
    Ok(OomControl {
        oom_kill_disable: flag("oom_kill_disable")?,
        under_oom: flag("under_oom")?,
        oom_kill: kv.get("oom_kill"),
    })
}

/// True when `dir` looks like a v1 memory cgroup (has memory.limit_in_bytes).
pub fn is_memory_cgroup(dir: &Path) -> bool {
    dir.join("memory.limit_in_bytes").is_file()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// memory.stat as this host's 6.18 kernel prints it for a leaf cgroup, trimmed.
    pub(crate) const STAT: &str = "cache 3989504\nrss 1634304\nrss_huge 0\nshmem 0\n\
mapped_file 0\nworkingset_refault_anon 0\nworkingset_refault_file 973\nswap 0\n\
pgfault 27091\npgmajfault 20\ninactive_anon 1560576\nactive_anon 12288\n\
inactive_file 1101824\nactive_file 2887680\nunevictable 0\n\
hierarchical_memory_limit 9223372036854771712\nhierarchical_memsw_limit 9223372036854771712\n\
total_cache 7979008\ntotal_rss 3268608\ntotal_shmem 0\ntotal_mapped_file 0\n\
total_workingset_refault_anon 5\ntotal_workingset_refault_file 1946\ntotal_swap 8192\n\
total_pgfault 54182\ntotal_pgmajfault 40\ntotal_inactive_anon 3121152\n\
total_active_anon 24576\ntotal_inactive_file 2203648\ntotal_active_file 5775360\n\
total_unevictable 4096\n";

    /// Writes a v1 memory cgroup as the kernel shows it, with or without the memsw files.
    pub(crate) fn fake_v1(dir: &Path, memsw: bool) {
        fs::create_dir_all(dir).unwrap();
        let files = [
            ("memory.usage_in_bytes", "7516160\n"),
            ("memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory.soft_limit_in_bytes", "9223372036854771712\n"),
            ("memory.swappiness", "60\n"),
            ("memory.stat", STAT),
            (
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
            ),
        ];
        for (name, text) in files {
            fs::write(dir.join(name), text).unwrap();
        }
        if memsw {
            fs::write(dir.join("memory.memsw.usage_in_bytes"), "7671808\n").unwrap();
            fs::write(
                dir.join("memory.memsw.limit_in_bytes"),
                "9223372036854771712\n",
            )
            .unwrap();
        }
    }

    #[test]
    fn single_value_files_read_with_unlimited_as_max() {
        let tmp = tempfile::tempdir().unwrap();
        fake_v1(tmp.path(), true);
        fs::write(tmp.path().join("memory.soft_limit_in_bytes"), "134217728\n").unwrap();
        let d = tmp.path();
        assert_eq!(read_usage(d).unwrap(), Bytes(7516160));
        assert_eq!(read_limit(d).unwrap(), Limit::Max);
        assert_eq!(
            read_soft_limit(d).unwrap(),
            Limit::Bytes(Bytes::from_mib(128))
        );
        assert_eq!(read_memsw_usage(d).unwrap(), Some(Bytes(7671808)));
        assert_eq!(read_memsw_limit(d).unwrap(), Some(Limit::Max));
        assert_eq!(read_swappiness(d).unwrap(), Some(60));
        assert!(has_swap_accounting(d));
        assert!(is_memory_cgroup(d));
    }

    #[test]
    fn memsw_files_absent_without_swap_accounting_read_none() {
        let tmp = tempfile::tempdir().unwrap();
        fake_v1(tmp.path(), false);
        assert_eq!(read_memsw_usage(tmp.path()).unwrap(), None);
        assert_eq!(read_memsw_limit(tmp.path()).unwrap(), None);
        assert!(!has_swap_accounting(tmp.path()));
    }

    #[test]
    fn stat_prefers_hierarchical_totals() {
        let s = parse_stat(Path::new("/cg/memory.stat"), STAT).unwrap();
        assert_eq!(s.rss, Some(Bytes(3268608)));
        assert_eq!(s.cache, Some(Bytes(7979008)));
        assert_eq!(s.swap, Some(Bytes(8192)));
        assert_eq!(s.unevictable, Some(Bytes(4096)));
        assert_eq!(s.active_file, Some(Bytes(5775360)));
        assert_eq!(s.workingset_refault_anon, Some(5));
        assert_eq!(s.workingset_refault_file, Some(1946));
        assert_eq!(s.pgmajfault, Some(40));
        assert_eq!(s.hierarchical_memory_limit, Some(Limit::Max));
    }

    #[test]
    fn stat_without_totals_uses_local_values_and_absent_keys_are_none() {
        let text = "cache 10\nrss 20\npgmajfault 3\nhierarchical_memory_limit 4096\n";
        let s = parse_stat(Path::new("/cg/memory.stat"), text).unwrap();
        assert_eq!(s.cache, Some(Bytes(10)));
        assert_eq!(s.rss, Some(Bytes(20)));
        assert_eq!(s.pgmajfault, Some(3));
        assert_eq!(s.swap, None);
        assert_eq!(s.workingset_refault_file, None);
        assert_eq!(s.hierarchical_memory_limit, Some(Limit::Bytes(Bytes(4096))));
    }

    #[test]
    fn oom_control_reads_flags_and_optional_kill_count() {
        let p = Path::new("/cg/memory.oom_control");
        let cases = [
            (
                "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
                (false, false, Some(2)),
            ),
            ("oom_kill_disable 1\nunder_oom 1\n", (true, true, None)),
        ];
        for (text, (disable, under, kills)) in cases {
            let o = parse_oom_control(p, text).unwrap();
            assert_eq!(
                (o.oom_kill_disable, o.under_oom, o.oom_kill),
                (disable, under, kills)
            );
        }
        let msg = parse_oom_control(p, "oom_kill_disable 7\nunder_oom 0\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("oom_kill_disable") && msg.contains("\"7\""),
            "{msg}"
        );
        assert!(matches!(
            parse_oom_control(p, "under_oom 0\n").unwrap_err(),
            FsError::Missing { .. }
        ));
    }

    #[test]
    fn malformed_values_name_path_and_value() {
        let tmp = tempfile::tempdir().unwrap();
        fake_v1(tmp.path(), true);
        let cases = [
            ("memory.usage_in_bytes", "12k\n"),
            ("memory.limit_in_bytes", "unlimited\n"),
            ("memory.memsw.limit_in_bytes", "x\n"),
            ("memory.swappiness", "sixty\n"),
        ];
        for (file, value) in cases {
            fake_v1(tmp.path(), true);
            fs::write(tmp.path().join(file), value).unwrap();
            let d = tmp.path();
            let err = match file {
                "memory.usage_in_bytes" => read_usage(d).unwrap_err(),
                "memory.limit_in_bytes" => read_limit(d).unwrap_err(),
                "memory.memsw.limit_in_bytes" => read_memsw_limit(d).unwrap_err(),
                _ => read_swappiness(d).unwrap_err(),
            };
            let msg = err.to_string();
            assert!(msg.contains(file) && msg.contains(value.trim()), "{msg}");
        }
    }

    #[test]
    fn removed_cgroup_reads_as_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let gone = tmp.path().join("gone");
        assert!(read_usage(&gone).unwrap_err().is_vanished());
        assert!(read_memsw_limit(&gone).unwrap_err().is_vanished());
        assert!(read_stat(&gone).unwrap_err().is_vanished());
    }

    #[test]
    fn stat_index_agrees_with_the_key_list() {
        for (i, key) in STAT_KEYS.iter().enumerate() {
            assert_eq!(stat_index(key), Some(i), "{key}");
        }
        assert_eq!(stat_index("total_rss"), None);
    }
}
