//! The key-value server of the density benchmark (issue 31): a Redis or memcached holding `keys` items, driven by GETs over its keys, uniformly, when a memtide-demand pattern says they are due.
//!
//! The same load as the real benchmark's: the pattern ([`Demand`]) is laid out by the same
//! [`Schedule`] from the same seed (`memtide_demand::tenant_seed(run, i)`), so tenant *i* of a
//! simulated trial gets the requests tenant *i* of a real one does, in the same seconds.
//!
//! - **Memory.** Each item takes `value_bytes × (1 + item_overhead)` bytes (the server's
//!   per-item header, key and allocator slack: 0.23 for Redis and 0.05 for memcached make
//!   20,000 values of 4 KiB hold what the real servers held filled, less their process), laid
//!   end to end in the workload's anonymous region: the dataset. The server fills it once at
//!   start (the workload's initial sweep, one write per page in order), before its load begins.
//! - **A GET** of key *k* reads every page its item overlaps: `pages_per_get` consecutive pages
//!   from the one its first byte falls in (the last GETs of the region stop at its end), the
//!   first touching the item's header. Keys are drawn uniformly from the workload's stream.
//! - **Requests due** in `[a, b)` of the run are `floor(R(b)) - floor(R(a))` with `R(t)` the
//!   schedule's requests from the load's start (`start_s` into the run) to `t`, so fractional
//!   rates add up exactly over ticks. Each GET is `pages_per_get` accesses; the demand of a
//!   tick is all of them (open loop).
//!
//! Cost: a fill appends the pages of whole GETs, `O(pages)`; the requests due are a binary
//! search and a sum over the schedule's bursts in the tick (`Schedule::requests_between`).

use super::validate::Check;
use super::{Access, Plan, WorkloadError};
use crate::rng::SimRng;
use memtide_demand::{Demand, Schedule};
use memtide_model::Pages;

const PAGE: f64 = 4096.0;
/// The most keys a server may hold.
pub const MAX_KEYS: u64 = 100_000_000;

/// What a key-value server is given: its dataset and its load.
#[derive(Clone, Debug, PartialEq)]
pub struct KvSizes {
    pub keys: u64,
    pub value_bytes: u64,
    pub item_overhead: f64,
    /// The pattern's text, as the load generator takes it.
    pub demand: String,
    pub seed: u64,
    /// When the load starts, in seconds from the workload's start (the warm-up before it).
    pub start_s: f64,
    /// How long the load lasts, in seconds.
    pub length_s: f64,
    /// The report window the load is judged in, in seconds.
    pub window_s: f64,
}

/// A running key-value server (see the module docs).
#[derive(Clone, Debug)]
pub struct Kv {
    keys: u64,
    item_bytes: f64,
    dataset_pages: u32,
    pages_per_get: u32,
    schedule: Schedule,
    start_s: f64,
    window_s: f64,
    /// The GET being appended: its next page and the pages of it left to append.
    next_page: u32,
    left: u32,
}

