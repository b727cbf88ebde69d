//! The cache workload: a key-value cache (memcached-like) whose pool holds some of its items, the simplest application pool an agent can resize.
//!
//! `items` items of one page each are read uniformly; the pool (anonymous memory, `pool` pages
//! at most) holds `size` of them. Under uniform gets which items the pool holds does not
//! change its hit ratio (`size / items`), so the model keeps the statistics, not the keys: a
//! get of key `k < size` whose slot holds data is a hit on slot `k`; any other get is a miss
//! that fetches the item from its backend (a disk read's cost, [`Access::Fill`]) into slot `k`
//! when `k < size`, else into a random slot, evicting what it held. Shrinking gives up the
//! highest slots; growing takes slots back empty, to be filled by misses. Its items and its
//! pool are at least a page, and its pool never shrinks below one.

use super::pool::{PoolCounters, ResizeCost};
use super::validate::Check;
use super::{Access, WorkloadError};
use crate::rng::SimRng;
use memtide_model::Pages;

/// The sizes and costs of a cache, as its config gives them.
pub(super) struct Sizes {
    pub items_mb: f64,
    pub pool_mb: f64,
    pub min_pool_mb: f64,
    pub shrink_s_per_gib: f64,
    pub grow_s_per_gib: f64,
}

/// A key-value cache (see the module docs).
#[derive(Clone, Debug)]
pub struct Cache {
    items: u32,
    max: u32,
    min: u32,
    size: u32,
    /// Slots holding an item.
    filled: Vec<bool>,
    counters: PoolCounters,
    cost: ResizeCost,
}

impl Cache {
    pub(super) fn new(check: Check, s: Sizes) -> Result<Cache, WorkloadError> {
        let items = check
            .size_mb("items_mb", check.positive("items_mb", s.items_mb)?)?
            .max(1);
        let max = check
            .size_mb("pool_mb", check.positive("pool_mb", s.pool_mb)?)?
            .max(1);
        // At least one page, so the pool always has a slot to fill.
        let min = check.size_mb("min_pool_mb", s.min_pool_mb)?.max(1);
        if min > max {
            return Err(check.error(
                "min_pool_mb",
                s.min_pool_mb,
                format!("<= pool_mb = {}", s.pool_mb),
            ));
        }
        let shrink = check.non_negative("shrink_s_per_gib", s.shrink_s_per_gib)?;
        let grow = check.non_negative("grow_s_per_gib", s.grow_s_per_gib)?;
        Ok(Cache {
            items,
            max,
            min,
            size: max,
            filled: vec![false; max as usize],
            counters: PoolCounters::default(),
            cost: ResizeCost::per_gib(shrink, grow),
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

    /// The anonymous region: the pool's slots.
    pub(super) fn anon_pages(&self) -> u32 {
        self.max
    }

    pub(super) fn shrink(&mut self, pages: u32, released: &mut Vec<u32>) {
        let to = self.size.saturating_sub(pages).max(self.min);
        for slot in to..self.size {
            if std::mem::take(&mut self.filled[slot as usize]) {
                self.counters.used -= 1;
                released.push(slot);
            }
        }
        self.size = to;
    }

    pub(super) fn grow(&mut self, pages: u32) {
        self.size = self.size.saturating_add(pages).min(self.max);
    }

    pub(super) fn fill(&mut self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize) {
        for _ in 0..n {
            let key = rng.below(u64::from(self.items)) as u32;
            if key < self.size && self.filled[key as usize] {
                self.counters.hits += 1;
                out.push(Access::Anon {
                    page: key,
                    write: false,
                });
                continue;
            }
            self.counters.misses += 1;
            let slot = if key < self.size {
                key
            } else {
                rng.below(u64::from(self.size)) as u32
            };
            if std::mem::replace(&mut self.filled[slot as usize], true) {
                self.counters.evictions += 1;
            } else {
                self.counters.used += 1;
            }
            out.push(Access::Fill {
                page: slot,
                sequential: false,
            });
        }
    }

    pub(super) fn return_unused(&mut self, unused: &[Access]) {
        for a in unused {
            match *a {
                Access::Fill { page, .. } => {
                    if std::mem::take(&mut self.filled[page as usize]) {
                        self.counters.used -= 1;
                    }
                    self.counters.misses -= 1;
                }
                Access::Anon { .. } => self.counters.hits -= 1,
                Access::File { .. } | Access::Collect { .. } => {}
            }
        }
    }

    /// The pool's slots holding the items it can.
    pub(super) fn working_set(&self) -> Pages {
        Pages(u64::from(self.size.min(self.items)))
    }
}
