//! The parent cgroup made ready for launched tenants: created when missing and, on cgroup v2, the memory controller delegated down to its children (`cgroup.subtree_control` of it and each ancestor), memtide first moving itself into a leaf of its own when it runs there; undone at release where that harms no one.
//!
//! cgroup v2 gives a cgroup's children the memory controller only when it and every ancestor
//! list `memory` in `cgroup.subtree_control`, and a non-root cgroup that enables a controller
//! there may hold no process (the no-internal-process rule). A daemon started by systemd with
//! `Delegate=yes` runs in its service's cgroup, which is also where `parent = "self"` launches
//! tenants: so, as systemd's delegation documents ask, memtide moves itself into the leaf
//! [`LEAF`] below it before enabling the controller. Any other process in a cgroup that must
//! enable it makes the start fail with one line naming the cgroup (and nothing made is kept).
//!
//! At release, cgroups memtide created are removed (when empty), the controller it enabled is
//! disabled again where no child cgroup is left that could be using it (a sibling's memory
//! accounting is never taken away), and memtide moves back out of its leaf when its own cgroup
//! enables nothing any more. On cgroup v1 only the creation applies.

use super::error::LinuxError;
use crate::fs::hierarchy::{CgroupVersion, MemoryHierarchy};
use crate::fs::subtree::{read_controllers, read_subtree_control, set_subtree_control};
use crate::fs::write_bounded;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The leaf memtide moves itself into when its own cgroup must delegate the memory controller.
pub const LEAF: &str = "memtide-daemon";

/// The controller launched tenants need from their parent.
const MEMORY: &str = "memory";

/// What memtide did to make the parent ready, to be undone at release.
#[derive(Debug, Default)]
pub(crate) struct Delegation {
    /// Cgroups it created, outermost first.
    created: Vec<PathBuf>,
    /// Cgroups where it enabled the memory controller for the children, outermost first.
    enabled: Vec<PathBuf>,
    /// Its own cgroup, when it moved itself into [`LEAF`] below it.
    moved_from: Option<PathBuf>,
}

impl Delegation {
    /// Makes the cgroup at `path` ready to hold launched tenants. On an error everything done
    /// so far is undone.
    pub(crate) fn prepare(
        hierarchy: &MemoryHierarchy,
        path: &str,
        timeout: Duration,
    ) -> Result<Delegation, LinuxError> {
        let mut done = Delegation::default();
        let result = done.make_ready(hierarchy, path, timeout);
        match result {
            Ok(()) => Ok(done),
            Err(e) => {
                done.undo(timeout);
                Err(e)
            }
        }
    }

    fn make_ready(
        &mut self,
        hierarchy: &MemoryHierarchy,
        path: &str,
        timeout: Duration,
    ) -> Result<(), LinuxError> {
        let dir = hierarchy.dir_of(path);
        let chain: Vec<PathBuf> = {
            let mut chain: Vec<PathBuf> = dir
                .ancestors()
                .take_while(|d| d.starts_with(&hierarchy.mount))
                .map(Path::to_path_buf)
                .collect();
            chain.reverse();
            chain
        };
        for d in &chain {
            if !d.is_dir() {
                std::fs::create_dir(d).map_err(|error| LinuxError::CreateCgroup {
                    dir: d.display().to_string(),
                    error,
                })?;
                self.created.push(d.clone());
            }
        }
        if hierarchy.version != CgroupVersion::V2 {
            return Ok(());
        }
        let own = hierarchy.dir_of(&hierarchy.own_cgroup);
        for d in &chain {
            if read_subtree_control(d)?.iter().any(|c| c == MEMORY) {
                continue;
            }
            let offered = read_controllers(d)?;
            if !offered.iter().any(|c| c == MEMORY) {
                return Err(LinuxError::NotDelegated {
                    dir: d.display().to_string(),
                    controllers: offered.join(" "),
                });
            }
            if *d == own && *d != hierarchy.mount {
                self.move_into_leaf(d, timeout)?;
            }
            set_subtree_control(d, MEMORY, true, timeout).map_err(|error| {
                LinuxError::Delegate {
                    dir: d.display().to_string(),
                    error,
                }
            })?;
            self.enabled.push(d.clone());
        }
        Ok(())
    }

    /// Moves this process (all its threads) into `<own>/LEAF`, creating it.
    fn move_into_leaf(&mut self, own: &Path, timeout: Duration) -> Result<(), LinuxError> {
        let leaf = own.join(LEAF);
        if !leaf.is_dir() {
            std::fs::create_dir(&leaf).map_err(|error| LinuxError::CreateCgroup {
                dir: leaf.display().to_string(),
                error,
            })?;
            self.created.push(leaf.clone());
        }
        write_bounded(
            &leaf.join("cgroup.procs"),
            &std::process::id().to_string(),
            timeout,
        )?;
        self.moved_from = Some(own.to_path_buf());
        Ok(())
    }

