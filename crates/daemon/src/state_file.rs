//! The daemon's state file: the runner's state file holding the QEMU world's tenant records (`memtide_qemu::Record`: the Linux host's `TenantRecord` of each cgroup, and a VM's own part).

use memtide_qemu::Record;

pub use memtide_runner::state_file::{
    check_not_in_use, load, remove, save, ApiChanges, StateError, TenantChange, FORMAT,
};

/// The state file as the daemon writes it.
pub type StateFile = memtide_runner::state_file::StateFile<Record>;

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_linux::host::{OomRecord, Origin, TenantRecord};
    use memtide_linux::{Limit, LimitSettings};
    use memtide_model::Bytes;
    use memtide_qemu::VmRecord;
    use std::collections::BTreeMap;

    fn state() -> StateFile {
        StateFile {
            format: FORMAT,
            pid: 4242,
            hierarchy: "v1".to_string(),
            tenants: vec![Record {
                linux: TenantRecord {
                    name: "db".to_string(),
                    cgroup: "/memtide/db".to_string(),
                    origin: Origin::Adopted,
                    original: LimitSettings::V1 {
                        limit: Limit::Bytes(Bytes(1 << 30)),
                        soft_limit: Limit::Max,
                        memsw_limit: Some(Limit::Max),
                        swappiness: Some(60),
                    },
                    oom: OomRecord {
                        killer_was_disabled: Some(false),
                        guard_on: true,
                    },
                    io: None,
                },
                vm: Some(VmRecord {
                    domain: None,
                    qmp: "/run/memtide/vms/db.qmp".into(),
                    found: Bytes(1 << 30),
                    paused: false,
                }),
            }],
            estimates: BTreeMap::from([("db".to_string(), 300 << 20)]),
            changes: ApiChanges {
                tax_rate: memtide_model::TaxRate::new(0.5).ok(),
                tenants: BTreeMap::from([(
                    "db".to_string(),
                    TenantChange {
                        shares: Some(2000),
                        ..TenantChange::default()
                    },
                )]),
            },
        }
    }

    #[test]
    fn a_linux_state_file_loads_back_identical() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        save(&path, &state()).unwrap();
        assert_eq!(load(&path).unwrap(), Some(state()));
    }

    #[test]
    fn a_format_1_state_file_still_loads_with_no_estimates_or_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut v: serde_json::Value = serde_json::to_value(state()).unwrap();
        v["format"] = 1.into();
        let o = v.as_object_mut().unwrap();
        o.remove("estimates");
        o.remove("changes");
        let tenant = o["tenants"][0].as_object_mut().unwrap();
        tenant.remove("oom_guard");
        tenant.remove("vm");
        std::fs::write(&path, v.to_string()).unwrap();
        let loaded: StateFile = load(&path).unwrap().unwrap();
        assert!(loaded.estimates.is_empty() && loaded.changes.is_empty());
        assert!(!loaded.tenants[0].linux.oom.guard_on);
        assert_eq!(loaded.tenants[0].vm, None);
        std::fs::write(&path, v.to_string().replace("\"format\":1", "\"format\":9")).unwrap();
        assert!(load::<Record>(&path)
            .unwrap_err()
            .to_string()
            .contains("format 9"));
    }
}
