//! A guest's per-page numbers — each page's owner value, the anonymous and file maps, the CLOCK queues — stored 16 bits wide when the guest and its regions are small enough, 32 bits otherwise.
//!
//! The width is chosen once, when the guest boots, from its sizes ([`Width::of`]): 16 bits
//! when the guest's pages and the pages of each of its regions number at most
//! [`NARROW_MAX_PAGES`] (every value a PPN, a page or a block below 65,534, so the two
//! values above are free for the sentinels: guests and regions under 256 MiB), 32 bits
//! otherwise. A new workload too large for 16 bits widens the guest then (the one
//! conversion). Values go in and come out as `u32` whatever the width: the top two `u32`
//! values, [`NONE`] and [`SWAPPED`], are stored as the top two values of the width.
//!
//! A map entry is stored XORed with the width's top value, so "not present" ([`NONE`]) is
//! 0: a region's map starts as zeroed memory the OS commits only when a page of it is
//! touched, and an untouched region costs no RSS.
//!
//! Memory: per guest page its owner value (2 or 4 bytes) and at most one queue entry (2 or
//! 4) while resident; per region page its map entry (2 or 4).

use std::collections::VecDeque;

/// "Not present" in a map; the end of a page stack in an owner value.
pub const NONE: u32 = u32::MAX;
/// An anonymous page held in guest swap.
pub const SWAPPED: u32 = u32::MAX - 1;
/// The most pages a guest, its anonymous region or its file set may have for 16-bit entries.
pub const NARROW_MAX_PAGES: u32 = u16::MAX as u32 - 1;

/// A full CLOCK queue grows by this fraction of its length (and 16), not the doubling of
/// `VecDeque`: a queue's ring moves through all of its capacity, so all of it is resident,
/// and a queue of most of a guest's pages would hold up to twice what it needs.
const QUEUE_GROWTH: usize = 8;

/// An unsigned integer entries are stored in.
trait Entry: Copy + std::fmt::Debug {
    /// The type's largest value.
    const TOP: u32;
    /// `v`, which the caller made fit.
    fn narrow(v: u32) -> Self;
    fn widen(self) -> u32;

    /// `v` stored: a sentinel moved to the type's top values.
    #[inline(always)]
    fn pack(v: u32) -> Self {
        Self::narrow(if v >= SWAPPED {
            v - (NONE - Self::TOP)
        } else {
            v
        })
    }

    /// A stored value read back (the inverse of [`Entry::pack`]).
    #[inline(always)]
    fn unpack(self) -> u32 {
        let v = self.widen();
        if v >= Self::TOP - 1 {
            v + (NONE - Self::TOP)
        } else {
            v
        }
    }

    /// A map entry stored: `NONE` is 0.
    #[inline(always)]
    fn pack_map(v: u32) -> Self {
        Self::narrow(Self::pack(v).widen() ^ Self::TOP)
    }

    /// A stored map entry read back.
    #[inline(always)]
    fn unpack_map(self) -> u32 {
        Self::narrow(self.widen() ^ Self::TOP).unpack()
    }
}

impl Entry for u16 {
    const TOP: u32 = u16::MAX as u32;

    #[inline(always)]
    fn narrow(v: u32) -> u16 {
        v as u16
    }

    #[inline(always)]
    fn widen(self) -> u32 {
        u32::from(self)
    }
}

impl Entry for u32 {
    const TOP: u32 = u32::MAX;

    #[inline(always)]
    fn narrow(v: u32) -> u32 {
        v
    }

    #[inline(always)]
    fn widen(self) -> u32 {
        self
    }
}

/// How wide a guest's entries are.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Width {
    Narrow,
    Wide,
}

impl Width {
    /// The width for a guest of `pages` pages whose regions have `anon` and `file` pages.
    pub fn of(pages: u32, anon: u32, file: u32) -> Width {
        if pages.max(anon).max(file) <= NARROW_MAX_PAGES {
            Width::Narrow
        } else {
            Width::Wide
        }
    }

    /// Bytes of one entry.
    pub fn bytes(self) -> u64 {
        match self {
            Width::Narrow => 2,
            Width::Wide => 4,
        }
    }
}

/// One of the two CLOCK queues.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Queue {
    Cache,
    Anon,
}

/// The entries at one width.
#[derive(Clone, Debug)]
struct Tables<E> {
    owner: Vec<E>,
    anon: Vec<E>,
    file: Vec<E>,
    cache_q: VecDeque<E>,
    anon_q: VecDeque<E>,
}

impl<E: Entry> Tables<E> {
    fn new(pages: u32, anon: u32, file: u32) -> Tables<E> {
        Tables {
            owner: vec![E::narrow(0); pages as usize],
            anon: vec![E::narrow(0); anon as usize],
            file: vec![E::narrow(0); file as usize],
            cache_q: VecDeque::new(),
            anon_q: VecDeque::new(),
        }
    }

