//! The guest OS model: who owns each guest-physical page (kernel, anonymous memory, page cache, balloon, free), its own swap device, and a CLOCK reclaim that prefers dropping page cache.
//!
//! The guest knows nothing of machine memory: whether a page is backed, host-swapped or
//! ballooned on the host side is the pmap's business (see `vm.rs`, which joins the two).
//!
//! Reclaim (when the free list is empty: a new anonymous page, a cache fill, a swap-in or
//! a balloon inflation needs a page) follows Linux's preference for page cache:
//!
//! 1. one lap of the page-cache CLOCK: an unreferenced cache page is dropped (clean, no
//!    I/O); referenced ones lose their bit (second chance), and pages referenced again
//!    while their bit was set (active) are first demoted, so they outlast pages touched once
//!    (a two-level CLOCK, like Linux's active and inactive lists);
//! 2. if the guest swap device has a free slot, one lap of the anonymous CLOCK: an
//!    unreferenced anonymous page is swapped out;
//! 3. the oldest cache page, referenced or not (cache is dropped before hot anonymous
//!    memory is swapped);
//! 4. if swap has room, the oldest anonymous page;
//! 5. otherwise nothing can be freed: the caller stalls (no OOM killer is modelled).
//!
//! After refaults (page-cache blocks read back soon after eviction) in the last
//! `REFAULT_MEMORY_TICKS` ticks, steps 1 and 2 swap places: the file working set does not
//! fit, so cold anonymous memory goes before cold cache, as Linux balances its LRUs on
//! refaults.
//!
//! Each lap only clears bits set by accesses since the last lap, so reclaim is amortised
//! O(1) per access.
//!
//! Memory: per guest page its flags (1 byte: the owner's kind and the CLOCK bits), its
//! owner value (the anonymous page or file block it holds) and at most one CLOCK queue entry
//! while resident, 2 bytes each for a guest and regions under 256 MiB and 4 otherwise
//! (`entries.rs`): 5 or 9 bytes; per page of the workload's anonymous region and file its
//! map entry (2 or 4 bytes, nothing committed while untouched) and a file block's evicted
//! bit. The free list and the balloon's pages are stacks threaded through the owner values
//! of their own pages (a free or ballooned page has no other use for them), and pages never
//! used since boot are a range handed out lowest first, so neither costs anything more.

use crate::entries::{Entries, Queue, NONE, SWAPPED};

/// The owner's kind, in the top bits of a page's flags (its owner value says which page or
/// block it holds, or the next page of a stack).
const TAG_SHIFT: u8 = 4;
const OWN_FREE: u8 = 0;
const OWN_KERNEL: u8 = 1 << TAG_SHIFT;
const OWN_ANON: u8 = 2 << TAG_SHIFT;
const OWN_CACHE: u8 = 3 << TAG_SHIFT;
const OWN_BALLOON: u8 = 4 << TAG_SHIFT;
const OWN_TAG: u8 = 7 << TAG_SHIFT;
/// End of a page stack threaded through owner values (no PPN reaches it).
const END: u32 = NONE;

/// A stack of pages threaded through the owner values of the pages it holds: each page
/// carries the stack's tag and names the page below it.
#[derive(Copy, Clone, Debug)]
struct PageStack {
    tag: u8,
    top: u32,
    len: u32,
}

impl PageStack {
    fn new(tag: u8) -> PageStack {
        PageStack {
            tag,
            top: END,
            len: 0,
        }
    }

    fn push(&mut self, flags: &mut [u8], entries: &mut Entries, ppn: u32) {
        set_tag(&mut flags[ppn as usize], self.tag);
        entries.set_owner(ppn, self.top);
        self.top = ppn;
        self.len += 1;
    }

    fn pop(&mut self, entries: &Entries) -> Option<u32> {
        if self.top == END {
            return None;
        }
        let ppn = self.top;
        self.top = entries.owner(ppn);
        self.len -= 1;
        Some(ppn)
    }
}

