//! Host-side memory of all VMs: backing guest pages with machine frames, host paging with random victims (ESX), and making room when the machine is full.
//!
//! VMs are addressed by their index in the world's id-ordered list; `pmaps[i]` and
//! `targets[i]` belong to the same VM.

use crate::machine::Machine;
use crate::pmap::{PageState, Pmap};
use crate::rng::SimRng;
use crate::sharing::{ContentMix, Offer, Sharing, Write};
use crate::victims::Victims;

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
    /// Pages the host paged out synchronously to find the frame (pages shared instead are
    /// not counted: they cost no write).
    pub sync_swap_outs: u32,
}

/// Machine memory and every VM's pmap.
#[derive(Clone, Debug)]
pub struct HostMemory {
    pub machine: Machine,
    pub pmaps: Vec<Pmap>,
    /// Each VM's last target from the controller (`None` before the first decision).
    targets: Vec<Option<u64>>,
    /// Where the next victim VM is found; every method that changes a VM's pmap or target
    /// marks that VM in it (so pmaps change only through these methods, or the VM is marked).
    victims: Victims,
    /// Content-based page sharing, where the host shares pages.
    pub sharing: Option<Sharing>,
}

/// How host paging reclaimed a page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reclaimed {
    /// Written to host swap.
    Swapped,
    /// Shared with an identical page instead (share before swap).
    Shared,
}

/// Pages host paging reclaimed, by how.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PagedOut {
    pub swapped: u64,
    pub shared: u64,
}

impl HostMemory {
    pub fn new(machine: Machine) -> HostMemory {
        HostMemory {
            machine,
            pmaps: Vec::new(),
            targets: Vec::new(),
            victims: Victims::default(),
            sharing: None,
        }
    }

    /// The guest wrote `what` into mapped `ppn` of VM `vm`. A shared page first gets a private
    /// copy (copy-on-write: a frame, found as [`HostMemory::back`] finds one); returns whether
    /// it did, and the pages paged out to find the frame. Without sharing, nothing happens.
    pub fn write(
        &mut self,
        vm: usize,
        ppn: u32,
        what: Write,
        rng: &mut SimRng,
    ) -> Result<(bool, u32), Stalled> {
        if self.sharing.is_none() {
            return Ok((false, 0));
        }
        let mut copy = (false, 0);
        self.victims.mark(vm);
        if self.pmaps[vm].is_shared(ppn) {
            copy = (true, self.frame_for(vm, rng)?);
            if let Some(s) = &mut self.sharing {
                s.broke(vm, ppn, &mut self.pmaps[vm], &mut self.machine);
            }
        }
        if let Some(s) = &mut self.sharing {
            s.write(vm, ppn, what);
        }
        Ok(copy)
    }

    /// One tick's page-sharing scan of `rate` pages per second over a tick of `seconds`.
    pub fn scan(&mut self, rate: u64, seconds: f64) {
        if let Some(s) = &mut self.sharing {
            s.scan(rate, seconds, &mut self.pmaps, &mut self.machine);
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
        self.victims.mark(vm);
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
            if self.make_room(vm, rng)? == Reclaimed::Swapped {
                outs += 1;
            }
        }
    }

    /// Pages out one random page of the VM most above its target (ties: lowest id); if
    /// none is above target, of the faulting VM `vm`; if that holds nothing, of the VM
    /// holding the most. Fails when no VM holds a frame or host swap is full.
    pub fn make_room(&mut self, vm: usize, rng: &mut SimRng) -> Result<Reclaimed, Stalled> {
        if !self.machine.swap_available() {
            return Err(Stalled);
        }
        let victim = self.victim_vm(vm).ok_or(Stalled)?;
        match self.page_out_random(victim, 1, rng) {
            PagedOut { swapped: 1, .. } => Ok(Reclaimed::Swapped),
            PagedOut { shared: 1, .. } => Ok(Reclaimed::Shared),
            _ => Err(Stalled),
        }
    }

    /// VM `vm`'s target from the controller's last decision.
    pub fn set_target(&mut self, vm: usize, target: u64) {
        self.targets[vm] = Some(target);
        self.victims.mark(vm);
    }

    /// Which VM gives up a page when the machine is full.
    pub fn victim_vm(&mut self, faulting: usize) -> Option<usize> {
        if self.sharing.is_some() {
            // Sharing a page changes the pmaps of the other VMs that map its frame.
            self.victims.mark_all();
        }
        if let Some(vm) = self.victims.most_above_target(&self.pmaps, &self.targets) {
            return Some(vm);
        }
        let own = |p: &Pmap| p.mapped() - p.shared();
        if self.pmaps.get(faulting).is_some_and(|p| own(p) > 0) {
            return Some(faulting);
        }
        self.victims.most_own(&self.pmaps, &self.targets)
    }

