//! Hot I/O page remapping (ESX §7): devices that DMA only below the 4 GB line reach pages in high memory through a bounce buffer in low memory, one copy per transfer; the host counts each I/O page's copies and, past a threshold, remaps the page into low memory, transparently to the guest.
//!
//! **Model.** Machine memory below `low_memory` is low, the rest high. The host places guest
//! pages without regard to the line, so a VM's I/O buffer pages (its guest's network buffers,
//! a small set of pages used over and over) each start in low memory with probability
//! `low / machine`. Every transfer picks one buffer page at random: from a high page it is a
//! bounce copy, and the page's copy count goes up; once the count passes `threshold` the page
//! is remapped into a free low page, if there is one, and its later transfers need no copy
//! (counted as copies avoided). Free memory is taken to be spread evenly over the address
//! space, so the low pages free for remapping are `free × low / machine` less those remapping
//! already took; when there are none the remap is refused and the page keeps being copied
//! (the paper leaves replacing low pages to future work, and so does this model). A remap
//! moves a page from one frame to another: it changes no VM's allocation.
//!
//! Deterministic (its own random stream); cost O(transfers) per tick, one `u32` per buffer page.

use crate::machine::Machine;
use crate::rng::SimRng;
use memtide_model::{IoRemapping, Pages};

/// The host's low memory and when a page is hot.
#[derive(Clone, Debug, PartialEq)]
pub struct IoRemapConfig {
    /// Machine memory below the DMA line (4 GB on the paper's PAE hosts).
    pub low_memory: Pages,
    /// Copies of a page after which it is remapped into low memory; `None`: never remapped
    /// (every transfer from high memory is copied).
    pub threshold: Option<u32>,
}

/// A VM's I/O: how many buffer pages it transfers from, and how often.
#[derive(Clone, Debug, PartialEq)]
pub struct VmIoConfig {
    pub buffers: Pages,
    pub transfers_per_sec: f64,
}

/// A buffer page: where it is, and its copies so far. `REMAPPED` marks a page remapping moved
/// to low memory; `LOW` one that was there from the start.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Buffer(u32);

impl Buffer {
    const LOW: u32 = 1 << 31;
    const REMAPPED: u32 = 1 << 30;
    const COPIES: u32 = (1 << 30) - 1;

    fn copies(self) -> u32 {
        self.0 & Self::COPIES
    }
}

#[derive(Clone, Debug, Default)]
struct VmIo {
    buffers: Vec<Buffer>,
    transfers_per_sec: f64,
    /// Fractional transfers carried to the next tick.
    carry: f64,
}

/// The host's I/O page remapping across its VMs (indexed as the world's `vms`).
#[derive(Clone, Debug)]
pub struct IoRemap {
    config: IoRemapConfig,
    rng: SimRng,
    vms: Vec<VmIo>,
    counts: IoRemapping,
}

impl IoRemap {
    pub fn new(config: IoRemapConfig, rng: SimRng) -> IoRemap {
        IoRemap {
            config,
            rng,
            vms: Vec::new(),
            counts: IoRemapping::default(),
        }
    }

    /// Low memory on `machine` (at most all of it).
    fn low(&self, machine: &Machine) -> u64 {
        self.config.low_memory.0.min(machine.total().0)
    }

    /// Adds the VM at index `at`, its buffer pages placed at random across the line.
    pub fn insert(&mut self, at: usize, io: Option<&VmIoConfig>, machine: &Machine) {
        let mut vm = VmIo::default();
        if let Some(io) = io {
            let p_low = self.low(machine) as f64 / machine.total().0.max(1) as f64;
            vm.transfers_per_sec = io.transfers_per_sec;
            vm.buffers = (0..io.buffers.0)
                .map(|_| {
                    Buffer(if self.rng.chance(p_low) {
                        Buffer::LOW
                    } else {
                        0
                    })
                })
                .collect();
        }
        self.vms.insert(at, vm);
    }

    /// Removes the VM at index `at`; the low pages its remapped buffers held are free again.
    pub fn remove(&mut self, at: usize) {
        let vm = self.vms.remove(at);
        let remapped = vm
            .buffers
            .iter()
            .filter(|b| b.0 & Buffer::REMAPPED != 0)
            .count() as u64;
        self.counts.remapped = self.counts.remapped.saturating_sub(Pages(remapped));
    }