    /// The same entries at another width.
    fn convert<F: Entry>(&self) -> Tables<F> {
        let entries = |v: &[E]| v.iter().map(|e| F::pack(e.unpack())).collect();
        let map = |v: &[E]| v.iter().map(|e| F::pack_map(e.unpack_map())).collect();
        let queue = |q: &VecDeque<E>| q.iter().map(|e| F::pack(e.unpack())).collect();
        Tables {
            owner: entries(&self.owner),
            anon: map(&self.anon),
            file: map(&self.file),
            cache_q: queue(&self.cache_q),
            anon_q: queue(&self.anon_q),
        }
    }

    fn queue(&mut self, q: Queue) -> &mut VecDeque<E> {
        match q {
            Queue::Cache => &mut self.cache_q,
            Queue::Anon => &mut self.anon_q,
        }
    }
}

/// A guest's entries at the width chosen for it (see the module docs).
#[derive(Clone, Debug)]
pub struct Entries(Any);

#[derive(Clone, Debug)]
enum Any {
    Narrow(Tables<u16>),
    Wide(Tables<u32>),
}

/// `$body` with `$t` bound to the tables of whichever width `$entries` has.
macro_rules! with {
    ($entries:expr, $t:ident => $body:expr) => {
        match $entries {
            Any::Narrow($t) => $body,
            Any::Wide($t) => $body,
        }
    };
}

impl Entries {
    /// Entries for `pages` guest pages (owner values 0) and regions of `anon` and `file`
    /// pages (all [`NONE`]), at [`Width::of`] those sizes.
    pub fn new(pages: u32, anon: u32, file: u32) -> Entries {
        Entries(match Width::of(pages, anon, file) {
            Width::Narrow => Any::Narrow(Tables::new(pages, anon, file)),
            Width::Wide => Any::Wide(Tables::new(pages, anon, file)),
        })
    }

    #[cfg(test)]
    fn width(&self) -> Width {
        match self.0 {
            Any::Narrow(_) => Width::Narrow,
            Any::Wide(_) => Width::Wide,
        }
    }

    /// Guest pages.
    pub fn pages(&self) -> u32 {
        with!(&self.0, t => t.owner.len() as u32)
    }

    /// Page `ppn`'s owner value (`ppn` must be a guest page).
    #[inline]
    pub fn owner(&self, ppn: u32) -> u32 {
        with!(&self.0, t => t.owner[ppn as usize].unpack())
    }

    #[inline]
    pub fn set_owner(&mut self, ppn: u32, v: u32) {
        with!(&mut self.0, t => t.owner[ppn as usize] = Entry::pack(v))
    }

    /// Pages of the anonymous region.
    pub fn anon_pages(&self) -> u32 {
        with!(&self.0, t => t.anon.len() as u32)
    }

    /// Blocks of the file set.
    pub fn file_pages(&self) -> u32 {
        with!(&self.0, t => t.file.len() as u32)
    }

    /// Anonymous page `page`'s entry ([`NONE`] outside the region).
    #[inline(always)]
    pub fn anon(&self, page: u32) -> u32 {
        with!(&self.0, t => t.anon.get(page as usize).map_or(NONE, |e| e.unpack_map()))
    }

    /// Sets anonymous page `page`'s entry (`page` must be in the region).
    #[inline]
    pub fn set_anon(&mut self, page: u32, v: u32) {
        with!(&mut self.0, t => t.anon[page as usize] = Entry::pack_map(v))
    }

    /// File block `block`'s entry ([`NONE`] outside the file set).
    #[inline(always)]
    pub fn file(&self, block: u32) -> u32 {
        with!(&self.0, t => t.file.get(block as usize).map_or(NONE, |e| e.unpack_map()))
    }

    /// Sets file block `block`'s entry (`block` must be in the file set).
    #[inline]
    pub fn set_file(&mut self, block: u32, v: u32) {
        with!(&mut self.0, t => t.file[block as usize] = Entry::pack_map(v))
    }

    /// A new anonymous region of `pages` pages, all [`NONE`] (widening if it needs to).
    pub fn replace_anon(&mut self, pages: u32) {
        self.fit(pages, self.file_pages());
        with!(&mut self.0, t => t.anon = vec![Entry::narrow(0); pages as usize])
    }

    /// Grows the file set to `blocks` blocks (widening if it needs to); the new ones are
    /// [`NONE`].
    pub fn grow_file(&mut self, blocks: u32) {
        self.fit(self.anon_pages(), blocks);
        with!(&mut self.0, t => t.file.resize(blocks as usize, Entry::narrow(0)))
    }

