//! cgroup v2 controller delegation files: `cgroup.controllers` (the controllers a cgroup may hand to its children) and `cgroup.subtree_control` (those it does), read as lists and changed by `+name`/`-name` writes.
//!
//! Both files hold space-separated controller names (`cpuset cpu io memory pids`); an empty
//! file is an empty list. The kernel refuses to enable a controller in a non-root cgroup that
//! holds processes (v2's no-internal-process rule) with `EBUSY`, and one its parent does not
//! delegate with `ENOENT`; both come back as the write's `FsError`.

use super::error::FsError;
use super::read::read_cgroup_file;
use super::write::write_bounded;
use std::path::Path;
use std::time::Duration;

/// cgroup.controllers: what `dir` may enable for its children.
pub fn read_controllers(dir: &Path) -> Result<Vec<String>, FsError> {
    Ok(list(&read_cgroup_file(&dir.join("cgroup.controllers"))?))
}

/// cgroup.subtree_control: what `dir` enables for its children.
pub fn read_subtree_control(dir: &Path) -> Result<Vec<String>, FsError> {
    Ok(list(&read_cgroup_file(
        &dir.join("cgroup.subtree_control"),
    )?))
}

/// Enables (`on`) or disables `controller` for the children of `dir`.
pub fn set_subtree_control(
    dir: &Path,
    controller: &str,
    on: bool,
    timeout: Duration,
) -> Result<(), FsError> {
    let sign = if on { '+' } else { '-' };
    write_bounded(
        &dir.join("cgroup.subtree_control"),
        &format!("{sign}{controller}"),
        timeout,
    )
}

fn list(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn lists_are_read_word_by_word_and_an_empty_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("cgroup.controllers"),
            "cpu io memory pids\n",
        )
        .unwrap();
        fs::write(dir.path().join("cgroup.subtree_control"), "\n").unwrap();
        assert_eq!(
            read_controllers(dir.path()).unwrap(),
            ["cpu", "io", "memory", "pids"]
        );
        assert!(read_subtree_control(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn a_controller_is_switched_by_a_signed_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cgroup.subtree_control");
        fs::write(&file, "").unwrap();
        set_subtree_control(dir.path(), "memory", true, T).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "+memory");
        set_subtree_control(dir.path(), "io", false, T).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), "-io");
    }

    #[test]
    fn a_vanished_cgroup_is_vanished() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        assert!(read_subtree_control(&gone).unwrap_err().is_vanished());
    }
}
