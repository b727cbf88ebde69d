//! Content-based page sharing on the simulated host (ESX §4): a random scan hashes guest pages into one global table, identical pages are mapped copy-on-write to one machine frame, a write breaks the sharing, and host paging shares a victim before it swaps it.
//!
//! The mechanism, step by step as ESX §4.2–4.3 describe it:
//!
//! - **Scan.** Each tick the scanner looks at `rate` random guest pages host-wide (the rate
//!   the policy decides: `memtide_policy::mechanism::scan_rate`), spread evenly over the VMs
//!   and at most `per_vm_rate` in one VM. A page is written out as bytes and hashed (XXH3).
//! - **Match a shared frame.** The candidate's bytes and the frame's are compared in full; if
//!   equal, the guest page is mapped to the shared frame, its own frame freed, the count
//!   raised. A false match (same hash, different bytes) leaves the page unshared.
//! - **Match a hint.** The hint's page is rehashed: if it changed, or is no longer mapped to a
//!   frame of its own, the hint is stale and the candidate takes its place. Otherwise the two
//!   are compared in full and, if equal, the hint's frame becomes a shared frame with both
//!   pages mapped to it (count 2) and the candidate's frame is freed.
//! - **No match.** The page is recorded as a hint; it is not marked copy-on-write.
//! - **Write.** A write to a shared page takes a private copy (a new frame) and lowers the
//!   count; the last reference gone frees the shared frame.
//! - **Share before swap.** Host paging first tries to share its victim (without leaving a
//!   hint); only a page that matches nothing goes to swap.
//!
//! Accounting keeps ESX's two figures apart: pages **shared** (guest pages mapped to shared
//! frames, counted in each VM's allocation as in ESX) and memory **reclaimed** (shared less one
//! copy per frame), with zero pages counted apart. The table's own memory is reported
//! (16 bytes per slot, `table.rs`). Hints whose page is gone are swept when hints outnumber
//! the pages that could hold them.
//!
//! Cost: one page written out and hashed per page scanned (two, plus a compare, on a match);
//! O(1) table work. Hashing runs at memory speed (`memtide bench`, docs/benchmarks.md).

pub mod content;
mod table;

pub use content::{Content, ContentMix, TenantContents};

use crate::machine::Machine;
use crate::pmap::Pmap;
use crate::rng::SimRng;
use content::{hash_page, write_page, PAGE_BYTES};
use memtide_model::{Bytes, HostSharing, Pages, SharingLever};
use table::{Entry, Table};

/// The host's sharing settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SharingConfig {
    /// Most pages scanned in one VM per second (ESX's per-VM rate).
    pub per_vm_rate: u64,
}

/// What happened to one page offered for sharing.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Mapped to a shared frame: its own frame is free.
    Shared,
    /// Recorded as a hint.
    Hinted,
    /// Nothing: not a private page, already hinted, or a false match.
    Kept,
}

/// What the guest wrote into a page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// The workload's anonymous page, first written.
    Anon(u32),
    /// A kernel page at boot.
    Kernel(u32),
    /// A file block read from disk.
    File(u32),
    /// Anything else: contents of its own.
    Modified,
}

/// Counters over the host's life.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SharingCounters {
    pub scanned: u64,
    /// Pages shared by the scan, and by host paging instead of a swap-out.
    pub shared_by_scan: u64,
    pub shared_before_swap: u64,
    /// Writes that broke sharing (copy-on-write faults).
    pub cow_breaks: u64,
    pub stale_hints: u64,
    pub false_matches: u64,
}

/// One VM's part: its slot in hint frames, its pages' contents and its shared zero pages.
#[derive(Clone, Debug)]
struct VmPart {
    slot: u16,
    tenant: TenantContents,
    contents: Vec<Content>,
    zero: u32,
}

