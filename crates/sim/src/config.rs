//! Plain parameters of the simulated host and its VMs, as built from a scenario.

use crate::disk::{DiskConfig, TenantDiskConfig};
use crate::remap::{IoRemapConfig, VmIoConfig};
use crate::sharing::{ContentMix, SharingConfig};
use crate::workload::WorkloadConfig;
use memtide_model::Pages;
use std::time::Duration;

/// The simulated machine.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// Machine memory (RAM).
    pub machine: Pages,
    /// Host swap space (0 = none).
    pub host_swap: Pages,
    /// Length of one tick of simulated time.
    pub tick: Duration,
    /// Content-based page sharing, where the host shares pages.
    pub sharing: Option<SharingConfig>,
    /// Hot I/O page remapping between low and high memory, where the host models it.
    pub io_remap: Option<IoRemapConfig>,
    /// The one disk the tenants share, where the host models it.
    pub disk: Option<DiskConfig>,
}

/// A VM's balloon driver.
#[derive(Clone, Debug, PartialEq)]
pub struct BalloonConfig {
    /// Most pages inflated or deflated per second.
    pub rate_per_s: Pages,
    /// Largest balloon the guest allows.
    pub limit: Pages,
    /// Time from power-on until the driver loads (ESX Fig. 8: Windows starts its balloon
    /// driver late in boot); until then the guest has no driver.
    pub starts_after: Duration,
}

/// ESX-style page sampling the host performs for this VM.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingSetup {
    pub sample_pages: u32,
    pub period: Duration,
}

/// What a simulated tenant is, and so which levers move its memory.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum TenantKind {
    /// A virtual machine: its guest OS behind a balloon driver (if it has one), its memory
    /// paged by the host where the balloon cannot reach (ESX).
    #[default]
    Vm,
    /// A container under a memory limit (a cgroup): no balloon and no host swap; the kernel
    /// reclaims within the limit at once when it is lowered, into the container's own swap
    /// (`guest_swap`) or by dropping page cache, and nothing can take `kernel` pages or
    /// anonymous pages with no swap left to hold them.
    Container,
}

/// One tenant of the simulated host: a VM or a container (`kind`). A container's "guest" is
/// the memory its processes see: the same OS model, with the limit in place of the balloon.
#[derive(Clone, Debug, PartialEq)]
pub struct VmConfig {
    pub kind: TenantKind,
    /// Configured ("physical") memory of the guest.
    pub max: Pages,
    /// Machine memory the host spends on this VM besides its allocation (pmap, frame buffer).
    pub overhead: Pages,
    /// Guest kernel memory: touched at boot, never reclaimable by the guest.
    pub kernel: Pages,
    /// The guest's own swap device.
    pub guest_swap: Pages,
    /// `None`: the guest has no balloon driver (always, for a container).
    pub balloon: Option<BalloonConfig>,
    /// Balloon size at power-on (e.g. to start a 2 GB VM at 263.3 MB).
    pub initial_balloon: Pages,
    /// `None`: the host does not sample this VM's pages.
    pub sampling: Option<SamplingSetup>,
    pub workload: WorkloadConfig,
    /// What its pages hold, for page sharing (all unique unless declared).
    pub content: ContentMix,
    /// Its I/O buffer pages and transfer rate, for I/O page remapping (none unless declared).
    pub io: Option<VmIoConfig>,
    /// What it does on the host's disk (nothing unless declared).
    pub disk: Option<TenantDiskConfig>,
}
