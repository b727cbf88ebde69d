//! One mapping of a process from `/proc/PID/smaps`: the smallest one of at least a given size, with its resident (`Rss:`) and swapped (`Swap:`) bytes — a VM's guest memory inside its QEMU process, apart from the emulator's own.
//!
//! QEMU maps a guest's RAM as one anonymous mapping of the guest's size (rounded up to its
//! alignment); what else QEMU holds (its code, heap) is in smaller mappings, but for one: the
//! TCG translation cache, 1 GiB by default (libvirt leaves the default; memtide's own VMs ask
//! for 64 MiB). So the guest's RAM is the smallest mapping at least the guest's size, not the
//! largest: under libvirt the largest was the cache, and a 512 MiB guest holding 440 MiB read
//! as 52 MiB. Reading smaps walks the process's page tables: 2-3 ms of CPU for a small TCG
//! guest's QEMU (docs/benchmarks.md), so the QEMU world reads it once every few ticks. A
//! process that has exited reads as `None`, never as zero.

use super::error::FsError;
use memtide_model::Bytes;
use std::io::ErrorKind;
use std::path::Path;

/// A mapping's figures.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// Its virtual size.
    pub size: Bytes,
    /// Resident in memory.
    pub rss: Bytes,
    /// In swap.
    pub swap: Bytes,
}

/// The smallest of `pid`'s mappings of at least `at_least` bytes (`Ok(None)`: the process is
/// gone; an error when it has no such mapping).
pub fn read_guest_mapping(
    root: &Path,
    pid: u32,
    at_least: Bytes,
) -> Result<Option<Mapping>, FsError> {
    let path = root.join(format!("proc/{pid}/smaps"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            return Ok(None)
        }
        Err(source) => return Err(FsError::Read { path, source }),
    };
    parse_guest_mapping(&path, &text, at_least).map(Some)
}

/// The smallest mapping of at least `at_least` bytes in an smaps text.
pub fn parse_guest_mapping(path: &Path, text: &str, at_least: Bytes) -> Result<Mapping, FsError> {
    let mut best: Option<Mapping> = None;
    let mut current: Option<Mapping> = None;
    let kib = |field: &str, value: &str| -> Result<Bytes, FsError> {
        value
            .trim()
            .strip_suffix("kB")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|k| Bytes(k * 1024))
            .ok_or_else(|| FsError::Parse {
                path: path.to_path_buf(),
                field: field.to_string(),
                value: value.trim().to_string(),
                expected: "a number of kB",
            })
    };
    let finish = |m: Option<Mapping>, best: &mut Option<Mapping>| {
        if let Some(m) = m {
            if m.size >= at_least && best.is_none_or(|b| m.size < b.size) {
                *best = Some(m);
            }
        }
    };
    for line in text.lines() {
        match line.split_once(':') {
            Some((key, value)) if !key.contains(' ') && !key.contains('-') => {
                if let Some(m) = &mut current {
                    match key {
                        "Size" => m.size = kib(key, value)?,
                        "Rss" => m.rss = kib(key, value)?,
                        "Swap" => m.swap = kib(key, value)?,
                        _ => {}
                    }
                }
            }
            // A header: `start-end perms offset dev inode [path]`.
            _ => {
                finish(current.take(), &mut best);
                current = Some(Mapping {
                    size: Bytes::ZERO,
                    rss: Bytes::ZERO,
                    swap: Bytes::ZERO,
                });
            }
        }
    }
    finish(current.take(), &mut best);
    best.ok_or_else(|| FsError::Missing {
        path: path.to_path_buf(),
        field: format!("a mapping of at least {} bytes", at_least.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c1a00000-55d0c1e00000 r-xp 00000000 08:01 1234                       /usr/bin/qemu-system-x86_64
Size:               4096 kB
Rss:                3000 kB
Swap:                  0 kB
7f0000000000-7f0020000000 rw-p 00000000 00:00 0 
Size:             524288 kB
KernelPageSize:        4 kB
Rss:              312000 kB
Swap:              10240 kB
VmFlags: rd wr mr mw me ac sd 
7f0020000000-7f0024000000 rwxp 00000000 00:00 0 
Size:              65536 kB
Rss:               20000 kB
Swap:                  0 kB
";

    #[test]
    fn a_translation_cache_larger_than_the_guest_is_not_taken_for_its_memory() {
        let cache = "7f1000000000-7f1040000000 rwxp 00000000 00:00 0 \nSize:            1048576 kB\nRss:               53248 kB\nSwap:                  0 kB\n";
        let m = parse_guest_mapping(
            Path::new("smaps"),
            &format!("{SMAPS}{cache}"),
            Bytes(512 << 20),
        )
        .unwrap();
        assert_eq!(m.size, Bytes(512 << 20));
        assert_eq!(m.rss, Bytes(312_000 * 1024));
    }

    #[test]
    fn the_guest_memory_is_the_mapping_of_its_size_with_its_resident_and_swapped_bytes() {
        let m = parse_guest_mapping(Path::new("smaps"), SMAPS, Bytes(512 << 20)).unwrap();
        assert_eq!(
            m,
            Mapping {
                size: Bytes(512 << 20),
                rss: Bytes(312_000 * 1024),
                swap: Bytes(10 << 20),
            }
        );
    }

    #[test]
    fn no_mapping_as_large_is_an_error_naming_the_size_and_a_gone_process_is_none() {
        let e = parse_guest_mapping(Path::new("smaps"), SMAPS, Bytes(1 << 30)).unwrap_err();
        assert!(e.to_string().contains("1073741824"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_guest_mapping(dir.path(), 42, Bytes(1)).unwrap(), None);
    }

    #[test]
    fn a_garbled_figure_names_its_field() {
        let bad = SMAPS.replace("Rss:              312000 kB", "Rss: lots");
        let e = parse_guest_mapping(Path::new("smaps"), &bad, Bytes(1)).unwrap_err();
        assert!(e.to_string().contains("Rss"), "{e}");
    }
}