    /// Pages out up to `n` randomly chosen pages of VM `vm` held in frames of its own (ESX's
    /// random victim selection), each shared instead where an identical page exists (share
    /// before swap); stops early when host swap is full or the VM holds no frame of its own.
    pub fn page_out_random(&mut self, vm: usize, n: u64, rng: &mut SimRng) -> PagedOut {
        let mut done = PagedOut::default();
        while done.swapped + done.shared < n {
            if !self.machine.swap_available() {
                break;
            }
            let Some(ppn) = random_private(&self.pmaps[vm], rng) else {
                break;
            };
            match self.page_out(vm, ppn) {
                Some(Reclaimed::Swapped) => done.swapped += 1,
                Some(Reclaimed::Shared) => done.shared += 1,
                None => break,
            }
        }
        done
    }

    /// Reclaims `ppn` of VM `vm` if it is held in a frame of its own: shared with an
    /// identical page if the sharing table knows one, else paged out if a host swap slot is
    /// free.
    pub fn page_out(&mut self, vm: usize, ppn: u32) -> Option<Reclaimed> {
        if !self.pmaps[vm].is_private(ppn) {
            return None;
        }
        if let Some(s) = &mut self.sharing {
            if s.offer(vm, ppn, false, &mut self.pmaps, &mut self.machine) == Offer::Shared {
                s.counters.shared_before_swap += 1;
                return Some(Reclaimed::Shared);
            }
        }
        if !self.machine.alloc_slot() {
            return None;
        }
        self.machine.free_frame();
        self.victims.mark(vm);
        let pmap = &mut self.pmaps[vm];
        pmap.set(ppn, PageState::HostSwapped);
        pmap.counters.host_swap_outs += 1;
        Some(Reclaimed::Swapped)
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
        self.victims.mark(vm);
        match self.pmaps[vm].state(ppn) {
            PageState::Mapped if self.pmaps[vm].is_shared(ppn) => {
                if let Some(s) = &mut self.sharing {
                    s.unshare(vm, ppn, &mut self.pmaps[vm], &mut self.machine);
                }
            }
            PageState::Mapped => self.machine.free_frame(),
            PageState::HostSwapped => self.machine.free_slot(),
            PageState::Ballooned | PageState::Unbacked => {}
        }
    }

    /// Adds VM `tenant`'s pmap at index `at`, its pages holding `content` where the host
    /// shares pages.
    pub fn insert(&mut self, at: usize, pmap: Pmap, tenant: u32, content: &ContentMix) {
        if let Some(s) = &mut self.sharing {
            s.insert(at, tenant, content, pmap.len());
        }
        self.pmaps.insert(at, pmap);
        self.targets.insert(at, None);
        self.victims = Victims::new(self.pmaps.len());
    }

    /// Removes the VM at index `at`, returning all its frames and host swap slots and its
    /// references to shared frames.
    pub fn remove(&mut self, at: usize) {
        let pmap = self.pmaps.remove(at);
        self.targets.remove(at);
        self.victims = Victims::new(self.pmaps.len());
        if let Some(s) = &mut self.sharing {
            s.remove(at, &pmap, &mut self.machine);
        }
        self.machine
            .give_back(pmap.mapped() - pmap.shared(), pmap.host_swapped());
    }
}

/// A random PPN mapped to a frame of the VM's own: a few uniform probes over all PPNs, then
/// a scan from a random start (so a VM holding any frame of its own always yields one). Shared
/// pages are never victims: paging one out frees no frame while others map it.
fn random_private(pmap: &Pmap, rng: &mut SimRng) -> Option<u32> {
    let n = pmap.len();
    if pmap.mapped() == pmap.shared() || n == 0 {
        return None;
    }
    for _ in 0..VICTIM_PROBES {
        let ppn = rng.below(u64::from(n)) as u32;
        if pmap.is_private(ppn) {
            return Some(ppn);
        }
    }
    let start = rng.below(u64::from(n)) as u32;
    pmap.next_private(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::Pages;

    fn host(frames: u64, swap: u64, vms: &[u32]) -> HostMemory {
        let mut h = HostMemory::new(Machine::new(Pages(frames), Pages(swap)));
        for (i, &n) in vms.iter().enumerate() {
            h.insert(i, Pmap::new(n), i as u32, &ContentMix::default());
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
        h.set_target(0, 1);
        h.set_target(1, 1);
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
        assert_eq!(h.page_out(0, 0), Some(Reclaimed::Swapped));
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
        assert_eq!(h.page_out_random(0, 5, &mut rng).swapped, 2);
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
