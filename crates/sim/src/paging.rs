//! Host-side memory of all VMs: backing guest pages with machine frames, host paging with random victims (ESX), and making room when the machine is full.
//!
//! VMs are addressed by their index in the world's id-ordered list; `pmaps[i]` and
//! `targets[i]` belong to the same VM.

use crate::machine::Machine;
use crate::pmap::{PageState, Pmap};
use crate::rng::SimRng;

/// Random probes for a mapped victim PPN before falling back to a scan.
const VICTIM_PROBES: u32 = 32;

/// The host could not find a frame: no free memory and nothing could be paged out.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Stalled;

/// What backing one guest page took.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Backing {
    /// The page was unbacked: a frame was allocated and zero-filled (minor fault).
    pub minor_fault: bool,
    /// The page was in host swap and was read back.
    pub host_swap_in: bool,
    /// Pages the host paged out synchronously to find the frame.
    pub sync_swap_outs: u32,
}

/// Machine memory and every VM's pmap.
#[derive(Clone, Debug)]
pub struct HostMemory {
    pub machine: Machine,
    pub pmaps: Vec<Pmap>,
    /// Each VM's last target from the controller (`None` before the first decision).
    pub targets: Vec<Option<u64>>,
}

impl HostMemory {
    pub fn new(machine: Machine) -> HostMemory {
        HostMemory {
            machine,
            pmaps: Vec::new(),
            targets: Vec::new(),
        }
    }

    /// Makes `ppn` of VM `vm` mapped: allocates a frame for an unbacked (or ballooned)
    /// page, reads a host-swapped one back. A frame comes from free memory, else from a
    /// synchronous page-out (see [`HostMemory::make_room`]).
    pub fn back(&mut self, vm: usize, ppn: u32, rng: &mut SimRng) -> Result<Backing, Stalled> {
        let state = self.pmaps[vm].state(ppn);
        if state == PageState::Mapped {
            return Ok(Backing::default());
        }
        let sync_swap_outs = self.frame_for(vm, rng)?;
        let pmap = &mut self.pmaps[vm];
        let mut backing = Backing {
            sync_swap_outs,
            ..Backing::default()
        };
        if state == PageState::HostSwapped {
            self.machine.free_slot();
            pmap.counters.host_swap_ins += 1;
            backing.host_swap_in = true;
        } else {
            pmap.counters.first_touches += 1;
            backing.minor_fault = true;
        }
        pmap.set(ppn, PageState::Mapped);
        Ok(backing)
    }

    /// Takes a frame for VM `vm`, paging out victims while the machine has none; the
    /// number of pages paged out.
    fn frame_for(&mut self, vm: usize, rng: &mut SimRng) -> Result<u32, Stalled> {
        let mut outs = 0;
        loop {
            if self.machine.alloc_frame() {
                return Ok(outs);
            }
            self.make_room(vm, rng)?;
            outs += 1;
        }
    }

    /// Pages out one random page of the VM most above its target (ties: lowest id); if
    /// none is above target, of the faulting VM `vm`; if that holds nothing, of the VM
    /// holding the most. Fails when no VM holds a frame or host swap is full.
    pub fn make_room(&mut self, vm: usize, rng: &mut SimRng) -> Result<(), Stalled> {
        if !self.machine.swap_available() {
            return Err(Stalled);
        }
        let victim = self.victim_vm(vm).ok_or(Stalled)?;
        if self.page_out_random(victim, 1, rng) == 1 {
            Ok(())
        } else {
            Err(Stalled)
        }
    }

