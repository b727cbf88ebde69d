//! Workloads that drive a simulated guest: each produces a stream of page accesses (anonymous or page-cache).
//!
//! A [`Workload`] is built from a scenario's [`WorkloadConfig`] and the [`CostModel`]. Every
//! tick the guest model calls [`Workload::advance`] with the current time, asks
//! [`Workload::demand`] how many accesses an open-loop workload wants this tick, and pulls
//! accesses with [`Workload::fill`]. The kinds (one file each) only decide *what* to touch:
//! an optional initial sequential sweep, then one or more timed phases, each a mix
//! of anonymous and file accesses. Behaviour and defaults of every kind are described in
//! `docs/cost-model.md` ("Workloads").

use crate::cost::{CostError, CostModel};
use crate::rng::SimRng;
use memtide_model::Pages;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One access by a workload, in the workload's own address space.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Anonymous (heap/stack) page `page` of the workload's anonymous region.
    Anon { page: u32, write: bool },
    /// Block `block` of the workload's file set, read through the guest page cache.
    File { block: u32 },
    /// Anonymous page `page` that the application fills from disk itself: a miss of its own
    /// pool (a database reading with O_DIRECT, a cache fetching from its backend). A disk read
    /// into the page, which is written; `sequential` when it is the next page of a scan (read
    /// ahead, at the disk's sequential rate).
    Fill { page: u32, sequential: bool },
    /// Anonymous page `page` that the application's garbage collector copies or marks: the
    /// time of an access (a write), completing no operation of the program.
    Collect { page: u32 },
}

/// Access skew over a region.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Skew {
    #[default]
    Uniform,
    /// Zipf with exponent `theta` (> 0): page rank r is touched with probability ~ 1/r^theta.
    Zipf { theta: f64 },
}

pub mod cache;
pub mod config;
pub mod database;
pub mod jvm;
pub mod kv;
pub mod pool;

mod cpu_job;
mod file_server;
mod idle;
mod oltp;
mod pick;
mod toucher;
mod validate;
mod web;

pub use config::{Job, Pace, TouchPhase, WorkloadConfig};
pub use pool::Pool;

use pick::Mix;
use validate::Check;
pub use validate::MIN_CPU_US_PER_ACCESS;

/// A workload parameter a scenario got wrong. The message names the workload kind, the
/// field and its value, e.g. `workload toucher: phases[1].working_set_mb = -5 must be >= 0`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("workload {kind}: {field} = {value} must be {rule}")]
    Invalid {
        kind: &'static str,
        field: String,
        value: String,
        rule: String,
    },
    #[error("workload {kind}: {field} must not be empty")]
    Empty {
        kind: &'static str,
        field: &'static str,
    },
    /// The cost model's default `cpu_us_per_access` (used by this workload) is invalid.
    #[error(transparent)]
    Cost(#[from] CostError),
}

/// What a kind module builds from its parameters: regions, the initial sweep and the
/// timed phases, plus the kind's defaults for the common options.
#[derive(Debug)]
struct Plan {
    anon_pages: u32,
    file_pages: u32,
    /// Anonymous pages `0..sweep` are written once, in order, before anything else.
    sweep: u32,
    /// `(at_s, mix)`, strictly increasing in `at_s`; before the first, nothing is touched.
    phases: Vec<(f64, Mix)>,
    /// The kind's open-loop rate when the scenario gives no `max_accesses_per_s`.
    default_rate: Option<f64>,
    default_accesses_per_op: u32,
}

impl Plan {
    /// The plan of a kind whose application pool makes every access: `anon_pages` of
    /// anonymous memory, no file, no sweep or phases, closed loop.
    fn of_pool(anon_pages: u32, default_accesses_per_op: u32) -> Plan {
        Plan {
            anon_pages,
            file_pages: 0,
            sweep: 0,
            phases: Vec::new(),
            default_rate: None,
            default_accesses_per_op,
        }
    }
}

/// What a kind builds from its own parameters: its plan and, for an application with a pool,
/// the pool and the jobs it is given; for a key-value server, the server.
struct Built<'a> {
    plan: Plan,
    pool: Option<Pool>,
    jobs: Option<&'a [Job]>,
    kv: Option<kv::Kv>,
}

