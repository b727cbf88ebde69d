//! The jvm workload (OpenJDK running XMark queries, ALB Figs. 7 and 9, Table 1): a generational heap whose collections cost more as the heap nears its live data, with a balloon space in the young generation that is resized at a full collection.
//!
//! The heap (`heap` pages at most) is an old generation of `old` holding `live` data, two
//! survivor spaces of `survivors` together, and eden, the rest, less the balloon. The mutator
//! reads the live data (uniformly) and allocates: `alloc_share` of its accesses write the
//! next page of eden. When eden is full, a minor collection copies the young objects still
//! alive (`young_live`) into a survivor space and promotes `promote` of them into the old
//! generation; when that is full, a full collection marks and compacts the live data. A
//! collection's work is accesses to the pages it copies or marks ([`Access::Collect`]): time
//! that completes no operation, at the cost of any access, so a heap paged out makes its
//! collections page it in. A smaller eden collects more often; an old generation nearer its
//! live data collects fully more often: both raise the collections' cost per operation.
//!
//! The program first builds its live data (writes every page of it, work that completes no
//! operation), then runs.
//!
//! The agent resizes the heap by its balloon (ALB's balloon space in the young generation):
//! a resize first runs a full collection, which leaves eden empty; then the balloon takes the
//! top pages of eden (their memory is given back) or gives them back to it, at the
//! [`ResizeCost`] of the kernel's part (ALB Table 2's parenthesised figures by default). The
//! pool the agent reports is the heap less its balloon.

use super::pool::{PoolCounters, ResizeCost};
use super::validate::Check;
use super::{Access, WorkloadError};
use crate::rng::SimRng;
use memtide_model::Pages;

/// Seconds the kernel's part of a JVM resize takes per GiB, from ALB Table 2's figures in
/// parentheses (the rest of each figure is the full collection, simulated): the balloon grew
/// (the heap shrank) by 0.5 / 1 / 2 GiB in 2.14 / 4.27 / 7.68 s and shrank in 0.41 / 0.82 /
/// 1.65 s; least squares through zero.
pub const JVM_SHRINK_S_PER_GIB: f64 = 3.94;
pub const JVM_GROW_S_PER_GIB: f64 = 0.82;

/// Defaults of the optional fields.
pub mod defaults {
    pub const ALLOC_SHARE: f64 = 0.3;
    pub const PROMOTE: f64 = 0.1;
    pub const ACCESSES_PER_OP: u32 = 1000;
}

/// A heap's parameters, as its config gives them.
pub(super) struct Sizes {
    pub heap_mb: f64,
    pub old_mb: f64,
    pub live_mb: f64,
    pub survivors_mb: f64,
    pub min_eden_mb: f64,
    pub young_live_mb: f64,
    pub alloc_share: f64,
    pub promote: f64,
    pub shrink_s_per_gib: f64,
    pub grow_s_per_gib: f64,
}

/// Where a resize's full collection stands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ResizeGc {
    /// No resize waits for one.
    Idle,
    /// Queued or running.
    Running,
    /// Done: the resize may go on.
    Done,
}

/// A JVM's heap (see the module docs). Its anonymous region: the old generation, then the
/// survivor spaces, then eden.
#[derive(Clone, Debug)]
pub struct Jvm {
    heap: u32,
    old: u32,
    live: u32,
    survivors: u32,
    eden_max: u32,
    min_eden: u32,
    young_live: u32,
    promote: f64,
    alloc_cut: u64,
    /// Pages of eden given back.
    balloon: u32,
    /// Eden's next page to allocate (from its start).
    bump: u32,
    /// Pages of the old generation in use: live data and promoted objects since the last
    /// full collection.
    old_used: u32,
    /// Promoted pages, fractional, not yet whole.
    promoted: f64,
    /// Collection work queued: ranges of pages (start, count) to touch, in order.
    gc: Vec<(u32, u32)>,
    /// A full collection is queued or running.
    full_gc: bool,
    /// The queue's accesses were all handed out: the collections end at the next fill,
    /// unless some come back unperformed.
    ending: bool,
    resize_gc: ResizeGc,
    /// Pages of each part touched so far (what the heap holds in memory).
    eden_touched: u32,
    survivors_touched: u32,
    old_touched: u32,
    counters: PoolCounters,
    cost: ResizeCost,
}

