//! One managed tenant of the Linux host: its cgroup, where it came from, the settings found before memtide touched it (its memory limits and, with disk I/O managed, its weight and caps), and its latest reading.

use crate::cgroup::{CgroupReader, CgroupSample, LimitSettings, MemoryCgroup};
use crate::fs::oom_events::OomWatch;
use memtide_model::{Pages, TenantId};
use serde::{Deserialize, Serialize};
use std::process::Child;

/// How a tenant came to be managed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// An existing cgroup memtide adopted; on exit its settings are restored.
    Adopted,
    /// A command memtide launched in a cgroup it created; on exit it is stopped and the cgroup
    /// removed.
    Launched,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Adopted => "adopted",
            Origin::Launched => "launched",
        }
    }
}

/// What the state file keeps per tenant, so a restarted daemon re-adopts instead of resetting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord {
    pub name: String,
    /// The cgroup, as a path inside the memory hierarchy.
    pub cgroup: String,
    pub origin: Origin,
    /// The limits found before memtide changed anything.
    pub original: LimitSettings,
    /// The OOM guard's part (v1), its fields at this level in the state file.
    #[serde(flatten)]
    pub oom: super::OomRecord,
    /// The disk's part (`Disk::persist`), when memtide manages the tenant's I/O: the blkio or
    /// io cgroup and the weight and caps found before memtide changed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<super::io::IoRecord>,
}

/// How a v1 tenant's stalls at its limit are noticed while its OOM guard is on.
#[derive(Debug, Default)]
pub(crate) struct OomState {
    /// The kernel signals this cgroup's OOMs through an eventfd; `None` while the guard is off,
    /// or when registering failed (memory.oom_control is then read at every check, as it is
    /// for a tenant with no kernel behind it).
    pub watch: Option<OomWatch>,
    /// Read memory.oom_control at the next check: the eventfd fired, or a tick passed (the
    /// check of every guarded tenant once a tick, in case a signal is ever missed), and until
    /// it reads not under OOM.
    pub pending: bool,
}

/// A tenant the host manages.
#[derive(Debug)]
pub struct ManagedTenant {
    pub id: TenantId,
    pub name: String,
    pub record: TenantRecord,
    pub(crate) cgroup: MemoryCgroup,
    /// The cgroup's files read every tick, kept open.
    pub(crate) reader: CgroupReader,
    /// The processes in the cgroup at the last reading (kept to reuse its allocation).
    pub(crate) pids: Vec<u32>,
    /// v1: how a stall at the limit is noticed while the OOM guard is on.
    pub(crate) oom: OomState,
    /// The launched process, when this daemon started it (not after re-adoption).
    pub(crate) child: Option<Child>,
    /// v1 `memory.swappiness` is 0: the kernel never swaps this cgroup's anonymous memory.
    pub(crate) no_anon_swap: bool,
    /// The latest reading: the one the next is compared with (see `derive.rs`), for the API
    /// and for skipping writes that change nothing.
    pub last_sample: Option<CgroupSample>,
    /// The inode of its cgroup's directory when it was adopted or launched: another one later
    /// is a new cgroup made under the same path (see `CgroupReader::identity`).
    pub(crate) identity: Option<u64>,
    /// What the tenant cannot give back, as last computed.
    pub unreclaimable: Pages,
    /// v2: ticks left, this one included, during which a memory.reclaim that answered EAGAIN
    /// counts as the tenant's pressure and memory.reclaim is not written for it again (each
    /// observation takes one; 0 or 1 after it: none).
    pub(crate) reclaim_refused: u32,
    /// The tenant's configured max: the OOM guard is on only while the limit is below it.
    pub(crate) max: Option<Pages>,
    /// The application's adapter, kept running in the cgroup.
    pub(crate) adapter: Option<super::adapter::Adapter>,
    /// Its swapped memory being read back ahead of its faults (`swap_in.rs`), while a worker
    /// runs.
    pub(crate) swap_in: Option<super::swap_in::SwapIn>,
    /// Held while memtide manages the cgroup (not in a dry run): no second memtide can adopt it.
    pub(crate) _lock: Option<super::lock::CgroupLock>,
}

impl ManagedTenant {
    pub fn origin(&self) -> Origin {
        self.record.origin
    }
}