    /// Which VM gives up a page when the machine is full.
    pub fn victim_vm(&self, faulting: usize) -> Option<usize> {
        let mut best: Option<(usize, u64)> = None;
        for (i, (pmap, target)) in self.pmaps.iter().zip(&self.targets).enumerate() {
            let allocated = u64::from(pmap.mapped());
            let excess = target.map_or(0, |t| allocated.saturating_sub(t));
            let better = match best {
                Some((_, e)) => excess > e,
                None => true,
            };
            if excess > 0 && better {
                best = Some((i, excess));
            }
        }
        if let Some((i, _)) = best {
            return Some(i);
        }
        if self.pmaps.get(faulting).is_some_and(|p| p.mapped() > 0) {
            return Some(faulting);
        }
        let mut most: Option<(usize, u32)> = None;
        for (i, pmap) in self.pmaps.iter().enumerate() {
            let more = match most {
                Some((_, m)) => pmap.mapped() > m,
                None => true,
            };
            if pmap.mapped() > 0 && more {
                most = Some((i, pmap.mapped()));
            }
        }
        most.map(|(i, _)| i)
    }

    /// Pages out up to `n` randomly chosen mapped pages of VM `vm` to host swap (ESX's
    /// random victim selection); stops early when host swap is full or the VM holds no
    /// frame. Returns the pages paged out.
    pub fn page_out_random(&mut self, vm: usize, n: u64, rng: &mut SimRng) -> u64 {
        let mut done = 0;
        while done < n {
            if !self.machine.swap_available() {
                break;
            }
            let Some(ppn) = random_mapped(&self.pmaps[vm], rng) else {
                break;
            };
            if !self.page_out(vm, ppn) {
                break;
            }
            done += 1;
        }
        done
    }

    /// Pages out `ppn` of VM `vm` if it is mapped and a host swap slot is free.
    pub fn page_out(&mut self, vm: usize, ppn: u32) -> bool {
        if self.pmaps[vm].state(ppn) != PageState::Mapped || !self.machine.alloc_slot() {
            return false;
        }
        self.machine.free_frame();
        let pmap = &mut self.pmaps[vm];
        pmap.set(ppn, PageState::HostSwapped);
        pmap.counters.host_swap_outs += 1;
        true
    }

    /// The balloon took `ppn`: the host frees its frame or swap slot.
    pub fn balloon(&mut self, vm: usize, ppn: u32) {
        self.drop_backing(vm, ppn);
        self.pmaps[vm].set(ppn, PageState::Ballooned);
    }

    /// The balloon gave `ppn` back: unbacked until the guest touches it.
    pub fn unballoon(&mut self, vm: usize, ppn: u32) {
        self.drop_backing(vm, ppn);
        self.pmaps[vm].set(ppn, PageState::Unbacked);
    }

    fn drop_backing(&mut self, vm: usize, ppn: u32) {
        match self.pmaps[vm].state(ppn) {
            PageState::Mapped => self.machine.free_frame(),
            PageState::HostSwapped => self.machine.free_slot(),
            PageState::Ballooned | PageState::Unbacked => {}
        }
    }

    /// Adds a VM's pmap at index `at`.
    pub fn insert(&mut self, at: usize, pmap: Pmap) {
        self.pmaps.insert(at, pmap);
        self.targets.insert(at, None);
    }

    /// Removes the VM at index `at`, returning all its frames and host swap slots.
    pub fn remove(&mut self, at: usize) {
        let pmap = self.pmaps.remove(at);
        self.targets.remove(at);
        self.machine.give_back(pmap.mapped(), pmap.host_swapped());
    }
}