impl Jvm {
    pub(super) fn new(check: Check, s: Sizes) -> Result<Jvm, WorkloadError> {
        let heap = check.size_mb("heap_mb", check.positive("heap_mb", s.heap_mb)?)?;
        let old = check.size_mb("old_mb", s.old_mb)?;
        let live = check.size_mb("live_mb", s.live_mb)?;
        let survivors = check.size_mb("survivors_mb", s.survivors_mb)?;
        let min_eden = check.size_mb("min_eden_mb", s.min_eden_mb)?.max(1);
        let young_live = check.size_mb("young_live_mb", s.young_live_mb)?;
        if live > old {
            return Err(check.error("live_mb", s.live_mb, format!("<= old_mb = {}", s.old_mb)));
        }
        if young_live > survivors {
            return Err(check.error(
                "young_live_mb",
                s.young_live_mb,
                format!("<= survivors_mb = {}", s.survivors_mb),
            ));
        }
        let young = heap.saturating_sub(old).saturating_sub(survivors);
        if young < min_eden {
            return Err(check.error(
                "heap_mb",
                s.heap_mb,
                format!(
                    ">= old_mb + survivors_mb + min_eden_mb = {} (eden at least its min)",
                    s.old_mb + s.survivors_mb + s.min_eden_mb.max(0.004)
                ),
            ));
        }
        let alloc_share = check.fraction("alloc_share", s.alloc_share)?;
        let promote = check.fraction("promote", s.promote)?;
        let shrink = check.non_negative("shrink_s_per_gib", s.shrink_s_per_gib)?;
        let grow = check.non_negative("grow_s_per_gib", s.grow_s_per_gib)?;
        Ok(Jvm {
            heap,
            old,
            live,
            survivors,
            eden_max: young,
            min_eden,
            young_live,
            promote,
            alloc_cut: super::pick::threshold(alloc_share),
            balloon: 0,
            bump: 0,
            old_used: live,
            promoted: 0.0,
            // The program builds its live data first.
            gc: vec![(0, live)],
            full_gc: false,
            ending: false,
            resize_gc: ResizeGc::Idle,
            eden_touched: 0,
            survivors_touched: 0,
            old_touched: live,
            counters: PoolCounters::default(),
            cost: ResizeCost::per_gib(shrink, grow),
        })
    }

    /// The heap less its balloon.
    pub(super) fn size(&self) -> u32 {
        self.heap - self.balloon
    }

    /// The smallest heap: eden down to its min.
    pub(super) fn min(&self) -> u32 {
        self.heap - (self.eden_max - self.min_eden)
    }

    pub(super) fn max(&self) -> u32 {
        self.heap
    }

    /// The heap's counters: `hits` are pages allocated, `misses` collections (each one an
    /// allocation that found eden full), `evictions` full collections; `used` the pages of the
    /// heap it has touched.
    pub(super) fn counters(&self) -> PoolCounters {
        PoolCounters {
            used: self.eden_touched + self.survivors_touched + self.old_touched,
            ..self.counters
        }
    }

    pub(super) fn resize_cost(&self) -> ResizeCost {
        self.cost
    }

    pub(super) fn anon_pages(&self) -> u32 {
        self.heap
    }

    fn eden_start(&self) -> u32 {
        self.old + self.survivors
    }

    /// Eden's pages now: what the balloon leaves.
    fn eden(&self) -> u32 {
        self.eden_max - self.balloon
    }

    /// Queues a full collection (unless one is queued): it marks the live data and the young
    /// objects alive, and leaves the old generation holding only the live data and eden empty.
    fn queue_full_gc(&mut self) {
        if self.full_gc {
            return;
        }
        self.full_gc = true;
        self.counters.misses += 1;
        self.counters.evictions += 1;
        self.gc.push((0, self.live));
        self.gc.push((self.old, self.young_live));
        self.survivors_touched = self.survivors_touched.max(self.young_live);
    }

    /// Eden is full: a minor collection copies the young objects alive, and promotes some.
    fn minor_gc(&mut self) {
        self.counters.misses += 1;
        self.gc.push((self.old, self.young_live));
        self.survivors_touched = self.survivors_touched.max(self.young_live);
        self.promoted += f64::from(self.young_live) * self.promote;
        let whole = self.promoted as u32;
        self.promoted -= f64::from(whole);
        self.old_used = self.old_used.saturating_add(whole);
        self.old_touched = self.old_touched.max(self.old_used.min(self.old));
        self.bump = 0;
        if self.old_used >= self.old {
            self.queue_full_gc();
        }
    }