/// Gives a page's flags the owner's kind `tag`.
fn set_tag(flags: &mut u8, tag: u8) {
    *flags = (*flags & !OWN_TAG) | tag;
}

/// Referenced (accessed) bit.
const REF: u8 = 1;
/// The page has an entry in the cache CLOCK queue.
const IN_CACHE_Q: u8 = 2;
/// The page has an entry in the anonymous CLOCK queue.
const IN_ANON_Q: u8 = 4;
/// The page was referenced again while `REF` was still set: in use, not touched once and
/// forgotten (Linux's active list; a reclaim lap demotes it before it can be chosen).
const ACTIVE: u8 = 8;
/// `ACTIVE` is `REF` shifted by this much, so `reference` stays branch-free.
const ACTIVE_SHIFT: u8 = 3;

/// Who owns a guest-physical page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    Free,
    /// Kernel memory: touched at boot, never reclaimed.
    Kernel,
    /// Anonymous page `page` of the workload.
    Anon(u32),
    /// Page cache holding file block `block`.
    Cache(u32),
    /// Held by the balloon driver.
    Balloon,
}

/// Where a workload's anonymous page is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AnonState {
    /// In guest memory at this PPN.
    Resident(u32),
    /// On the guest's swap device.
    Swapped,
    /// Never touched (or freed with the workload that had it).
    Untouched,
}

/// How long refaults keep reclaim turned toward anonymous memory.
pub const REFAULT_MEMORY_TICKS: u32 = 300;

/// A page reclaim chose to free.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Victim {
    /// A page-cache page: dropped without I/O.
    Cache(u32),
    /// An anonymous page: must be written to guest swap first.
    Anon(u32),
}

/// Guest events counted over the VM's life.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GuestCounters {
    /// Anonymous pages read back from guest swap.
    pub swap_ins: u64,
    /// Anonymous pages written to guest swap.
    pub swap_outs: u64,
    /// Cache misses on blocks that had been cached and evicted (Linux workingset refaults).
    pub refaults: u64,
    /// All page-cache misses (each is a disk read).
    pub disk_reads: u64,
}

/// One guest OS.
#[derive(Clone, Debug)]
pub struct Guest {
    /// Per page: the owner's kind (`OWN_*`) and the CLOCK bits.
    flags: Vec<u8>,
    /// Owner values, the anonymous and file maps and the CLOCK queues.
    entries: Entries,
    /// Pages freed since boot, most recent on top.
    free: PageStack,
    /// Pages never used since boot: `fresh.start` is handed out next.
    fresh: std::ops::Range<u32>,
    /// The balloon's pages, most recently inflated on top.
    ballooned: PageStack,
    /// One bit per block: evicted from the cache since it was last read.
    evicted: Vec<u64>,
    swap_size: u32,
    swap_used: u32,
    kernel: u32,
    anon_resident: u32,
    cache_resident: u32,
    /// Refaults counted up to the end of the previous tick.
    refaults_at_tick: u64,
    /// Ticks since the last tick that saw refaults (saturating).
    ticks_since_refault: u32,
    pub counters: GuestCounters,
}

/// Where a guest boots from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GuestLayout {
    /// Guest-physical pages.
    pub pages: u32,
    /// Kernel pages: PPNs `0..kernel`.
    pub kernel: u32,
    /// Guest swap device size in pages.
    pub swap: u32,
    /// Pages held by the balloon from boot: the highest PPNs.
    pub balloon: u32,
    pub anon_pages: u32,
    pub file_pages: u32,
}

