//! A VM's pmap: for every guest-physical page (PPN), where the host keeps it — a machine frame, host swap, the balloon, or nowhere yet.
//!
//! Rule: two bits per PPN, 32 PPNs a word (the lowest PPN in the low bits), hold the page's
//! state, and an entry reads Mapped exactly when a guest access needs nothing from the host
//! (the hot path, [`Pmap::is_fast`]: a shift and one compare, as with the wider entries
//! before). Machine frames and host swap slots are interchangeable, so the pmap records only
//! that a page has one, not which one (the machine counts them). A never-touched page is 0
//! (Unbacked), so a VM's untouched memory stays in zeroed pages the OS has not yet committed.
//!
//! Two kinds of Mapped page must take the slow path; their entries read Unbacked, and what
//! they are is kept beside the entries:
//!
//! - a page backed by a *shared* frame (content-based page sharing, copy-on-write): the VM
//!   counts it as allocated, as ESX does, but the frame belongs to the sharing table, and any
//!   access takes the slow path so that a write can break the sharing. A bitmap of a bit a
//!   PPN marks them, allocated when the VM's first page is shared (never without sharing).
//! - a page carrying ESX's "sampled" mark (the mapping is invalidated so the next guest access
//!   is seen). The marks, `sample_pages` a VM, are a sorted list of PPNs, each saying whether
//!   it hides a Mapped page, with a summary bit per 16 PPNs (`GROUP`) where a mark may be:
//!   a look-up of an unmarked page (every fault asks, [`Pmap::take_sampled`]) mostly stops
//!   there, and a count of the marks hiding a Mapped page spares the other queries even that.
//!   A mark survives state changes (a marked page's state is its mark's while it is Mapped,
//!   its entry's otherwise) and is taken once.
//!
//! Host paging finds the next private page (mapped, not shared) after a random PPN by scanning
//! the entries 32 pages a word ([`Pmap::next_private`]; a marked private page is found in the
//! list): a VM whose pages are mostly out (the density benchmark's thrashing tenants) would
//! otherwise cost a scan page by page per fault.
//!
//! Guarantees: every query answers as if each page had its own state, shared bit and mark
//! (the tests check every answer against such a model); an out-of-range PPN reads as
//! unbacked, unshared and unmarked, and changing one does nothing.
//!
//! Cost: 2 bits per simulated 4 KiB page; with page sharing a bit more; with sampling 8 bytes
//! a mark and a bit per 16 pages. It was 4 bytes while the entry named its frame, then a byte
//! and a bit, then 5 bits (half a byte and a bitmap of the private pages): the 2 bits saved
//! 19 MiB of peak RSS on density-2000's 2,000 servers of 28.3 K pages (386.6 -> 367.8 MiB
//! in a minute, 418.2 -> 398.7 in ten). Marking a period's sample costs O(n log n) for n
//! marks and clearing it O(n); a query that reaches the list, O(log n). The slow path costs
//! more than with the mark in the entry (docs/benchmarks.md, "The pmap at 2 bits").

/// Where the host keeps one guest-physical page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PageState {
    /// Never touched since power-on or since a balloon deflate: no machine memory.
    Unbacked,
    /// Backed by a machine frame.
    Mapped,
    /// Paged out by the host to a host swap slot.
    HostSwapped,
    /// Held by the guest's balloon driver: the host has reclaimed it.
    Ballooned,
}

const UNBACKED: u8 = 0;
const MAPPED: u8 = 1;
const SWAPPED: u8 = 2;
const BALLOONED: u8 = 3;
/// What the entry of a Mapped page off the fast path (shared or marked) reads.
const HIDDEN_AS: u8 = UNBACKED;
/// PPNs per word of entries.
const PER_WORD: u32 = 32;
/// The low bit of every entry of a word.
const LOW_BITS: u64 = 0x5555_5555_5555_5555;
/// PPNs per bit of the summary of the marks: a look-up of a PPN whose group holds no mark
/// stops at the summary (with 100 marks on a VM of 28,000 pages, 19 in 20).
pub(crate) const GROUP: u32 = 16;
/// A mark's list entry (`ppn << 2 | flags`): the page is marked (clear once the mark is
/// taken: the entry stays until the marks are cleared).
const LIVE: u64 = 1;
/// A mark's list entry: the page is Mapped, its entry reading Unbacked.
const HIDDEN: u64 = 2;