/// Content-based page sharing across the host's VMs, indexed like `HostMemory::pmaps`.
#[derive(Clone, Debug)]
pub struct Sharing {
    config: SharingConfig,
    table: Table,
    /// The contents of each shared frame, by frame; `free` lists unused entries.
    frames: Vec<Content>,
    free: Vec<u32>,
    vms: Vec<VmPart>,
    rng: SimRng,
    a: Box<[u8; PAGE_BYTES]>,
    b: Box<[u8; PAGE_BYTES]>,
    pub counters: SharingCounters,
    /// `counters.scanned` at the last observation.
    scanned_seen: u64,
}

impl Sharing {
    pub fn new(config: SharingConfig, rng: SimRng) -> Sharing {
        Sharing {
            config,
            table: Table::new(),
            frames: Vec::new(),
            free: Vec::new(),
            vms: Vec::new(),
            rng,
            a: Box::new([0; PAGE_BYTES]),
            b: Box::new([0; PAGE_BYTES]),
            counters: SharingCounters::default(),
            scanned_seen: 0,
        }
    }

    /// Adds VM `tenant` (its id) at index `at`, with `pages` PPNs holding `mix`.
    pub fn insert(&mut self, at: usize, tenant: u32, mix: &ContentMix, pages: u32) {
        let mut slot = 0u16;
        while self.vms.iter().any(|v| v.slot == slot) {
            slot += 1;
        }
        self.vms.insert(
            at,
            VmPart {
                slot,
                tenant: TenantContents::new(tenant, mix),
                contents: vec![Content::ZERO; pages as usize],
                zero: 0,
            },
        );
    }

    /// Removes the VM at `at`, dropping its references to shared frames (its hints go stale).
    /// Its pmap is left as it was: its frames of its own are `mapped - shared`.
    pub fn remove(&mut self, at: usize, pmap: &Pmap, machine: &mut Machine) {
        for ppn in 0..pmap.len() {
            if pmap.is_shared(ppn) {
                self.release(at, ppn, machine);
            }
        }
        self.vms.remove(at);
    }

    /// Records what the guest wrote into `ppn` of VM `at`, which must not be shared.
    pub fn write(&mut self, at: usize, ppn: u32, what: Write) {
        let vm = &mut self.vms[at];
        let c = match what {
            Write::Anon(page) => vm.tenant.anon(page),
            Write::Kernel(ppn) => vm.tenant.kernel(ppn),
            Write::File(block) => vm.tenant.file(block),
            Write::Modified => vm.tenant.written(),
        };
        if let Some(slot) = vm.contents.get_mut(ppn as usize) {
            *slot = c;
        }
    }

    /// Unmaps `ppn` of VM `at` from its shared frame (freeing the frame with its last
    /// reference); the caller gives the page a frame of its own or none.
    pub fn unshare(&mut self, at: usize, ppn: u32, pmap: &mut Pmap, machine: &mut Machine) {
        self.release(at, ppn, machine);
        pmap.set_shared(ppn, false);
    }

    /// Drops VM `at`'s reference from `ppn`'s shared frame.
    fn release(&mut self, at: usize, ppn: u32, machine: &mut Machine) {
        let c = self.vms[at].contents[ppn as usize];
        let hash = self.hash_a(c);
        if let Some((pos, Entry::Shared { frame, refs })) = self.table.find(hash) {
            if refs <= 1 {
                self.table.remove(pos);
                self.free.push(frame);
                machine.free_frame();
            } else {
                self.table.set(
                    pos,
                    Entry::Shared {
                        frame,
                        refs: refs - 1,
                    },
                );
            }
        } else {
            debug_assert!(false, "shared page without a shared frame");
        }
        if c.is_zero() {
            self.vms[at].zero -= 1;
        }
    }

    /// A write to shared `ppn` took a private copy (the caller took its frame).
    pub fn broke(&mut self, at: usize, ppn: u32, pmap: &mut Pmap, machine: &mut Machine) {
        self.unshare(at, ppn, pmap, machine);
        self.counters.cow_breaks += 1;
    }