impl Guest {
    /// A booted guest: kernel pages owned, the initial balloon held, everything else free
    /// (lowest PPNs handed out first). `kernel + balloon` must not exceed `pages`.
    pub fn boot(layout: GuestLayout) -> Guest {
        let n = layout.pages as usize;
        let kernel = layout.kernel.min(layout.pages);
        let balloon = layout.balloon.min(layout.pages - kernel);
        let first_balloon = layout.pages - balloon;
        let mut flags = vec![OWN_FREE; n];
        flags[..kernel as usize].fill(OWN_KERNEL);
        let mut entries = Entries::new(layout.pages, layout.anon_pages, layout.file_pages);
        let mut ballooned = PageStack::new(OWN_BALLOON);
        for ppn in first_balloon..layout.pages {
            ballooned.push(&mut flags, &mut entries, ppn);
        }
        Guest {
            flags,
            entries,
            free: PageStack::new(OWN_FREE),
            fresh: kernel..first_balloon,
            ballooned,
            evicted: vec![0; (layout.file_pages as usize).div_ceil(64)],
            swap_size: layout.swap,
            swap_used: 0,
            kernel,
            anon_resident: 0,
            cache_resident: 0,
            refaults_at_tick: 0,
            ticks_since_refault: u32::MAX,
            counters: GuestCounters::default(),
        }
    }

    /// Closes a tick, remembering whether it saw refaults (they set the reclaim balance).
    pub fn end_tick(&mut self) {
        self.ticks_since_refault = if self.counters.refaults > self.refaults_at_tick {
            0
        } else {
            self.ticks_since_refault.saturating_add(1)
        };
        self.refaults_at_tick = self.counters.refaults;
    }

    /// Refaults in the last [`REFAULT_MEMORY_TICKS`] ticks mean the file working set does not
    /// fit: reclaim then turns to cold anonymous memory before cold page cache (Linux's
    /// refault-driven balancing of the anon and file LRUs).
    fn anon_first(&self) -> bool {
        self.ticks_since_refault < REFAULT_MEMORY_TICKS
    }

    /// Who owns `ppn` (`Free` outside the guest's memory).
    pub fn owner(&self, ppn: u32) -> Owner {
        let tag = self
            .flags
            .get(ppn as usize)
            .map_or(OWN_FREE, |f| f & OWN_TAG);
        match tag {
            OWN_KERNEL => Owner::Kernel,
            OWN_ANON => Owner::Anon(self.entries.owner(ppn)),
            OWN_CACHE => Owner::Cache(self.entries.owner(ppn)),
            OWN_BALLOON => Owner::Balloon,
            _ => Owner::Free,
        }
    }

    /// The raw anonymous-map entry of `page`: a PPN when resident (below the guest's pages).
    #[inline]
    pub fn anon_entry(&self, page: u32) -> u32 {
        self.entries.anon(page)
    }

    /// Where anonymous page `page` is.
    pub fn anon_state(&self, page: u32) -> AnonState {
        match self.anon_entry(page) {
            NONE => AnonState::Untouched,
            SWAPPED => AnonState::Swapped,
            ppn => AnonState::Resident(ppn),
        }
    }

    /// True if `page` is one of the workload's anonymous pages.
    pub fn has_anon(&self, page: u32) -> bool {
        page < self.entries.anon_pages()
    }

    /// The PPN caching `block`, if cached.
    #[inline]
    pub fn file_entry(&self, block: u32) -> Option<u32> {
        match self.entries.file(block) {
            NONE => None,
            ppn => Some(ppn),
        }
    }

    /// True if `block` is one of the workload's file blocks.
    pub fn has_block(&self, block: u32) -> bool {
        block < self.entries.file_pages()
    }

    /// Sets the referenced bit of `ppn` (the guest's accessed bit).
    #[inline]
    pub fn reference(&mut self, ppn: u32) {
        if let Some(f) = self.flags.get_mut(ppn as usize) {
            *f |= REF | ((*f & REF) << ACTIVE_SHIFT);
        }
    }

    /// `ppn`'s flags as raw bits (0 outside the guest), for reading ahead.
    #[inline]
    pub fn peek_flags(&self, ppn: u32) -> u8 {
        self.flags.get(ppn as usize).copied().unwrap_or(0)
    }