/// Host-side events counted per VM over its life.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PmapCounters {
    /// First touches that allocated a frame (Unbacked -> Mapped).
    pub first_touches: u64,
    /// Pages read back from host swap.
    pub host_swap_ins: u64,
    /// Pages written to host swap.
    pub host_swap_outs: u64,
}

/// The pmap of one VM.
#[derive(Clone, Debug)]
pub struct Pmap {
    /// 32 entries a word.
    entries: Vec<u64>,
    pages: u32,
    /// Bit `ppn` set when `ppn` is shared; empty until a page is first shared.
    shared_bits: Vec<u64>,
    /// Bit `g` set when the list may hold a PPN of group `g` (`GROUP` PPNs); empty until a
    /// page is first marked.
    sampled_groups: Vec<u64>,
    /// The marks, sorted by PPN: `ppn << 2 | LIVE | HIDDEN`, unique PPNs.
    sampled: Vec<u64>,
    /// Marks that hide a Mapped page: while there are none, an entry that reads Unbacked in
    /// a VM without shared pages is unbacked.
    hidden: u32,
    mapped: u32,
    swapped: u32,
    ballooned: u32,
    shared: u32,
    pub counters: PmapCounters,
}

fn encode(state: PageState) -> u8 {
    match state {
        PageState::Unbacked => UNBACKED,
        PageState::Mapped => MAPPED,
        PageState::HostSwapped => SWAPPED,
        PageState::Ballooned => BALLOONED,
    }
}

fn decode(entry: u8) -> PageState {
    match entry {
        MAPPED => PageState::Mapped,
        SWAPPED => PageState::HostSwapped,
        BALLOONED => PageState::Ballooned,
        _ => PageState::Unbacked,
    }
}

fn bit(bits: &[u64], i: usize) -> bool {
    bits.get(i / 64).is_some_and(|w| (w >> (i % 64)) & 1 != 0)
}

