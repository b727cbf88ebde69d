//! memtide's third world: QEMU virtual machines, each in its own memory cgroup, controlled through QMP (the virtio balloon, the guest's statistics) and paged by the host through that cgroup when the balloon cannot.
//!
//! - `qmp/`: our own blocking QMP client (greeting and capabilities, commands by id with
//!   events skipped, one deadline per command, 1 MiB lines; the balloon, its QOM path found by
//!   `qom-list`, the guest's statistics with -1 as `None`, status, memory summary, quit;
//!   `QmpError` naming the socket);
//! - `vm`: `VmSource`, a `LaunchSpec` (kernel, initrd or disk, memory, CPUs, append, args, KVM
//!   or TCG) checked before anything starts, with its QEMU command line, or a QMP socket to
//!   adopt;
//! - `adopt`: a running VM's memory cgroup from its socket's peer pid, which it must hold alone;
//! - `host`: [`QemuHost`], the `World`. It wraps a `memtide_linux` `LinuxHost`: a cgroup
//!   tenant passes through; a VM is a Linux tenant in its own cgroup whose observation the
//!   world turns into a VM's — what it holds is its guest memory resident in QEMU (the largest
//!   mapping of QEMU's smaps, `memtide_linux::fs::mapping`, read every 10 observations), its
//!   levers the balloon (`query-balloon`, `free_unbacked`) and host swap (its cgroup's swap,
//!   the cgroup's limit lowered by what host swap pages out and raised with the target), its
//!   swap-ins and refaults the guest's own; `apply` sends balloon targets that moved by a MiB
//!   and pauses the VM while blocked. A [`Record`] keeps the Linux record with the VM's socket
//!   and the balloon it was found with, given back on detach and by `restore` after a crash.
//!
//! The daemon runs it as its one world. Tests: `tests/qmp.rs` against a real QEMU with no
//! guest; `crates/cli/tests/linux/vm.rs` with real guests from `scripts/guest-image.sh`.
//! See docs/vms.md.

pub mod adopt;
pub mod host;
pub mod qmp;
pub mod vm;

pub use host::{
    ContainerPlacement, DomainPlacement, DomainRef, Placement, QemuError, QemuHost, QemuOptions,
    Record, VmPlacement, VmRecord,
};
