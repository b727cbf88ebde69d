//! Gemini's two-level cache hierarchy, request by request: a database buffer pool over a storage server's cache over disk, with per-tenant quotas in each level or one shared pool at each, under LRU/LRU or LRU/DEMOTE.
//!
//! - **LRU/LRU** (inclusive): a request misses in the buffer pool and goes to the storage
//!   cache, which keeps what it serves; both levels insert on a miss, so a block read from disk
//!   sits in both, and a storage quota no larger than the buffer quota gains nothing.
//! - **LRU/DEMOTE** (exclusive, Wong and Wilkes 2002): a block the storage cache serves leaves
//!   it for the buffer pool, and a block the buffer pool evicts is demoted into the storage
//!   cache's most recent end, so no block is in both. Every eviction is demoted (the model
//!   has no dirty blocks).
//! - **Quotas**: each tenant has its own LRU of `q_c` blocks in the buffer pool and `q_s` in
//!   the storage cache ([`TwoLevel::partitioned`]); SHARED is one LRU per level for all
//!   tenants ([`TwoLevel::shared`]), blocks kept apart by tenant; each level can be either
//!   ([`TwoLevel::new`]: PROFILE partitions the buffer pool and shares the storage cache).
//!
//! Each request is a buffer hit, a storage hit or a disk read, and costs its level's latency
//! ([`Latencies`]). O(1) per request.

use crate::lru::Lru;

/// How the two levels cooperate.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    LruLru,
    Demote,
}

/// What a request's data access costs at each level, in microseconds.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Latencies {
    /// Served by the database's own buffer pool.
    pub buffer_us: f64,
    /// Served by the storage server's cache: a network round trip and a copy.
    pub storage_us: f64,
    /// Read from disk (the paper's D' = 3500 µs, its average disk access).
    pub disk_us: f64,
}

impl Default for Latencies {
    /// The paper gives the disk's 3500 µs; a buffer-pool hit is taken as 2 µs and a
    /// storage-cache hit as 200 µs (a gigabit round trip and a 16 KiB block), our estimates.
    fn default() -> Latencies {
        Latencies {
            buffer_us: 2.0,
            storage_us: 200.0,
            disk_us: 3500.0,
        }
    }
}

/// Where a request was served.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Served {
    Buffer,
    Storage,
    Disk,
}

/// Requests of one tenant by where they were served.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub buffer: u64,
    pub storage: u64,
    pub disk: u64,
}

impl Counts {
    pub fn requests(&self) -> u64 {
        self.buffer + self.storage + self.disk
    }

    /// The mean data-access latency under `l` (0 without requests).
    pub fn mean_latency_us(&self, l: &Latencies) -> f64 {
        let n = self.requests();
        if n == 0 {
            return 0.0;
        }
        (self.buffer as f64 * l.buffer_us
            + self.storage as f64 * l.storage_us
            + self.disk as f64 * l.disk_us)
            / n as f64
    }

    fn add(&mut self, s: Served) {
        match s {
            Served::Buffer => self.buffer += 1,
            Served::Storage => self.storage += 1,
            Served::Disk => self.disk += 1,
        }
    }
}

/// How one level is divided among the tenants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Level {
    /// Tenant `i` gets `quotas[i]` blocks of its own.
    Partitioned(Vec<usize>),
    /// One LRU of this many blocks for every tenant.
    Shared(usize),
}

impl Level {
    fn caches(&self) -> Vec<Lru> {
        match self {
            Level::Partitioned(q) => q.iter().map(|&c| Lru::new(c)).collect(),
            Level::Shared(c) => vec![Lru::new(*c)],
        }
    }
}

/// The two levels, each partitioned or shared.
#[derive(Clone, Debug)]
pub struct TwoLevel {
    policy: Policy,
    buffer: Vec<Lru>,
    storage: Vec<Lru>,
    counts: Vec<Counts>,
}

impl TwoLevel {
    /// `tenants` tenants over a buffer pool and a storage cache, each level divided as given
    /// (PROFILE: the buffer pool partitioned, the storage cache shared).
    pub fn new(policy: Policy, tenants: usize, buffer: &Level, storage: &Level) -> TwoLevel {
        TwoLevel {
            policy,
            buffer: buffer.caches(),
            storage: storage.caches(),
            counts: vec![Counts::default(); tenants],
        }
    }

    /// Tenant `i` gets `quotas[i] = (q_c, q_s)` blocks in the buffer pool and the storage cache.
    pub fn partitioned(policy: Policy, quotas: &[(usize, usize)]) -> TwoLevel {
        TwoLevel::new(
            policy,
            quotas.len(),
            &Level::Partitioned(quotas.iter().map(|q| q.0).collect()),
            &Level::Partitioned(quotas.iter().map(|q| q.1).collect()),
        )
    }