impl Built<'_> {
    /// A kind without a pool of its own.
    fn plan(plan: Plan) -> Built<'static> {
        Built {
            plan,
            pool: None,
            jobs: None,
            kv: None,
        }
    }
}

/// Validates and builds the kind's own parameters of `config` ([`Workload::new`] checks its
/// [`Pace`]): the kinds without a pool here, the others in [`build_pool`].
fn build(check: Check, config: &WorkloadConfig) -> Result<Built<'_>, WorkloadError> {
    let plan = match *config {
        WorkloadConfig::Idle {
            resident_mb,
            background_mb,
            ..
        } => idle::plan(check, resident_mb, background_mb)?,
        WorkloadConfig::Toucher {
            ref phases,
            allocated_mb,
            skew,
            ..
        } => toucher::plan(check, phases, allocated_mb, skew)?,
        WorkloadConfig::FileServer {
            file_set_mb,
            anon_mb,
            skew,
            ..
        } => file_server::plan(check, file_set_mb, anon_mb, skew)?,
        WorkloadConfig::CpuJob {
            allocated_mb,
            working_set_mb,
            skew,
            input_mb,
            input_fraction,
            ref phases,
            ..
        } => {
            let sizes = cpu_job::Sizes {
                allocated_mb,
                working_set_mb,
                input_mb,
                input_fraction,
                phases,
            };
            cpu_job::plan(check, sizes, skew)?
        }
        WorkloadConfig::Oltp {
            data_mb,
            buffer_pool_mb,
            anon_mb,
            file_fraction,
            skew,
            ..
        } => {
            let sizes = oltp::Sizes {
                data_mb,
                buffer_pool_mb,
                anon_mb,
            };
            oltp::plan(check, sizes, file_fraction, skew)?
        }
        WorkloadConfig::Web {
            anon_mb, file_mb, ..
        } => web::plan(check, anon_mb, file_mb)?,
        WorkloadConfig::Kv {
            keys,
            value_bytes,
            item_overhead,
            ref demand,
            seed,
            start_s,
            length_s,
            window_s,
            ..
        } => {
            let sizes = kv::KvSizes {
                keys,
                value_bytes,
                item_overhead,
                demand: demand.clone(),
                seed,
                start_s,
                length_s,
                window_s,
            };
            let (server, plan) = kv::Kv::new(check, &sizes)?;
            return Ok(Built {
                kv: Some(server),
                ..Built::plan(plan)
            });
        }
        WorkloadConfig::Cache { .. }
        | WorkloadConfig::Database { .. }
        | WorkloadConfig::Jvm { .. } => return build_pool(check, config),
    };
    Ok(Built::plan(plan))
}

/// Validates and builds the pool of an application that has one (cache, database, JVM).
fn build_pool(check: Check, config: &WorkloadConfig) -> Result<Built<'_>, WorkloadError> {
    let (plan, pool, jobs) = match *config {
        WorkloadConfig::Cache {
            items_mb,
            pool_mb,
            min_pool_mb,
            shrink_s_per_gib,
            grow_s_per_gib,
            ref jobs,
            ..
        } => {
            let sizes = cache::Sizes {
                items_mb,
                pool_mb,
                min_pool_mb,
                shrink_s_per_gib,
                grow_s_per_gib,
            };
            let cache = cache::Cache::new(check, sizes)?;
            (
                Plan::of_pool(cache.anon_pages(), 1),
                Pool::Cache(cache),
                jobs,
            )
        }
        WorkloadConfig::Database {
            data_mb,
            pool_mb,
            min_pool_mb,
            heap_mb,
            work_ratio,
            work_share,
            scan_share,
            scan_mb,
            skew,
            shrink_s_per_gib,
            grow_s_per_gib,
            ref agent,
            ref jobs,
            ..
        } => {
            let sizes = database::Sizes {
                data_mb,
                pool_mb,
                min_pool_mb,
                heap_mb,
                work_ratio,
                work_share,
                scan_share,
                scan_mb,
                skew,
                shrink_s_per_gib,
                grow_s_per_gib,
            };
            let mut db = database::Database::new(check, sizes)?;
            if let Some(window) = agent.as_ref().and_then(|a| a.curve_window) {
                db.sample_curve(window);
            }
            let plan = Plan::of_pool(db.anon_pages(), database::defaults::ACCESSES_PER_OP);
            (plan, Pool::Database(Box::new(db)), jobs)
        }
        WorkloadConfig::Jvm {
            heap_mb,
            old_mb,
            live_mb,
            survivors_mb,
            min_eden_mb,
            young_live_mb,
            alloc_share,
            promote,
            shrink_s_per_gib,
            grow_s_per_gib,
            ref jobs,
            ..
        } => {
            let sizes = jvm::Sizes {
                heap_mb,
                old_mb,
                live_mb,
                survivors_mb,
                min_eden_mb,
                young_live_mb,
                alloc_share,
                promote,
                shrink_s_per_gib,
                grow_s_per_gib,
            };
            let heap = jvm::Jvm::new(check, sizes)?;
            let plan = Plan::of_pool(heap.anon_pages(), jvm::defaults::ACCESSES_PER_OP);
            (plan, Pool::Jvm(heap), jobs)
        }
        // A kind without a pool: its plan alone.
        _ => return build(check, config),
    };
    Ok(Built {
        plan,
        pool: Some(pool),
        jobs: jobs.as_deref(),
        kv: None,
    })
}

