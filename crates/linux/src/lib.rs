//! memtide's real Linux host: readers for cgroupfs and procfs, bounded writes to kernel files, access sampling, launching tenants, and the Linux implementation of the controller's `Host` trait.
//!
//! Every reader takes the root it reads under, so tests run against fake trees in a temp dir.
//! Counters a kernel does not expose are `None`, never zero.

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