    /// Widens narrow entries that regions of `anon` and `file` pages would not fit.
    fn fit(&mut self, anon: u32, file: u32) {
        if let Any::Narrow(t) = &self.0 {
            if Width::of(self.pages(), anon, file) == Width::Wide {
                self.0 = Any::Wide(t.convert());
            }
        }
    }

    /// Queues `ppn` at the tail of `q`.
    #[inline]
    pub fn push(&mut self, q: Queue, ppn: u32) {
        with!(&mut self.0, t => {
            let queue = t.queue(q);
            if queue.len() == queue.capacity() {
                queue.reserve_exact(queue.len() / QUEUE_GROWTH + 16);
            }
            queue.push_back(Entry::pack(ppn))
        })
    }

    /// Takes the head of `q`.
    #[inline]
    pub fn pop(&mut self, q: Queue) -> Option<u32> {
        with!(&mut self.0, t => t.queue(q).pop_front().map(Entry::unpack))
    }

    /// Entries in `q`.
    pub fn queued(&self, q: Queue) -> usize {
        with!(&self.0, t => match q {
            Queue::Cache => t.cache_q.len(),
            Queue::Anon => t.anon_q.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same writes at either width.
    fn fill(e: &mut Entries) {
        e.set_owner(0, 7);
        e.set_owner(1, NONE);
        e.set_owner(5, 65_533);
        e.set_anon(0, 3);
        e.set_anon(1, SWAPPED);
        e.set_anon(2, NONE);
        e.set_file(4, 65_533);
        e.push(Queue::Cache, 4);
        e.push(Queue::Anon, 0);
        e.push(Queue::Cache, 9);
    }

    fn read(e: &mut Entries) -> Vec<u32> {
        let mut v: Vec<u32> = (0..10).map(|p| e.owner(p)).collect();
        v.extend((0..7).map(|p| e.anon(p)));
        v.extend((0..7).map(|b| e.file(b)));
        v.push(e.queued(Queue::Cache) as u32);
        v.extend(std::iter::from_fn(|| e.pop(Queue::Cache)));
        v.extend(std::iter::from_fn(|| e.pop(Queue::Anon)));
        v
    }

    #[test]
    fn the_width_is_chosen_from_the_guest_and_region_sizes() {
        assert_eq!(Width::of(65_534, 65_534, 65_534), Width::Narrow);
        assert_eq!(Width::of(65_535, 10, 10), Width::Wide);
        assert_eq!(Width::of(10, 65_535, 10), Width::Wide);
        assert_eq!(Width::of(10, 10, 1 << 20), Width::Wide);
        assert_eq!(Entries::new(16_384, 4_096, 0).width(), Width::Narrow);
        assert_eq!(Entries::new(262_144, 4_096, 0).width(), Width::Wide);
        assert_eq!((Width::Narrow.bytes(), Width::Wide.bytes()), (2, 4));
    }

    #[test]
    fn both_widths_give_the_same_answers() {
        let mut narrow = Entries::new(10, 6, 6);
        let mut wide = Entries(Any::Wide(Tables::new(10, 6, 6)));
        assert_eq!(narrow.width(), Width::Narrow);
        fill(&mut narrow);
        fill(&mut wide);
        assert_eq!(read(&mut narrow), read(&mut wide));
    }

    #[test]
    fn sentinels_round_trip_and_a_new_map_is_none_and_zeroed() {
        let mut e = Entries::new(4, 3, 3);
        assert!((0..4).all(|p| e.anon(p) == NONE && e.file(p) == NONE));
        assert_eq!(e.owner(3), 0);
        for v in [0, 1, NARROW_MAX_PAGES - 1, SWAPPED, NONE] {
            e.set_owner(0, v);
            e.set_anon(0, v);
            e.set_file(0, v);
            assert_eq!((e.owner(0), e.anon(0), e.file(0)), (v, v, v), "{v}");
        }
        // "Not present" is stored as 0: untouched map memory stays uncommitted.
        let Any::Narrow(t) = &e.0 else {
            panic!("narrow")
        };
        assert_eq!(t.anon[1..], [0, 0]);
        assert_eq!(u16::pack_map(NONE), 0);
        assert_eq!(u32::pack_map(NONE), 0);
    }

    #[test]
    fn a_region_too_large_for_sixteen_bits_widens_the_entries() {
        let mut e = Entries::new(10, 6, 6);
        fill(&mut e);
        let before = read(&mut e.clone());
        e.grow_file(100_000);
        assert_eq!(e.width(), Width::Wide);
        assert_eq!(e.file(99_999), NONE);
        assert_eq!(read(&mut e.clone()), before);
        let mut n = Entries::new(100, 10, 10);
        n.replace_anon(70_000);
        let anon = (n.width(), n.anon_pages(), n.anon(69_999));
        assert_eq!(anon, (Width::Wide, 70_000, NONE));
    }
}
