//! The thin cgroupfs/procfs layer: readers that take the directory or root they read under (so tests use fake trees), typed errors naming the file, and bounded-time writes.
//!
//! Conventions: system-wide readers (`meminfo`, `pressure`, `hierarchy`)
//! take the filesystem root (`/` live) and read `<root>/proc/...`; cgroup readers
//! (`cgroup_v1`, `cgroup_v2`, `procs`) take the cgroup's directory. A file that exists only with
//! an optional kernel feature reads as `None` when absent; a required field that is absent is
//! `FsError::Missing`; a malformed value is `FsError::Parse`; a cgroup directory that is gone is
//! `FsError::Vanished`.

pub mod blkio;
pub mod cgroup_v1;
pub mod cgroup_v2;
pub mod cpu_time;
pub mod diskstat;
pub mod error;
pub mod hierarchy;
pub mod io_v2;
pub mod kept;
pub mod keyed;
pub mod ksm;
pub mod limit;
pub mod mapping;
pub mod meminfo;
pub mod oom_events;
pub mod pressure;
pub mod procs;
pub(crate) mod read;
pub mod smaps;
pub mod subtree;
pub mod write;

pub use cpu_time::{read_cpu_time, CpuTime};
pub use error::FsError;
pub use hierarchy::{CgroupVersion, MemoryHierarchy};
pub use kept::KeptFile;
pub use keyed::KeyedValues;
pub use limit::Limit;
pub use meminfo::{read_meminfo, Meminfo};
pub use pressure::{read_memory_pressure, Pressure, PsiLine};
pub use write::write_bounded;
