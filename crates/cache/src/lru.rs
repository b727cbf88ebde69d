//! A single-size LRU cache of blocks, replayed request by request: the reference every curve is checked against, and the building block of the two-level simulation.
//!
//! Entries live in one `Vec` as an intrusive doubly-linked list (indexes, not pointers) with a
//! free list, and an Fx hash map from block to entry: a hit is one lookup and two relinks, a
//! miss into a full cache reuses the evicted entry. O(1) per request; 24 bytes per entry plus
//! the map's.

use rustc_hash::FxHashMap;

const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Entry {
    block: u64,
    prev: u32,
    next: u32,
}

/// An LRU cache of at most `capacity` blocks.
#[derive(Clone, Debug)]
pub struct Lru {
    capacity: usize,
    entries: Vec<Entry>,
    map: FxHashMap<u64, u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next victim.
    tail: u32,
    hits: u64,
    misses: u64,
}

impl Lru {
    /// An empty cache of `capacity` blocks (0: every request misses). Capacities beyond
    /// `u32::MAX - 1` entries are cut to that.
    pub fn new(capacity: usize) -> Lru {
        let capacity = capacity.min(NONE as usize - 1);
        Lru {
            capacity,
            entries: Vec::with_capacity(capacity.min(1 << 20)),
            map: FxHashMap::default(),
            head: NONE,
            tail: NONE,
            hits: 0,
            misses: 0,
        }
    }

    /// Requests `block`: true on a hit. A miss inserts it, evicting the least recently used
    /// block when full; [`Lru::access_evicting`] also says which.
    pub fn access(&mut self, block: u64) -> bool {
        self.access_evicting(block).0
    }

    /// Requests `block`: (hit, the block evicted to make room on a miss).
    pub fn access_evicting(&mut self, block: u64) -> (bool, Option<u64>) {
        if let Some(&i) = self.map.get(&block) {
            self.hits += 1;
            self.move_to_front(i);
            return (true, None);
        }
        self.misses += 1;
        (false, self.insert(block))
    }

    /// Puts `block` at the front without counting a request (a block demoted into this
    /// level); returns the block evicted to make room. A block already here moves to the front.
    pub fn insert(&mut self, block: u64) -> Option<u64> {
        if self.capacity == 0 {
            return Some(block);
        }
        if let Some(&i) = self.map.get(&block) {
            self.move_to_front(i);
            return None;
        }
        let mut evicted = None;
        let i = if self.entries.len() < self.capacity {
            self.entries.push(Entry {
                block,
                prev: NONE,
                next: NONE,
            });
            (self.entries.len() - 1) as u32
        } else {
            let victim = self.tail;
            self.unlink(victim);
            let old = self.entries[victim as usize].block;
            self.map.remove(&old);
            evicted = Some(old);
            self.entries[victim as usize].block = block;
            victim
        };
        self.map.insert(block, i);
        self.push_front(i);
        evicted
    }

    /// Drops `block` if cached (a block promoted out of an exclusive level); true if it was.
    pub fn remove(&mut self, block: u64) -> bool {
        let Some(i) = self.map.remove(&block) else {
            return false;
        };
        self.unlink(i);
        // Move the last entry into the hole so the vector stays dense.
        let last = (self.entries.len() - 1) as u32;
        if i != last {
            let moved = self.entries[last as usize].clone();
            self.unlink(last);
            self.entries[i as usize] = Entry {
                block: moved.block,
                prev: NONE,
                next: NONE,
            };
            self.map.insert(moved.block, i);
            // Relink at the moved entry's old place.
            self.link_between(i, moved.prev, moved.next);
        }
        self.entries.pop();
        true
    }

    /// Whether `block` is cached (no request counted, no reordering).
    pub fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn hits(&self) -> u64 {
        self.hits
    }

    pub fn misses(&self) -> u64 {
        self.misses
    }

    fn move_to_front(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }

    fn push_front(&mut self, i: u32) {
        self.link_between(i, NONE, self.head);
    }

    /// Links `i` between `prev` and `next` (either may be NONE: the list's end).
    fn link_between(&mut self, i: u32, prev: u32, next: u32) {
        self.entries[i as usize].prev = prev;
        self.entries[i as usize].next = next;
        match prev {
            NONE => self.head = i,
            p => self.entries[p as usize].next = i,
        }
        match next {
            NONE => self.tail = i,
            n => self.entries[n as usize].prev = i,
        }
    }

    fn unlink(&mut self, i: u32) {
        let Entry { prev, next, .. } = self.entries[i as usize];
        match prev {
            NONE => self.head = next,
            p => self.entries[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.entries[n as usize].prev = prev,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks from most to least recently used.
    fn order(c: &Lru) -> Vec<u64> {
        let mut out = Vec::new();
        let mut i = c.head;
        while i != NONE {
            out.push(c.entries[i as usize].block);
            i = c.entries[i as usize].next;
        }
        out
    }

    #[test]
    fn a_hand_checked_trace_hits_and_evicts_as_lru() {
        // Capacity 3: a b c a d (evicts b) b (miss, evicts c) a (hit).
        let mut c = Lru::new(3);
        let trace = [1, 2, 3, 1, 4, 2, 1];
        let hits: Vec<bool> = trace.iter().map(|&b| c.access(b)).collect();
        assert_eq!(hits, [false, false, false, true, false, false, true]);
        assert_eq!((c.hits(), c.misses()), (2, 5));
        assert_eq!(order(&c), [1, 2, 4]);
    }

    #[test]
    fn evictions_are_reported_and_a_zero_cache_misses_everything() {
        let mut c = Lru::new(2);
        assert_eq!(c.access_evicting(1), (false, None));
        assert_eq!(c.access_evicting(2), (false, None));
        assert_eq!(c.access_evicting(3), (false, Some(1)));
        let mut z = Lru::new(0);
        assert!(!z.access(1) && !z.access(1));
        assert!(z.is_empty());
    }

    #[test]
    fn removing_keeps_the_order_of_the_rest() {
        let mut c = Lru::new(4);
        for b in [1, 2, 3, 4] {
            c.access(b);
        }
        assert!(c.remove(3));
        assert!(!c.remove(3));
        assert_eq!(order(&c), [4, 2, 1]);
        assert!(c.remove(4));
        assert_eq!(order(&c), [2, 1]);
        assert_eq!(c.insert(9), None);
        assert_eq!(order(&c), [9, 2, 1]);
        c.access(1);
        assert_eq!(order(&c), [1, 9, 2]);
    }
}
