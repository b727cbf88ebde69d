//! The database workload (MySQL/InnoDB, ALB Figs. 1, 6 and 8): a buffer pool with its own LRU over the database's pages, a query mix of index lookups and scans, and a planner that sizes joins and sorts by the pool it believes it has.
//!
//! The database's `data` pages live on disk and are read with O_DIRECT into the buffer pool:
//! `pool` slots of anonymous memory (at most; `size` of them are the pool now, the rest given
//! back through the agent). The pool keeps an exact LRU over the pages it holds: an index
//! lookup (a page drawn with the `skew` over the data) enters at the LRU's head; a scan (the
//! next of `scan` consecutive pages from a random start) enters at its tail, InnoDB's
//! midpoint insertion in its simplest form, so one scan does not flush the pages lookups keep
//! using. A hit touches the page's slot; a miss takes a free slot or evicts the LRU's tail
//! and reads the page into it ([`Access::Fill`]: a random read for a lookup, a sequential one
//! for a scan).
//!
//! The planner gives each query's joins and sorts `work_ratio` x the pool it knows, touched
//! by `work_share` of the accesses: with the agent, the pool it knows is the pool it has;
//! ballooned by the OS behind its back, it is still the configured one, so the pool's LRU
//! holds more pages than the guest has memory for, the joins get work memory the guest must
//! swap, and a miss that evicts a slot the guest swapped out reads it back only to overwrite
//! it (double paging). `heap` of other memory (server structures, connections) takes 5% of
//! the accesses. Giving back `k` pages takes free slots first, then the LRU's tail, and the
//! work memory beyond what the smaller pool is given.

use super::pick::{threshold, Picker};
use super::pool::{PoolCounters, ResizeCost};
use super::validate::Check;
use super::{Access, Skew, WorkloadError};
use crate::app::curve::CurveSampler;
use crate::rng::SimRng;
use memtide_model::{MissCurve, Pages};
use std::time::Duration;

/// "No page" / "no slot".
const NONE: u32 = u32::MAX;
/// Share of accesses to the server's heap.
const HEAP_SHARE: f64 = 0.05;

/// Defaults of the optional fields.
pub mod defaults {
    use crate::workload::Skew;

    pub const HEAP_MB: f64 = 32.0;
    pub const WORK_RATIO: f64 = 0.1;
    pub const WORK_SHARE: f64 = 0.2;
    pub const SCAN_SHARE: f64 = 0.5;
    pub const SCAN_MB: f64 = 4.0;
    pub const SKEW: Skew = Skew::Uniform;
    pub const ACCESSES_PER_OP: u32 = 1000;
}

/// A database's parameters, as its config gives them.
pub(super) struct Sizes {
    pub data_mb: f64,
    pub pool_mb: f64,
    pub min_pool_mb: f64,
    pub heap_mb: f64,
    pub work_ratio: f64,
    pub work_share: f64,
    pub scan_share: f64,
    pub scan_mb: f64,
    pub skew: Skew,
    pub shrink_s_per_gib: f64,
    pub grow_s_per_gib: f64,
}

/// A database with its buffer pool (see the module docs).
#[derive(Clone, Debug)]
pub struct Database {
    data: u32,
    max: u32,
    min: u32,
    size: u32,
    /// The LRU over slots holding pages: `prev` toward the head (most recent), `next` toward
    /// the tail.
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    page_of: Vec<u32>,
    slot_of: Vec<u32>,
    /// Slots of the pool holding no page.
    free: Vec<u32>,
    /// Slots given back: not in the pool.
    ballooned: Vec<u32>,
    lookups: Picker,
    scan: u32,
    scan_next: u32,
    scan_left: u32,
    /// Coins below these: a work access, a heap access (the rest read the data); and, of the
    /// data's reads, a scan's page.
    work_cut: u64,
    heap_cut: u64,
    scan_cut: u64,
    work_ratio: f64,
    work_max: u32,
    heap: u32,
    counters: PoolCounters,
    cost: ResizeCost,
    /// The agent's sample of the pages read, where it reports a curve.
    sampler: Option<CurveSampler>,
}