    /// `tenants` share one buffer pool of `buffer` blocks and one storage cache of `storage`.
    pub fn shared(policy: Policy, tenants: usize, buffer: usize, storage: usize) -> TwoLevel {
        TwoLevel::new(
            policy,
            tenants,
            &Level::Shared(buffer),
            &Level::Shared(storage),
        )
    }

    /// Tenant `tenant` asks for `block` (tenants beyond those configured are an error of the
    /// caller: it panics). Blocks are the tenant's own: in a shared level they are kept apart
    /// by the tenant in their top byte.
    pub fn access(&mut self, tenant: usize, block: u64) -> Served {
        let key = block ^ ((tenant as u64) << 56);
        let pick = |caches: &[Lru]| if caches.len() == 1 { 0 } else { tenant };
        let (b, s) = (pick(&self.buffer), pick(&self.storage));
        let served = serve(self.policy, &mut self.buffer[b], &mut self.storage[s], key);
        self.counts[tenant].add(served);
        served
    }

    /// Each tenant's requests by where they were served.
    pub fn counts(&self) -> &[Counts] {
        &self.counts
    }
}

/// One request to a buffer pool and storage cache.
fn serve(policy: Policy, buffer: &mut Lru, storage: &mut Lru, block: u64) -> Served {
    match policy {
        Policy::LruLru => {
            if buffer.access(block) {
                Served::Buffer
            } else if storage.access(block) {
                Served::Storage
            } else {
                Served::Disk
            }
        }
        Policy::Demote => {
            let (hit, evicted) = buffer.access_evicting(block);
            if hit {
                return Served::Buffer;
            }
            let served = if storage.remove(block) {
                Served::Storage
            } else {
                Served::Disk
            };
            if let Some(e) = evicted {
                storage.insert(e);
            }
            served
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(t: &mut TwoLevel, trace: &[(usize, u64)]) -> Vec<Served> {
        trace.iter().map(|&(i, b)| t.access(i, b)).collect()
    }

    use Served::{Buffer as B, Disk as D, Storage as S};

    #[test]
    fn lru_lru_is_inclusive_so_a_small_storage_cache_gains_nothing() {
        // Buffer 2, storage 2: the storage cache holds what the buffer holds.
        let mut t = TwoLevel::partitioned(Policy::LruLru, &[(2, 2)]);
        assert_eq!(run(&mut t, &[(0, 1), (0, 2), (0, 3), (0, 1)]), [D, D, D, D]);
        // Storage 3: block 1 survives there.
        let mut t = TwoLevel::partitioned(Policy::LruLru, &[(2, 3)]);
        assert_eq!(run(&mut t, &[(0, 1), (0, 2), (0, 3), (0, 1)]), [D, D, D, S]);
    }

    #[test]
    fn demote_keeps_the_levels_exclusive_so_they_add_up() {
        // Buffer 2 + storage 2 hold 4 blocks between them.
        let mut t = TwoLevel::partitioned(Policy::Demote, &[(2, 2)]);
        let got = run(
            &mut t,
            &[(0, 1), (0, 2), (0, 3), (0, 4), (0, 1), (0, 2), (0, 1)],
        );
        assert_eq!(got, [D, D, D, D, S, S, B]);
        let c = t.counts()[0];
        assert_eq!((c.buffer, c.storage, c.disk), (1, 2, 4));
    }

    #[test]
    fn quotas_isolate_tenants_and_shared_pools_let_one_crowd_out_the_other() {
        // Tenant 0 loops over 2 blocks, tenant 1 scans new blocks.
        let trace: Vec<(usize, u64)> = (0..100u64)
            .flat_map(|i| [(0, i % 2), (1, 1000 + i), (1, 2000 + i)])
            .collect();
        let mut part = TwoLevel::partitioned(Policy::Demote, &[(2, 0), (1, 1)]);
        run(&mut part, &trace);
        assert_eq!(part.counts()[0].disk, 2, "only its first two requests miss");
        let mut shared = TwoLevel::shared(Policy::Demote, 2, 3, 1);
        run(&mut shared, &trace);
        assert!(shared.counts()[0].disk > 2, "{:?}", shared.counts()[0]);
    }

    #[test]
    fn mean_latency_weighs_each_level() {
        let c = Counts {
            buffer: 2,
            storage: 1,
            disk: 1,
        };
        let l = Latencies::default();
        assert_eq!(c.mean_latency_us(&l), (2.0 * 2.0 + 200.0 + 3500.0) / 4.0);
        assert_eq!(Counts::default().mean_latency_us(&l), 0.0);
    }
}