/// A random mapped PPN: a few uniform probes over all PPNs, then a scan from a random
/// start (so a VM holding any frame always yields one).
fn random_mapped(pmap: &Pmap, rng: &mut SimRng) -> Option<u32> {
    let n = pmap.len();
    if pmap.mapped() == 0 || n == 0 {
        return None;
    }
    for _ in 0..VICTIM_PROBES {
        let ppn = rng.below(u64::from(n)) as u32;
        if matches!(pmap.state(ppn), PageState::Mapped) {
            return Some(ppn);
        }
    }
    let start = rng.below(u64::from(n)) as u32;
    (start..n)
        .chain(0..start)
        .find(|&ppn| matches!(pmap.state(ppn), PageState::Mapped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::Pages;

    fn host(frames: u64, swap: u64, vms: &[u32]) -> HostMemory {
        let mut h = HostMemory::new(Machine::new(Pages(frames), Pages(swap)));
        for (i, &n) in vms.iter().enumerate() {
            h.insert(i, Pmap::new(n));
        }
        h
    }

    #[test]
    fn backing_an_unbacked_page_is_a_minor_fault() {
        let mut h = host(4, 0, &[2]);
        let mut rng = SimRng::new(1);
        let b = h.back(0, 1, &mut rng).unwrap();
        assert!(b.minor_fault && !b.host_swap_in);
        assert_eq!(h.pmaps[0].mapped(), 1);
        assert_eq!(h.machine.free(), Pages(3));
        assert_eq!(h.back(0, 1, &mut rng).unwrap(), Backing::default());
    }

    #[test]
    fn a_full_machine_pages_out_the_vm_most_above_target() {
        let mut h = host(4, 4, &[4, 4]);
        let mut rng = SimRng::new(2);
        for p in 0..3 {
            h.back(0, p, &mut rng).unwrap();
        }
        h.back(1, 0, &mut rng).unwrap();
        h.targets = vec![Some(1), Some(1)];
        let b = h.back(1, 1, &mut rng).unwrap();
        assert_eq!(b.sync_swap_outs, 1);
        assert_eq!(h.pmaps[0].mapped(), 2);
        assert_eq!(h.pmaps[0].host_swapped(), 1);
        assert_eq!(h.pmaps[1].mapped(), 2);
    }

    #[test]
    fn without_targets_the_faulting_vm_pays() {
        let mut h = host(2, 4, &[4, 4]);
        let mut rng = SimRng::new(3);
        h.back(0, 0, &mut rng).unwrap();
        h.back(1, 0, &mut rng).unwrap();
        h.back(1, 1, &mut rng).unwrap();
        assert_eq!(h.pmaps[0].mapped(), 1);
        assert_eq!(h.pmaps[1].mapped(), 1);
        assert_eq!(h.pmaps[1].host_swapped(), 1);
    }

    #[test]
    fn a_full_machine_without_swap_stalls() {
        let mut h = host(1, 0, &[2]);
        let mut rng = SimRng::new(4);
        h.back(0, 0, &mut rng).unwrap();
        assert_eq!(h.back(0, 1, &mut rng), Err(Stalled));
    }

    #[test]
    fn touching_a_host_swapped_page_swaps_it_in() {
        let mut h = host(4, 4, &[2]);
        let mut rng = SimRng::new(5);
        h.back(0, 0, &mut rng).unwrap();
        assert!(h.page_out(0, 0));
        assert_eq!(h.machine.swap_used(), Pages(1));
        let b = h.back(0, 0, &mut rng).unwrap();
        assert!(b.host_swap_in);
        assert_eq!(h.machine.swap_used(), Pages(0));
        assert_eq!(h.pmaps[0].counters.host_swap_ins, 1);
        assert_eq!(h.pmaps[0].counters.host_swap_outs, 1);
    }

    #[test]
    fn random_page_out_stops_when_swap_is_full() {
        let mut h = host(8, 2, &[8]);
        let mut rng = SimRng::new(6);
        for p in 0..8 {
            h.back(0, p, &mut rng).unwrap();
        }
        assert_eq!(h.page_out_random(0, 5, &mut rng), 2);
        assert_eq!(h.pmaps[0].mapped(), 6);
    }

    #[test]
    fn removing_a_vm_returns_frames_and_slots() {
        let mut h = host(4, 4, &[4]);
        let mut rng = SimRng::new(7);
        for p in 0..4 {
            h.back(0, p, &mut rng).unwrap();
        }
        h.page_out_random(0, 2, &mut rng);
        h.balloon(0, 0);
        h.remove(0);
        assert_eq!(h.machine.free(), Pages(4));
        assert_eq!(h.machine.swap_used(), Pages(0));
    }
}