    fn hash_a(&mut self, c: Content) -> u64 {
        write_page(c, &mut self.a);
        hash_page(&self.a)
    }

    fn slot_index(&self, slot: u16) -> Option<usize> {
        self.vms.iter().position(|v| v.slot == slot)
    }

    /// Offers private `ppn` of VM `at` for sharing; `hint`: record it as a hint when nothing
    /// matches (the scan does, share-before-swap does not).
    pub fn offer(
        &mut self,
        at: usize,
        ppn: u32,
        hint: bool,
        pmaps: &mut [Pmap],
        machine: &mut Machine,
    ) -> Offer {
        if !pmaps[at].is_private(ppn) {
            return Offer::Kept;
        }
        let c = self.vms[at].contents[ppn as usize];
        let hash = self.hash_a(c);
        let me = (self.vms[at].slot, ppn);
        match self.table.find(hash) {
            Some((pos, Entry::Shared { frame, refs })) => {
                write_page(self.frames[frame as usize], &mut self.b);
                if self.a != self.b {
                    self.counters.false_matches += 1;
                    return Offer::Kept;
                }
                self.table.set(
                    pos,
                    Entry::Shared {
                        frame,
                        refs: refs + 1,
                    },
                );
                self.map_shared(at, ppn, c, &mut pmaps[at]);
                machine.free_frame();
                Offer::Shared
            }
            Some((pos, Entry::Hint { slot, ppn: other })) => {
                if (slot, other) == me {
                    return Offer::Kept;
                }
                let live = self
                    .slot_index(slot)
                    .filter(|&v| pmaps[v].is_private(other))
                    .map(|v| (v, self.vms[v].contents[other as usize]));
                // Rehash the hint's page: a changed hash is a stale hint.
                let fresh = live.filter(|&(_, oc)| {
                    write_page(oc, &mut self.b);
                    hash_page(&self.b) == hash
                });
                let Some((v, oc)) = fresh else {
                    self.counters.stale_hints += 1;
                    if hint {
                        self.table.set(pos, Entry::Hint { slot: me.0, ppn });
                        return Offer::Hinted;
                    }
                    self.table.remove(pos);
                    return Offer::Kept;
                };
                if self.a != self.b {
                    self.counters.false_matches += 1;
                    return Offer::Kept;
                }
                let frame = match self.free.pop() {
                    Some(f) => {
                        self.frames[f as usize] = oc;
                        f
                    }
                    None => {
                        self.frames.push(oc);
                        (self.frames.len() - 1) as u32
                    }
                };
                self.table.set(pos, Entry::Shared { frame, refs: 2 });
                self.map_shared(v, other, oc, &mut pmaps[v]);
                self.map_shared(at, ppn, c, &mut pmaps[at]);
                machine.free_frame();
                Offer::Shared
            }
            None => {
                if !hint {
                    return Offer::Kept;
                }
                self.table.insert(hash, Entry::Hint { slot: me.0, ppn });
                Offer::Hinted
            }
        }
    }

    fn map_shared(&mut self, at: usize, ppn: u32, c: Content, pmap: &mut Pmap) {
        pmap.set_shared(ppn, true);
        if c.is_zero() {
            self.vms[at].zero += 1;
        }
    }

    /// One tick's scan of `rate` random pages, spread over the VMs, at most `per_vm_rate`
    /// each (`seconds`: the tick's length).
    pub fn scan(&mut self, rate: u64, seconds: f64, pmaps: &mut [Pmap], machine: &mut Machine) {
        let n = self.vms.len();
        let mut left = (rate as f64 * seconds).round() as u64;
        let per_vm = (self.config.per_vm_rate as f64 * seconds).round() as u64;
        for at in 0..n {
            let quota = (left / (n - at) as u64).min(per_vm);
            left -= quota;
            let pages = pmaps[at].len();
            if pages == 0 {
                continue;
            }
            for _ in 0..quota {
                let ppn = self.rng.below(u64::from(pages)) as u32;
                self.counters.scanned += 1;
                if self.offer(at, ppn, true, pmaps, machine) == Offer::Shared {
                    self.counters.shared_by_scan += 1;
                }
            }
        }
        let private: u64 = pmaps
            .iter()
            .map(|p| u64::from(p.mapped() - p.shared()))
            .sum();
        if self.table.hints() as u64 > 2 * (private + 1024) {
            self.sweep_hints(pmaps);
        }
    }