    /// True if `ppn`'s referenced bit is set.
    pub fn is_referenced(&self, ppn: u32) -> bool {
        self.flags.get(ppn as usize).is_some_and(|f| f & REF != 0)
    }

    /// A page from the free list, without reclaiming.
    pub fn pop_free(&mut self) -> Option<u32> {
        self.free.pop(&self.entries).or_else(|| self.fresh.next())
    }

    /// Puts an unused page (owner `Free`) back on the free list.
    pub fn release(&mut self, ppn: u32) {
        if self.owner(ppn) == Owner::Free {
            self.free.push(&mut self.flags, &mut self.entries, ppn);
        }
    }

    /// Chooses a page to reclaim (see the module docs); the page stays with its owner
    /// until [`Guest::evict_cache`] or [`Guest::swap_out`], or [`Guest::requeue`] if the
    /// caller cannot go on.
    pub fn pick_victim(&mut self) -> Option<Victim> {
        let can_swap = self.swap_used < self.swap_size;
        if self.anon_first() && can_swap {
            if let Some(p) = self.scan(OWN_ANON, false) {
                return Some(Victim::Anon(p));
            }
        }
        if let Some(p) = self.scan(OWN_CACHE, false) {
            return Some(Victim::Cache(p));
        }
        if can_swap {
            if let Some(p) = self.scan(OWN_ANON, false) {
                return Some(Victim::Anon(p));
            }
        }
        if let Some(p) = self.scan(OWN_CACHE, true) {
            return Some(Victim::Cache(p));
        }
        if can_swap {
            if let Some(p) = self.scan(OWN_ANON, true) {
                return Some(Victim::Anon(p));
            }
        }
        None
    }

    /// Up to two laps of a CLOCK queue (one if `force`): the first page of owner `tag` that
    /// is unreferenced (or any, if `force`), leaving it out of the queue. Two laps let a page
    /// touched once go (its bit cleared on the first) while active pages survive both.
    /// Stale entries are dropped.
    fn scan(&mut self, tag: u8, force: bool) -> Option<u32> {
        let (queue, qflag) = if tag == OWN_CACHE {
            (Queue::Cache, IN_CACHE_Q)
        } else {
            (Queue::Anon, IN_ANON_Q)
        };
        let laps = if force { 1 } else { 2 };
        for _ in 0..self.entries.queued(queue) * laps {
            let ppn = self.entries.pop(queue)?;
            let f = &mut self.flags[ppn as usize];
            if *f & OWN_TAG != tag {
                *f &= !qflag;
                continue;
            }
            if *f & ACTIVE != 0 && !force {
                // Demote: one more lap before it can go.
                *f &= !ACTIVE;
                self.entries.push(queue, ppn);
                continue;
            }
            if *f & REF != 0 && !force {
                *f &= !REF;
                self.entries.push(queue, ppn);
                continue;
            }
            *f &= !qflag;
            return Some(ppn);
        }
        None
    }

    /// Puts a victim the caller could not free back at the tail of its queue.
    pub fn requeue(&mut self, victim: Victim) {
        match victim {
            Victim::Cache(p) => self.enqueue(p, Queue::Cache),
            Victim::Anon(p) => self.enqueue(p, Queue::Anon),
        }
    }

    fn enqueue(&mut self, ppn: u32, queue: Queue) {
        let qflag = match queue {
            Queue::Cache => IN_CACHE_Q,
            Queue::Anon => IN_ANON_Q,
        };
        let f = &mut self.flags[ppn as usize];
        if *f & qflag == 0 {
            *f |= qflag;
            self.entries.push(queue, ppn);
        }
    }