impl Kv {
    /// Validates `sizes`; the server and its workload plan (the dataset, filled by the sweep).
    pub(super) fn new(check: Check, sizes: &KvSizes) -> Result<(Kv, Plan), WorkloadError> {
        if !(1..=MAX_KEYS).contains(&sizes.keys) {
            return Err(check.error("keys", sizes.keys, format!("from 1 to {MAX_KEYS}")));
        }
        if !(1..=1 << 20).contains(&sizes.value_bytes) {
            return Err(check.error("value_bytes", sizes.value_bytes, "from 1 to 1048576"));
        }
        let overhead = check.non_negative("item_overhead", sizes.item_overhead)?;
        if overhead > 10.0 {
            return Err(check.error("item_overhead", overhead, "<= 10"));
        }
        let demand = Demand::parse(&sizes.demand)
            .map_err(|e| check.error("demand", format!("\"{}\"", sizes.demand), e))?;
        let start_s = check.non_negative("start_s", sizes.start_s)?;
        let window_s = check.positive("window_s", sizes.window_s)?;
        if window_s > sizes.length_s {
            return Err(check.error(
                "window_s",
                window_s,
                format!("<= length_s = {}", sizes.length_s),
            ));
        }
        let schedule = Schedule::new(&demand, sizes.seed, sizes.length_s)
            .map_err(|e| check.error("length_s", sizes.length_s, e))?;
        let item_bytes = sizes.value_bytes as f64 * (1.0 + overhead);
        let dataset = (sizes.keys as f64 * item_bytes / PAGE).ceil();
        let mib = dataset * PAGE / f64::from(1u32 << 20);
        let dataset_pages = check.size_mb("dataset_mb", mib)?;
        let pages_per_get = ((item_bytes / PAGE).ceil() as u32).max(1);
        let kv = Kv {
            keys: sizes.keys,
            item_bytes,
            dataset_pages,
            pages_per_get,
            schedule,
            start_s,
            window_s,
            next_page: 0,
            left: 0,
        };
        let plan = Plan {
            anon_pages: dataset_pages,
            file_pages: 0,
            sweep: dataset_pages,
            phases: Vec::new(),
            default_rate: None,
            default_accesses_per_op: pages_per_get,
        };
        Ok((kv, plan))
    }

    /// Pages one GET reads.
    pub fn pages_per_get(&self) -> u32 {
        self.pages_per_get
    }

    /// The load's schedule, in seconds from the load's start.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// When the load starts, in seconds from the workload's start.
    pub fn start_s(&self) -> f64 {
        self.start_s
    }

    /// The report window the load is judged in, in seconds.
    pub fn window_s(&self) -> f64 {
        self.window_s
    }

    /// Requests the schedule sends from the load's start up to `t` (workload time), whole.
    fn due_by(&self, t: f64) -> u64 {
        let t = t - self.start_s;
        if t <= 0.0 {
            return 0;
        }
        // Saturating `as`; non-negative.
        self.schedule.requests_between(0.0, t).floor() as u64
    }

    /// GETs due in `[from, to)` seconds of workload time.
    pub fn requests_due(&self, from: f64, to: f64) -> u64 {
        self.due_by(to).saturating_sub(self.due_by(from))
    }

    /// Whether the tenant has requests due at `t` (workload time).
    pub fn active_at(&self, t: f64) -> bool {
        self.schedule.rate_at(t - self.start_s) > 0.0
    }

    /// The pages GETs read: the whole dataset, uniformly.
    pub fn working_set(&self, t: f64) -> Pages {
        if self.active_at(t) {
            Pages(u64::from(self.dataset_pages))
        } else {
            Pages::ZERO
        }
    }

    /// Appends `n` page accesses of GETs: the rest of the GET under way, then new ones.
    pub fn fill(&mut self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize) {
        for _ in 0..n {
            if self.left == 0 {
                let key = rng.below(self.keys);
                // The page the item's first byte is in; its pages, cut at the region's end.
                let first = (key as f64 * self.item_bytes / PAGE) as u32;
                self.next_page = first.min(self.dataset_pages - 1);
                self.left = self.pages_per_get;
            }
            out.push(Access::Anon {
                page: self.next_page,
                write: false,
            });
            self.left -= 1;
            self.next_page = (self.next_page + 1).min(self.dataset_pages - 1);
        }
    }