    /// Collection accesses not yet made.
    pub(super) fn overhead(&self) -> u64 {
        self.gc.iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// Appends up to `n` accesses: queued collection work first, then at most `mutator`
    /// accesses of the program, up to the next collection (collections stop the world). A
    /// collection ends at the fill after its last access was handed out and performed.
    pub(super) fn fill(&mut self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize, mutator: u64) {
        self.settle();
        let mut left = n;
        while left > 0 && !self.gc.is_empty() {
            let (start, count) = &mut self.gc[0];
            let k = (*count as usize).min(left) as u32;
            out.extend((*start..*start + k).map(|page| Access::Collect { page }));
            *start += k;
            *count -= k;
            left -= k as usize;
            if *count == 0 {
                self.gc.remove(0);
                self.ending = self.gc.is_empty();
            }
        }
        if !self.gc.is_empty() || self.ending {
            return;
        }
        for _ in 0..(left as u64).min(mutator) {
            let x = rng.next_u64();
            if x & 0xFFFF_FFFF < self.alloc_cut {
                let page = self.eden_start() + self.bump;
                self.bump += 1;
                self.eden_touched = self.eden_touched.max(self.bump);
                self.counters.hits += 1;
                out.push(Access::Anon { page, write: true });
                if self.bump >= self.eden() {
                    self.minor_gc();
                    return;
                }
            } else {
                let page = ((x >> 32) * u64::from(self.live.max(1))) >> 32;
                out.push(Access::Anon {
                    page: page as u32,
                    write: false,
                });
            }
        }
    }

    /// Ends the collections whose accesses were all handed out and none came back.
    fn settle(&mut self) {
        if self.ending && self.gc.is_empty() {
            self.ending = false;
            self.end_collections();
        }
    }

    /// The collections queued are done: after a full one only the live data remains in the
    /// old generation and eden is empty.
    fn end_collections(&mut self) {
        if self.full_gc {
            self.full_gc = false;
            self.old_used = self.live;
            self.bump = 0;
            if self.resize_gc == ResizeGc::Running {
                self.resize_gc = ResizeGc::Done;
            }
        }
    }

    /// Collection accesses handed out and never performed come first again; an allocation
    /// not made leaves a page of eden unused until the next collection.
    pub(super) fn return_unused(&mut self, unused: &[Access]) {
        for a in unused.iter().rev() {
            if let Access::Collect { page } = *a {
                match self.gc.first_mut() {
                    Some((start, count)) if *start == page + 1 => {
                        *start = page;
                        *count += 1;
                    }
                    _ => self.gc.insert(0, (page, 1)),
                }
            }
        }
    }

    /// Ready for the resize under way: once a full collection has run for it.
    pub(super) fn prepare(&mut self) -> bool {
        self.settle();
        match self.resize_gc {
            ResizeGc::Done => true,
            ResizeGc::Running => false,
            ResizeGc::Idle => {
                self.resize_gc = ResizeGc::Running;
                self.queue_full_gc();
                false
            }
        }
    }

    /// The resize is over: the next one needs its own full collection.
    pub(super) fn finish(&mut self) {
        self.resize_gc = ResizeGc::Idle;
    }

    /// The balloon takes `pages` of eden's top (at most down to eden's min); their pages are
    /// given back.
    pub(super) fn shrink(&mut self, pages: u32, released: &mut Vec<u32>) {
        let take = pages.min(self.eden() - self.min_eden.min(self.eden()));
        let top = self.eden_start() + self.eden();
        released.extend(top - take..top);
        self.balloon += take;
        self.bump = self.bump.min(self.eden());
        self.eden_touched = self.eden_touched.min(self.eden());
    }

    /// The balloon gives `pages` back to eden.
    pub(super) fn grow(&mut self, pages: u32) {
        self.balloon -= pages.min(self.balloon);
    }

    /// The live data, the young objects alive and eden.
    pub(super) fn working_set(&self) -> Pages {
        Pages(u64::from(self.live) + u64::from(self.young_live) + u64::from(self.eden()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A heap of 64 MiB: old generation `old` MiB with 8 MiB live, 4 MiB of survivors holding
    /// 1 MiB of young objects alive, eden the rest (at least 4 MiB); half the accesses
    /// allocate, a tenth of the young objects alive are promoted.
    fn jvm(old: f64) -> Jvm {
        Jvm::new(
            Check { kind: "jvm" },
            Sizes {
                heap_mb: 64.0,
                old_mb: old,
                live_mb: 8.0,
                survivors_mb: 4.0,
                min_eden_mb: 4.0,
                young_live_mb: 1.0,
                alloc_share: 0.5,
                promote: 0.1,
                shrink_s_per_gib: 1.0,
                grow_s_per_gib: 1.0,
            },
        )
        .unwrap()
    }

    /// Collection accesses per program access over `n` program accesses.
    fn gc_per_access(j: &mut Jvm, n: u64) -> f64 {
        let mut rng = SimRng::new(1);
        let (mut program, mut gc) = (0u64, 0u64);
        let mut out = Vec::new();
        while program < n {
            out.clear();
            j.fill(&mut rng, &mut out, 256, n - program);
            for a in &out {
                match a {
                    Access::Collect { .. } => gc += 1,
                    _ => program += 1,
                }
            }
        }
        gc as f64 / program as f64
    }

    #[test]
    fn a_smaller_eden_collects_more_often_and_costs_more_per_operation() {
        let mut wide = jvm(16.0);
        let mut narrow = jvm(16.0);
        // Both build their live data first.
        gc_per_access(&mut wide, 1);
        let mut released = Vec::new();
        assert!(!narrow.prepare());
        gc_per_access(&mut narrow, 1);
        assert!(narrow.prepare());
        narrow.shrink(8 * 256, &mut released);
        narrow.finish();
        assert_eq!(narrow.size(), 56 * 256);
        let (w, n) = (
            gc_per_access(&mut wide, 400_000),
            gc_per_access(&mut narrow, 400_000),
        );
        // Eden of 44 MiB against 36: the same young objects copied, more often.
        assert!(n > 1.15 * w, "{n} vs {w}");
        assert!(narrow.counters().misses > wide.counters().misses);
    }

    #[test]
    fn an_old_generation_nearer_its_live_data_collects_fully_more_often() {
        // 8 MiB live in 9 MiB of old generation against 8 in 16 (eden the same).
        let mut near = Jvm::new(
            Check { kind: "jvm" },
            Sizes {
                heap_mb: 57.0,
                old_mb: 9.0,
                live_mb: 8.0,
                survivors_mb: 4.0,
                min_eden_mb: 4.0,
                young_live_mb: 1.0,
                alloc_share: 0.5,
                promote: 0.1,
                shrink_s_per_gib: 1.0,
                grow_s_per_gib: 1.0,
            },
        )
        .unwrap();
        let mut far = jvm(16.0);
        let (n, f) = (
            gc_per_access(&mut near, 2_000_000),
            gc_per_access(&mut far, 2_000_000),
        );
        assert!(near.counters().evictions > 4 * far.counters().evictions.max(1));
        assert!(n > 1.5 * f, "{n} vs {f}");
    }

    #[test]
    fn a_resize_collects_fully_first_then_the_balloon_moves_eden_pages() {
        let mut j = jvm(16.0);
        gc_per_access(&mut j, 100_000);
        let fulls = j.counters().evictions;
        assert!(!j.prepare(), "a full collection first");
        assert_eq!(j.counters().evictions, fulls + 1);
        // Live data, young objects and all of eden touched, and what was promoted since.
        assert!(
            j.counters().used >= (8 + 1 + 44) * 256,
            "{:?}",
            j.counters()
        );
        assert_eq!(j.overhead(), 8 * 256 + 256);
        gc_per_access(&mut j, 1);
        assert!(j.prepare());
        let mut released = Vec::new();
        j.shrink(u32::MAX, &mut released);
        // Eden (44 MiB) down to its min (4 MiB): the top 40 MiB of the heap given back.
        assert_eq!(released.len(), 40 * 256);
        assert_eq!(released.first(), Some(&(24 * 256)));
        assert_eq!((j.size(), j.min()), (j.min(), 24 * 256));
        j.finish();
        assert!(!j.prepare(), "the next resize collects again");
        j.grow(u32::MAX);
        assert_eq!(j.size(), j.max());
    }

    #[test]
    fn bad_sizes_name_the_field() {
        let err = |old: f64, live: f64, young_live: f64| {
            Jvm::new(
                Check { kind: "jvm" },
                Sizes {
                    heap_mb: 64.0,
                    old_mb: old,
                    live_mb: live,
                    survivors_mb: 4.0,
                    min_eden_mb: 4.0,
                    young_live_mb: young_live,
                    alloc_share: 0.5,
                    promote: 0.1,
                    shrink_s_per_gib: 1.0,
                    grow_s_per_gib: 1.0,
                },
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            err(16.0, 20.0, 1.0),
            "workload jvm: live_mb = 20 must be <= old_mb = 16"
        );
        assert_eq!(
            err(16.0, 8.0, 5.0),
            "workload jvm: young_live_mb = 5 must be <= survivors_mb = 4"
        );
        assert_eq!(
            err(60.0, 8.0, 1.0),
            "workload jvm: heap_mb = 64 must be >= old_mb + survivors_mb + min_eden_mb = 68 (eden at least its min)"
        );
    }
}