/// A running workload: a deterministic stream of page accesses whose shape changes over time.
#[derive(Clone, Debug)]
pub struct Workload {
    kind: &'static str,
    anon_pages: u32,
    file_pages: u32,
    /// Next page of the initial sweep, and its end.
    sweep_next: u32,
    sweep_end: u32,
    phases: Vec<(f64, Mix)>,
    /// Index of the current phase; `None` before the first phase starts.
    phase: Option<usize>,
    nothing: Mix,
    now: Duration,
    rate: Option<f64>,
    cpu_ns_per_access: u64,
    accesses_per_op: u32,
    /// Sweep and steady accesses appended by the last `fill`, for `return_unused`.
    last_sweep: u32,
    last_steady: usize,
    /// The application's own pool, for kinds that manage one: it then makes every access.
    pool: Option<Pool>,
    /// The work it is given, for an application with jobs: `(at_s, accesses)`, in time
    /// order; without jobs it works all the time.
    jobs: Option<Vec<(f64, u64)>>,
    /// The next job not started yet, and the program's accesses left of those started.
    next_job: usize,
    job_left: u64,
    /// The key-value server, for the `kv` kind: it makes every steady access.
    kv: Option<kv::Kv>,
}

impl Workload {
    /// Validates `config` and builds the workload at time zero (call [`Workload::advance`]
    /// before the first tick). `cost.cpu_us_per_access` is the default work per access.
    pub fn new(config: &WorkloadConfig, cost: &CostModel) -> Result<Workload, WorkloadError> {
        let check = Check {
            kind: config.kind(),
        };
        let Built {
            plan,
            pool,
            jobs,
            kv,
        } = build(check, config)?;
        let pace = config.pace();
        let cpu_us = match pace.cpu_us_per_access {
            Some(v) => check.work_per_access("cpu_us_per_access", v)?,
            None => match cost.cpu_us_per_access {
                v if v.is_finite() && v >= MIN_CPU_US_PER_ACCESS => v,
                value => {
                    return Err(CostError {
                        field: "cpu_us_per_access",
                        value,
                        least: MIN_CPU_US_PER_ACCESS,
                    }
                    .into())
                }
            },
        };
        let accesses_per_op = match pace.accesses_per_op {
            Some(v) => check.at_least_one("accesses_per_op", v)?,
            None => plan.default_accesses_per_op,
        };
        let jobs = match jobs {
            None => None,
            Some(list) => Some(check.jobs(list, accesses_per_op)?),
        };
        let rate = match pace.max_accesses_per_s {
            Some(v) if check.positive("max_accesses_per_s", v)? > validate::MAX_ACCESSES_PER_S => {
                return Err(check.error(
                    "max_accesses_per_s",
                    v,
                    format!(
                        "<= {} (the simulator runs each access)",
                        validate::MAX_ACCESSES_PER_S
                    ),
                ))
            }
            Some(v) => Some(v),
            None => plan.default_rate,
        };
        let mut w = Workload {
            kind: check.kind,
            anon_pages: plan.anon_pages,
            file_pages: plan.file_pages,
            sweep_next: 0,
            sweep_end: plan.sweep.min(plan.anon_pages),
            phases: plan.phases,
            phase: None,
            nothing: Mix::nothing(),
            now: Duration::ZERO,
            rate,
            // Rounded to the nearest nanosecond; `as` saturates on absurd values.
            cpu_ns_per_access: (cpu_us * 1000.0).round() as u64,
            accesses_per_op,
            last_sweep: 0,
            last_steady: 0,
            pool,
            jobs,
            next_job: 0,
            job_left: 0,
            kv,
        };
        w.advance(Duration::ZERO);
        Ok(w)
    }

