//! Application pools inside workloads: memory an application manages itself (a cache, a database's buffer pool, a JVM heap), which its agent can resize on request (ALB).
//!
//! A pool lives in the workload's anonymous region, so the guest sees its pages as any
//! anonymous memory: OS ballooning swaps them behind the application's back. Resizing is the
//! application's own: shrinking picks which pages to give up and hands their anonymous pages
//! back to the guest (they are freed, as `madvise(DONTNEED)` would), growing takes pages back
//! into the pool (touched again only when used). How long a resize takes is the agent's
//! business (`crate::app::agent`), from the pool's [`ResizeCost`].

use super::cache::Cache;
use super::database::Database;
use super::jvm::Jvm;
use super::Access;
use crate::rng::SimRng;
use memtide_balloon::protocol::PoolKind;
use memtide_model::{MissCurve, Pages};
use std::time::Duration;

/// Seconds a resize takes per GiB moved, from ALB Table 2 (Salomie et al., EuroSys 2013):
/// InnoDB's balloon grew (its pool shrank) by 0.5 / 1 / 2 GiB in 3.99 / 7.57 / 16.07 s, and
/// shrank (its pool grew) in 0.77 / 1.51 / 3.02 s: linear, least squares through zero.
pub const INNODB_SHRINK_S_PER_GIB: f64 = 7.94;
pub const INNODB_GROW_S_PER_GIB: f64 = 1.51;

/// Pages in a GiB.
const PAGES_PER_GIB: f64 = 262_144.0;

/// How long a resize takes per page moved, each way.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ResizeCost {
    pub shrink_ns_per_page: u64,
    pub grow_ns_per_page: u64,
}

impl ResizeCost {
    /// From seconds per GiB, as scenarios write them.
    pub fn per_gib(shrink_s: f64, grow_s: f64) -> ResizeCost {
        let ns = |s: f64| (s * 1e9 / PAGES_PER_GIB).round() as u64;
        ResizeCost {
            shrink_ns_per_page: ns(shrink_s),
            grow_ns_per_page: ns(grow_s),
        }
    }
}

/// A pool's counters since the workload started, as the agent reports them.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PoolCounters {
    /// Pages of the pool holding data.
    pub used: u32,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Pages of the pool written and not yet written back.
    pub dirty: u32,
}

/// An application pool.
#[derive(Clone, Debug)]
pub enum Pool {
    Cache(Cache),
    /// Boxed: a database's pool is several times the size of the others.
    Database(Box<Database>),
    Jvm(Jvm),
}

impl Pool {
    /// What the agent says the pool is.
    pub fn kind(&self) -> PoolKind {
        match self {
            Pool::Cache(_) => PoolKind::Cache,
            Pool::Database(_) => PoolKind::BufferPool,
            Pool::Jvm(_) => PoolKind::Heap,
        }
    }

    /// Pages in the pool now.
    pub fn size(&self) -> u32 {
        match self {
            Pool::Cache(c) => c.size(),
            Pool::Database(d) => d.size(),
            Pool::Jvm(j) => j.size(),
        }
    }

    /// The smallest and largest pool the application accepts.
    pub fn min(&self) -> u32 {
        match self {
            Pool::Cache(c) => c.min(),
            Pool::Database(d) => d.min(),
            Pool::Jvm(j) => j.min(),
        }
    }

    pub fn max(&self) -> u32 {
        match self {
            Pool::Cache(c) => c.max(),
            Pool::Database(d) => d.max(),
            Pool::Jvm(j) => j.max(),
        }
    }

    pub fn counters(&self) -> PoolCounters {
        match self {
            Pool::Cache(c) => c.counters(),
            Pool::Database(d) => d.counters(),
            Pool::Jvm(j) => j.counters(),
        }
    }

    /// The miss-ratio curve the pool's agent samples, at `now` (see `crate::app::curve`):
    /// `None` for a pool that samples none, or before its first window ends.
    pub fn curve(&mut self, now: Duration) -> Option<MissCurve> {
        match self {
            Pool::Database(d) => d.curve(now),
            Pool::Cache(_) | Pool::Jvm(_) => None,
        }
    }

    pub fn resize_cost(&self) -> ResizeCost {
        match self {
            Pool::Cache(c) => c.resize_cost(),
            Pool::Database(d) => d.resize_cost(),
            Pool::Jvm(j) => j.resize_cost(),
        }
    }

    /// Gives up `pages` of the pool (at most down to its min); the anonymous pages to free go
    /// to `released`.
    pub fn shrink(&mut self, pages: u32, released: &mut Vec<u32>) {
        match self {
            Pool::Cache(c) => c.shrink(pages, released),
            Pool::Database(d) => d.shrink(pages, released),
            Pool::Jvm(j) => j.shrink(pages, released),
        }
    }

    /// Takes `pages` back into the pool (at most up to its max).
    pub fn grow(&mut self, pages: u32) {
        match self {
            Pool::Cache(c) => c.grow(pages),
            Pool::Database(d) => d.grow(pages),
            Pool::Jvm(j) => j.grow(pages),
        }
    }

    /// Takes back `unused`, the last accesses of the latest fill, never performed: a page it
    /// was to read leaves its slot (what it evicted stays evicted), a hit is not counted, a
    /// collection's page comes again.
    pub(super) fn return_unused(&mut self, unused: &[Access]) {
        match self {
            Pool::Cache(c) => c.return_unused(unused),
            Pool::Database(d) => d.return_unused(unused),
            Pool::Jvm(j) => j.return_unused(unused),
        }
    }

    /// Appends up to `n` accesses, of which at most `program` the program's (the rest the
    /// application's own work, a collector's).
    pub(super) fn fill(&mut self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize, program: u64) {
        let n_program = (n as u64).min(program) as usize;
        match self {
            Pool::Cache(c) => c.fill(rng, out, n_program),
            Pool::Database(d) => d.fill(rng, out, n_program),
            Pool::Jvm(j) => j.fill(rng, out, n, program),
        }
    }

    /// Accesses of the application's own work queued (a collector's).
    pub(super) fn overhead(&self) -> u64 {
        match self {
            Pool::Cache(_) | Pool::Database(_) => 0,
            Pool::Jvm(j) => j.overhead(),
        }
    }

    /// Whether the resize under way can move pages now: a heap collects fully first.
    pub fn prepare(&mut self) -> bool {
        match self {
            Pool::Cache(_) | Pool::Database(_) => true,
            Pool::Jvm(j) => j.prepare(),
        }
    }

    /// The resize under way is over.
    pub fn finish(&mut self) {
        if let Pool::Jvm(j) = self {
            j.finish();
        }
    }

    /// The pages the application keeps touching now.
    pub(super) fn working_set(&self) -> Pages {
        match self {
            Pool::Cache(c) => c.working_set(),
            Pool::Database(d) => d.working_set(),
            Pool::Jvm(j) => j.working_set(),
        }
    }
}