fn set_bit(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

fn mark_ppn(mark: u64) -> u32 {
    (mark >> 2) as u32
}

impl Pmap {
    /// `pages` PPNs, all unbacked.
    pub fn new(pages: u32) -> Pmap {
        Pmap {
            entries: vec![0; pages.div_ceil(PER_WORD) as usize],
            pages,
            shared_bits: Vec::new(),
            sampled_groups: Vec::new(),
            sampled: Vec::new(),
            hidden: 0,
            mapped: 0,
            swapped: 0,
            ballooned: 0,
            shared: 0,
            counters: PmapCounters::default(),
        }
    }

    /// Number of PPNs.
    pub fn len(&self) -> u32 {
        self.pages
    }

    /// True for a VM of zero pages.
    pub fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// True when `ppn` is mapped, not shared and not sampled: a guest access needs nothing
    /// from the host (the hot path). False for an out-of-range PPN.
    #[inline]
    pub fn is_fast(&self, ppn: u32) -> bool {
        self.peek(ppn) == MAPPED
    }

    /// `ppn`'s entry as raw bits, 1 exactly when [`Pmap::is_fast`] (0 out of range: the
    /// unused entries of the last word are never written), also for reading ahead.
    #[inline]
    pub fn peek(&self, ppn: u32) -> u8 {
        self.entries
            .get((ppn / PER_WORD) as usize)
            .map_or(UNBACKED, |w| ((w >> ((ppn % PER_WORD) * 2)) & 3) as u8)
    }

    /// Writes `ppn`'s raw entry (in range).
    fn put(&mut self, ppn: u32, entry: u8) {
        let shift = (ppn % PER_WORD) * 2;
        let w = &mut self.entries[(ppn / PER_WORD) as usize];
        *w = (*w & !(3 << shift)) | (u64::from(entry) << shift);
    }

    /// The index of `ppn`'s entry in the list of marks, taken or not.
    #[inline]
    fn mark_at(&self, ppn: u32) -> Option<usize> {
        if !bit(&self.sampled_groups, (ppn / GROUP) as usize) {
            return None;
        }
        self.sampled
            .binary_search_by_key(&ppn, |&m| mark_ppn(m))
            .ok()
    }

    /// The index of `ppn`'s mark, if it carries one.
    #[inline]
    fn live_mark(&self, ppn: u32) -> Option<usize> {
        self.mark_at(ppn).filter(|&i| self.sampled[i] & LIVE != 0)
    }

    /// False when `ppn` is surely not a Mapped page hidden by its mark: no mark hides one, or
    /// none is near. Mostly answered by a count in the pmap itself, before the entry's value
    /// (hard to predict) is tested.
    #[inline]
    fn near_hidden(&self, ppn: u32) -> bool {
        self.hidden != 0 && bit(&self.sampled_groups, (ppn / GROUP) as usize)
    }

    /// True when `ppn`, its entry reading [`HIDDEN_AS`], is Mapped: shared or hidden by its
    /// mark.
    #[inline(never)]
    fn is_hidden(&self, ppn: u32) -> bool {
        self.is_shared(ppn) || (self.hidden != 0 && self.hides_mapped(ppn))
    }

    /// True when `ppn`, its entry reading [`HIDDEN_AS`], is private: hidden by its mark and
    /// not shared.
    #[inline(never)]
    fn is_hidden_private(&self, ppn: u32) -> bool {
        !self.is_shared(ppn) && self.hides_mapped(ppn)
    }

    /// True when `ppn`'s mark hides a Mapped page.
    fn hides_mapped(&self, ppn: u32) -> bool {
        self.mark_at(ppn)
            .is_some_and(|i| self.sampled[i] & HIDDEN != 0)
    }

    /// `ppn`'s state, encoded.
    #[inline]
    fn real(&self, ppn: u32) -> u8 {
        let e = self.peek(ppn);
        if self.hidden == 0 && self.shared_bits.is_empty() {
            return e;
        }
        if e == HIDDEN_AS && self.is_hidden(ppn) {
            MAPPED
        } else {
            e
        }
    }

    /// Where `ppn` is; an out-of-range PPN reads as unbacked.
    #[inline]
    pub fn state(&self, ppn: u32) -> PageState {
        decode(self.real(ppn))
    }

    /// Moves `ppn` to `state`, keeping its sampled mark and the counts of each state. A shared
    /// page must be unshared first.
    pub fn set(&mut self, ppn: u32, state: PageState) {
        if ppn >= self.pages {
            return;
        }
        debug_assert!(!self.is_shared(ppn), "ppn {ppn} is shared");
        let e = self.peek(ppn);
        let entry = encode(state);
        // The mark matters to a page that becomes Mapped (hidden under it) or may have been
        // Mapped under it.
        let mark = if entry == MAPPED || (e == HIDDEN_AS && self.hidden != 0) {
            self.live_mark(ppn)
        } else {
            None
        };
        let hidden = mark.is_some_and(|i| self.sampled[i] & HIDDEN != 0);
        let old = if hidden { MAPPED } else { e };
        match old {
            MAPPED => self.mapped -= 1,
            SWAPPED => self.swapped -= 1,
            BALLOONED => self.ballooned -= 1,
            _ => {}
        }
        match state {
            PageState::Mapped => self.mapped += 1,
            PageState::HostSwapped => self.swapped += 1,
            PageState::Ballooned => self.ballooned += 1,
            PageState::Unbacked => {}
        }
        match mark {
            Some(i) if entry == MAPPED => {
                self.hidden += u32::from(!hidden);
                self.sampled[i] |= HIDDEN;
                self.put(ppn, HIDDEN_AS);
            }
            Some(i) => {
                self.hidden -= u32::from(hidden);
                self.sampled[i] &= !HIDDEN;
                self.put(ppn, entry);
            }
            None => self.put(ppn, entry),
        }
    }

    /// The first PPN at or after `start` (in range) whose entry reads Mapped, wrapping around
    /// once: a scan of the entries, four words at a time between the first and the last.
    fn next_fast(&self, start: u32) -> Option<u32> {
        fn fast(e: u64) -> u64 {
            e & !(e >> 1) & LOW_BITS
        }
        let first = (start / PER_WORD) as usize;
        let at = |w: usize, bits: u64| Some(w as u32 * PER_WORD + bits.trailing_zeros() / 2);
        let head = fast(self.entries[first]) & (!0u64 << ((start % PER_WORD) * 2));
        if head != 0 {
            return at(first, head);
        }
        // The words after the first, then from the start, the first one last (its entries
        // below `start`).
        let scan = |from: usize, to: usize| {
            let words = &self.entries[from..to];
            let mut chunks = words.chunks_exact(4);
            let mut w = from;
            for c in &mut chunks {
                if fast(c[0]) | fast(c[1]) | fast(c[2]) | fast(c[3]) != 0 {
                    break;
                }
                w += 4;
            }
            (w..to)
                .map(|w| (w, fast(self.entries[w])))
                .find(|&(_, bits)| bits != 0)
        };
        let (w, bits) = scan(first + 1, self.entries.len()).or_else(|| scan(0, first + 1))?;
        at(w, bits)
    }

    /// The first PPN at or after `start` (in range) that is private but marked (its entry
    /// reads Unbacked), wrapping around once: a walk of the marks.
    fn next_hidden(&self, start: u32) -> Option<u32> {
        let from = self.sampled.partition_point(|&m| mark_ppn(m) < start);
        let (after, before) = (&self.sampled[from..], &self.sampled[..from]);
        after
            .iter()
            .chain(before)
            .map(|&m| (m, mark_ppn(m)))
            .find(|&(m, ppn)| m & HIDDEN != 0 && !self.is_shared(ppn))
            .map(|(_, ppn)| ppn)
    }

    /// The first private PPN at or after `start`, wrapping around once; `None` when there is
    /// none. The same answer as testing [`Pmap::is_private`] page by page: the first of the
    /// next page whose entry reads Mapped and the next marked private page.
    pub fn next_private(&self, start: u32) -> Option<u32> {
        if start >= self.pages {
            return None;
        }
        let hidden = if self.hidden == 0 {
            None
        } else {
            self.next_hidden(start)
        };
        // Going round from `start`: the pages at or after it first.
        [self.next_fast(start), hidden]
            .into_iter()
            .flatten()
            .min_by_key(|&ppn| (ppn < start, ppn))
    }

    /// True when `ppn` is backed by a shared frame.
    pub fn is_shared(&self, ppn: u32) -> bool {
        bit(&self.shared_bits, ppn as usize)
    }

    /// Marks a mapped `ppn` as backed by a shared frame, or no longer.
    pub fn set_shared(&mut self, ppn: u32, shared: bool) {
        if ppn >= self.pages {
            return;
        }
        debug_assert_eq!(self.real(ppn), MAPPED, "ppn {ppn} is not mapped");
        if self.is_shared(ppn) == shared {
            return;
        }
        if self.shared_bits.is_empty() {
            self.shared_bits = vec![0; self.pages.div_ceil(64) as usize];
        }
        let (word, mask) = ((ppn / 64) as usize, 1u64 << (ppn % 64));
        if shared {
            self.shared_bits[word] |= mask;
            self.put(ppn, HIDDEN_AS);
            self.shared += 1;
        } else {
            self.shared_bits[word] &= !mask;
            if self.live_mark(ppn).is_none() {
                self.put(ppn, MAPPED);
            }
            self.shared -= 1;
        }
    }

    /// True when `ppn` is mapped to a frame of the VM's own (not shared).
    #[inline]
    pub fn is_private(&self, ppn: u32) -> bool {
        let e = self.peek(ppn);
        e == MAPPED || (self.near_hidden(ppn) && e == HIDDEN_AS && self.is_hidden_private(ppn))
    }

    /// True when `ppn` carries the sampling mark.
    pub fn is_sampled(&self, ppn: u32) -> bool {
        self.live_mark(ppn).is_some()
    }

    /// The list entry of a newly marked `ppn`, its pmap entry hidden if it is Mapped.
    fn hide(&mut self, ppn: u32) -> u64 {
        let mapped = match self.peek(ppn) {
            MAPPED => {
                self.put(ppn, HIDDEN_AS);
                true
            }
            HIDDEN_AS => self.is_shared(ppn),
            _ => false,
        };
        self.hidden += u32::from(mapped);
        u64::from(ppn) << 2 | LIVE | if mapped { HIDDEN } else { 0 }
    }

    /// Puts the sampling mark on each of `ppns` (repeats and out-of-range PPNs are ignored).
    /// O((n + m) log(n + m)) for m PPNs and n marks in the list.
    pub fn mark_sampled(&mut self, ppns: &[u32]) {
        if self.sampled_groups.is_empty() {
            self.sampled_groups = vec![0; self.pages.div_ceil(GROUP).div_ceil(64) as usize];
        }
        let mut fresh = Vec::new();
        for &ppn in ppns {
            match self.mark_at(ppn) {
                Some(i) if self.sampled[i] & LIVE == 0 => self.sampled[i] = self.hide(ppn),
                Some(_) => {}
                None if ppn < self.pages => fresh.push(ppn),
                None => {}
            }
        }
        fresh.sort_unstable();
        fresh.dedup();
        self.sampled.reserve_exact(fresh.len());
        for ppn in fresh {
            let mark = self.hide(ppn);
            self.sampled.push(mark);
            set_bit(&mut self.sampled_groups, (ppn / GROUP) as usize);
        }
        // Two sorted runs: a merge.
        self.sampled.sort();
    }

    /// Clears every sampling mark: the list is emptied. O(n) for n marks.
    pub fn clear_sampled(&mut self) {
        for i in 0..self.sampled.len() {
            let mark = self.sampled[i];
            if mark & HIDDEN != 0 && !self.is_shared(mark_ppn(mark)) {
                self.put(mark_ppn(mark), MAPPED);
            }
        }
        self.sampled.clear();
        self.sampled_groups.fill(0);
        self.hidden = 0;
    }

    /// Clears the sampling mark of `ppn`; true if it was set.
    #[inline]
    pub fn take_sampled(&mut self, ppn: u32) -> bool {
        let Some(i) = self.live_mark(ppn) else {
            return false;
        };
        let mark = self.sampled[i];
        self.sampled[i] = mark & !(LIVE | HIDDEN);
        if mark & HIDDEN != 0 {
            self.hidden -= 1;
            if !self.is_shared(ppn) {
                self.put(ppn, MAPPED);
            }
        }
        true
    }

    /// PPNs backed by machine frames: the VM's allocation.
    pub fn mapped(&self) -> u32 {
        self.mapped
    }

    /// Mapped PPNs backed by shared frames (counted in [`Pmap::mapped`] too).
    pub fn shared(&self) -> u32 {
        self.shared
    }

    /// PPNs in host swap.
    pub fn host_swapped(&self) -> u32 {
        self.swapped
    }

    /// PPNs held by the balloon.
    pub fn ballooned(&self) -> u32 {
        self.ballooned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_private_page_is_the_one_a_page_by_page_scan_finds() {
        let mut p = Pmap::new(200);
        for ppn in [3, 70, 71, 150, 199] {
            p.set(ppn, PageState::Mapped);
        }
        p.set(71, PageState::HostSwapped);
        p.set_shared(150, true);
        let scan = |p: &Pmap, start: u32| {
            (start..p.len())
                .chain(0..start)
                .find(|&ppn| p.is_private(ppn))
        };
        for start in 0..200 {
            assert_eq!(p.next_private(start), scan(&p, start), "from {start}");
        }
        assert_eq!(p.next_private(4), Some(70));
        assert_eq!(p.next_private(200), None);
        p.set_shared(150, false);
        assert_eq!(p.next_private(100), Some(150));
        assert_eq!(Pmap::new(10).next_private(0), None);
        // Shared and marked pages, whose entries read unbacked: a marked mapped page is
        // private, a shared one is not, marked or not.
        for ppn in [40, 41, 100, 101, 130] {
            p.set(ppn, PageState::Mapped);
        }
        p.set_shared(40, true);
        p.set_shared(100, true);
        p.mark_sampled(&[41, 100, 130, 131]);
        for start in 0..200 {
            assert_eq!(p.next_private(start), scan(&p, start), "from {start}");
        }
        assert_eq!(p.next_private(4), Some(41));
        assert_eq!(p.next_private(71), Some(101));
        assert_eq!(p.next_private(102), Some(130));
    }

    /// A page-by-page model of a pmap: state, shared, sampled.
    type Model = Vec<(PageState, bool, bool)>;

    fn agrees(p: &Pmap, m: &Model) {
        let count = |s| m.iter().filter(|e| e.0 == s).count() as u32;
        assert_eq!(p.mapped(), count(PageState::Mapped));
        assert_eq!(p.host_swapped(), count(PageState::HostSwapped));
        assert_eq!(p.ballooned(), count(PageState::Ballooned));
        assert_eq!(p.shared(), m.iter().filter(|e| e.1).count() as u32);
        for (ppn, &(state, shared, sampled)) in (0..).zip(m) {
            assert_eq!(p.state(ppn), state, "ppn {ppn}");
            assert_eq!(p.is_shared(ppn), shared, "ppn {ppn}");
            assert_eq!(p.is_sampled(ppn), sampled, "ppn {ppn}");
            let private = state == PageState::Mapped && !shared;
            assert_eq!(p.is_private(ppn), private, "ppn {ppn}");
            assert_eq!(p.is_fast(ppn), private && !sampled, "ppn {ppn}");
            let next = (ppn..p.len()).chain(0..ppn).find(|&q| {
                let (s, sh, _) = m[q as usize];
                s == PageState::Mapped && !sh
            });
            assert_eq!(p.next_private(ppn), next, "from {ppn}");
        }
    }

    #[test]
    fn every_answer_is_a_page_by_page_models_under_random_changes() {
        let pages = 300;
        let mut rng = crate::rng::SimRng::new(7);
        let mut p = Pmap::new(pages);
        let mut m: Model = vec![(PageState::Unbacked, false, false); pages as usize];
        let states = [
            PageState::Unbacked,
            PageState::Mapped,
            PageState::HostSwapped,
            PageState::Ballooned,
        ];
        for step in 0..4000 {
            let ppn = rng.below(u64::from(pages)) as u32;
            let e = &mut m[ppn as usize];
            match rng.below(6) {
                0 | 1 if !e.1 => {
                    let s = states[rng.below(4) as usize];
                    p.set(ppn, s);
                    e.0 = s;
                }
                2 if e.0 == PageState::Mapped => {
                    let shared = !e.1;
                    p.set_shared(ppn, shared);
                    e.1 = shared;
                }
                3 => {
                    let ppns: Vec<u32> = (0..rng.below(20))
                        .map(|_| rng.below(u64::from(pages) + 5) as u32)
                        .collect();
                    p.mark_sampled(&ppns);
                    for &q in ppns.iter().filter(|&&q| q < pages) {
                        m[q as usize].2 = true;
                    }
                }
                4 => {
                    assert_eq!(p.take_sampled(ppn), e.2);
                    e.2 = false;
                }
                5 if ppn.is_multiple_of(8) => {
                    p.clear_sampled();
                    m.iter_mut().for_each(|e| e.2 = false);
                }
                5 => {
                    p.mark_sampled(&[ppn]);
                    e.2 = true;
                }
                _ => {}
            }
            if step % 100 == 0 {
                agrees(&p, &m);
            }
        }
        agrees(&p, &m);
    }

    #[test]
    fn a_marked_mapped_page_stays_off_the_fast_path_until_its_mark_is_taken() {
        let mut p = Pmap::new(100);
        p.set(70, PageState::Mapped);
        p.mark_sampled(&[70, 71, 70]);
        assert!(!p.is_fast(70) && p.is_private(70) && p.is_sampled(71));
        assert_ne!(p.peek(70), MAPPED);
        p.set(70, PageState::HostSwapped);
        p.set(70, PageState::Mapped);
        assert!(!p.is_fast(70));
        p.set_shared(70, true);
        assert!(p.take_sampled(70));
        assert!(!p.is_fast(70) && p.is_shared(70));
        p.set_shared(70, false);
        assert!(p.is_fast(70));
        assert!(p.take_sampled(71));
        assert!(!p.is_sampled(71) && !p.is_sampled(70));
        assert_eq!(p.mapped(), 1);
    }

    #[test]
    fn a_new_pmap_is_all_unbacked() {
        let p = Pmap::new(4);
        assert_eq!(p.len(), 4);
        assert!((0..4).all(|i| p.state(i) == PageState::Unbacked));
        assert_eq!((p.mapped(), p.host_swapped(), p.ballooned()), (0, 0, 0));
    }

    #[test]
    fn states_round_trip_and_are_counted() {
        let mut p = Pmap::new(4);
        p.set(0, PageState::Mapped);
        p.set(1, PageState::HostSwapped);
        p.set(2, PageState::Ballooned);
        assert_eq!(p.state(0), PageState::Mapped);
        assert_eq!(p.state(1), PageState::HostSwapped);
        assert_eq!(p.state(2), PageState::Ballooned);
        assert_eq!((p.mapped(), p.host_swapped(), p.ballooned()), (1, 1, 1));
        p.set(0, PageState::HostSwapped);
        assert_eq!((p.mapped(), p.host_swapped()), (0, 2));
    }

    #[test]
    fn only_a_mapped_unsampled_entry_is_on_the_fast_path() {
        let mut p = Pmap::new(2);
        p.set(0, PageState::Mapped);
        assert!(p.is_fast(0));
        assert!(!p.is_fast(1));
        p.mark_sampled(&[0]);
        assert!(!p.is_fast(0));
        assert_eq!(p.state(0), PageState::Mapped);
    }

    #[test]
    fn the_sampling_mark_survives_state_changes_and_is_taken_once() {
        let mut p = Pmap::new(1);
        p.mark_sampled(&[0]);
        p.set(0, PageState::Mapped);
        assert!(p.is_sampled(0));
        assert!(p.take_sampled(0));
        assert!(!p.take_sampled(0));
        assert_eq!(p.state(0), PageState::Mapped);
    }

    #[test]
    fn a_shared_page_is_counted_apart_and_leaves_the_fast_path() {
        let mut p = Pmap::new(2);
        p.set(0, PageState::Mapped);
        p.set(1, PageState::Mapped);
        p.set_shared(0, true);
        p.set_shared(0, true);
        assert!(p.is_shared(0) && !p.is_fast(0) && !p.is_private(0));
        assert!(p.is_private(1) && p.is_fast(1));
        assert_eq!((p.mapped(), p.shared()), (2, 1));
        assert_eq!(p.state(0), PageState::Mapped);
        p.set_shared(0, false);
        assert!(p.is_fast(0));
        assert_eq!(p.shared(), 0);
    }

    #[test]
    fn out_of_range_ppns_are_harmless() {
        let mut p = Pmap::new(1);
        p.set(9, PageState::Mapped);
        assert_eq!(p.state(9), PageState::Unbacked);
        assert!(!p.is_fast(9));
        assert_eq!(p.mapped(), 0);
    }

    #[test]
    fn neighbours_sharing_a_word_keep_their_own_entries() {
        let mut p = Pmap::new(5);
        p.set(2, PageState::Mapped);
        p.set(3, PageState::HostSwapped);
        p.mark_sampled(&[3]);
        p.set(4, PageState::Ballooned);
        p.set_shared(2, true);
        assert_eq!(p.state(2), PageState::Mapped);
        assert!(p.is_shared(2) && !p.is_sampled(2));
        assert_eq!(p.state(3), PageState::HostSwapped);
        assert!(p.is_sampled(3) && !p.is_shared(3));
        assert!(p.take_sampled(3) && !p.is_sampled(3));
        assert_eq!(p.state(4), PageState::Ballooned);
        // The unused entries of the last word read as out of range, and stay so.
        p.set(5, PageState::Mapped);
        assert_eq!((p.state(5), p.peek(5)), (PageState::Unbacked, 0));
        assert_eq!((p.len(), p.mapped(), p.ballooned()), (5, 1, 1));
    }
}
