//! Finding the memory controller: which cgroup hierarchy (v1 or v2) holds it, where it is mounted and which cgroup this process is in, from /proc/self/mountinfo and /proc/self/cgroup.

use super::error::FsError;
use super::read::{read_optional_text, read_text, unescape_octal};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};

/// Which cgroup interface a memory cgroup speaks.
#[derive(Serialize, Deserialize, Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CgroupVersion {
    /// The legacy hierarchy: memory.limit_in_bytes, memory.memsw.*, ...
    V1,
    /// The unified hierarchy: memory.max, memory.high, memory.reclaim, ...
    V2,
}

impl CgroupVersion {
    /// `v1` or `v2`, for logs, the API and the state file.
    pub fn name(self) -> &'static str {
        match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        }
    }
}

/// One line of /proc/self/mountinfo (see `man 5 proc`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The directory of the mounted filesystem that appears at the mount point (`/` for a
    /// whole cgroup hierarchy; a subdirectory for a bind mount of part of one).
    pub root: String,
    /// Where it is mounted, as an absolute path in this process's mount namespace.
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// Per-superblock options; for a v1 cgroup mount these name its controllers.
    pub super_options: Vec<String>,
}

/// Where the memory controller is, and this process's cgroup in it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MemoryHierarchy {
    pub version: CgroupVersion,
    /// The mount point under the root detection read from (so a fake tree resolves inside it).
    pub mount: PathBuf,
    /// The hierarchy directory shown at the mount point (`/` unless only part is mounted).
    pub mount_root: String,
    /// This process's cgroup, as /proc/self/cgroup names it, e.g. `/process_api/abc`.
    pub own_cgroup: String,
}

impl MemoryHierarchy {
    /// Finds the memory controller's hierarchy and this process's cgroup in it, reading under
    /// `root` (see [`detect`]).
    pub fn detect(root: &Path) -> Result<MemoryHierarchy, FsError> {
        detect(root)
    }

    /// A hierarchy mounted whole (mount root `/`) at `mount`.
    pub fn new(version: CgroupVersion, mount: PathBuf, own_cgroup: String) -> MemoryHierarchy {
        MemoryHierarchy {
            version,
            mount,
            mount_root: "/".to_string(),
            own_cgroup,
        }
    }

    /// The directory of the cgroup `cgroup_path` (a path as /proc/<pid>/cgroup prints it).
    /// `.` and `..` components are dropped, so the result always lies under the mount.
    pub fn dir_of(&self, cgroup_path: &str) -> PathBuf {
        let rel = match self.mount_root.as_str() {
            "/" | "" => cgroup_path,
            root => cgroup_path
                .strip_prefix(root)
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
                .unwrap_or(cgroup_path),
        };
        let mut dir = self.mount.clone();
        for component in Path::new(rel).components() {
            if let Component::Normal(name) = component {
                dir.push(name);
            }
        }
        dir
    }

    /// The directory of this process's own cgroup.
    pub fn own_dir(&self) -> PathBuf {
        self.dir_of(&self.own_cgroup)
    }
}

/// Finds the memory controller under `root` (`/` on a live host): a v1 `cgroup` mount with the
/// `memory` option, else a `cgroup2` mount whose cgroup.controllers lists `memory`; then this
/// process's cgroup in it from `<root>/proc/self/cgroup`.
pub fn detect(root: &Path) -> Result<MemoryHierarchy, FsError> {
    let mountinfo_path = root.join("proc/self/mountinfo");
    let mounts = parse_mountinfo(&mountinfo_path, &read_text(&mountinfo_path)?)?;
    let (version, mount) = match find_memory_mount(root, &mounts)? {
        Some(found) => found,
        None => {
            return Err(FsError::NoMemoryController {
                mountinfo: mountinfo_path,
            })
        }
    };
    let cgroup_path = root.join("proc/self/cgroup");
    let own_cgroup = own_cgroup(&cgroup_path, &read_text(&cgroup_path)?, version)?;
    Ok(MemoryHierarchy {
        version,
        mount: under_root(root, &mount.mount_point),
        mount_root: mount.root.clone(),
        own_cgroup,
    })
}

fn under_root(root: &Path, absolute: &Path) -> PathBuf {
    root.join(absolute.strip_prefix("/").unwrap_or(absolute))
}