    /// Drops the cache page at `ppn`; the page is free for the caller to use (not put on
    /// the free list). The block is remembered as evicted (for refault detection).
    pub fn evict_cache(&mut self, ppn: u32) {
        if let Owner::Cache(block) = self.owner(ppn) {
            self.entries.set_file(block, NONE);
            self.evicted[block as usize / 64] |= 1 << (block % 64);
            self.cache_resident -= 1;
            self.disown(ppn);
        }
    }

    /// Writes the anonymous page at `ppn` to guest swap; the page is free for the caller.
    /// False (nothing done) when swap is full or the page is not anonymous.
    pub fn swap_out(&mut self, ppn: u32) -> bool {
        let Owner::Anon(page) = self.owner(ppn) else {
            return false;
        };
        if self.swap_used >= self.swap_size {
            return false;
        }
        self.swap_used += 1;
        self.entries.set_anon(page, SWAPPED);
        self.anon_resident -= 1;
        self.counters.swap_outs += 1;
        self.disown(ppn);
        true
    }

    fn disown(&mut self, ppn: u32) {
        self.flags[ppn as usize] &= !(REF | ACTIVE | OWN_TAG);
    }

    /// Anonymous page `page` (never touched) now lives at the free page `ppn`.
    pub fn install_anon(&mut self, page: u32, ppn: u32) {
        if self.anon_state(page) == AnonState::Untouched && self.has_anon(page) {
            self.own_anon(page, ppn);
        }
    }

    /// Anonymous page `page` is read back from guest swap into the free page `ppn`.
    pub fn swap_in(&mut self, page: u32, ppn: u32) {
        if self.anon_state(page) == AnonState::Swapped {
            self.swap_used -= 1;
            self.counters.swap_ins += 1;
            self.own_anon(page, ppn);
        }
    }

    fn own_anon(&mut self, page: u32, ppn: u32) {
        self.entries.set_anon(page, ppn);
        self.own(ppn, OWN_ANON, page);
        self.anon_resident += 1;
        self.enqueue(ppn, Queue::Anon);
    }

    /// Block `block` is read from disk into the free page `ppn`; true if it is a refault
    /// (the block had been cached and evicted before).
    pub fn install_cache(&mut self, block: u32, ppn: u32) -> bool {
        if !self.has_block(block) || self.file_entry(block).is_some() {
            return false;
        }
        let (word, bit) = (block as usize / 64, 1u64 << (block % 64));
        let refault = self.evicted[word] & bit != 0;
        self.evicted[word] &= !bit;
        self.counters.disk_reads += 1;
        if refault {
            self.counters.refaults += 1;
        }
        self.entries.set_file(block, ppn);
        self.own(ppn, OWN_CACHE, block);
        self.cache_resident += 1;
        self.enqueue(ppn, Queue::Cache);
        refault
    }

    /// `ppn` now holds `value` (an anonymous page or a file block) for owner `tag`, referenced.
    fn own(&mut self, ppn: u32, tag: u8, value: u32) {
        let f = &mut self.flags[ppn as usize];
        set_tag(f, tag);
        *f |= REF;
        self.entries.set_owner(ppn, value);
    }

    /// The free page `ppn` goes to the balloon.
    pub fn give_to_balloon(&mut self, ppn: u32) {
        if self.owner(ppn) == Owner::Free {
            self.ballooned.push(&mut self.flags, &mut self.entries, ppn);
        }
    }

    /// The balloon gives back its most recently inflated page, which goes on the free list;
    /// `None` when it holds none.
    pub fn take_from_balloon(&mut self) -> Option<u32> {
        let ppn = self.ballooned.pop(&self.entries)?;
        self.free.push(&mut self.flags, &mut self.entries, ppn);
        Some(ppn)
    }

    /// The workload frees anonymous page `page` (an application giving pool memory back to
    /// the OS, as `madvise(DONTNEED)` does): a resident page goes on the free list (still
    /// backed by the host, like any free page), a swapped one frees its slot, and the next
    /// touch finds a new zero page.
    pub fn free_anon(&mut self, page: u32) {
        match self.anon_state(page) {
            AnonState::Resident(ppn) => {
                self.disown(ppn);
                self.anon_resident -= 1;
                self.free.push(&mut self.flags, &mut self.entries, ppn);
            }
            AnonState::Swapped => self.swap_used -= 1,
            AnonState::Untouched => return,
        }
        self.entries.set_anon(page, NONE);
    }

