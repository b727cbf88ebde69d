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

/// The most cgroups [`read_subtree_procs`] reads: a subtree holding more is read up to this
/// many (a systemd slice holds a few dozen services and scopes, a busy host's `user.slice` a
/// few hundred).
pub const SUBTREE_CGROUPS: usize = 4096;

/// Reads the processes of `dir` and of every cgroup below it into `out` (a systemd slice's
/// services and scopes hold its processes; the slice itself holds none), at most
/// [`SUBTREE_CGROUPS`] cgroups. A child cgroup removed during the walk is skipped; `dir`
/// itself gone is `FsError::Vanished`.
pub fn read_subtree_procs(dir: &Path, out: &mut Vec<u32>) -> Result<(), FsError> {
    out.clear();
    out.extend(read_procs(dir)?);
    let mut read = 1;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if read >= SUBTREE_CGROUPS {
                return Ok(());
            }
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let child = entry.path();
            read += 1;
            match read_procs(&child) {
                Ok(pids) => out.extend(pids),
                Err(e) if e.is_vanished() => continue,
                Err(e) => return Err(e),
            }
            stack.push(child);
        }
    }
    Ok(())
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
    fn a_subtree_lists_the_processes_of_every_cgroup_below() {
        let tmp = tempfile::tempdir().unwrap();
        let slice = tmp.path().join("app.slice");
        for (dir, procs) in [
            ("", ""),
            ("a.service", "10\n11\n"),
            ("b.scope", "20\n"),
            ("b.scope/inner", "30\n"),
        ] {
            std::fs::create_dir_all(slice.join(dir)).unwrap();
            std::fs::write(slice.join(dir).join("cgroup.procs"), procs).unwrap();
        }
        // A plain file is no cgroup.
        std::fs::write(slice.join("memory.current"), "0\n").unwrap();
        let mut pids = vec![99];
        read_subtree_procs(&slice, &mut pids).unwrap();
        pids.sort_unstable();
        assert_eq!(pids, vec![10, 11, 20, 30]);
        assert_eq!(read_procs(&slice).unwrap(), Vec::<u32>::new());
        assert!(read_subtree_procs(&tmp.path().join("gone"), &mut pids)
            .unwrap_err()
            .is_vanished());
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