fn find_memory_mount<'a>(
    root: &Path,
    mounts: &'a [Mount],
) -> Result<Option<(CgroupVersion, &'a Mount)>, FsError> {
    if let Some(m) = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.super_options.iter().any(|o| o == "memory"))
    {
        return Ok(Some((CgroupVersion::V1, m)));
    }
    for m in mounts.iter().filter(|m| m.fstype == "cgroup2") {
        let controllers = under_root(root, &m.mount_point).join("cgroup.controllers");
        if let Some(text) = read_optional_text(&controllers)? {
            if text.split_whitespace().any(|c| c == "memory") {
                return Ok(Some((CgroupVersion::V2, m)));
            }
        }
    }
    Ok(None)
}

/// Parses /proc/self/mountinfo text read from `path`.
pub fn parse_mountinfo(path: &Path, text: &str) -> Result<Vec<Mount>, FsError> {
    let mut mounts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || {
            FsError::Parse {
            path: path.to_path_buf(),
            field: format!("line {}", i + 1),
            value: line.to_string(),
            expected: "ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS",
        }
        };
        let tokens: Vec<&str> = line.split_whitespace().collect();
        // Six fixed fields, then optional fields up to the "-" separator.
        let sep = 6 + tokens
            .iter()
            .skip(6)
            .position(|t| *t == "-")
            .ok_or_else(bad)?;
        if tokens.len() < sep + 3 {
            return Err(bad());
        }
        mounts.push(Mount {
            root: unescape_octal(tokens[3]),
            mount_point: PathBuf::from(unescape_octal(tokens[4])),
            fstype: tokens[sep + 1].to_string(),
            source: unescape_octal(tokens[sep + 2]),
            super_options: tokens
                .get(sep + 3)
                .map(|o| o.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
        });
    }
    Ok(mounts)
}

