//! /proc/meminfo: the host's memory totals, in bytes; everything but MemTotal is optional.

use super::error::FsError;
use super::keyed::KeyedValues;
use super::read::read_text;
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The /proc/meminfo figures the host uses. A field the kernel does not print is `None`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Meminfo {
    pub mem_total: Bytes,
    pub mem_free: Option<Bytes>,
    pub mem_available: Option<Bytes>,
    pub buffers: Option<Bytes>,
    pub cached: Option<Bytes>,
    pub swap_cached: Option<Bytes>,
    pub active_anon: Option<Bytes>,
    pub inactive_anon: Option<Bytes>,
    pub active_file: Option<Bytes>,
    pub inactive_file: Option<Bytes>,
    pub unevictable: Option<Bytes>,
    pub mlocked: Option<Bytes>,
    pub swap_total: Option<Bytes>,
    pub swap_free: Option<Bytes>,
    pub dirty: Option<Bytes>,
    pub writeback: Option<Bytes>,
    pub anon_pages: Option<Bytes>,
    pub mapped: Option<Bytes>,
    pub shmem: Option<Bytes>,
    pub slab_reclaimable: Option<Bytes>,
    pub slab_unreclaimable: Option<Bytes>,
    pub commit_limit: Option<Bytes>,
    pub committed_as: Option<Bytes>,
}

/// Reads `<root>/proc/meminfo`.
pub fn read_meminfo(root: &Path) -> Result<Meminfo, FsError> {
    let path = root.join("proc/meminfo");
    let text = read_text(&path)?;
    parse_meminfo(&path, &text)
}

/// Parses /proc/meminfo text read from `path`.
pub fn parse_meminfo(path: &Path, text: &str) -> Result<Meminfo, FsError> {
    let kv = KeyedValues::parse(path, text)?;
    Ok(Meminfo {
        mem_total: kv.require_bytes("MemTotal")?,
        mem_free: kv.bytes("MemFree"),
        mem_available: kv.bytes("MemAvailable"),
        buffers: kv.bytes("Buffers"),
        cached: kv.bytes("Cached"),
        swap_cached: kv.bytes("SwapCached"),
        active_anon: kv.bytes("Active(anon)"),
        inactive_anon: kv.bytes("Inactive(anon)"),
        active_file: kv.bytes("Active(file)"),
        inactive_file: kv.bytes("Inactive(file)"),
        unevictable: kv.bytes("Unevictable"),
        mlocked: kv.bytes("Mlocked"),
        swap_total: kv.bytes("SwapTotal"),
        swap_free: kv.bytes("SwapFree"),
        dirty: kv.bytes("Dirty"),
        writeback: kv.bytes("Writeback"),
        anon_pages: kv.bytes("AnonPages"),
        mapped: kv.bytes("Mapped"),
        shmem: kv.bytes("Shmem"),
        slab_reclaimable: kv.bytes("SReclaimable"),
        slab_unreclaimable: kv.bytes("SUnreclaim"),
        commit_limit: kv.bytes("CommitLimit"),
        committed_as: kv.bytes("Committed_AS"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "MemTotal:       24684084 kB\n\
MemFree:        24021200 kB\n\
MemAvailable:   24288652 kB\n\
Buffers:            1948 kB\n\
Cached:           430868 kB\n\
Active(anon):       1544 kB\n\
Inactive(file):   308664 kB\n\
SwapTotal:             0 kB\n\
SwapFree:              0 kB\n\
HugePages_Total:       0\n\
Hugepagesize:       2048 kB\n";

    #[test]
    fn reads_fields_in_bytes_under_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("proc")).unwrap();
        std::fs::write(tmp.path().join("proc/meminfo"), SAMPLE).unwrap();
        let m = read_meminfo(tmp.path()).unwrap();
        assert_eq!(m.mem_total, Bytes(24684084 * 1024));
        assert_eq!(m.mem_available, Some(Bytes(24288652 * 1024)));
        assert_eq!(m.active_anon, Some(Bytes(1544 * 1024)));
        assert_eq!(m.swap_total, Some(Bytes(0)));
    }

    #[test]
    fn absent_fields_are_none_not_zero() {
        let m = parse_meminfo(Path::new("/proc/meminfo"), "MemTotal: 4 kB\n").unwrap();
        assert_eq!(m.mem_total, Bytes(4096));
        assert_eq!(m.mem_available, None);
        assert_eq!(m.swap_free, None);
    }

    #[test]
    fn missing_mem_total_is_an_error() {
        let err = parse_meminfo(Path::new("/proc/meminfo"), "MemFree: 4 kB\n").unwrap_err();
        assert!(matches!(err, FsError::Missing { ref field, .. } if field == "MemTotal"));
    }

    #[test]
    fn malformed_value_names_the_field_and_value() {
        let msg = parse_meminfo(
            Path::new("/proc/meminfo"),
            "MemTotal: 4 kB\nMemFree: lots kB\n",
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("MemFree") && msg.contains("lots kB"), "{msg}");
    }

    #[test]
    fn missing_file_is_a_read_error_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let err = read_meminfo(tmp.path()).unwrap_err();
        assert!(matches!(err, FsError::Read { .. }));
        assert!(err.to_string().contains("proc/meminfo"));
    }
}
