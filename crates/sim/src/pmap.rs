//! A VM's pmap: for every guest-physical page (PPN), where the host keeps it — a machine frame, host swap, the balloon, or nowhere yet.
//!
//! Four bits per PPN, two PPNs a byte (the even one in the low half): the state in the low
//! two bits and ESX's "sampled" mark (the mapping is invalidated so the next guest access is
//! seen) in bit 2. Machine frames and host swap
//! slots are interchangeable, so the pmap records only that a page has one, not which one
//! (the machine counts them). A never-touched page is 0, so a VM's untouched memory stays
//! in zeroed pages the OS has not yet committed, and the common case, mapped and not
//! sampled, is a shift and one compare on the hot path.
//!
//! Bit 3 marks a mapped page backed by a *shared* frame (content-based page sharing,
//! copy-on-write): the VM counts it as allocated, as ESX does, but the frame belongs to the
//! sharing table, and any access takes the slow path so that a write can break the sharing.
//!
//! A bitmap beside the entries marks the *private* pages (mapped, not shared), so host
//! paging finds the next victim after a random PPN a word of 64 pages at a time
//! ([`Pmap::next_private`]): a VM whose pages are mostly out (the density benchmark's
//! thrashing tenants) would otherwise cost a scan of its whole pmap per fault.
//!
//! Cost: 5 bits per simulated 4 KiB page (it was 4 bytes while the entry named its frame, then
//! a byte and a bit: the half byte saved 24 MiB on density-2000's 10 minutes, 1,733 servers).

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
const STATE_MASK: u8 = 3;
/// ESX sampling mark.
const SAMPLED: u8 = 4;
/// Backed by a shared, copy-on-write frame.
const SHARED: u8 = 8;

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
    /// Two entries a byte.
    entries: Vec<u8>,
    pages: u32,
    /// Bit `ppn` set when `ppn` is private: mapped and not shared.
    private: Vec<u64>,
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
    match entry & STATE_MASK {
        MAPPED => PageState::Mapped,
        SWAPPED => PageState::HostSwapped,
        BALLOONED => PageState::Ballooned,
        _ => PageState::Unbacked,
    }
}

