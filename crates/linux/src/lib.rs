//! memtide's real Linux host: readers for cgroupfs and procfs, bounded writes to kernel files, access sampling, launching tenants, and the Linux implementation of the controller's `Host` trait.
//!
//! Every reader takes the root it reads under, so tests run against fake trees in a temp dir.
//! Counters a kernel does not expose are `None`, never zero.
//!
//! - `fs/`: one reader per kernel file (cgroup v1 and v2 memory files, `memory.stat`, PSI,
//!   `/proc/meminfo`, `smaps_rollup`/`clear_refs`, the hierarchy from mountinfo, `ksm.rs`:
//!   KSM's counters and knobs and `/proc/PID/ksm_stat`, the disk's `blkio.rs`, `io_v2.rs`,
//!   `diskstat.rs`), plus `kept.rs` (files read every tick kept open and read with one `pread`,
//!   reopened on `ENODEV`, at most half the open-file limit), `oom_events.rs` (v1 OOM stalls
//!   signalled on an eventfd through `cgroup.event_control`, waited on with one `epoll_wait`)
//!   and `write.rs` (every kernel write on a kept writer thread with a timeout; EBUSY/EAGAIN,
//!   vanished cgroups and in-flight writes are typed errors);
//! - `cgroup`: `MemoryCgroup`, the v1/v2-neutral view (sample, settings, restore,
//!   set_limit); `block` and `io_cgroup` (a block device set to BFQ and given back; a tenant's
//!   I/O weight, caps and counters with their originals);
//! - `host/`: `LinuxHost`, the world. `world.rs` (attach = adopt, re-adopt or launch, waiting
//!   while a cgroup is missing or empty), `derive.rs` (the tenant's observation built purely
//!   from the raw sample and the previous one; its limit lever declares 1 MiB as the smallest
//!   lowering worth a write, and the policy holds smaller ones while the budget has room),
//!   `actuator.rs` (the `Actuator` trait a mechanism implements in its own folder, with its
//!   own kernel file access: those every tenant has are built by `LinuxHost::new`, such as
//!   `sampling/`, ESX sampling counts from cleared accessed bits; those the configuration
//!   turns on are passed with `LinuxHost::with` and reached again with
//!   `LinuxHost::actuator`, such as `ksm/`'s `Sharing` and `io/`'s `Disk`, the shared disk
//!   and each tenant's blkio or io cgroup, with its part of the state file's record),
//!   `oom_guard.rs` (the v1 OOM guard and `rescue_stalled`), `release.rs` (a leaving tenant
//!   gets back its recorded settings and OOM killer; failed restores are retried every tick and
//!   at exit, and the first original seen on a cgroup is kept for its next adoption), `lock.rs`
//!   (one memtide per cgroup: `flock`), `launch.rs` (a command joins its cgroup before exec,
//!   and the cgroups its mechanisms made ready, and asks for KSM with
//!   `prctl(PR_SET_MEMORY_MERGE)` unless `isolated`), `adapter.rs` (`[tenant.app]` adapters),
//!   `paths.rs`.
//!
//! The last floor check runs before each limit write; `cgroup.procs` is read every 10 ticks or
//! when a pidfd says a process it listed exited. See docs/linux.md.

pub mod block;
pub mod cgroup;
pub mod fs;
pub mod host;
pub mod io_cgroup;

// The face other crates use: what a daemon composing this world needs, without reaching into
// the readers (`fs`), the cgroup files or the host's internals.
pub use block::BlockDevice;
pub use cgroup::{Limit, LimitSettings};
pub use fs::hierarchy::MemoryHierarchy;
pub use fs::meminfo::{read_meminfo, Meminfo};
pub use fs::FsError;
pub use host::paths::is_under;
pub use io_cgroup::IoCap;
