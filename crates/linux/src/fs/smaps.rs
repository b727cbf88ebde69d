//! A process's referenced memory: `/proc/PID/clear_refs` clears the accessed bits of its pages, and `/proc/PID/smaps_rollup`'s `Referenced:` then counts the bytes touched since.
//!
//! This is the working-set measurement that needs no page_idle or DAMON support, only
//! CONFIG_PROC_PAGE_MONITOR. A process that has exited reads as `None` / `false`, never as zero.

use super::error::FsError;
use super::keyed::KeyedValues;
use memtide_model::Bytes;
use std::io::{ErrorKind, Write};
use std::path::Path;

/// Bytes of `pid`'s pages referenced since its accessed bits were last cleared; `None` when the
/// process is gone.
pub fn read_referenced(root: &Path, pid: u32) -> Result<Option<Bytes>, FsError> {
    let path = root.join(format!("proc/{pid}/smaps_rollup"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if gone(&e) => return Ok(None),
        Err(source) => return Err(FsError::Read { path, source }),
    };
    parse_referenced(&path, &text).map(Some)
}

/// The `Referenced:` figure of an smaps_rollup text.
pub fn parse_referenced(path: &Path, text: &str) -> Result<Bytes, FsError> {
    // The first line is the address range header ("00400000-7fff... ---p 00000000 00:00 0 [rollup]").
    let body: String = text
        .lines()
        .filter(|l| l.contains(':') && !l.contains("[rollup]"))
        .map(|l| format!("{l}\n"))
        .collect();
    let values = KeyedValues::parse(path, &body)?;
    values.require_bytes("Referenced")
}

/// Clears the accessed bits of all of `pid`'s pages (`1` into clear_refs); `false` when the
/// process is gone.
pub fn clear_referenced(root: &Path, pid: u32) -> Result<bool, FsError> {
    let path = root.join(format!("proc/{pid}/clear_refs"));
    let result = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"1"));
    match result {
        Ok(()) => Ok(true),
        Err(e) if gone(&e) => Ok(false),
        Err(source) => Err(FsError::Write {
            path,
            value: "1".to_string(),
            source,
        }),
    }
}

fn gone(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLLUP: &str =
        "00400000-7ffcc1bfd000 ---p 00000000 00:00 0                          [rollup]
Rss:              421696 kB
Pss:              421130 kB
Referenced:       409600 kB
Anonymous:        409960 kB
Swap:                  0 kB
";

    #[test]
    fn referenced_is_read_in_bytes_from_the_rollup() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/42")).unwrap();
        std::fs::write(dir.path().join("proc/42/smaps_rollup"), ROLLUP).unwrap();
        assert_eq!(
            read_referenced(dir.path(), 42).unwrap(),
            Some(Bytes(409_600 * 1024))
        );
    }

    #[test]
    fn a_gone_process_reads_as_none_and_clears_as_false() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_referenced(dir.path(), 7).unwrap(), None);
        assert!(!clear_referenced(dir.path(), 7).unwrap());
    }

    #[test]
    fn a_rollup_without_referenced_is_an_error_naming_the_file() {
        let err = parse_referenced(Path::new("/proc/1/smaps_rollup"), "Rss: 4 kB\n").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("smaps_rollup") && msg.contains("Referenced"),
            "{msg}"
        );
    }

    #[test]
    fn clearing_then_touching_our_own_memory_shows_as_referenced() {
        let root = Path::new("/");
        let pid = std::process::id();
        if read_referenced(root, pid).unwrap().is_none() {
            eprintln!("SKIPPED: no /proc/self/smaps_rollup on this kernel");
            return;
        }
        let mut hot = vec![1u8; 64 << 20];
        assert!(clear_referenced(root, pid).unwrap());
        let after_clear = read_referenced(root, pid).unwrap().unwrap();
        for page in hot.chunks_mut(4096) {
            page[0] = page[0].wrapping_add(1);
        }
        let after_touch = read_referenced(root, pid).unwrap().unwrap();
        assert!(
            after_touch.0 >= after_clear.0 + (48 << 20),
            "touching 64 MiB raised Referenced from {} to {}",
            after_clear.0,
            after_touch.0
        );
        std::hint::black_box(&hot);
    }
}