impl Pmap {
    /// `pages` PPNs, all unbacked.
    pub fn new(pages: u32) -> Pmap {
        Pmap {
            entries: vec![UNBACKED; (pages as usize).div_ceil(2)],
            pages,
            private: vec![0; (pages as usize).div_ceil(64)],
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

    /// True when `ppn` is mapped and not sampled: a guest access needs nothing from the
    /// host (the hot path). False for an out-of-range PPN.
    #[inline]
    pub fn is_fast(&self, ppn: u32) -> bool {
        self.peek(ppn) == MAPPED
    }

    /// `ppn`'s entry as raw bits (0 out of range: the unused half of an odd pmap's last byte
    /// is never written), also for reading ahead.
    #[inline]
    pub fn peek(&self, ppn: u32) -> u8 {
        self.entries
            .get(ppn as usize / 2)
            .map_or(UNBACKED, |b| (b >> ((ppn & 1) * 4)) & 0xF)
    }

    /// Replaces `ppn`'s entry by `f` of it; `None` (nothing done) out of range.
    #[inline]
    fn update<T>(&mut self, ppn: u32, f: impl FnOnce(&mut u8) -> T) -> Option<T> {
        if ppn >= self.pages {
            return None;
        }
        let shift = (ppn & 1) * 4;
        let b = &mut self.entries[ppn as usize / 2];
        let mut e = (*b >> shift) & 0xF;
        let out = f(&mut e);
        *b = (*b & !(0xF << shift)) | (e << shift);
        Some(out)
    }

    /// Where `ppn` is; an out-of-range PPN reads as unbacked.
    pub fn state(&self, ppn: u32) -> PageState {
        decode(self.peek(ppn))
    }

    /// Moves `ppn` to `state`, keeping its sampled mark and the counts of each state. A shared
    /// page must be unshared first.
    pub fn set(&mut self, ppn: u32, state: PageState) {
        let Some(old) = self.update(ppn, |e| {
            std::mem::replace(e, (*e & SAMPLED) | encode(state))
        }) else {
            return;
        };
        debug_assert!(old & SHARED == 0, "ppn {ppn} is shared");
        match old & STATE_MASK {
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
        self.mark_private(ppn, state == PageState::Mapped);
    }

    fn mark_private(&mut self, ppn: u32, private: bool) {
        let (word, bit) = (ppn as usize / 64, ppn % 64);
        if private {
            self.private[word] |= 1 << bit;
        } else {
            self.private[word] &= !(1 << bit);
        }
    }

    /// The first private PPN at or after `start`, wrapping around once; `None` when there is
    /// none. The same answer as testing [`Pmap::is_private`] page by page.
    pub fn next_private(&self, start: u32) -> Option<u32> {
        let n = self.len();
        if start >= n {
            return None;
        }
        let first = start as usize / 64;
        let words = self.private.len();
        // The first word without the bits below `start`; then the others, wrapping, and the
        // first word's low bits last.
        let head = self.private[first] & (!0u64 << (start % 64));
        let found = std::iter::once((first, head))
            .chain((first + 1..words).map(|w| (w, self.private[w])))
            .chain((0..=first).map(|w| (w, self.private[w])))
            .find(|&(_, bits)| bits != 0)?;
        Some((found.0 * 64) as u32 + found.1.trailing_zeros())
    }

    /// True when `ppn` is backed by a shared frame.
    pub fn is_shared(&self, ppn: u32) -> bool {
        self.peek(ppn) & SHARED != 0
    }

    /// Marks a mapped `ppn` as backed by a shared frame, or no longer.
    pub fn set_shared(&mut self, ppn: u32, shared: bool) {
        let Some(was) = self.update(ppn, |e| {
            let was = *e & SHARED != 0;
            *e = if shared { *e | SHARED } else { *e & !SHARED };
            was
        }) else {
            return;
        };
        debug_assert_eq!(
            self.peek(ppn) & STATE_MASK,
            MAPPED,
            "ppn {ppn} is not mapped"
        );
        match (was, shared) {
            (false, true) => self.shared += 1,
            (true, false) => self.shared -= 1,
            _ => return,
        }
        self.mark_private(ppn, !shared);
    }

    /// True when `ppn` is mapped to a frame of the VM's own (not shared).
    pub fn is_private(&self, ppn: u32) -> bool {
        self.peek(ppn) & (STATE_MASK | SHARED) == MAPPED
    }

    /// True when `ppn` carries the sampling mark.
    pub fn is_sampled(&self, ppn: u32) -> bool {
        self.peek(ppn) & SAMPLED != 0
    }

    /// Sets or clears the sampling mark of `ppn`.
    pub fn set_sampled(&mut self, ppn: u32, sampled: bool) {
        self.update(ppn, |e| {
            *e = if sampled { *e | SAMPLED } else { *e & !SAMPLED };
        });
    }

    /// Clears the sampling mark of `ppn`; true if it was set.
    #[inline]
    pub fn take_sampled(&mut self, ppn: u32) -> bool {
        if self.peek(ppn) & SAMPLED == 0 {
            return false;
        }
        self.update(ppn, |e| *e &= !SAMPLED);
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
        p.set_sampled(0, true);
        assert!(!p.is_fast(0));
        assert_eq!(p.state(0), PageState::Mapped);
    }

    #[test]
    fn the_sampling_mark_survives_state_changes_and_is_taken_once() {
        let mut p = Pmap::new(1);
        p.set_sampled(0, true);
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
    fn neighbours_sharing_a_byte_keep_their_own_entries() {
        let mut p = Pmap::new(5);
        p.set(2, PageState::Mapped);
        p.set(3, PageState::HostSwapped);
        p.set_sampled(3, true);
        p.set(4, PageState::Ballooned);
        p.set_shared(2, true);
        assert_eq!(p.state(2), PageState::Mapped);
        assert!(p.is_shared(2) && !p.is_sampled(2));
        assert_eq!(p.state(3), PageState::HostSwapped);
        assert!(p.is_sampled(3) && !p.is_shared(3));
        assert!(p.take_sampled(3) && !p.is_sampled(3));
        assert_eq!(p.state(4), PageState::Ballooned);
        // The unused half of the last byte reads as out of range, and stays so.
        p.set(5, PageState::Mapped);
        assert_eq!((p.state(5), p.peek(5)), (PageState::Unbacked, 0));
        assert_eq!((p.len(), p.mapped(), p.ballooned()), (5, 1, 1));
    }
}