    /// Takes back the last `n` accesses appended (never made): a GET cut short is dropped, so
    /// the next fill starts a new one.
    pub fn return_unused(&mut self, n: usize) {
        if n > 0 {
            self.left = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cost::CostModel;
    use crate::rng::SimRng;
    use crate::workload::{Access, Pace, Workload, WorkloadConfig};
    use std::time::Duration;

    fn kv(demand: &str, start_s: f64) -> Workload {
        let config = WorkloadConfig::Kv {
            keys: 20_000,
            value_bytes: 4096,
            item_overhead: 0.23,
            demand: demand.to_string(),
            seed: 7,
            start_s,
            length_s: 300.0,
            window_s: 10.0,
            pace: Pace::default(),
        };
        Workload::new(&config, &CostModel::default()).unwrap()
    }

    #[test]
    fn the_dataset_is_the_items_end_to_end_and_a_get_reads_the_pages_its_item_overlaps() {
        let w = kv("busy:rate=200", 0.0);
        // 20,000 x 4096 x 1.23 bytes = 24,600 pages; an item of 5,038 bytes spans 2 pages.
        assert_eq!(w.anon_pages(), 24_600);
        assert_eq!(w.accesses_per_op(), 2);
    }

    #[test]
    fn the_fill_comes_first_then_gets_due_by_the_schedule_from_the_load_start() {
        let mut w = kv("busy:rate=200", 10.0);
        let tick = Duration::from_secs(1);
        w.advance(Duration::ZERO);
        assert_eq!(
            w.demand(tick),
            Some(24_600),
            "the fill, no GET before the load"
        );
        let mut out = Vec::new();
        w.fill(&mut SimRng::new(1), &mut out, 24_600);
        assert!(!w.initialising());
        w.advance(Duration::from_secs(9));
        assert_eq!(w.demand(tick), Some(0));
        w.advance(Duration::from_secs(10));
        assert_eq!(w.demand(tick), Some(400), "200 GETs of 2 pages");
        out.clear();
        w.fill(&mut SimRng::new(1), &mut out, 400);
        for get in out.chunks(2) {
            match (get[0], get[1]) {
                (
                    Access::Anon {
                        page: a,
                        write: false,
                    },
                    Access::Anon {
                        page: b,
                        write: false,
                    },
                ) => {
                    assert!(b == a + 1 || (a == 24_599 && b == a), "{a} {b}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn fractional_rates_add_up_exactly_over_ticks() {
        let mut w = kv("diurnal:period=100s,low=0,high=3", 0.0);
        let tick = Duration::from_secs(1);
        let mut out = Vec::new();
        w.fill(&mut SimRng::new(1), &mut out, 24_600);
        let mut gets = 0;
        for t in 0..100u64 {
            w.advance(Duration::from_secs(t));
            gets += w.demand(tick).unwrap() / 2;
        }
        // A mean of 1.5 a second for 100 s: 150, less one when rounding leaves R(100) a hair
        // under it (the floor of the running total never loses more than one).
        assert!((149..=150).contains(&gets), "{gets}");
    }

    #[test]
    fn a_bursty_server_is_idle_between_its_bursts() {
        let w = kv("bursty:every=120s,burst=30s,rate=400", 0.0);
        let kv = w.kv().unwrap();
        let (start, end) = kv.schedule().bursts()[0];
        assert_eq!(kv.requests_due(0.0, start.floor()), 0);
        assert!(kv.working_set(start + 1.0).0 > 0);
        let mid = (start + end) / 2.0;
        assert_eq!(kv.requests_due(mid.floor(), mid.floor() + 1.0), 400);
    }

    #[test]
    fn bad_parameters_name_the_field() {
        let bad = |keys: u64, demand: &str| {
            let config = WorkloadConfig::Kv {
                keys,
                value_bytes: 4096,
                item_overhead: 0.1,
                demand: demand.to_string(),
                seed: 1,
                start_s: 0.0,
                length_s: 60.0,
                window_s: 10.0,
                pace: Pace::default(),
            };
            Workload::new(&config, &CostModel::default())
                .unwrap_err()
                .to_string()
        };
        assert!(bad(0, "busy:rate=1").contains("workload kv: keys = 0 must be from 1"));
        let e = bad(10, "busy:rate=0");
        assert!(e.contains("workload kv: demand = \"busy:rate=0\""), "{e}");
    }
}