    /// Drops every stale hint: its VM gone, its page no longer a private page, or its
    /// contents changed since it was hashed (a rehash per hint: run only when hints outnumber
    /// twice the pages that could hold them, so its cost is amortised over as many inserts).
    fn sweep_hints(&mut self, pmaps: &[Pmap]) {
        let (vms, page) = (&self.vms, &mut self.b);
        self.table.retain_hints(|hash, slot, ppn| {
            let Some(v) = vms.iter().position(|v| v.slot == slot) else {
                return false;
            };
            if !pmaps[v].is_private(ppn) {
                return false;
            }
            write_page(vms[v].contents[ppn as usize], page);
            hash_page(page) == hash
        });
    }

    /// Host-wide figures, the pages scanned since the last call among them.
    pub fn observe(&mut self, pmaps: &[Pmap]) -> HostSharing {
        let shared: u64 = pmaps.iter().map(|p| u64::from(p.shared())).sum();
        let zero: u64 = self.vms.iter().map(|v| u64::from(v.zero)).sum();
        let scanned = self.counters.scanned - self.scanned_seen;
        self.scanned_seen = self.counters.scanned;
        HostSharing {
            shared: Pages(shared),
            frames: Pages(self.table.shared_frames() as u64),
            zero: Some(Pages(zero)),
            metadata: Some(Bytes(self.table.bytes())),
            scanned: Some(scanned),
            cpu: None,
        }
    }

