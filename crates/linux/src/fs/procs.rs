//! cgroup.procs: the processes in one cgroup, the same file in v1 and v2.

use super::error::FsError;
use super::read::read_cgroup_file;
use std::path::Path;

/// Reads `<dir>/cgroup.procs`: the processes in this cgroup, not its descendants.
pub fn read_procs(dir: &Path) -> Result<Vec<u32>, FsError> {
    let path = dir.join("cgroup.procs");
    let text = read_cgroup_file(&path)?;
    parse_procs(&path, &text)
}

/// Parses cgroup.procs text (one pid per line) read from `path`.
pub fn parse_procs(path: &Path, text: &str) -> Result<Vec<u32>, FsError> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.parse::<u32>().map_err(|_| FsError::Parse {
                path: path.to_path_buf(),
                field: "pid".to_string(),
                value: l.to_string(),
                expected: "a process id",
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_pids_one_per_line() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("cgroup.procs"), "12\n345\n").unwrap();
        assert_eq!(read_procs(tmp.path()).unwrap(), vec![12, 345]);
    }

    #[test]
    fn empty_cgroup_has_no_pids() {
        assert_eq!(parse_procs(Path::new("/x"), "").unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn junk_is_an_error_naming_path_and_value() {
        let msg = parse_procs(Path::new("/cg/cgroup.procs"), "1\nabc\n")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("/cg/cgroup.procs") && msg.contains("abc"),
            "{msg}"
        );
    }

    #[test]
    fn removed_cgroup_is_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(read_procs(&tmp.path().join("gone"))
            .unwrap_err()
            .is_vanished());
    }
}