impl Database {
    pub(super) fn new(check: Check, s: Sizes) -> Result<Database, WorkloadError> {
        let data = check
            .size_mb("data_mb", check.positive("data_mb", s.data_mb)?)?
            .max(1);
        let max = check
            .size_mb("pool_mb", check.positive("pool_mb", s.pool_mb)?)?
            .max(1);
        let min = check.size_mb("min_pool_mb", s.min_pool_mb)?;
        if min > max {
            return Err(check.error(
                "min_pool_mb",
                s.min_pool_mb,
                format!("<= pool_mb = {}", s.pool_mb),
            ));
        }
        let heap = check.size_mb("heap_mb", s.heap_mb)?;
        let work_ratio = check.fraction("work_ratio", s.work_ratio)?;
        let work_share = check.fraction("work_share", s.work_share)?;
        let scan_share = check.fraction("scan_share", s.scan_share)?;
        if work_share + HEAP_SHARE > 1.0 {
            return Err(check.error(
                "work_share",
                work_share,
                format!(
                    "<= {} (the heap takes {HEAP_SHARE} of the accesses)",
                    1.0 - HEAP_SHARE
                ),
            ));
        }
        let scan = check.size_mb("scan_mb", s.scan_mb)?.max(1);
        let skew = check.skew("skew", s.skew)?;
        let shrink = check.non_negative("shrink_s_per_gib", s.shrink_s_per_gib)?;
        let grow = check.non_negative("grow_s_per_gib", s.grow_s_per_gib)?;
        let work_max = (f64::from(max) * work_ratio).ceil() as u32;
        Ok(Database {
            data,
            max,
            min: min.max(1),
            size: max,
            prev: vec![NONE; max as usize],
            next: vec![NONE; max as usize],
            head: NONE,
            tail: NONE,
            page_of: vec![NONE; max as usize],
            slot_of: vec![NONE; data as usize],
            free: (0..max).rev().collect(),
            ballooned: Vec::new(),
            lookups: Picker::new(data, skew),
            scan: scan.min(data),
            scan_next: 0,
            scan_left: 0,
            work_cut: threshold(work_share),
            heap_cut: threshold(work_share + HEAP_SHARE),
            scan_cut: threshold(scan_share),
            work_ratio,
            work_max,
            heap,
            counters: PoolCounters::default(),
            cost: ResizeCost::per_gib(shrink, grow),
            sampler: None,
        })
    }

    pub(super) fn size(&self) -> u32 {
        self.size
    }

    pub(super) fn min(&self) -> u32 {
        self.min
    }

    pub(super) fn max(&self) -> u32 {
        self.max
    }

    pub(super) fn counters(&self) -> PoolCounters {
        self.counters
    }

    pub(super) fn resize_cost(&self) -> ResizeCost {
        self.cost
    }

    /// The agent samples every page read and reports the curve of each `window`.
    pub(super) fn sample_curve(&mut self, window: Duration) {
        self.sampler = Some(CurveSampler::new(window, self.max));
    }

    /// The sampled curve at `now` (see [`CurveSampler::curve`]).
    pub(super) fn curve(&mut self, now: Duration) -> Option<MissCurve> {
        self.sampler.as_mut()?.curve(now)
    }

    /// The anonymous region: the pool's slots, the joins' and sorts' work memory, the heap.
    pub(super) fn anon_pages(&self) -> u32 {
        self.max + self.work_max + self.heap
    }

    /// Work memory the planner gives queries now: by the pool it knows.
    fn work(&self) -> u32 {
        ((f64::from(self.size) * self.work_ratio) as u32).min(self.work_max)
    }

    fn unlink(&mut self, slot: u32) {
        let (p, n) = (self.prev[slot as usize], self.next[slot as usize]);
        match p {
            NONE => self.head = n,
            p => self.next[p as usize] = n,
        }
        match n {
            NONE => self.tail = p,
            n => self.prev[n as usize] = p,
        }
    }