    /// A new workload replaces the old (process exit and start): the old anonymous pages
    /// are freed (their swap too); the page cache stays, keyed by block number (the same
    /// disk), so blocks the new workload shares with the old are still cached.
    pub fn replace_workload(&mut self, anon_pages: u32, file_pages: u32) {
        for page in 0..self.entries.anon_pages() {
            match self.anon_state(page) {
                AnonState::Resident(ppn) => {
                    self.disown(ppn);
                    self.anon_resident -= 1;
                    self.free.push(&mut self.flags, &mut self.entries, ppn);
                }
                AnonState::Swapped => self.swap_used -= 1,
                AnonState::Untouched => {}
            }
        }
        self.entries.replace_anon(anon_pages);
        if file_pages > self.entries.file_pages() {
            self.entries.grow_file(file_pages);
            self.evicted.resize((file_pages as usize).div_ceil(64), 0);
        }
    }

    /// Guest-physical pages.
    pub fn pages(&self) -> u32 {
        self.flags.len() as u32
    }

    pub fn kernel(&self) -> u32 {
        self.kernel
    }

    /// Anonymous pages in guest memory.
    pub fn anon_resident(&self) -> u32 {
        self.anon_resident
    }

    /// Page-cache pages.
    pub fn cache_resident(&self) -> u32 {
        self.cache_resident
    }

    /// Pages held by the balloon.
    pub fn balloon(&self) -> u32 {
        self.ballooned.len
    }

    /// Pages on the free list.
    pub fn free(&self) -> u32 {
        self.free.len + self.fresh.len() as u32
    }

    /// Size of the guest swap device.
    pub fn swap_size(&self) -> u32 {
        self.swap_size
    }

    /// Anonymous pages on the guest swap device.
    pub fn swap_used(&self) -> u32 {
        self.swap_used
    }

