//! `[density]`: the density benchmark's tenants (issue 31) — N key-value servers, the mix repeated, each a container driven by its demand pattern from the run's seed and its index, set up for one policy.
//!
//! Tenant *i* (named `t0000`, ...) is kind `mix[i % len]`: a container holding
//! `server_memory` of its own and its dataset (`keys` items of `value_bytes` and
//! `item_overhead` more), its *peak*. What the policy changes:
//!
//! - `static`: the container's size is its static limit (the peak and 10%,
//!   `memtide_demand::static_limit`), which nothing moves;
//! - `kernel`: no per-tenant limit (a container twice its static limit, more than it ever
//!   holds) and no manager: the host pages when its memory, the budget, is full;
//! - `sampling`, `tws`: as memtide's daemon adopts each real server — min 16 MiB, ESX
//!   sampling over 10 s periods with the wake-up rule, or TWS — under the controller with
//!   `[policy]`'s budget and tax; max is the static limit (the real daemon's is twice that,
//!   room a server that only reads its dataset never uses, and admission control reserves
//!   max - min of host swap per tenant here).
//!
//! The run is `warmup` (fill, then idle: memtide's first periods) and then `duration` of
//! load; the scenario's duration is both. `app` has no simulated counterpart: the simulator's
//! application balloon drives the cache, database and JVM pools, not a key-value server's.

