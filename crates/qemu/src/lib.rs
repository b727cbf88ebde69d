//! memtide's third world: QEMU virtual machines, each in its own memory cgroup, controlled through QMP (the virtio balloon, the guest's statistics) and paged by the host through that cgroup when the balloon cannot.

pub mod adopt;
pub mod host;
pub mod qmp;
pub mod vm;

pub use host::{Placement, QemuError, QemuHost, QemuOptions, Record, VmPlacement, VmRecord};