    /// Size of the workload's anonymous region.
    pub fn anon_pages(&self) -> u32 {
        self.entries.anon_pages()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(pages: u32, kernel: u32, swap: u32, anon: u32, file: u32) -> Guest {
        Guest::boot(GuestLayout {
            pages,
            kernel,
            swap,
            balloon: 0,
            anon_pages: anon,
            file_pages: file,
        })
    }

    /// Allocates like the VM does without a host: free list, then reclaim.
    fn alloc(g: &mut Guest) -> Option<u32> {
        if let Some(p) = g.pop_free() {
            return Some(p);
        }
        match g.pick_victim()? {
            Victim::Cache(p) => {
                g.evict_cache(p);
                Some(p)
            }
            Victim::Anon(p) => g.swap_out(p).then_some(p),
        }
    }

    #[test]
    fn boot_owns_kernel_and_balloon_pages_and_frees_the_rest() {
        let g = Guest::boot(GuestLayout {
            pages: 10,
            kernel: 2,
            swap: 0,
            balloon: 3,
            anon_pages: 0,
            file_pages: 0,
        });
        assert_eq!(g.owner(0), Owner::Kernel);
        assert_eq!(g.owner(2), Owner::Free);
        assert_eq!(g.owner(7), Owner::Balloon);
        assert_eq!((g.free(), g.balloon(), g.kernel()), (5, 3, 2));
    }

    #[test]
    fn reclaim_drops_unreferenced_cache_before_swapping_anon() {
        let mut g = guest(4, 0, 4, 2, 2);
        for page in 0..2 {
            let p = alloc(&mut g).unwrap();
            g.install_anon(page, p);
        }
        for block in 0..2 {
            let p = alloc(&mut g).unwrap();
            g.install_cache(block, p);
        }
        // Everything referenced: the cache lap clears bits, the anon lap clears bits, then
        // the oldest cache page goes.
        assert!(matches!(g.pick_victim(), Some(Victim::Cache(_))));
        assert_eq!(g.counters.swap_outs, 0);
    }

    #[test]
    fn cold_anon_is_swapped_when_all_cache_is_hot() {
        let mut g = guest(3, 0, 4, 2, 1);
        for page in 0..2 {
            let p = alloc(&mut g).unwrap();
            g.install_anon(page, p);
        }
        let c = alloc(&mut g).unwrap();
        g.install_cache(0, c);
        // The cache page is in use (read again and again); the anonymous pages were touched
        // once.
        g.reference(c);
        g.reference(c);
        assert!(matches!(g.pick_victim(), Some(Victim::Anon(_))));
    }

    #[test]
    fn pages_touched_again_outlast_pages_touched_once() {
        let mut g = guest(4, 0, 4, 4, 0);
        let mut ppns = Vec::new();
        for page in 0..4 {
            let p = alloc(&mut g).unwrap();
            g.install_anon(page, p);
            ppns.push(p);
        }
        // Pages 0 and 1 are in use (touched again); 2 and 3 were touched once.
        g.reference(ppns[0]);
        g.reference(ppns[1]);
        let mut victims = Vec::new();
        for _ in 0..2 {
            if let Some(Victim::Anon(p)) = g.pick_victim() {
                assert!(g.swap_out(p));
                victims.push(p);
            }
        }
        victims.sort_unstable();
        assert_eq!(victims, vec![ppns[2], ppns[3]]);
    }

    #[test]
    fn refaults_turn_reclaim_to_cold_anon_before_cold_cache() {
        let mut g = guest(4, 0, 4, 2, 4);
        for page in 0..2 {
            let p = alloc(&mut g).unwrap();
            g.install_anon(page, p);
        }
        for block in 0..2 {
            let p = alloc(&mut g).unwrap();
            g.install_cache(block, p);
        }
        // Evict block 0 and read it back: a refault.
        let v = g.pick_victim().unwrap();
        assert!(matches!(v, Victim::Cache(_)));
        if let Victim::Cache(p) = v {
            g.evict_cache(p);
            assert!(g.install_cache(0, p));
        }
        g.end_tick();
        let v = g.pick_victim().unwrap();
        assert!(matches!(v, Victim::Anon(_)), "{v:?}");
    }

    #[test]
    fn without_swap_space_anon_is_never_chosen() {
        let mut g = guest(2, 0, 0, 2, 0);
        for page in 0..2 {
            let p = alloc(&mut g).unwrap();
            g.install_anon(page, p);
        }
        assert_eq!(g.pick_victim(), None);
    }

    #[test]
    fn kernel_pages_are_never_reclaimed() {
        let mut g = guest(2, 2, 8, 1, 1);
        assert_eq!(alloc(&mut g), None);
    }

    #[test]
    fn refault_only_for_a_block_evicted_before() {
        let mut g = guest(1, 0, 0, 0, 2);
        let p = alloc(&mut g).unwrap();
        assert!(!g.install_cache(0, p));
        let p = alloc(&mut g).unwrap(); // evicts block 0
        assert!(!g.install_cache(1, p));
        let p = alloc(&mut g).unwrap(); // evicts block 1
        assert!(g.install_cache(0, p));
        assert_eq!(g.counters.disk_reads, 3);
        assert_eq!(g.counters.refaults, 1);
    }

    #[test]
    fn anon_is_swapped_until_the_swap_device_is_full() {
        let mut g = guest(1, 0, 1, 2, 0);
        let p = alloc(&mut g).unwrap();
        g.install_anon(0, p);
        let p = alloc(&mut g).unwrap();
        assert_eq!(g.anon_state(0), AnonState::Swapped);
        g.install_anon(1, p);
        assert_eq!(alloc(&mut g), None, "swap full: page 1 cannot go");
        assert_eq!((g.counters.swap_outs, g.swap_used()), (1, 1));
    }

    #[test]
    fn swap_in_frees_the_slot_and_makes_the_page_resident() {
        let mut g = guest(1, 0, 2, 2, 0);
        let p = alloc(&mut g).unwrap();
        g.install_anon(0, p);
        let p = alloc(&mut g).unwrap();
        g.install_anon(1, p);
        assert!(g.swap_out(p));
        g.swap_in(0, p);
        assert_eq!(g.anon_state(0), AnonState::Resident(p));
        assert_eq!(g.anon_state(1), AnonState::Swapped);
        assert_eq!((g.counters.swap_ins, g.swap_used()), (1, 1));
    }

    #[test]
    fn balloon_round_trip_returns_the_page_to_the_free_list() {
        let mut g = guest(2, 0, 0, 0, 0);
        let p = g.pop_free().unwrap();
        g.give_to_balloon(p);
        assert_eq!((g.balloon(), g.free()), (1, 1));
        assert_eq!(g.take_from_balloon(), Some(p));
        assert_eq!((g.balloon(), g.free()), (0, 2));
        assert_eq!(g.take_from_balloon(), None);
    }

    #[test]
    fn freed_anon_pages_go_back_to_the_free_list_or_free_their_swap_slot() {
        let mut g = guest(1, 0, 1, 2, 0);
        let p = alloc(&mut g).unwrap();
        g.install_anon(0, p);
        let q = alloc(&mut g).unwrap(); // swaps page 0 out
        g.install_anon(1, q);
        g.free_anon(0);
        g.free_anon(1);
        assert_eq!((g.swap_used(), g.anon_resident(), g.free()), (0, 0, 1));
        assert_eq!(g.anon_state(0), AnonState::Untouched);
        assert_eq!(g.anon_state(1), AnonState::Untouched);
        // Freeing a page never touched changes nothing.
        g.free_anon(1);
        assert_eq!(g.free(), 1);
    }

    #[test]
    fn replacing_the_workload_frees_anon_and_keeps_cache() {
        let mut g = guest(4, 0, 4, 2, 1);
        let a = alloc(&mut g).unwrap();
        g.install_anon(0, a);
        let c = alloc(&mut g).unwrap();
        g.install_cache(0, c);
        g.replace_workload(3, 1);
        assert_eq!(g.anon_resident(), 0);
        assert_eq!(g.anon_pages(), 3);
        assert_eq!(g.cache_resident(), 1);
        assert_eq!(g.free(), 3);
        assert_eq!(g.owner(a), Owner::Free);
    }

    #[test]
    fn a_workload_too_large_for_narrow_entries_keeps_the_cache_and_balloon() {
        let mut g = Guest::boot(GuestLayout {
            pages: 8,
            kernel: 1,
            swap: 4,
            balloon: 2,
            anon_pages: 2,
            file_pages: 2,
        });
        let c = alloc(&mut g).unwrap();
        g.install_cache(1, c);
        let a = alloc(&mut g).unwrap();
        g.install_anon(0, a);
        // A file set of 2^20 blocks needs 32-bit entries.
        g.replace_workload(70_000, 1 << 20);
        assert_eq!(g.file_entry(1), Some(c));
        assert_eq!(g.owner(c), Owner::Cache(1));
        assert_eq!(g.anon_state(69_999), AnonState::Untouched);
        assert_eq!(g.take_from_balloon(), Some(7));
        assert_eq!(g.owner(a), Owner::Free);
        assert_eq!((g.balloon(), g.free(), g.anon_pages()), (1, 5, 70_000));
        let p = alloc(&mut g).unwrap();
        g.install_cache(1_000_000, p);
        assert_eq!(g.owner(p), Owner::Cache(1_000_000));
    }
}