/// This process's cgroup in the hierarchy of `version`, from /proc/self/cgroup text read from
/// `path`: the line whose controller list has `memory` (v1) or the `0::` line (v2).
pub fn own_cgroup(path: &Path, text: &str, version: CgroupVersion) -> Result<String, FsError> {
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(cgroup)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let matches = match version {
            CgroupVersion::V1 => controllers.split(',').any(|c| c == "memory"),
            CgroupVersion::V2 => id == "0" && controllers.is_empty(),
        };
        if matches {
            return Ok(cgroup.to_string());
        }
    }
    Err(FsError::Missing {
        path: path.to_path_buf(),
        field: match version {
            CgroupVersion::V1 => "memory".to_string(),
            CgroupVersion::V2 => "0::".to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// This host's mountinfo: v1 memory at /sys/fs/cgroup/memory, cgroup2 without memory.
    const MOUNTINFO_V1: &str = "\
23 1 0:21 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const CGROUP_V1: &str = "\
9:name=systemd:/
4:memory:/process_api/76b199ab
1:cpu:/
0::/
";

    const MOUNTINFO_V2: &str = "\
23 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw
26 23 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    fn fake_root(mountinfo: &str, cgroup: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("proc/self")).unwrap();
        fs::write(tmp.path().join("proc/self/mountinfo"), mountinfo).unwrap();
        fs::write(tmp.path().join("proc/self/cgroup"), cgroup).unwrap();
        tmp
    }

    #[test]
    fn v1_memory_mount_is_found_with_own_cgroup() {
        let tmp = fake_root(MOUNTINFO_V1, CGROUP_V1);
        // The cgroup2 mount has controllers but not memory; it must not be chosen.
        fs::create_dir_all(tmp.path().join("sys/fs/cgroup/unified")).unwrap();
        fs::write(
            tmp.path().join("sys/fs/cgroup/unified/cgroup.controllers"),
            "hugetlb\n",
        )
        .unwrap();
        let h = detect(tmp.path()).unwrap();
        assert_eq!(h.version, CgroupVersion::V1);
        assert_eq!(h.mount, tmp.path().join("sys/fs/cgroup/memory"));
        assert_eq!(h.own_cgroup, "/process_api/76b199ab");
        assert_eq!(
            h.own_dir(),
            tmp.path().join("sys/fs/cgroup/memory/process_api/76b199ab")
        );
    }

    #[test]
    fn v2_mount_needs_memory_in_cgroup_controllers() {
        let tmp = fake_root(MOUNTINFO_V2, "0::/user.slice/app\n");
        let err = detect(tmp.path()).unwrap_err();
        assert!(matches!(err, FsError::NoMemoryController { .. }), "{err}");
        fs::create_dir_all(tmp.path().join("sys/fs/cgroup")).unwrap();
        fs::write(
            tmp.path().join("sys/fs/cgroup/cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        let h = detect(tmp.path()).unwrap();
        assert_eq!(h.version, CgroupVersion::V2);
        assert_eq!(h.own_cgroup, "/user.slice/app");
        assert_eq!(h.own_dir(), tmp.path().join("sys/fs/cgroup/user.slice/app"));
    }

    #[test]
    fn no_memory_controller_names_mountinfo() {
        let tmp = fake_root("23 1 0:21 / / rw - ext4 /dev/vda rw\n", "0::/\n");
        let msg = detect(tmp.path()).unwrap_err().to_string();
        assert!(msg.contains("proc/self/mountinfo"), "{msg}");
    }

    #[test]
    fn missing_memory_line_in_proc_self_cgroup_is_missing() {
        let tmp = fake_root(MOUNTINFO_V1, "1:cpu:/\n0::/\n");
        let err = detect(tmp.path()).unwrap_err();
        assert!(
            matches!(err, FsError::Missing { ref field, .. } if field == "memory"),
            "{err}"
        );
    }

    #[test]
    fn mountinfo_handles_optional_fields_and_escapes() {
        let text = "36 35 98:0 /mnt1 /mnt\\0402 rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue\n";
        let m = &parse_mountinfo(Path::new("/proc/self/mountinfo"), text).unwrap()[0];
        assert_eq!(m.root, "/mnt1");
        assert_eq!(m.mount_point, PathBuf::from("/mnt 2"));
        assert_eq!(m.fstype, "ext3");
        assert_eq!(m.source, "/dev/root");
        assert_eq!(m.super_options, vec!["rw", "errors=continue"]);
        let dash = "37 35 0:40 / /- rw - tmpfs tmpfs rw\n";
        let m = &parse_mountinfo(Path::new("/proc/self/mountinfo"), dash).unwrap()[0];
        assert_eq!(
            (m.mount_point.as_path(), m.fstype.as_str()),
            (Path::new("/-"), "tmpfs")
        );
    }

    #[test]
    fn malformed_mountinfo_lines_name_path_and_line() {
        let cases = [
            "36 35 98:0 / /mnt rw ext3 /dev/root rw",
            "36 35 - ext3",
            "36 35 98:0 / /mnt rw - ext3",
        ];
        for line in cases {
            let msg = parse_mountinfo(Path::new("/proc/self/mountinfo"), line)
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("/proc/self/mountinfo") && msg.contains("line 1"),
                "{msg}"
            );
        }
    }

    #[test]
    fn dir_of_strips_mount_root_and_never_leaves_the_mount() {
        let h = MemoryHierarchy {
            version: CgroupVersion::V1,
            mount: PathBuf::from("/sys/fs/cgroup/memory"),
            mount_root: "/docker/abc".to_string(),
            own_cgroup: "/docker/abc/app".to_string(),
        };
        let cases = [
            ("/docker/abc/app", "/sys/fs/cgroup/memory/app"),
            ("/docker/abc", "/sys/fs/cgroup/memory"),
            ("/docker/abcdef", "/sys/fs/cgroup/memory/docker/abcdef"),
            ("/../../etc", "/sys/fs/cgroup/memory/etc"),
            ("/", "/sys/fs/cgroup/memory"),
        ];
        for (cgroup, want) in cases {
            assert_eq!(h.dir_of(cgroup), PathBuf::from(want), "{cgroup}");
        }
    }

    #[test]
    fn whole_mount_dir_of_joins_the_cgroup_path() {
        let h = MemoryHierarchy::new(
            CgroupVersion::V1,
            PathBuf::from("/sys/fs/cgroup/memory"),
            "/process_api/abc".to_string(),
        );
        assert_eq!(
            h.own_dir(),
            PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")
        );
        assert_eq!(h.dir_of("/"), PathBuf::from("/sys/fs/cgroup/memory"));
    }

    #[test]
    fn own_cgroup_picks_memory_among_joined_controllers() {
        let text = "5:cpu,cpuacct:/a\n4:blkio,memory:/b:c\n0::/d\n";
        let p = Path::new("/proc/self/cgroup");
        assert_eq!(own_cgroup(p, text, CgroupVersion::V1).unwrap(), "/b:c");
        assert_eq!(own_cgroup(p, text, CgroupVersion::V2).unwrap(), "/d");
    }
}
