//! memtide's real Linux host: readers for cgroupfs and procfs, bounded writes to kernel files, access sampling, launching tenants, and the Linux implementation of the controller's `Host` trait.
//!
//! Every reader takes the root it reads under, so tests run against fake trees in a temp dir.
//! Counters a kernel does not expose are `None`, never zero.

pub mod block;
pub mod cgroup;
pub mod fs;
pub mod host;
pub mod io_cgroup;
