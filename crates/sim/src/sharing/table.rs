//! ESX's global page-sharing hash table (§4.3): 16-byte frames, *shared* frames with a 16-bit reference count and an overflow table, and *hint* frames for pages scanned but not shared yet.
//!
//! Written here rather than taken from a crate because its point is its layout: ESX encodes
//! each frame in 16 bytes and reports the table's overhead (< 0.5% of memory), and a general
//! map's entries are larger. Open addressing with linear probing over a power-of-two array,
//! tombstones on removal, rebuilt at 7/8 full. Keys are 64-bit page hashes (XXH3 of the bytes);
//! as in ESX every entry has a distinct hash (a false match makes a page ineligible, it is
//! never chained). Deterministic: nothing is iterated in an order a hash seed could change.
//!
//! - **Shared frame**: the hash, the machine page holding the one copy (an index into the
//!   caller's frame arena) and the reference count in 16 bits; a count that does not fit
//!   keeps `u16::MAX` in the frame and its real value in the overflow table (the zero page
//!   is typically the one there).
//! - **Hint frame**: the hash and a reference back to the guest page (VM slot, PPN). On a
//!   later match the caller rehashes the hint's page; a changed hash means a stale hint.
//!
//! Cost: O(1) expected per lookup, insert and removal; 16 bytes per slot of capacity.

use std::collections::BTreeMap;

const EMPTY: u16 = 0;
const TOMBSTONE: u16 = 1;
const SHARED: u16 = 2;
const HINT: u16 = 3;
/// The 16-bit count that means "look in the overflow table".
const OVERFLOW: u16 = u16::MAX;

/// One frame: 16 bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
struct Frame {
    hash: u64,
    /// Shared: the machine page (frame arena index). Hint: the PPN.
    word: u32,
    /// Shared: the reference count (or [`OVERFLOW`]). Hint: the VM slot.
    count: u16,
    tag: u16,
}

const _: () = assert!(std::mem::size_of::<Frame>() == 16);

/// What the table holds for a hash.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A shared machine page `frame` with `refs` guest pages mapped to it.
    Shared { frame: u32, refs: u64 },
    /// A page scanned but not shared: VM `slot`'s `ppn`.
    Hint { slot: u16, ppn: u32 },
}

/// Where an entry lies, for [`Table::set`] and [`Table::remove`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct At(usize);

/// The global table.
#[derive(Clone, Debug)]
pub struct Table {
    frames: Vec<Frame>,
    /// Live entries.
    len: usize,
    tombstones: usize,
    shared: usize,
    /// Reference counts that do not fit in 16 bits, by frame.
    overflow: BTreeMap<u32, u64>,
}

impl Default for Table {
    fn default() -> Self {
        Table::new()
    }
}

impl Table {
    const MIN_CAPACITY: usize = 1024;

    pub fn new() -> Table {
        Table {
            frames: vec![Frame::default(); Self::MIN_CAPACITY],
            len: 0,
            tombstones: 0,
            shared: 0,
            overflow: BTreeMap::new(),
        }
    }

    /// Shared frames held.
    pub fn shared_frames(&self) -> usize {
        self.shared
    }

    /// Hint frames held.
    pub fn hints(&self) -> usize {
        self.len - self.shared
    }

    /// The table's memory: 16 bytes per slot and per overflow entry.
    pub fn bytes(&self) -> u64 {
        ((self.frames.len() + self.overflow.len()) * 16) as u64
    }

    fn mask(&self) -> usize {
        self.frames.len() - 1
    }