    fn push_head(&mut self, slot: u32) {
        self.prev[slot as usize] = NONE;
        self.next[slot as usize] = self.head;
        match self.head {
            NONE => self.tail = slot,
            h => self.prev[h as usize] = slot,
        }
        self.head = slot;
    }

    fn push_tail(&mut self, slot: u32) {
        self.next[slot as usize] = NONE;
        self.prev[slot as usize] = self.tail;
        match self.tail {
            NONE => self.head = slot,
            t => self.next[t as usize] = slot,
        }
        self.tail = slot;
    }

    /// A slot for a new page: a free one, else the LRU's tail, its page evicted. The pool
    /// always has a slot (its min is at least one), so one of the two is there.
    fn take_slot(&mut self) -> u32 {
        if let Some(slot) = self.free.pop() {
            return slot;
        }
        let slot = self.tail;
        debug_assert_ne!(slot, NONE, "a pool of at least one slot");
        self.unlink(slot);
        self.slot_of[self.page_of[slot as usize] as usize] = NONE;
        self.page_of[slot as usize] = NONE;
        self.counters.used -= 1;
        self.counters.evictions += 1;
        slot
    }

    /// Reads `page` through the pool.
    fn read(&mut self, page: u32, scan: bool) -> Access {
        if let Some(s) = &mut self.sampler {
            s.access(page);
        }
        let slot = self.slot_of[page as usize];
        if slot != NONE {
            self.counters.hits += 1;
            self.unlink(slot);
            self.push_head(slot);
            return Access::Anon {
                page: slot,
                write: false,
            };
        }
        self.counters.misses += 1;
        let slot = self.take_slot();
        self.page_of[slot as usize] = page;
        self.slot_of[page as usize] = slot;
        self.counters.used += 1;
        if scan {
            self.push_tail(slot);
        } else {
            self.push_head(slot);
        }
        Access::Fill {
            page: slot,
            sequential: scan,
        }
    }

    /// Takes back accesses never performed: a page read into a slot leaves it (the slot is
    /// free again; what it evicted stays evicted), a hit on a slot is not counted.
    pub(super) fn return_unused(&mut self, unused: &[Access]) {
        for a in unused.iter().rev() {
            match *a {
                Access::Fill { page: slot, .. } => {
                    let page = self.page_of[slot as usize];
                    if page != NONE {
                        self.unlink(slot);
                        self.slot_of[page as usize] = NONE;
                        self.page_of[slot as usize] = NONE;
                        self.free.push(slot);
                        self.counters.used -= 1;
                        self.counters.misses -= 1;
                    }
                }
                Access::Anon { page, .. } if page < self.max => self.counters.hits -= 1,
                Access::Anon { .. } | Access::File { .. } | Access::Collect { .. } => {}
            }
        }
    }

    pub(super) fn fill(&mut self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize) {
        let work = self.work();
        for _ in 0..n {
            let x = rng.next_u64();
            let coin = x & 0xFFFF_FFFF;
            let hi = (x >> 32) as u32;
            let a = if coin < self.work_cut && work > 0 {
                Access::Anon {
                    page: self.max + ((u64::from(hi) * u64::from(work)) >> 32) as u32,
                    write: true,
                }
            } else if coin < self.heap_cut && self.heap > 0 {
                Access::Anon {
                    page: self.max
                        + self.work_max
                        + ((u64::from(hi) * u64::from(self.heap)) >> 32) as u32,
                    write: hi & 1 == 0,
                }
            } else if rng.next_u64() & 0xFFFF_FFFF < self.scan_cut {
                if self.scan_left == 0 {
                    self.scan_next = rng.below(u64::from(self.data - self.scan + 1)) as u32;
                    self.scan_left = self.scan;
                }
                let page = self.scan_next;
                self.scan_next += 1;
                self.scan_left -= 1;
                self.read(page, true)
            } else {
                let page = self.lookups.pick(hi, rng);
                self.read(page, false)
            };
            out.push(a);
        }
    }