    /// The `kind` name as written in scenarios.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Size of the anonymous region the workload has allocated (counts in the guest's
    /// Committed_AS); anonymous accesses are to pages `0..anon_pages`.
    pub fn anon_pages(&self) -> u32 {
        self.anon_pages
    }

    /// Size of the file set in pages; file accesses are to blocks `0..file_pages`.
    pub fn file_pages(&self) -> u32 {
        self.file_pages
    }

    /// Moves the workload to time `now` (call at the start of each tick): switches phases.
    pub fn advance(&mut self, now: Duration) {
        self.now = now;
        let t = now.as_secs_f64();
        // Phases are few: a scan from the start keeps this right even if time goes back.
        self.phase = self.phases.iter().rposition(|(at, _)| *at <= t);
        if let Some(jobs) = &self.jobs {
            while let Some(&(_, accesses)) = jobs.get(self.next_job).filter(|(at, _)| *at <= t) {
                self.job_left = self.job_left.saturating_add(accesses);
                self.next_job += 1;
            }
        }
    }

    /// Program accesses the application may make now: what is left of its jobs, or no bound
    /// without jobs.
    fn program_budget(&self) -> u64 {
        match self.jobs {
            Some(_) => self.job_left,
            None => u64::MAX,
        }
    }

    /// The current steady-state mix.
    fn mix(&self) -> &Mix {
        match self.phase {
            Some(i) => &self.phases[i].1,
            None => &self.nothing,
        }
    }

    /// Appends exactly `n` accesses to `out`: first what remains of the initial sweep
    /// (sequential writes), then steady-state accesses of the current phase. The one
    /// exception: when the workload has nothing to touch right now (a toucher before its
    /// first phase or in a 0 MB phase, an all-zero config) it appends only what remains of
    /// the sweep; [`Workload::demand`] then says so (`Some(count)`), so a caller that never
    /// asks for more than the demand always gets exactly `n`. A workload with an application
    /// pool appends between one and `n` accesses (a stop-the-world collection ends a batch).
    pub fn fill(&mut self, rng: &mut SimRng, out: &mut Vec<Access>, n: usize) {
        out.reserve(n);
        let budget = self.program_budget();
        if let Some(pool) = &mut self.pool {
            let before = out.len();
            pool.fill(rng, out, n, budget);
            self.last_sweep = 0;
            self.last_steady = out.len() - before;
            if self.jobs.is_some() {
                let program = out[before..]
                    .iter()
                    .filter(|a| !matches!(a, Access::Collect { .. }))
                    .count();
                self.job_left -= program as u64;
            }
            return;
        }
        let sweep = (n as u64).min(u64::from(self.sweep_end - self.sweep_next)) as u32;
        let start = self.sweep_next;
        out.extend((start..start + sweep).map(|page| Access::Anon { page, write: true }));
        self.sweep_next += sweep;
        let before = out.len();
        let steady = n - sweep as usize;
        if let Some(kv) = &mut self.kv {
            kv.fill(rng, out, steady);
        } else if steady > 0 {
            if let Some(i) = self.phase {
                self.phases[i].1.fill(rng, out, steady);
            }
        }
        self.last_sweep = sweep;
        self.last_steady = out.len() - before;
    }

    /// Tells the workload that `unused`, the last accesses appended by the latest
    /// [`Workload::fill`], were never performed (the tick ran out of time): sweep accesses
    /// among them are handed out again by the next fill, so the initial sweep still touches
    /// every page; an application pool takes back the pages it was to read and the hits it
    /// counted. Steady-state accesses are random and simply dropped. Optional.
    pub fn return_unused(&mut self, unused: &[Access]) {
        if let Some(pool) = &mut self.pool {
            pool.return_unused(unused);
            if self.jobs.is_some() {
                let program = unused
                    .iter()
                    .filter(|a| !matches!(a, Access::Collect { .. }))
                    .count();
                self.job_left += program as u64;
            }
        }
        if let Some(kv) = &mut self.kv {
            kv.return_unused(unused.len().min(self.last_steady));
        }
        let unused_sweep = unused
            .len()
            .saturating_sub(self.last_steady)
            .min(self.last_sweep as usize) as u32;
        self.sweep_next -= unused_sweep;
        self.last_sweep = 0;
        self.last_steady = 0;
    }

