//! Exact latency surfaces r(q_c, q_s) of one tenant in its own quotas, where Gemini fitted an SVR to about 160 simulated samples: computed from stack distances, at every point of a grid.
//!
//! - **LRU/DEMOTE**: the two exclusive levels hold between them the q_c + q_s most recently used
//!   blocks, the buffer pool the q_c most recent of them, so one stack distance d decides
//!   both: a buffer hit when d < q_c, a storage hit when q_c ≤ d < q_c + q_s, else disk. The
//!   whole surface comes from one curve: O(grid) after one pass.
//! - **LRU/LRU**: the storage cache is an LRU over the buffer pool's miss stream, which depends
//!   on q_c; so for each buffer size of the grid, one replay of the buffer level and the
//!   stack distances of its misses give the storage hits at every q_s: O(buffer sizes × n log n).
//!
//! Both equal a request-by-request two-level simulation at every grid point (tested).

use crate::lru::Lru;
use crate::mrc::{at_size, MissRatioCurve, StackDistances};
use crate::twolevel::{Counts, Latencies};

/// A tenant's mean data-access latency at each (buffer, storage) quota of a grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Surface {
    /// Buffer-pool quotas, in blocks.
    pub buffer: Vec<u64>,
    /// Storage-cache quotas, in blocks.
    pub storage: Vec<u64>,
    /// Requests by level at each point, row-major: `counts[i * storage.len() + j]` is at
    /// (`buffer[i]`, `storage[j]`).
    pub counts: Vec<Counts>,
}

impl Surface {
    /// LRU/DEMOTE from the tenant's exact curve.
    pub fn demote(curve: &MissRatioCurve, buffer: &[u64], storage: &[u64]) -> Surface {
        let n = curve.requests().round() as u64;
        let by_size = curve.hits_by_size();
        let hits = |size: u64| at_size(&by_size, size).round() as u64;
        let mut counts = Vec::with_capacity(buffer.len() * storage.len());
        for &c in buffer {
            let in_buffer = hits(c);
            for &s in storage {
                let in_both = hits(c + s);
                counts.push(Counts {
                    buffer: in_buffer,
                    storage: in_both - in_buffer,
                    disk: n - in_both,
                });
            }
        }
        Surface {
            buffer: buffer.to_vec(),
            storage: storage.to_vec(),
            counts,
        }
    }

    /// LRU/LRU from the tenant's requests (replayed once per buffer size).
    pub fn lru_lru(blocks: &[u64], buffer: &[u64], storage: &[u64]) -> Surface {
        let n = blocks.len() as u64;
        let mut counts = Vec::with_capacity(buffer.len() * storage.len());
        for &c in buffer {
            let mut pool = Lru::new(c as usize);
            let mut below = StackDistances::new();
            let mut misses = MissRatioCurve::new();
            for &b in blocks {
                if !pool.access(b) {
                    misses.add(below.access(b), 1.0);
                }
            }
            let in_buffer = pool.hits();
            let below = misses.hits_by_size();
            for &s in storage {
                let in_storage = at_size(&below, s).round() as u64;
                counts.push(Counts {
                    buffer: in_buffer,
                    storage: in_storage,
                    disk: n - in_buffer - in_storage,
                });
            }
        }
        Surface {
            buffer: buffer.to_vec(),
            storage: storage.to_vec(),
            counts,
        }
    }

    /// The mean latency at (`buffer[i]`, `storage[j]`) under `l`.
    pub fn latency_us(&self, i: usize, j: usize, l: &Latencies) -> f64 {
        self.counts[i * self.storage.len() + j].mean_latency_us(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twolevel::{Policy, TwoLevel};
    use proptest::prelude::*;

    fn simulated(policy: Policy, blocks: &[u64], c: u64, s: u64) -> Counts {
        let mut t = TwoLevel::partitioned(policy, &[(c as usize, s as usize)]);
        for &b in blocks {
            t.access(0, b);
        }
        t.counts()[0]
    }

    const GRID: [u64; 6] = [0, 1, 3, 8, 20, 50];

    proptest! {
        #[test]
        fn both_surfaces_equal_a_request_by_request_simulation(
            blocks in proptest::collection::vec(0u64..60, 0..500)
        ) {
            let curve = MissRatioCurve::exact(blocks.iter().copied());
            let demote = Surface::demote(&curve, &GRID, &GRID);
            let lru = Surface::lru_lru(&blocks, &GRID, &GRID);
            for (i, &c) in GRID.iter().enumerate() {
                for (j, &s) in GRID.iter().enumerate() {
                    let at = i * GRID.len() + j;
                    prop_assert_eq!(demote.counts[at], simulated(Policy::Demote, &blocks, c, s), "demote {} {}", c, s);
                    prop_assert_eq!(lru.counts[at], simulated(Policy::LruLru, &blocks, c, s), "lru/lru {} {}", c, s);
                }
            }
        }
    }

    #[test]
    fn demote_beats_lru_lru_where_the_storage_quota_is_no_larger_than_the_buffer_quota() {
        // A loop over 30 blocks: 20 + 20 blocks hold it under DEMOTE, never under LRU/LRU.
        let blocks: Vec<u64> = (0..600).map(|i| i % 30).collect();
        let curve = MissRatioCurve::exact(blocks.iter().copied());
        let l = Latencies::default();
        let d = Surface::demote(&curve, &[20], &[20]).latency_us(0, 0, &l);
        let i = Surface::lru_lru(&blocks, &[20], &[20]).latency_us(0, 0, &l);
        // DEMOTE: 30 first reads from disk, then every request a storage hit (distance 29).
        assert_eq!(d, (30.0 * 3500.0 + 570.0 * 200.0) / 600.0);
        assert_eq!(i, 3500.0, "LRU/LRU: every request from disk");
    }
}
