//! /proc/vmstat: the host's cumulative paging counters (swap-ins and -outs, major faults, refaults), each optional.

use super::error::FsError;
use super::keyed::KeyedValues;
use super::read::read_text;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Cumulative event counters since boot. A counter this kernel does not print is `None`.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Vmstat {
    /// Pages swapped in.
    pub pswpin: Option<u64>,
    /// Pages swapped out.
    pub pswpout: Option<u64>,
    pub pgfault: Option<u64>,
    pub pgmajfault: Option<u64>,
    /// Anonymous pages faulted back in soon after eviction (kernel 5.9+).
    pub workingset_refault_anon: Option<u64>,
    /// File pages read back in soon after eviction (kernel 5.9+).
    pub workingset_refault_file: Option<u64>,
    pub workingset_activate_anon: Option<u64>,
    pub workingset_activate_file: Option<u64>,
    pub workingset_restore_anon: Option<u64>,
    pub workingset_restore_file: Option<u64>,
    pub pgscan_kswapd: Option<u64>,
    pub pgscan_direct: Option<u64>,
    pub pgsteal_kswapd: Option<u64>,
    pub pgsteal_direct: Option<u64>,
    pub oom_kill: Option<u64>,
}

/// Reads `<root>/proc/vmstat`.
pub fn read_vmstat(root: &Path) -> Result<Vmstat, FsError> {
    let path = root.join("proc/vmstat");
    let text = read_text(&path)?;
    parse_vmstat(&path, &text)
}

/// Parses /proc/vmstat text read from `path`.
pub fn parse_vmstat(path: &Path, text: &str) -> Result<Vmstat, FsError> {
    let kv = KeyedValues::parse(path, text)?;
    Ok(Vmstat {
        pswpin: kv.get("pswpin"),
        pswpout: kv.get("pswpout"),
        pgfault: kv.get("pgfault"),
        pgmajfault: kv.get("pgmajfault"),
        workingset_refault_anon: kv.get("workingset_refault_anon"),
        workingset_refault_file: kv.get("workingset_refault_file"),
        workingset_activate_anon: kv.get("workingset_activate_anon"),
        workingset_activate_file: kv.get("workingset_activate_file"),
        workingset_restore_anon: kv.get("workingset_restore_anon"),
        workingset_restore_file: kv.get("workingset_restore_file"),
        pgscan_kswapd: kv.get("pgscan_kswapd"),
        pgscan_direct: kv.get("pgscan_direct"),
        pgsteal_kswapd: kv.get("pgsteal_kswapd"),
        pgsteal_direct: kv.get("pgsteal_direct"),
        oom_kill: kv.get("oom_kill"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_counters_under_the_root_and_absent_ones_are_none() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("proc")).unwrap();
        std::fs::write(
            tmp.path().join("proc/vmstat"),
            "workingset_refault_anon 0\nworkingset_refault_file 2121617\n\
             pswpin 3\npswpout 4\npgmajfault 22172\n",
        )
        .unwrap();
        let v = read_vmstat(tmp.path()).unwrap();
        assert_eq!(v.pswpin, Some(3));
        assert_eq!(v.pswpout, Some(4));
        assert_eq!(v.pgmajfault, Some(22172));
        assert_eq!(v.workingset_refault_anon, Some(0));
        assert_eq!(v.workingset_refault_file, Some(2121617));
        assert_eq!(v.oom_kill, None);
    }

    #[test]
    fn older_kernel_without_split_refaults_reads_none() {
        let v = parse_vmstat(Path::new("/proc/vmstat"), "workingset_refault 12\n").unwrap();
        assert_eq!(v.workingset_refault_anon, None);
        assert_eq!(v.workingset_refault_file, None);
    }

    #[test]
    fn malformed_counter_names_path_field_and_value() {
        let msg = parse_vmstat(Path::new("/proc/vmstat"), "pswpin 1.5\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("/proc/vmstat") && msg.contains("pswpin") && msg.contains("1.5"));
    }
}