    /// Gives back what [`Delegation::prepare`] did, as far as that harms no one (see the module
    /// documentation); what cannot be given back yet is left as it is.
    pub(crate) fn undo(&mut self, timeout: Duration) {
        let leaf = self.leaf();
        // Innermost first; what is not given back now stays, for the next try.
        let mut created = std::mem::take(&mut self.created);
        created.reverse();
        created.retain(|d| Some(d) == leaf.as_ref() || std::fs::remove_dir(d).is_err());
        created.reverse();
        let mut enabled = std::mem::take(&mut self.enabled);
        enabled.reverse();
        enabled.retain(|d| {
            let harmless = d.is_dir() && !has_children_but(d, leaf.as_deref());
            !(harmless && set_subtree_control(d, MEMORY, false, timeout).is_ok())
        });
        enabled.reverse();
        self.enabled = enabled;
        if let (Some(own), Some(leaf)) = (self.moved_from.clone(), leaf) {
            let nothing_enabled = read_subtree_control(&own).is_ok_and(|c| c.is_empty());
            let moved_back = nothing_enabled
                && write_bounded(
                    &own.join("cgroup.procs"),
                    &std::process::id().to_string(),
                    timeout,
                )
                .is_ok();
            if moved_back {
                self.moved_from = None;
                created.retain(|d| *d != leaf || std::fs::remove_dir(d).is_err());
            }
        }
        self.created = created;
    }

    fn leaf(&self) -> Option<PathBuf> {
        self.moved_from.as_ref().map(|own| own.join(LEAF))
    }
}

/// True when `dir` has a child cgroup other than `except`.
fn has_children_but(dir: &Path, except: Option<&Path>) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().is_dir() && Some(e.path().as_path()) != except)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const T: Duration = Duration::from_secs(5);

    /// A fake v2 tree at `root`: the mount offering and enabling `subtree` in each of `dirs`.
    fn v2(root: &Path, own: &str) -> MemoryHierarchy {
        MemoryHierarchy {
            version: CgroupVersion::V2,
            mount: root.to_path_buf(),
            mount_root: "/".to_string(),
            own_cgroup: own.to_string(),
        }
    }

    fn cgroup(dir: &Path, offered: &str, enabled: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("cgroup.controllers"), offered).unwrap();
        fs::write(dir.join("cgroup.subtree_control"), enabled).unwrap();
        fs::write(dir.join("cgroup.procs"), "").unwrap();
    }

    #[test]
    fn the_memory_controller_is_enabled_down_to_the_parent_where_missing() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        cgroup(r, "cpu io memory", "memory");
        cgroup(&r.join("svc"), "io memory", "");
        let h = v2(r, "/other");
        let mut d = Delegation::prepare(&h, "/svc", T).unwrap();
        assert_eq!(
            fs::read_to_string(r.join("cgroup.subtree_control")).unwrap(),
            "memory",
            "already enabled at the top: not written"
        );
        assert_eq!(
            fs::read_to_string(r.join("svc/cgroup.subtree_control")).unwrap(),
            "+memory"
        );
        assert_eq!(d.enabled, [r.join("svc")]);
        assert!(d.moved_from.is_none());
        d.undo(T);
        assert_eq!(
            fs::read_to_string(r.join("svc/cgroup.subtree_control")).unwrap(),
            "-memory",
            "no child left: disabled again"
        );
    }

    #[test]
    fn memtide_moves_into_its_leaf_before_enabling_its_own_cgroup_and_back_at_release() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        cgroup(r, "memory", "memory");
        cgroup(&r.join("svc"), "memory", "");
        // A fake tree has no kernel to fill a new cgroup in: the leaf is there already (so it
        // is not memtide's to remove).
        let leaf = r.join("svc").join(LEAF);
        cgroup(&leaf, "", "");
        let mut d = Delegation::prepare(&v2(r, "/svc"), "/svc", T).unwrap();
        assert_eq!(
            fs::read_to_string(leaf.join("cgroup.procs")).unwrap(),
            std::process::id().to_string()
        );
        assert_eq!(d.moved_from.as_deref(), Some(r.join("svc").as_path()));
        // A tenant still under the parent: its memory accounting stays, memtide stays too.
        fs::create_dir(r.join("svc/busy")).unwrap();
        d.undo(T);
        assert_eq!(
            fs::read_to_string(r.join("svc/cgroup.subtree_control")).unwrap(),
            "+memory"
        );
        assert!(leaf.is_dir());
        // Gone: disabled, then moved back. (A fake file keeps what was written, so the file
        // is cleared as the kernel would show it.)
        fs::remove_dir(r.join("svc/busy")).unwrap();
        d.undo(T);
        assert_eq!(
            fs::read_to_string(r.join("svc/cgroup.subtree_control")).unwrap(),
            "-memory"
        );
        assert!(d.moved_from.is_some(), "its cgroup still enables memory");
        fs::write(r.join("svc/cgroup.subtree_control"), "").unwrap();
        d.undo(T);
        assert_eq!(
            fs::read_to_string(r.join("svc/cgroup.procs")).unwrap(),
            std::process::id().to_string()
        );
        assert!(d.moved_from.is_none());
        assert!(leaf.is_dir(), "a leaf memtide did not create is kept");
    }

    #[test]
    fn a_controller_not_offered_is_refused_naming_the_cgroup_and_what_is_made_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        cgroup(r, "cpu io", "");
        let err = Delegation::prepare(&v2(r, "/other"), "/new/tenants", T).unwrap_err();
        assert!(matches!(err, LinuxError::NotDelegated { .. }), "{err}");
        assert!(err.to_string().contains("cpu io"), "{err}");
        // Created before the check failed (a real kernel fills them in): removed again.
        assert!(!r.join("new").exists());
    }

    #[test]
    fn on_v1_the_parent_is_only_created_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let h = MemoryHierarchy {
            version: CgroupVersion::V1,
            ..v2(root.path(), "/")
        };
        let mut d = Delegation::prepare(&h, "/a/b", T).unwrap();
        assert!(root.path().join("a/b").is_dir());
        assert!(d.enabled.is_empty());
        d.undo(T);
        assert!(!root.path().join("a").exists());
    }
}