    pub(super) fn shrink(&mut self, pages: u32, released: &mut Vec<u32>) {
        let work_before = self.work();
        let take = pages.min(self.size.saturating_sub(self.min));
        for _ in 0..take {
            let slot = self.take_slot();
            released.push(slot);
            self.ballooned.push(slot);
            self.size -= 1;
        }
        let work_after = self.work();
        released.extend((work_after..work_before).map(|w| self.max + w));
    }

    pub(super) fn grow(&mut self, pages: u32) {
        for _ in 0..pages {
            let Some(slot) = self.ballooned.pop() else {
                break;
            };
            self.free.push(slot);
            self.size += 1;
        }
    }

    /// The pool's pages of data (as many as it and the data hold), the work memory and the
    /// heap.
    pub(super) fn working_set(&self) -> Pages {
        Pages(u64::from(self.size.min(self.data)) + u64::from(self.work()) + u64::from(self.heap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database of `data` MiB with a pool of `pool` MiB (no heap), its reads all lookups
    /// unless `scan_share` says, and `work_ratio` of the pool for work memory touched by 20%
    /// of its accesses (none: those read the data too).
    fn db(data: f64, pool: f64, scan_share: f64, work_ratio: f64) -> Database {
        Database::new(
            Check { kind: "database" },
            Sizes {
                data_mb: data,
                pool_mb: pool,
                min_pool_mb: 1.0,
                heap_mb: 0.0,
                work_ratio,
                work_share: 0.2,
                scan_share,
                scan_mb: 1.0,
                skew: Skew::Uniform,
                shrink_s_per_gib: 1.0,
                grow_s_per_gib: 1.0,
            },
        )
        .unwrap()
    }

    fn run(d: &mut Database, n: usize, rng: &mut SimRng) -> Vec<Access> {
        let mut out = Vec::new();
        d.fill(rng, &mut out, n);
        out
    }

    #[test]
    fn data_that_fits_in_the_pool_is_read_once_then_hit() {
        let mut d = db(4.0, 8.0, 0.0, 0.0);
        let mut rng = SimRng::new(1);
        run(&mut d, 50_000, &mut rng);
        // Every one of the 1024 data pages read once: 1024 misses, no eviction.
        let c = d.counters();
        assert_eq!((c.misses, c.evictions, c.used), (1024, 0, 1024));
        let later = run(&mut d, 10_000, &mut rng);
        assert!(later.iter().all(|a| matches!(a, Access::Anon { .. })));
        assert_eq!(d.counters().misses, 1024);
    }

    #[test]
    fn misses_read_lookups_at_random_and_scans_in_sequence() {
        let mut d = db(64.0, 8.0, 0.5, 0.0);
        let out = run(&mut d, 20_000, &mut SimRng::new(2));
        let fills = |seq: bool| {
            out.iter()
                .filter(|a| matches!(a, Access::Fill { sequential, .. } if *sequential == seq))
                .count()
        };
        // Without work memory or a heap every access reads the data: half scan, half look
        // up, and both mostly miss a pool of 1/8 of the data.
        assert!((8_000..10_000).contains(&fills(true)), "{}", fills(true));
        assert!((8_000..10_000).contains(&fills(false)), "{}", fills(false));
    }

    #[test]
    fn scans_enter_at_the_lru_tail_and_leave_the_lookups_pages_cached() {
        // 8 MiB of data, a 4 MiB pool: lookups over the first half of the pool's worth...
        let mut d = db(8.0, 4.0, 0.0, 0.0);
        for page in 0..1024 {
            d.read(page, false);
        }
        // ... then a scan of all 2048 pages: each takes the tail slot, one after another.
        for page in 0..2048 {
            d.read(page, true);
        }
        let cached = (0..1024).filter(|&p| d.slot_of[p as usize] != NONE).count();
        assert_eq!(cached, 1023, "the scan recycled one slot");
    }

    #[test]
    fn shrinking_gives_back_free_slots_then_the_coldest_pages_and_the_work_memory() {
        let mut d = db(8.0, 4.0, 0.0, 0.5);
        // 512 pages read, oldest first: the pool has 512 free slots left.
        for page in 0..512 {
            d.read(page, false);
        }
        let mut released = Vec::new();
        d.shrink(768, &mut released);
        assert_eq!(d.size(), 256);
        // The 512 free slots, then the 256 least recently read pages (0..256) are gone.
        assert!((0..256).all(|p| d.slot_of[p as usize] == NONE));
        assert!((256..512).all(|p| d.slot_of[p as usize] != NONE));
        assert_eq!(d.counters().evictions, 256);
        // The slots, and the work memory beyond half of the smaller pool.
        let work: Vec<u32> = released.iter().copied().filter(|&p| p >= d.max).collect();
        assert_eq!(released.len() - work.len(), 768);
        assert_eq!(work.len(), 512 - 128);
        assert_eq!(d.work(), 128);
    }

    #[test]
    fn the_planner_sizes_work_memory_by_the_pool_it_knows() {
        let mut d = db(8.0, 4.0, 0.0, 0.25);
        let work_pages = |d: &mut Database| {
            let out = run(d, 20_000, &mut SimRng::new(3));
            out.iter()
                .filter_map(|a| match a {
                    Access::Anon { page, write: true } => Some(*page),
                    _ => None,
                })
                .max()
                .unwrap()
                - d.max
        };
        assert_eq!(work_pages(&mut d), 255, "a quarter of 1024 slots");
        d.shrink(512, &mut Vec::new());
        assert_eq!(work_pages(&mut d), 127, "a quarter of 512");
        d.grow(512);
        assert_eq!((d.size(), work_pages(&mut d)), (1024, 255));
    }

    #[test]
    fn a_pool_never_shrinks_below_its_min_nor_grows_past_its_max() {
        let mut d = db(8.0, 4.0, 0.0, 0.0);
        d.shrink(u32::MAX, &mut Vec::new());
        assert_eq!(d.size(), 256, "min_pool_mb = 1");
        d.grow(u32::MAX);
        assert_eq!(d.size(), 1024);
        // The pool still works at its smallest.
        d.shrink(u32::MAX, &mut Vec::new());
        run(&mut d, 5_000, &mut SimRng::new(4));
        assert!(d.counters().used <= 256);
    }

    #[test]
    fn reads_never_performed_leave_their_slots_and_are_not_counted() {
        let mut d = db(8.0, 4.0, 0.0, 0.0);
        let mut rng = SimRng::new(5);
        run(&mut d, 3_000, &mut rng);
        let before = d.counters();
        let out = run(&mut d, 500, &mut rng);
        d.return_unused(&out);
        let after = d.counters();
        assert_eq!((after.misses, after.hits), (before.misses, before.hits));
        // What the reads evicted stays evicted; their own pages are gone again.
        let evicted = (after.evictions - before.evictions) as u32;
        assert!(evicted > 0);
        assert_eq!(after.used, before.used - evicted);
        assert_eq!(d.free.len() as u32, d.size() - after.used);
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let err = |s: Sizes| {
            Database::new(Check { kind: "database" }, s)
                .unwrap_err()
                .to_string()
        };
        let base = || Sizes {
            data_mb: 8.0,
            pool_mb: 4.0,
            min_pool_mb: 0.0,
            heap_mb: 0.0,
            work_ratio: 0.1,
            work_share: 0.2,
            scan_share: 0.5,
            scan_mb: 1.0,
            skew: Skew::Uniform,
            shrink_s_per_gib: 1.0,
            grow_s_per_gib: 1.0,
        };
        assert_eq!(
            err(Sizes {
                min_pool_mb: 5.0,
                ..base()
            }),
            "workload database: min_pool_mb = 5 must be <= pool_mb = 4"
        );
        assert_eq!(
            err(Sizes {
                work_share: 0.99,
                ..base()
            }),
            "workload database: work_share = 0.99 must be <= 0.95 (the heap takes 0.05 of the accesses)"
        );
        assert_eq!(
            err(Sizes {
                data_mb: 0.0,
                ..base()
            }),
            "workload database: data_mb = 0 must be > 0"
        );
    }
}