    /// One tick of `seconds`: every VM's transfers, copies and remaps.
    pub fn run(&mut self, seconds: f64, machine: &Machine) {
        let low = self.low(machine);
        // Low pages free for remapping: the low share of free memory, less what remapping took.
        let low_free =
            (machine.free().0 as f64 * low as f64 / machine.total().0.max(1) as f64) as u64;
        let mut available = low_free.saturating_sub(self.counts.remapped.0);
        let threshold = self.config.threshold;
        for vm in &mut self.vms {
            if vm.buffers.is_empty() {
                continue;
            }
            let due = vm.transfers_per_sec * seconds + vm.carry;
            let n = due.floor() as u64;
            vm.carry = due - n as f64;
            let pages = vm.buffers.len() as u64;
            for _ in 0..n {
                let b = &mut vm.buffers[self.rng.below(pages) as usize];
                self.counts.transmits += 1;
                if b.0 & Buffer::REMAPPED != 0 {
                    self.counts.avoided += 1;
                    continue;
                }
                if b.0 & Buffer::LOW != 0 {
                    continue;
                }
                self.counts.copies += 1;
                if b.copies() < Buffer::COPIES {
                    b.0 += 1;
                }
                if threshold.is_some_and(|t| b.copies() > t) {
                    if available > 0 {
                        available -= 1;
                        b.0 = Buffer::LOW | Buffer::REMAPPED;
                        self.counts.remaps += 1;
                        self.counts.remapped += Pages(1);
                    } else {
                        self.counts.refused += 1;
                    }
                }
            }
        }
    }

    /// The lifetime counts.
    pub fn observe(&self) -> IoRemapping {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(mib: u64) -> Machine {
        Machine::new(Pages::from_mib(mib), Pages::ZERO)
    }

    fn remap(threshold: Option<u32>) -> IoRemap {
        remap_low(256, threshold)
    }

    fn remap_low(low_mib: u64, threshold: Option<u32>) -> IoRemap {
        IoRemap::new(
            IoRemapConfig {
                low_memory: Pages::from_mib(low_mib),
                threshold,
            },
            SimRng::new(5),
        )
    }

    fn io(buffers: u64, rate: f64) -> VmIoConfig {
        VmIoConfig {
            buffers: Pages(buffers),
            transfers_per_sec: rate,
        }
    }

    #[test]
    fn hot_pages_are_remapped_and_copies_fall_by_orders_of_magnitude() {
        let m = machine(1024);
        let (mut on, mut off) = (remap(Some(32)), remap(None));
        for r in [&mut on, &mut off] {
            r.insert(0, Some(&io(64, 10_000.0)), &m);
            for _ in 0..60 {
                r.run(1.0, &m);
            }
        }
        let (a, b) = (on.observe(), off.observe());
        assert_eq!(a.transmits, 600_000);
        assert_eq!(b.transmits, 600_000);
        // A quarter of the machine is low: about three buffers in four start high.
        assert!((300_000..600_000).contains(&b.copies), "{b:?}");
        assert_eq!(b.remaps, 0);
        assert!(a.copies * 100 < b.copies, "{a:?} vs {b:?}");
        assert!(a.remaps > 0 && a.remapped.0 == a.remaps);
        // The same stream picks the same buffers in both: each copy not made was avoided.
        assert_eq!(a.avoided + a.copies, b.copies);
    }

    #[test]
    fn without_free_low_memory_a_remap_is_refused_and_copies_go_on() {
        let mut m = machine(64);
        while m.alloc_frame() {}
        let mut r = remap_low(16, Some(1));
        r.insert(0, Some(&io(8, 1_000.0)), &m);
        r.run(10.0, &m);
        let c = r.observe();
        assert_eq!(c.remaps, 0);
        assert!(c.refused > 0 && c.copies > 0, "{c:?}");
    }

    #[test]
    fn a_removed_vm_gives_its_low_pages_back_and_a_vm_without_io_transfers_nothing() {
        let m = machine(1024);
        let mut r = remap(Some(2));
        r.insert(0, None, &m);
        r.insert(1, Some(&io(16, 5_000.0)), &m);
        r.run(1.0, &m);
        assert!(r.observe().remapped > Pages::ZERO);
        assert_eq!(r.observe().transmits, 5_000);
        r.remove(1);
        assert_eq!(r.observe().remapped, Pages::ZERO);
        r.run(1.0, &m);
        assert_eq!(r.observe().transmits, 5_000);
    }
}