    /// VM `at`'s sharing lever: what it has shared (the scan merges as it finds, so nothing
    /// is left known-identical and unmerged).
    pub fn lever(&self, at: usize, pmap: &Pmap) -> SharingLever {
        SharingLever {
            shared: Pages(u64::from(pmap.shared())),
            shareable: Pages::ZERO,
            zero: Some(Pages(u64::from(self.vms[at].zero))),
            profit: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmap::PageState;

    fn host(vms: &[(u32, &ContentMix)], pages: u32) -> (Sharing, Vec<Pmap>, Machine) {
        let mut s = Sharing::new(
            SharingConfig {
                per_vm_rate: 1 << 20,
            },
            SimRng::new(1),
        );
        let mut machine = Machine::new(Pages(1 << 20), Pages(0));
        let mut pmaps = Vec::new();
        for (at, &(id, mix)) in vms.iter().enumerate() {
            s.insert(at, id, mix, pages);
            let mut p = Pmap::new(pages);
            for ppn in 0..pages {
                assert!(machine.alloc_frame());
                p.set(ppn, PageState::Mapped);
                s.write(at, ppn, Write::Anon(ppn));
            }
            pmaps.push(p);
        }
        (s, pmaps, machine)
    }

    fn common() -> ContentMix {
        ContentMix {
            image: "linux".into(),
            common: 1.0,
            ..ContentMix::default()
        }
    }

    #[test]
    fn a_hint_then_a_match_shares_one_frame_between_two_vms() {
        let mix = common();
        let (mut s, mut pmaps, mut m) = host(&[(1, &mix), (2, &mix)], 4);
        let used = m.in_use();
        assert_eq!(s.offer(0, 2, true, &mut pmaps, &mut m), Offer::Hinted);
        assert_eq!(s.offer(0, 2, true, &mut pmaps, &mut m), Offer::Kept);
        assert_eq!(s.offer(1, 2, true, &mut pmaps, &mut m), Offer::Shared);
        assert!(pmaps[0].is_shared(2) && pmaps[1].is_shared(2));
        assert_eq!(m.in_use(), used - Pages(1));
        let h = s.observe(&pmaps);
        assert_eq!(
            (h.shared, h.frames, h.reclaimed()),
            (Pages(2), Pages(1), Pages(1))
        );
        // Allocation still counts the shared page in each VM, as ESX does.
        assert_eq!((pmaps[0].mapped(), pmaps[1].mapped()), (4, 4));
    }

    #[test]
    fn a_write_to_a_hinted_page_makes_its_hint_stale() {
        let mix = common();
        let (mut s, mut pmaps, mut m) = host(&[(1, &mix), (2, &mix)], 4);
        assert_eq!(s.offer(0, 1, true, &mut pmaps, &mut m), Offer::Hinted);
        s.write(0, 1, Write::Modified);
        // VM 1's copy of the old contents meets a hint whose page has changed.
        assert_eq!(s.offer(1, 1, true, &mut pmaps, &mut m), Offer::Hinted);
        assert_eq!(s.counters.stale_hints, 1);
        assert!(!pmaps[0].is_shared(1) && !pmaps[1].is_shared(1));
    }

    #[test]
    fn the_last_reference_frees_the_shared_frame_and_zero_pages_are_counted_apart() {
        let zeros = ContentMix {
            zero: 1.0,
            ..ContentMix::default()
        };
        let (mut s, mut pmaps, mut m) = host(&[(1, &zeros)], 8);
        for ppn in 0..8 {
            s.offer(0, ppn, true, &mut pmaps, &mut m);
        }
        let h = s.observe(&pmaps);
        assert_eq!(
            (h.shared, h.frames, h.zero),
            (Pages(8), Pages(1), Some(Pages(8)))
        );
        assert_eq!(m.in_use(), Pages(1));
        for ppn in 0..8 {
            assert!(m.alloc_frame(), "the private copy's frame");
            s.broke(0, ppn, &mut pmaps[0], &mut m);
            s.write(0, ppn, Write::Modified);
        }
        let h = s.observe(&pmaps);
        assert_eq!(
            (h.shared, h.frames, h.zero),
            (Pages(0), Pages(0), Some(Pages(0)))
        );
        assert_eq!(m.in_use(), Pages(8));
        assert_eq!(s.counters.cow_breaks, 8);
    }

    #[test]
    fn share_before_swap_leaves_no_hint_behind() {
        let mix = common();
        let (mut s, mut pmaps, mut m) = host(&[(1, &mix), (2, &mix)], 2);
        assert_eq!(s.offer(0, 0, false, &mut pmaps, &mut m), Offer::Kept);
        assert_eq!(s.offer(1, 0, true, &mut pmaps, &mut m), Offer::Hinted);
        assert_eq!(s.offer(0, 0, false, &mut pmaps, &mut m), Offer::Shared);
    }

    #[test]
    fn unique_pages_never_share_and_a_removed_vm_gives_its_references_back() {
        let unique = ContentMix::default();
        let (mut s, mut pmaps, mut m) = host(&[(1, &unique), (2, &unique)], 64);
        s.scan(10_000, 1.0, &mut pmaps, &mut m);
        assert_eq!(s.observe(&pmaps).shared, Pages(0));
        let mix = common();
        let (mut s, mut pmaps, mut m) = host(&[(1, &mix), (2, &mix), (3, &mix)], 64);
        s.scan(100_000, 1.0, &mut pmaps, &mut m);
        let h = s.observe(&pmaps);
        assert_eq!((h.shared, h.frames), (Pages(192), Pages(64)));
        assert_eq!(m.in_use(), Pages(64));
        let gone = pmaps.remove(0);
        s.remove(0, &gone, &mut m);
        let h = s.observe(&pmaps);
        assert_eq!((h.shared, h.frames), (Pages(128), Pages(64)));
        assert_eq!(m.in_use(), Pages(64));
        // VM 1 holds no frame of its own: every page was shared.
        assert_eq!(gone.mapped() - gone.shared(), 0);
    }
}