use crate::scenario::{Density, DensityKind, ScenarioTenant};
use crate::schema::DensityDoc;
use memtide_config::{FieldPath, Size};
use memtide_demand::{static_limit, tenant_seed, Demand, Policy, Slo};
use memtide_model::{
    EstimatorConfig, Pages, SamplingConfig, TenantId, TenantSpec, WorkingSetConfig,
};
use memtide_sim::config::{SamplingSetup, TenantKind, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::{Pace, Workload, WorkloadConfig};
use std::time::Duration;

use super::{Build, Facts, Result};

/// The most tenants a density scenario runs.
pub(crate) const MAX_TENANTS: usize = 10_000;
/// memtide's daemon's settings for each adopted server (crates/cli/src/density/trial.rs).
const MEMTIDE_MIN: Size = Size(16 << 20);
const SAMPLING_PERIOD: Duration = Duration::from_secs(10);

impl Build<'_> {
    /// The density set-up and its tenants; `run` is the file's `duration` (the load's
    /// length), `budget` `[policy]`'s.
    pub(super) fn density(
        &self,
        d: DensityDoc,
        run: Duration,
        budget: Option<Size>,
        seed: u64,
        cost: &CostModel,
    ) -> Result<(Density, Vec<ScenarioTenant>, Vec<Facts>)> {
        let at = FieldPath::root().key("density");
        let policy = match Policy::named(&d.policy) {
            Some(p) if !p.simulated() => {
                return Err(self.err(
                    &at.key("policy"),
                    "has no simulated counterpart (the simulator's application balloon drives \
                     cache, database and JVM pools, not a key-value server, and Senpai runs on \
                     real cgroup v2 only): static, kernel, sampling or tws",
                ))
            }
            Some(p) => p,
            None => {
                return Err(self.err(&at.key("policy"), "must be static, kernel, sampling or tws"))
            }
        };
        let budget = budget.ok_or_else(|| {
            self.err(
                &FieldPath::root().key("policy"),
                "needs budget = the memory all density tenants share",
            )
        })?;
        if !(1..=MAX_TENANTS).contains(&d.tenants) {
            return Err(self.err(
                &at.key("tenants"),
                format!("must be from 1 to {MAX_TENANTS}"),
            ));
        }
        if !(1..=MAX_TENANTS).contains(&d.start) || d.start > d.max || d.max > MAX_TENANTS {
            return Err(self.err(
                &at.key("start"),
                format!(
                    "start = {}, max = {}: need 1 <= start <= max <= {MAX_TENANTS}",
                    d.start, d.max
                ),
            ));
        }
        if d.step == 0 {
            return Err(self.err(&at.key("step"), "must be at least 1"));
        }
        let warmup = self.tick_time(&at.key("warmup"), d.warmup)?;
        let window = self.tick_time(&at.key("window"), d.window)?;
        if window.is_zero() || window > run {
            return Err(self.err(
                &at.key("window"),
                "must be from 1 s to the scenario's duration",
            ));
        }
        let slo_at = at.key("slo");
        let p99 = self.time(&slo_at.key("p99"), d.slo.p99)?;
        if p99.is_zero() {
            return Err(self.err(&slo_at.key("p99"), "must be > 0"));
        }
        let slo = Slo {
            p99_us: p99.as_micros() as u64,
            wake_s: self.time(&slo_at.key("wake"), d.slo.wake)?.as_secs_f64(),
            min_requests: d.slo.min_requests,
        };
        let server_memory = self.size(&at.key("server_memory"), d.server_memory)?;
        if d.mix.is_empty() {
            return Err(self.err(
                &at.key("mix"),
                "name at least one kind of tenant ([[density.mix]])",
            ));
        }
        let pace = Pace {
            cpu_us_per_access: d.cpu_us_per_access,
            ..Pace::default()
        };
        let mut mix = Vec::with_capacity(d.mix.len());
        let mut configs = Vec::with_capacity(d.mix.len());
        let density_at = at.clone();
        for (k, m) in d.mix.into_iter().enumerate() {
            let at = at.key("mix").index(k);
            Demand::parse(&m.demand).map_err(|e| self.err(&at.key("demand"), e.to_string()))?;
            let config = WorkloadConfig::Kv {
                keys: m.keys,
                value_bytes: m.value_bytes.bytes(),
                item_overhead: m.item_overhead,
                demand: m.demand.clone(),
                seed: 0,
                start_s: warmup.as_secs_f64(),
                length_s: run.as_secs_f64(),
                window_s: window.as_secs_f64(),
                pace,
            };
            let workload = Workload::new(&config, cost)
                .map_err(|e| self.workload_error(&at, &density_at, e))?;
            let dataset = u64::from(workload.anon_pages()) * memtide_model::PAGE_SIZE;
            mix.push(DensityKind {
                server: m.server,
                keys: m.keys,
                value_bytes: m.value_bytes.bytes(),
                demand: m.demand,
                peak: server_memory.bytes() + dataset,
            });
            configs.push(config);
        }
        let mut tenants = Vec::with_capacity(d.tenants);
        let mut facts = Vec::with_capacity(d.tenants);
        for i in 0..d.tenants {
            let kind = &mix[i % mix.len()];
            let limit = Size(static_limit(kind.peak));
            let (min, max) = match policy {
                Policy::Static => (Size(0), limit),
                Policy::Kernel => (Size(0), Size(limit.bytes() * 2)),
                _ => (MEMTIDE_MIN, limit),
            };
            let estimator = match policy {
                Policy::Tws => EstimatorConfig::WorkingSet(WorkingSetConfig::default()),
                _ => EstimatorConfig::Sampling(SamplingConfig {
                    period: SAMPLING_PERIOD,
                    wake: true,
                    ..SamplingConfig::default()
                }),
            };
            let sampling = match (&estimator, policy.is_memtide()) {
                (EstimatorConfig::Sampling(s), true) => Some(SamplingSetup {
                    sample_pages: s.sample_pages,
                    period: s.period,
                }),
                _ => None,
            };
            let mut workload = configs[i % mix.len()].clone();
            if let WorkloadConfig::Kv { seed: s, .. } = &mut workload {
                *s = tenant_seed(seed, i as u64);
            }
            let name = format!("t{i:04}");
            tenants.push(ScenarioTenant {
                spec: TenantSpec {
                    cap_at_estimate: policy == Policy::Tws,
                    estimator,
                    ..TenantSpec::new(
                        TenantId(i as u32),
                        name.clone(),
                        min.to_pages(),
                        max.to_pages(),
                    )
                },
                vm: VmConfig {
                    kind: TenantKind::Container,
                    max: max.to_pages(),
                    overhead: Pages::ZERO,
                    kernel: server_memory.to_pages(),
                    guest_swap: max.to_pages(),
                    balloon: None,
                    initial_balloon: Pages::ZERO,
                    sampling,
                    workload,
                    content: Default::default(),
                    io: None,
                    disk: None,
                },
                start: Duration::ZERO,
                stop: None,
            });
            facts.push(Facts {
                name,
                min,
                max,
                slo: false,
            });
        }
        let density = Density {
            policy,
            tenants: d.tenants,
            budget: budget.bytes(),
            warmup,
            run,
            window,
            start: d.start,
            step: d.step,
            max: d.max,
            slo,
            mix,
        };
        Ok((density, tenants, facts))
    }
}
