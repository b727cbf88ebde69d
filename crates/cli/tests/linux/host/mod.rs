//! The real-host tests' helpers: the kit (root and cgroup check, test cgroups, zram, a daemon
//! driven through its API, the waits, the skip rule) and this binary's own servers and guests
//! (a disk under BFQ, private Docker and Podman engines, a private libvirt, MariaDB, Redis, a
//! QEMU guest).

// Some fields are held only for their Drop (a VM's cgroup, a server's log) and some helpers
// serve one module only, as when every test file included these one by one.
#![allow(dead_code)]

pub use memtide_testkit::*;

pub mod disk;
pub mod engines;
pub mod libvirt;
pub mod mariadb;
pub mod redis;
pub mod v2guest;
pub mod vm;