    /// Open-loop cap on the accesses the workload wants during the tick of length `tick`
    /// starting at the time of the last [`Workload::advance`]; `None`: closed loop, it runs
    /// as fast as its time allows. Open-loop demand is `floor(rate * (now + tick)) -
    /// floor(rate * now)`, so fractional rates add up exactly over time. The remaining
    /// initial sweep is added on top and is never rate-limited. `Some(0)` when there is
    /// nothing to touch.
    pub fn demand(&self, tick: Duration) -> Option<u64> {
        if let (Some(pool), Some(_)) = (&self.pool, &self.jobs) {
            return Some(self.job_left.saturating_add(pool.overhead()));
        }
        let sweep = u64::from(self.sweep_end - self.sweep_next);
        if let Some(kv) = &self.kv {
            let (t0, t1) = (self.now.as_secs_f64(), (self.now + tick).as_secs_f64());
            let gets = kv.requests_due(t0, t1);
            return Some(sweep.saturating_add(gets * u64::from(kv.pages_per_get())));
        }
        let steady = if self.pool.is_none() && self.mix().is_empty() {
            Some(0)
        } else {
            self.rate.map(|rate| {
                let t0 = self.now.as_secs_f64();
                let t1 = (self.now + tick).as_secs_f64();
                // Saturating `as`; both non-negative.
                ((rate * t1).floor() as u64).saturating_sub((rate * t0).floor() as u64)
            })
        };
        steady.map(|s| s.saturating_add(sweep))
    }

    /// Work per access besides memory stalls, in nanoseconds (`cpu_us_per_access` of the
    /// workload, else of the cost model).
    pub fn cpu_ns_per_access(&self) -> u64 {
        self.cpu_ns_per_access
    }

    /// Page accesses that make one operation (for throughput and latency).
    pub fn accesses_per_op(&self) -> u32 {
        self.accesses_per_op
    }

    /// The open-loop rate in accesses per second, `None` for a closed loop.
    pub fn rate_per_s(&self) -> Option<f64> {
        self.rate
    }

    /// True while the initial sweep (idle boot, cpu_job initialisation) is unfinished.
    pub fn initialising(&self) -> bool {
        self.sweep_next < self.sweep_end
    }

    /// Pages of the initial sweep not yet handed out.
    pub fn sweep_remaining(&self) -> u32 {
        self.sweep_end - self.sweep_next
    }

    /// Index of the current phase (`None` before the first phase starts). Only touchers
    /// have more than one phase.
    pub fn phase_index(&self) -> Option<usize> {
        self.phase
    }

    /// The true working set now: the pages the workload keeps touching in its current
    /// phase (anonymous + file). The initial sweep touches each page once and is not part
    /// of it. Per kind (see docs/cost-model.md): idle: background; toucher: the current
    /// phase; file_server: file set + anon; cpu_job: working_set_mb; oltp: anon + the
    /// hottest data pages that receive 90% of its file accesses; web: anon + file.
    pub fn working_set(&self) -> Pages {
        if let Some(kv) = &self.kv {
            return kv.working_set(self.now.as_secs_f64());
        }
        match &self.pool {
            Some(pool) => pool.working_set(),
            None => self.mix().working_set(),
        }
    }

    /// The key-value server, for the `kv` kind.
    pub fn kv(&self) -> Option<&kv::Kv> {
        self.kv.as_ref()
    }

    /// Accesses of the initial sweep among those the last [`Workload::fill`] appended (they
    /// come first).
    pub fn last_sweep(&self) -> usize {
        self.last_sweep as usize
    }

    /// Time since the workload started (the last [`Workload::advance`]).
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The application's own pool, for kinds that manage one (`cache`).
    pub fn pool(&self) -> Option<&Pool> {
        self.pool.as_ref()
    }