    /// The entry for `hash`, and where it lies.
    pub fn find(&self, hash: u64) -> Option<(At, Entry)> {
        let mut i = hash as usize & self.mask();
        loop {
            let f = &self.frames[i];
            match f.tag {
                EMPTY => return None,
                SHARED | HINT if f.hash == hash => return Some((At(i), self.entry(f))),
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    fn entry(&self, f: &Frame) -> Entry {
        if f.tag == SHARED {
            let refs = if f.count == OVERFLOW {
                self.overflow[&f.word]
            } else {
                u64::from(f.count)
            };
            Entry::Shared {
                frame: f.word,
                refs,
            }
        } else {
            Entry::Hint {
                slot: f.count,
                ppn: f.word,
            }
        }
    }

    /// Adds `entry` under `hash`, which the table must not hold.
    pub fn insert(&mut self, hash: u64, entry: Entry) {
        debug_assert!(self.find(hash).is_none());
        if (self.len + self.tombstones + 1) * 8 > self.frames.len() * 7 {
            self.rebuild();
        }
        let mut i = hash as usize & self.mask();
        while matches!(self.frames[i].tag, SHARED | HINT) {
            i = (i + 1) & self.mask();
        }
        if self.frames[i].tag == TOMBSTONE {
            self.tombstones -= 1;
        }
        self.len += 1;
        self.frames[i] = Frame {
            hash,
            ..Frame::default()
        };
        self.write(At(i), entry);
    }

    /// Replaces the entry at `at` (same hash).
    pub fn set(&mut self, at: At, entry: Entry) {
        self.clear_overflow(at);
        self.write(at, entry);
    }

    fn write(&mut self, at: At, entry: Entry) {
        let was_shared = self.frames[at.0].tag == SHARED;
        let f = &mut self.frames[at.0];
        match entry {
            Entry::Shared { frame, refs } => {
                f.tag = SHARED;
                f.word = frame;
                if refs >= u64::from(OVERFLOW) {
                    f.count = OVERFLOW;
                    self.overflow.insert(frame, refs);
                } else {
                    f.count = refs as u16;
                }
            }
            Entry::Hint { slot, ppn } => {
                f.tag = HINT;
                f.word = ppn;
                f.count = slot;
            }
        }
        let is_shared = self.frames[at.0].tag == SHARED;
        match (was_shared, is_shared) {
            (false, true) => self.shared += 1,
            (true, false) => self.shared -= 1,
            _ => {}
        }
    }

    fn clear_overflow(&mut self, at: At) {
        let f = self.frames[at.0];
        if f.tag == SHARED && f.count == OVERFLOW {
            self.overflow.remove(&f.word);
        }
    }

    /// Removes the entry at `at`.
    pub fn remove(&mut self, at: At) {
        self.clear_overflow(at);
        if self.frames[at.0].tag == SHARED {
            self.shared -= 1;
        }
        self.frames[at.0] = Frame {
            tag: TOMBSTONE,
            ..Frame::default()
        };
        self.len -= 1;
        self.tombstones += 1;
    }

    /// Keeps the hints `keep(hash, slot, ppn)` says yes to (shared frames always stay), then
    /// rebuilds.
    pub fn retain_hints(&mut self, mut keep: impl FnMut(u64, u16, u32) -> bool) {
        for i in 0..self.frames.len() {
            let f = self.frames[i];
            if f.tag == HINT && !keep(f.hash, f.count, f.word) {
                self.remove(At(i));
            }
        }
        self.rebuild();
    }

    /// Lays the live entries out again in an array at most half full.
    fn rebuild(&mut self) {
        let capacity = (self.len * 2).next_power_of_two().max(Self::MIN_CAPACITY);
        let old = std::mem::replace(&mut self.frames, vec![Frame::default(); capacity]);
        self.tombstones = 0;
        let mask = self.mask();
        for f in old.into_iter().filter(|f| matches!(f.tag, SHARED | HINT)) {
            let mut i = f.hash as usize & mask;
            while self.frames[i].tag != EMPTY {
                i = (i + 1) & mask;
            }
            self.frames[i] = f;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_found_by_hash_changed_in_place_and_removed() {
        let mut t = Table::new();
        t.insert(7, Entry::Hint { slot: 1, ppn: 42 });
        t.insert(7 + 1024, Entry::Shared { frame: 3, refs: 2 });
        let (at, e) = t.find(7).unwrap();
        assert_eq!(e, Entry::Hint { slot: 1, ppn: 42 });
        assert_eq!((t.len, t.shared_frames(), t.hints()), (2, 1, 1));
        t.set(at, Entry::Shared { frame: 9, refs: 2 });
        assert_eq!(t.shared_frames(), 2);
        assert_eq!(t.find(7).unwrap().1, Entry::Shared { frame: 9, refs: 2 });
        let (at, _) = t.find(7).unwrap();
        t.remove(at);
        assert!(t.find(7).is_none());
        // The entry probed past the removed one is still found.
        assert_eq!(
            t.find(7 + 1024).unwrap().1,
            Entry::Shared { frame: 3, refs: 2 }
        );
        assert_eq!((t.len, t.shared_frames()), (1, 1));
    }

    #[test]
    fn counts_beyond_16_bits_live_in_the_overflow_table() {
        let mut t = Table::new();
        t.insert(
            1,
            Entry::Shared {
                frame: 0,
                refs: 65_534,
            },
        );
        assert!(t.overflow.is_empty());
        let (at, _) = t.find(1).unwrap();
        t.set(
            at,
            Entry::Shared {
                frame: 0,
                refs: 100_000,
            },
        );
        assert_eq!(
            t.find(1).unwrap().1,
            Entry::Shared {
                frame: 0,
                refs: 100_000
            }
        );
        assert_eq!(t.overflow.len(), 1);
        assert_eq!(t.bytes(), (1024 + 1) * 16);
        t.set(at, Entry::Shared { frame: 0, refs: 3 });
        assert!(t.overflow.is_empty());
        assert_eq!(t.find(1).unwrap().1, Entry::Shared { frame: 0, refs: 3 });
    }

    #[test]
    fn the_table_grows_and_keeps_every_entry() {
        let mut t = Table::new();
        let hash = |i: u64| crate::sharing::content::mix(i);
        for i in 0..10_000u64 {
            t.insert(
                hash(i),
                Entry::Hint {
                    slot: 0,
                    ppn: i as u32,
                },
            );
        }
        for i in (0..10_000u64).step_by(2) {
            let (at, _) = t.find(hash(i)).unwrap();
            t.remove(at);
        }
        for i in 0..10_000u64 {
            let found = t.find(hash(i)).map(|(_, e)| e);
            let want = (i % 2 == 1).then_some(Entry::Hint {
                slot: 0,
                ppn: i as u32,
            });
            assert_eq!(found, want, "{i}");
        }
        assert!(t.frames.len() >= 5_000 * 8 / 7);
        t.retain_hints(|_, _, ppn| ppn % 4 == 1);
        assert_eq!(t.len, 2_500);
        assert!(t.find(hash(3)).is_none() && t.find(hash(5)).is_some());
    }
}
