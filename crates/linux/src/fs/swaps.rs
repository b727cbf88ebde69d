//! /proc/swaps: the host's swap areas (file or partition, size, used, priority).

use super::error::FsError;
use super::read::{read_optional_text, unescape_octal};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What backs a swap area.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum SwapKind {
    Partition,
    File,
    /// A type this reader does not know, as the kernel printed it.
    Other(String),
}

/// One row of /proc/swaps.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SwapArea {
    pub filename: PathBuf,
    pub kind: SwapKind,
    pub size: Bytes,
    pub used: Bytes,
    /// Higher is used first; the kernel gives areas without one a negative priority.
    pub priority: i64,
}

/// Reads `<root>/proc/swaps`: `None` when the kernel has no swap support (no file), an empty
/// list when no swap area is active.
pub fn read_swaps(root: &Path) -> Result<Option<Vec<SwapArea>>, FsError> {
    let path = root.join("proc/swaps");
    match read_optional_text(&path)? {
        Some(text) => parse_swaps(&path, &text).map(Some),
        None => Ok(None),
    }
}

/// Parses /proc/swaps text read from `path`. Sizes are printed in KiB.
pub fn parse_swaps(path: &Path, text: &str) -> Result<Vec<SwapArea>, FsError> {
    let mut areas = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        match tokens.as_slice() {
            [] | ["Filename", ..] => continue,
            [filename, kind, size, used, priority] => {
                let kib = |field: &str, v: &str| -> Result<Bytes, FsError> {
                    v.parse::<u64>()
                        .ok()
                        .and_then(|n| n.checked_mul(1024))
                        .map(Bytes)
                        .ok_or_else(|| FsError::Parse {
                            path: path.to_path_buf(),
                            field: format!("{filename} {field}"),
                            value: v.to_string(),
                            expected: "a size in KiB",
                        })
                };
                areas.push(SwapArea {
                    filename: PathBuf::from(unescape_octal(filename)),
                    kind: match *kind {
                        "partition" => SwapKind::Partition,
                        "file" => SwapKind::File,
                        other => SwapKind::Other(other.to_string()),
                    },
                    size: kib("Size", size)?,
                    used: kib("Used", used)?,
                    priority: priority.parse::<i64>().map_err(|_| FsError::Parse {
                        path: path.to_path_buf(),
                        field: format!("{filename} Priority"),
                        value: priority.to_string(),
                        expected: "a signed integer",
                    })?,
                });
            }
            _ => {
                return Err(FsError::Parse {
                    path: path.to_path_buf(),
                    field: "row".to_string(),
                    value: line.to_string(),
                    expected: "Filename Type Size Used Priority",
                })
            }
        }
    }
    Ok(areas)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";

    #[test]
    fn header_only_is_no_areas() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("proc")).unwrap();
        std::fs::write(tmp.path().join("proc/swaps"), HEADER).unwrap();
        assert_eq!(read_swaps(tmp.path()).unwrap(), Some(vec![]));
    }

    #[test]
    fn missing_file_is_none() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(read_swaps(tmp.path()).unwrap(), None);
    }

    #[test]
    fn rows_parse_in_bytes_with_kind_priority_and_escaped_names() {
        let text = format!(
            "{HEADER}/dev/sda2                               partition\t8388604\t\t1024\t\t-2\n\
             /swap\\040file                          file\t\t1048572\t\t0\t\t5\n\
             /dev/zram0                              zram\t\t4\t\t0\t\t100\n"
        );
        let areas = parse_swaps(Path::new("/proc/swaps"), &text).unwrap();
        assert_eq!(areas.len(), 3);
        assert_eq!(areas[0].filename, PathBuf::from("/dev/sda2"));
        assert_eq!(areas[0].kind, SwapKind::Partition);
        assert_eq!(areas[0].size, Bytes(8388604 * 1024));
        assert_eq!(areas[0].used, Bytes(1024 * 1024));
        assert_eq!(areas[0].priority, -2);
        assert_eq!(areas[1].filename, PathBuf::from("/swap file"));
        assert_eq!(areas[1].kind, SwapKind::File);
        assert_eq!(areas[2].kind, SwapKind::Other("zram".into()));
    }

    #[test]
    fn malformed_rows_are_errors_naming_path_and_value() {
        let cases = [
            ("/dev/sda2 partition big 0 -2\n", "big"),
            ("/dev/sda2 partition 4 0 high\n", "high"),
            ("/dev/sda2 partition 4\n", "/dev/sda2 partition 4"),
        ];
        for (row, value) in cases {
            let msg = parse_swaps(Path::new("/proc/swaps"), &format!("{HEADER}{row}"))
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("/proc/swaps") && msg.contains(value),
                "{row:?}: {msg}"
            );
        }
    }
}