    pub fn pool_mut(&mut self) -> Option<&mut Pool> {
        self.pool.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_kinds() -> Vec<WorkloadConfig> {
        let toml = r#"
            [[w]]
            kind = "idle"
            resident_mb = 8
            [[w]]
            kind = "toucher"
            phases = [{ at_s = 0, working_set_mb = 4 }, { at_s = 2, working_set_mb = 12 }]
            skew = { kind = "zipf", theta = 1.1 }
            [[w]]
            kind = "file_server"
            file_set_mb = 20
            [[w]]
            kind = "cpu_job"
            allocated_mb = 10
            working_set_mb = 3
            [[w]]
            kind = "oltp"
            data_mb = 40
            [[w]]
            kind = "web"
            [[w]]
            kind = "cache"
            items_mb = 30
            pool_mb = 10
            [[w]]
            kind = "database"
            data_mb = 40
            pool_mb = 16
        "#;
        #[derive(Deserialize)]
        struct Holder {
            w: Vec<WorkloadConfig>,
        }
        toml::from_str::<Holder>(toml).unwrap().w
    }

    fn assert_in_range(w: &Workload, out: &[Access]) {
        for a in out {
            match *a {
                Access::Anon { page, .. } => assert!(page < w.anon_pages(), "{} {a:?}", w.kind()),
                Access::File { block } => assert!(block < w.file_pages(), "{} {a:?}", w.kind()),
                Access::Fill { page, .. } | Access::Collect { page } => {
                    assert!(page < w.anon_pages(), "{} {a:?}", w.kind())
                }
            }
        }
    }

    #[test]
    fn every_kind_stays_in_range_and_fills_exactly_n() {
        let cost = CostModel::default();
        for config in all_kinds() {
            let mut w = Workload::new(&config, &cost).unwrap();
            let mut rng = SimRng::new(1);
            let mut out = Vec::new();
            for t in 0..4u64 {
                w.advance(Duration::from_secs(t));
                let n = w
                    .demand(Duration::from_secs(1))
                    .unwrap_or(30_000)
                    .min(30_000) as usize;
                let before = out.len();
                w.fill(&mut rng, &mut out, n);
                assert_eq!(out.len() - before, n, "{}", w.kind());
            }
            assert_in_range(&w, &out);
        }
    }

    #[test]
    fn same_seed_gives_same_accesses() {
        let cost = CostModel::default();
        for config in all_kinds() {
            let run = || {
                let mut w = Workload::new(&config, &cost).unwrap();
                let mut rng = SimRng::new(77).fork(3);
                let mut out = Vec::new();
                for t in 0..3u64 {
                    w.advance(Duration::from_secs(t));
                    w.fill(&mut rng, &mut out, 5_000);
                }
                out
            };
            assert_eq!(run(), run(), "{}", config.kind());
        }
    }

    #[test]
    fn defaults_per_kind() {
        let cost = CostModel::default();
        let got: Vec<(&str, u64, u32, Option<f64>)> = all_kinds()
            .iter()
            .map(|c| {
                let w = Workload::new(c, &cost).unwrap();
                (
                    w.kind(),
                    w.cpu_ns_per_access(),
                    w.accesses_per_op(),
                    w.rate_per_s(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("idle", 10_000, 1, Some(500.0)),
                ("toucher", 10_000, 1, None),
                ("file_server", 10_000, 10, None),
                ("cpu_job", 10_000, 100, None),
                ("oltp", 10_000, 50, None),
                ("web", 10_000, 10, Some(20_000.0)),
                ("cache", 10_000, 1, None),
                ("database", 10_000, 1000, None),
            ]
        );
    }

    #[test]
    fn a_job_runs_its_operations_and_then_the_application_idles() {
        let config = WorkloadConfig::Cache {
            items_mb: 4.0,
            pool_mb: 2.0,
            min_pool_mb: 0.0,
            shrink_s_per_gib: 1.0,
            grow_s_per_gib: 1.0,
            agent: None,
            jobs: Some(vec![Job { at_s: 10.0, ops: 3 }]),
            pace: Pace {
                cpu_us_per_access: None,
                accesses_per_op: Some(100),
                max_accesses_per_s: None,
            },
        };
        let mut w = Workload::new(&config, &CostModel::default()).unwrap();
        let tick = Duration::from_secs(1);
        let mut rng = SimRng::new(1);
        w.advance(Duration::from_secs(5));
        assert_eq!(w.demand(tick), Some(0), "before its job");
        w.advance(Duration::from_secs(10));
        assert_eq!(w.demand(tick), Some(300));
        let mut out = Vec::new();
        w.fill(&mut rng, &mut out, 250);
        assert_eq!(w.demand(tick), Some(50));
        w.return_unused(&out[200..]);
        assert_eq!(
            w.demand(tick),
            Some(100),
            "accesses never made are still to do"
        );
        out.clear();
        w.fill(&mut rng, &mut out, 1000);
        assert_eq!(out.len(), 100, "no more than the job");
        assert_eq!(w.demand(tick), Some(0), "done");
    }

    #[test]
    fn common_options_override_defaults() {
        let config = WorkloadConfig::CpuJob {
            allocated_mb: 1.0,
            working_set_mb: 1.0,
            skew: Skew::Uniform,
            input_mb: 0.0,
            input_fraction: 0.1,
            phases: Vec::new(),
            pace: Pace {
                cpu_us_per_access: Some(2.5),
                accesses_per_op: Some(7),
                max_accesses_per_s: Some(1000.0),
            },
        };
        let cost = CostModel {
            cpu_us_per_access: 99.0,
            ..CostModel::default()
        };
        let mut w = Workload::new(&config, &cost).unwrap();
        assert_eq!(w.cpu_ns_per_access(), 2_500);
        assert_eq!(w.accesses_per_op(), 7);
        // The initialisation sweep (256 pages) comes on top of the rate and is not capped.
        assert_eq!(w.demand(Duration::from_secs(1)), Some(1256));
        let mut out = Vec::new();
        w.fill(&mut SimRng::new(1), &mut out, 1256);
        assert_eq!(w.demand(Duration::from_secs(1)), Some(1000));
        assert_eq!(w.demand(Duration::from_millis(500)), Some(500));

        let no_cpu = Workload::new(&all_kinds()[1], &cost).unwrap();
        assert_eq!(no_cpu.cpu_ns_per_access(), 99_000);
    }

    #[test]
    fn bad_common_options_name_the_field() {
        let cost = CostModel::default();
        let web = |cpu: Option<f64>, per_op: Option<u32>, rate: Option<f64>| WorkloadConfig::Web {
            anon_mb: 1.0,
            file_mb: 1.0,
            pace: Pace {
                cpu_us_per_access: cpu,
                accesses_per_op: per_op,
                max_accesses_per_s: rate,
            },
        };
        let err = |c: WorkloadConfig| Workload::new(&c, &cost).unwrap_err().to_string();
        assert_eq!(
            err(web(Some(-1.0), None, None)),
            "workload web: cpu_us_per_access = -1 must be >= 0.05 (at most 20 million accesses per simulated second: the simulator runs each one)"
        );
        // No work per access would let a closed-loop workload run without bound.
        assert!(err(web(Some(0.0), None, None)).contains("cpu_us_per_access = 0 must be >= 0.05"));
        assert_eq!(
            err(web(None, Some(0), None)),
            "workload web: accesses_per_op = 0 must be >= 1"
        );
        assert_eq!(
            err(web(None, None, Some(0.0))),
            "workload web: max_accesses_per_s = 0 must be > 0"
        );
        assert_eq!(
            err(web(None, None, Some(f64::NAN))),
            "workload web: max_accesses_per_s = NaN must be a finite number"
        );
        // Bounded above by what the simulator can run.
        assert_eq!(
            err(web(None, None, Some(1e18))),
            "workload web: max_accesses_per_s = 1000000000000000000 must be <= 20000000 (the simulator runs each access)"
        );
        assert_eq!(
            err(web(Some(1e300), None, None)),
            format!(
                "workload web: cpu_us_per_access = {} must be <= 1000000 (a second)",
                1e300
            )
        );
        let check = validate::Check { kind: "cache" };
        let zipf = |theta| {
            check
                .skew("skew", Skew::Zipf { theta })
                .map_err(|e| e.to_string())
        };
        assert!(zipf(10.0).is_ok());
        assert_eq!(
            zipf(1e9).unwrap_err(),
            "workload cache: skew.theta = 1000000000 must be <= 10"
        );
        let bad_cost = CostModel {
            cpu_us_per_access: f64::NAN,
            ..CostModel::default()
        };
        assert_eq!(
            Workload::new(&web(None, None, None), &bad_cost)
                .unwrap_err()
                .to_string(),
            "cost.cpu_us_per_access = NaN must be a finite number >= 0.05"
        );
    }

    #[test]
    fn bad_sizes_name_the_field_for_every_kind() {
        let cost = CostModel::default();
        let cases = [
            (
                WorkloadConfig::Idle {
                    resident_mb: -1.0,
                    background_mb: 1.0,
                    pace: Pace::default(),
                },
                "workload idle: resident_mb = -1 must be >= 0",
            ),
            (
                WorkloadConfig::Idle {
                    resident_mb: 1.0,
                    background_mb: 2e9,
                    pace: Pace::default(),
                },
                "workload idle: background_mb = 2000000000 must be <= 1048576 (1 TiB)",
            ),
            (
                WorkloadConfig::FileServer {
                    file_set_mb: 1.0,
                    anon_mb: -3.0,
                    skew: Skew::Uniform,
                    pace: Pace::default(),
                },
                "workload file_server: anon_mb = -3 must be >= 0",
            ),
            (
                WorkloadConfig::CpuJob {
                    allocated_mb: f64::NAN,
                    working_set_mb: 1.0,
                    skew: Skew::Uniform,
                    input_mb: 0.0,
                    input_fraction: 0.1,
                    phases: Vec::new(),
                    pace: Pace::default(),
                },
                "workload cpu_job: allocated_mb = NaN must be a finite number",
            ),
            (
                WorkloadConfig::Oltp {
                    buffer_pool_mb: 0.0,
                    data_mb: -0.5,
                    anon_mb: 1.0,
                    file_fraction: 0.5,
                    skew: Skew::Uniform,
                    pace: Pace::default(),
                },
                "workload oltp: data_mb = -0.5 must be >= 0",
            ),
            (
                WorkloadConfig::Web {
                    anon_mb: 1.0,
                    file_mb: f64::NEG_INFINITY,
                    pace: Pace::default(),
                },
                "workload web: file_mb = -inf must be a finite number",
            ),
        ];
        for (config, message) in cases {
            assert_eq!(
                Workload::new(&config, &cost).unwrap_err().to_string(),
                message
            );
        }
    }

    proptest! {
        #[test]
        fn accesses_stay_in_range_for_any_sizes(
            a in 0.0f64..64.0,
            b in 0.0f64..64.0,
            frac in 0.0f64..=1.0,
            theta in 0.05f64..3.0,
            zipf in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let skew = if zipf { Skew::Zipf { theta } } else { Skew::Uniform };
            let (small, large) = if a <= b { (a, b) } else { (b, a) };
            let configs = [
                WorkloadConfig::Idle { resident_mb: a, background_mb: b, pace: Pace::default() },
                WorkloadConfig::Toucher { phases: vec![TouchPhase { at_s: 0.0, working_set_mb: a }, TouchPhase { at_s: 1.0, working_set_mb: b }], allocated_mb: None, skew, pace: Pace::default() },
                WorkloadConfig::FileServer { file_set_mb: a, anon_mb: b, skew, pace: Pace::default() },
                WorkloadConfig::CpuJob { allocated_mb: large, working_set_mb: small, skew, input_mb: 0.0, input_fraction: 0.1, phases: Vec::new(), pace: Pace::default() },
                WorkloadConfig::Oltp { data_mb: a, buffer_pool_mb: 0.0, anon_mb: b, file_fraction: frac, skew, pace: Pace::default() },
                WorkloadConfig::Web { anon_mb: a, file_mb: b, pace: Pace::default() },
            ];
            for config in configs {
                let mut w = Workload::new(&config, &CostModel::default()).unwrap();
                let mut rng = SimRng::new(seed);
                let mut out = Vec::new();
                for t in 0..2u64 {
                    w.advance(Duration::from_secs(t));
                    let want = w.demand(Duration::from_secs(1)).unwrap_or(2_000).min(2_000) as usize;
                    let before = out.len();
                    w.fill(&mut rng, &mut out, want);
                    prop_assert_eq!(out.len() - before, want);
                }
                assert_in_range(&w, &out);
                prop_assert!(w.working_set().0 <= u64::from(w.anon_pages()) + u64::from(w.file_pages()));
            }
        }
    }
}
