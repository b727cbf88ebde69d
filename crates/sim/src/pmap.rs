//! A VM's pmap: for every guest-physical page (PPN), where the host keeps it — a machine frame, host swap, the balloon, or nowhere yet.
//!
//! One `u32` per PPN: the state in the top two bits, ESX's "sampled" mark (the mapping is
//! invalidated so the next guest access is seen) in bit 29, and the MPN or swap slot in
//! the low 29 bits. The common case, mapped and not sampled, is an entry below 2^29, so the
//! hot path tests one comparison.

/// Where the host keeps one guest-physical page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PageState {
    /// Never touched since power-on or since a balloon deflate: no machine memory.
    Unbacked,
    /// Backed by machine frame `mpn`.
    Mapped(u32),
    /// Paged out by the host to host swap slot `slot`.
    HostSwapped(u32),
    /// Held by the guest's balloon driver: the host has reclaimed it.
    Ballooned,
}

const TAG_MAPPED: u32 = 0;
const TAG_SWAPPED: u32 = 1 << 30;
const TAG_BALLOONED: u32 = 2 << 30;
const TAG_UNBACKED: u32 = 3 << 30;
const TAG_MASK: u32 = 3 << 30;
/// ESX sampling mark.
pub const SAMPLED: u32 = 1 << 29;
const VALUE_MASK: u32 = SAMPLED - 1;

/// Entries below this are mapped and not sampled: the fast case.
pub const FAST_LIMIT: u32 = SAMPLED;

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
    entries: Vec<u32>,
    mapped: u32,
    swapped: u32,
    ballooned: u32,
    pub counters: PmapCounters,
}

fn encode(state: PageState) -> u32 {
    match state {
        PageState::Unbacked => TAG_UNBACKED,
        PageState::Mapped(mpn) => TAG_MAPPED | (mpn & VALUE_MASK),
        PageState::HostSwapped(slot) => TAG_SWAPPED | (slot & VALUE_MASK),
        PageState::Ballooned => TAG_BALLOONED,
    }
}

/// The state an entry encodes (ignoring the sampled mark).
#[inline]
pub fn decode(entry: u32) -> PageState {
    match entry & TAG_MASK {
        TAG_MAPPED => PageState::Mapped(entry & VALUE_MASK),
        TAG_SWAPPED => PageState::HostSwapped(entry & VALUE_MASK),
        TAG_BALLOONED => PageState::Ballooned,
        _ => PageState::Unbacked,
    }
}

impl Pmap {
    /// `pages` PPNs, all unbacked.
    pub fn new(pages: u32) -> Pmap {
        Pmap {
            entries: vec![TAG_UNBACKED; pages as usize],
            mapped: 0,
            swapped: 0,
            ballooned: 0,
            counters: PmapCounters::default(),
        }
    }

    /// Number of PPNs.
    pub fn len(&self) -> u32 {
        self.entries.len() as u32
    }

    /// True for a VM of zero pages.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The raw entry of `ppn` (see the module docs); an out-of-range PPN reads as unbacked.
    #[inline]
    pub fn raw(&self, ppn: u32) -> u32 {
        self.entries
            .get(ppn as usize)
            .copied()
            .unwrap_or(TAG_UNBACKED)
    }

    /// Where `ppn` is.
    pub fn state(&self, ppn: u32) -> PageState {
        decode(self.raw(ppn))
    }

    /// Moves `ppn` to `state`, keeping its sampled mark and the counts of each state.
    pub fn set(&mut self, ppn: u32, state: PageState) {
        let Some(e) = self.entries.get_mut(ppn as usize) else {
            return;
        };
        match *e & TAG_MASK {
            TAG_MAPPED => self.mapped -= 1,
            TAG_SWAPPED => self.swapped -= 1,
            TAG_BALLOONED => self.ballooned -= 1,
            _ => {}
        }
        match state {
            PageState::Mapped(_) => self.mapped += 1,
            PageState::HostSwapped(_) => self.swapped += 1,
            PageState::Ballooned => self.ballooned += 1,
            PageState::Unbacked => {}
        }
        *e = (*e & SAMPLED) | encode(state);
    }

    /// True when `ppn` carries the sampling mark.
    pub fn is_sampled(&self, ppn: u32) -> bool {
        self.raw(ppn) & SAMPLED != 0
    }

    /// Sets or clears the sampling mark of `ppn`.
    pub fn set_sampled(&mut self, ppn: u32, sampled: bool) {
        if let Some(e) = self.entries.get_mut(ppn as usize) {
            if sampled {
                *e |= SAMPLED;
            } else {
                *e &= !SAMPLED;
            }
        }
    }

    /// Clears the sampling mark of `ppn`; true if it was set.
    #[inline]
    pub fn take_sampled(&mut self, ppn: u32) -> bool {
        match self.entries.get_mut(ppn as usize) {
            Some(e) if *e & SAMPLED != 0 => {
                *e &= !SAMPLED;
                true
            }
            _ => false,
        }
    }

    /// PPNs backed by machine frames: the VM's allocation.
    pub fn mapped(&self) -> u32 {
        self.mapped
    }

    /// PPNs in host swap.
    pub fn host_swapped(&self) -> u32 {
        self.swapped
    }

    /// PPNs held by the balloon.
    pub fn ballooned(&self) -> u32 {
        self.ballooned
    }

    /// Every frame and host swap slot this pmap holds (for power-off).
    pub fn holdings(&self) -> impl Iterator<Item = PageState> + '_ {
        self.entries.iter().map(|&e| decode(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        p.set(0, PageState::Mapped(7));
        p.set(1, PageState::HostSwapped(3));
        p.set(2, PageState::Ballooned);
        assert_eq!(p.state(0), PageState::Mapped(7));
        assert_eq!(p.state(1), PageState::HostSwapped(3));
        assert_eq!(p.state(2), PageState::Ballooned);
        assert_eq!((p.mapped(), p.host_swapped(), p.ballooned()), (1, 1, 1));
        p.set(0, PageState::HostSwapped(1));
        assert_eq!((p.mapped(), p.host_swapped()), (0, 2));
    }

    #[test]
    fn only_a_mapped_unsampled_entry_is_on_the_fast_path() {
        let mut p = Pmap::new(2);
        p.set(0, PageState::Mapped(SAMPLED - 1));
        assert!(p.raw(0) < FAST_LIMIT);
        assert!(p.raw(1) >= FAST_LIMIT);
        p.set_sampled(0, true);
        assert!(p.raw(0) >= FAST_LIMIT);
        assert_eq!(p.state(0), PageState::Mapped(SAMPLED - 1));
    }

    #[test]
    fn the_sampling_mark_survives_state_changes_and_is_taken_once() {
        let mut p = Pmap::new(1);
        p.set_sampled(0, true);
        p.set(0, PageState::Mapped(5));
        assert!(p.is_sampled(0));
        assert!(p.take_sampled(0));
        assert!(!p.take_sampled(0));
        assert_eq!(p.state(0), PageState::Mapped(5));
    }

    #[test]
    fn out_of_range_ppns_are_harmless() {
        let mut p = Pmap::new(1);
        p.set(9, PageState::Mapped(1));
        assert_eq!(p.state(9), PageState::Unbacked);
        assert_eq!(p.mapped(), 0);
    }
}
