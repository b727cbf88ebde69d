//! Which managed tenant holds a process, for the balloon socket's identity check: the process's memory cgroup (read from `/proc/<pid>/cgroup` under the proc root) at or below a managed tenant's cgroup directory.
//!
//! The event loop of the balloon socket asks from its own thread, so the host keeps the
//! tenants' directories in a [`Members`] map it updates as tenants come and go, and
//! [`CgroupTenants`] reads that map and `/proc`: one small file read per `hello`.
//!
//! The socket's connections are counted in the descriptor budget kept files share
//! ([`AgentDescriptors`], two descriptors each: the socket and the peer's pidfd), and there are
//! at most [`max_agent_connections`] of them: a quarter of the budget, so that even when
//! every one is taken half the budget is left for kept files and the rest of the process
//! keeps the other half of the open-file limit. With the open-file limit at 4,096 that is
//! 512 connections.

use crate::fs::hierarchy::{own_cgroup, MemoryHierarchy};
use crate::fs::kept::{self, Slot};
use memtide_agents::hub::Tenants;
use memtide_agents::server::Descriptors;
use memtide_model::TenantId;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

/// The managed tenants' names and cgroup directories, shared with the balloon socket's thread.
#[derive(Clone, Debug, Default)]
pub(crate) struct Members(Arc<Mutex<BTreeMap<TenantId, (String, PathBuf)>>>);

impl Members {
    pub(crate) fn insert(&self, id: TenantId, name: &str, dir: PathBuf) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, (name.to_string(), dir));
    }

    pub(crate) fn remove(&self, id: TenantId) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
    }
}

/// The balloon socket's connections at most that the descriptor budget leaves room for (see
/// the module docs).
pub fn max_agent_connections() -> usize {
    kept::budget() / 4
}

/// The descriptor budget, as the balloon socket counts its connections in it.
#[derive(Debug)]
pub struct AgentDescriptors;

impl Descriptors for AgentDescriptors {
    fn take(&self, n: usize) -> Option<Box<dyn Send>> {
        // All or none: places taken before one was missing are given back as they drop.
        let slots: Option<Vec<Slot>> = (0..n).map(|_| Slot::take()).collect();
        slots.map(|s| Box::new(s) as Box<dyn Send>)
    }
}

/// A process's tenant, by its memory cgroup (see the module docs).
#[derive(Debug)]
pub struct CgroupTenants {
    pub(crate) proc_root: PathBuf,
    pub(crate) hierarchy: MemoryHierarchy,
    pub(crate) members: Members,
}

impl Tenants for CgroupTenants {
    /// The tenant whose cgroup is the process's, or the closest above it; `None` for a
    /// process that is gone, unreadable or in no managed tenant.
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
        let path = self.proc_root.join(format!("proc/{pid}/cgroup"));
        let text = std::fs::read_to_string(&path).ok()?;
        let cgroup = own_cgroup(&path, &text, self.hierarchy.version).ok()?;
        let dir = self.hierarchy.dir_of(&cgroup);
        let members = self
            .members
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        members
            .iter()
            .filter(|(_, (_, d))| dir.starts_with(d))
            .max_by_key(|(_, (_, d))| d.components().count())
            .map(|(&id, (name, _))| (id, name.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::hierarchy::CgroupVersion;
    use std::fs;

    fn tenants(root: &std::path::Path) -> CgroupTenants {
        let hierarchy = MemoryHierarchy::new(
            CgroupVersion::V1,
            root.join("sys/fs/cgroup/memory"),
            "/".into(),
        );
        let members = Members::default();
        members.insert(TenantId(1), "db", hierarchy.dir_of("/memtide/db"));
        members.insert(TenantId(2), "db-logs", hierarchy.dir_of("/memtide/db/logs"));
        CgroupTenants {
            proc_root: root.to_path_buf(),
            hierarchy,
            members,
        }
    }

    fn process(root: &std::path::Path, pid: u32, memory_cgroup: &str) {
        let dir = root.join(format!("proc/{pid}"));
        fs::create_dir_all(&dir).unwrap();
        let text = format!("5:cpu,cpuacct:/\n4:memory:{memory_cgroup}\n0::/\n");
        fs::write(dir.join("cgroup"), text).unwrap();
    }

    #[test]
    fn a_process_belongs_to_the_closest_managed_cgroup_at_or_above_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        process(tmp.path(), 10, "/memtide/db");
        process(tmp.path(), 11, "/memtide/db/workers/3");
        process(tmp.path(), 12, "/memtide/db/logs");
        let t = tenants(tmp.path());
        assert_eq!(t.tenant_of(10), Some((TenantId(1), "db".into())));
        assert_eq!(t.tenant_of(11), Some((TenantId(1), "db".into())));
        assert_eq!(t.tenant_of(12), Some((TenantId(2), "db-logs".into())));
    }

    #[test]
    fn a_process_elsewhere_gone_or_in_a_look_alike_cgroup_has_no_tenant() {
        let tmp = tempfile::tempdir().unwrap();
        process(tmp.path(), 20, "/memtide/web");
        process(tmp.path(), 21, "/memtide/db2");
        let t = tenants(tmp.path());
        assert_eq!(t.tenant_of(20), None);
        assert_eq!(
            t.tenant_of(21),
            None,
            "/memtide/db2 is not under /memtide/db"
        );
        assert_eq!(t.tenant_of(99), None);
    }

    #[test]
    fn agent_connections_take_places_in_the_budget_all_or_none() {
        let places = AgentDescriptors.take(2).expect("room for two descriptors");
        drop(places);
        // More than the whole budget: none taken, and what was taken on the way given back.
        assert!(AgentDescriptors.take(kept::budget() + 1).is_none());
        assert!(AgentDescriptors.take(2).is_some());
        assert!(max_agent_connections() * 4 <= kept::budget());
    }

    #[test]
    fn a_tenant_removed_no_longer_claims_its_processes() {
        let tmp = tempfile::tempdir().unwrap();
        process(tmp.path(), 10, "/memtide/db");
        let t = tenants(tmp.path());
        t.members.remove(TenantId(1));
        assert_eq!(t.tenant_of(10), None);
    }
}
