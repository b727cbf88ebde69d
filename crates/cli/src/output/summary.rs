//! The run's summary: per-tenant and host figures, written as summary.json.
//!
//! An [`Accumulator`] takes the ticks one by one as the run goes (running sums per tenant and
//! for the host: memory in the number of tenants, not ticks) and makes the [`Summary`] at the
//! end; [`summarize`] feeds it every tick of a whole record. Every float is rounded to three
//! decimals and fields keep their declared order, so the same run always gives the same bytes.

use super::headline::{HeadlineAcc, HeadlineSummary};
use super::round3;
use crate::record::{Run, RunRecord, TenantMeta, TickRecord, Ticks};
use crate::settings::{EstimatorSettings, PolicySettings};
use memtide_model::{Bytes, ReclamationState, TenantId};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Everything summary.json holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The memtide version that produced the run.
    pub version: String,
    pub scenario: String,
    pub variant: Option<String>,
    pub seed: u64,
    pub duration_s: f64,
    pub tick_s: f64,
    pub machine_mb: f64,
    /// The controller's settings at the start of the run.
    pub policy: PolicySettings,
    /// Band around the working set used for `converged_s`.
    pub convergence: Convergence,
    /// Every tenant of the scenario, in scenario order, including those that never ran.
    /// The scenario's headline, when it states one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headline: Option<HeadlineSummary>,
    pub tenants: Vec<TenantSummary>,
    pub host: HostSummary,
    /// Scenario events as they took effect.
    pub events: Vec<EventSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Convergence {
    pub low: f64,
    pub high: f64,
    /// The scenario sets the band: converging is a goal of the run (else `converged_s` is
    /// computed but not shown).
    pub goal: bool,
}

/// One tenant: its configuration and, when it ran, its figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantSummary {
    pub name: String,
    pub estimator: String,
    pub estimator_settings: EstimatorSettings,
    pub min_mb: f64,
    pub max_mb: f64,
    pub shares: u64,
    pub balloon_driver: bool,
    /// False when admission control refused it or it never started within the run.
    pub ran: bool,
    /// Absent when the tenant did not run.
    #[serde(flatten)]
    pub figures: Option<TenantFigures>,
}

/// Figures of a tenant over the ticks it ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantFigures {
    /// Simulated time the tenant ran (ticks with a row x tick length).
    pub ran_s: f64,
    pub mean_allocated_mb: f64,
    pub final_allocated_mb: f64,
    pub mean_target_mb: f64,
    pub mean_active_estimate_mb: f64,
    pub mean_working_set_mb: f64,
    /// Operations per second, averaged over every tick the tenant ran.
    pub mean_throughput: f64,
    /// Mean latency over the ticks in which operations completed; `None` if none did.
    pub mean_latency_ms: Option<f64>,
    /// `1 - mean_throughput / baseline mean throughput`; `None` without a baseline run.
    pub degradation: Option<f64>,
    pub swap_ins: u64,
    pub refaults: u64,
    pub host_swap_ins: u64,
    pub mean_balloon_mb: f64,
    pub final_balloon_mb: f64,
    pub mean_host_swapped_mb: f64,
    /// Earliest time from which both allocated memory and the target stay within
    /// `[low x working set, high x working set]` until the tenant's last tick; `None` if never.
    pub converged_s: Option<f64>,
    /// Ticks in which the tenant was blocked (low state, above target).
    pub blocked_ticks: u64,
}

/// Host-wide figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostSummary {
    pub time_in_state_s: TimeInState,
    /// Changes of reclamation state between consecutive ticks.
    pub state_transitions: u64,
    pub final_state: Option<ReclamationState>,
    pub mean_free_mb: f64,
    pub min_free_mb: f64,
    pub mean_budget_mb: f64,
    pub refusals: Vec<RefusalSummary>,
    /// Page sharing over the run, when the world shares pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharing: Option<SharingSummary>,
    /// Hot I/O page remapping's counts at the last tick, when the world models it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_remap: Option<memtide_model::IoRemapping>,
}

/// Page sharing host-wide: ESX's shared and reclaimed memory (and shared zero pages) averaged
/// over the ticks, the most reclaimed at once, and the sharing machinery's memory at the end.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SharingSummary {
    pub mean_shared_mb: f64,
    pub mean_reclaimed_mb: f64,
    pub max_reclaimed_mb: f64,
    pub mean_zero_mb: Option<f64>,
    pub final_metadata_mb: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimeInState {
    pub high: f64,
    pub soft: f64,
    pub hard: f64,
    pub low: f64,
}

impl TimeInState {
    pub fn get(&self, state: ReclamationState) -> f64 {
        match state {
            ReclamationState::High => self.high,
            ReclamationState::Soft => self.soft,
            ReclamationState::Hard => self.hard,
            ReclamationState::Low => self.low,
        }
    }

    fn add(&mut self, state: ReclamationState, s: f64) {
        match state {
            ReclamationState::High => self.high += s,
            ReclamationState::Soft => self.soft += s,
            ReclamationState::Hard => self.hard += s,
            ReclamationState::Low => self.low += s,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RefusalSummary {
    pub time_s: f64,
    pub tenant: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventSummary {
    pub time_s: f64,
    pub description: String,
}

/// Running sums of one tenant's rows.
#[derive(Default)]
struct Acc {
    rows: u64,
    allocated: f64,
    target: f64,
    estimate: f64,
    working_set: f64,
    throughput: f64,
    latency: f64,
    latency_ticks: u64,
    swap_ins: u64,
    refaults: u64,
    host_swap_ins: u64,
    balloon: f64,
    host_swapped: f64,
    blocked: u64,
    final_allocated: f64,
    final_balloon: f64,
    /// Start of the current run of in-band ticks.
    in_band_since: Option<f64>,
}

/// The summary of a run in the making: running sums, fed one tick at a time.
pub struct Accumulator {
    low: f64,
    high: f64,
    tick_s: f64,
    /// Each tenant's place in the run's list.
    index: BTreeMap<TenantId, usize>,
    acc: Vec<Acc>,
    ticks: u64,
    in_state: TimeInState,
    transitions: u64,
    free_sum: f64,
    min_free: f64,
    budget_sum: f64,
    previous: Option<ReclamationState>,
    sharing: Option<SharingAcc>,
    io_remap: Option<memtide_model::IoRemapping>,
    headline: Option<HeadlineAcc>,
}

/// Page sharing summed over the ticks that reported it (MB), their count, the most reclaimed
/// at once and the last reading.
struct SharingAcc {
    shared: f64,
    reclaimed: f64,
    zero: f64,
    ticks: u64,
    max_reclaimed: f64,
    last: memtide_model::HostSharing,
}

impl Accumulator {
    /// Nothing summed yet, for `run`'s tenants.
    pub fn new(run: &Run) -> Accumulator {
        Accumulator {
            low: run.convergence_low,
            high: run.convergence_high,
            tick_s: run.tick_s,
            index: run
                .tenants
                .iter()
                .enumerate()
                .map(|(i, t)| (t.id, i))
                .collect(),
            acc: run.tenants.iter().map(|_| Acc::default()).collect(),
            ticks: 0,
            in_state: TimeInState::default(),
            transitions: 0,
            free_sum: 0.0,
            min_free: f64::INFINITY,
            budget_sum: 0.0,
            previous: None,
            sharing: None,
            io_remap: None,
            headline: HeadlineAcc::new(run),
        }
    }

    /// Adds one tick (after every earlier one).
    pub fn add(&mut self, tick: &TickRecord) {
        let (low, high) = (self.low, self.high);
        self.ticks += 1;
        self.in_state.add(tick.state, self.tick_s);
        if self.previous.is_some_and(|p| p != tick.state) {
            self.transitions += 1;
        }
        self.previous = Some(tick.state);
        self.free_sum += tick.free.as_mib_f64();
        self.min_free = f64::min(self.min_free, tick.free.as_mib_f64());
        self.budget_sum += tick.budget.as_mib_f64();
        if let Some(s) = tick.sharing {
            let mb = |p: memtide_model::Pages| p.to_bytes().as_mib_f64();
            let acc = self.sharing.get_or_insert(SharingAcc {
                shared: 0.0,
                reclaimed: 0.0,
                zero: 0.0,
                ticks: 0,
                max_reclaimed: 0.0,
                last: s,
            });
            acc.shared += mb(s.shared);
            acc.reclaimed += mb(s.reclaimed());
            acc.zero += s.zero.map_or(0.0, mb);
            acc.ticks += 1;
            acc.max_reclaimed = acc.max_reclaimed.max(mb(s.reclaimed()));
            acc.last = s;
        }
        if tick.remapping.is_some() {
            self.io_remap = tick.remapping;
        }
        if let Some(h) = &mut self.headline {
            h.add(tick);
        }
        for row in &tick.rows {
            let Some(a) = self.index.get(&row.tenant).map(|&i| &mut self.acc[i]) else {
                continue;
            };
            a.rows += 1;
            a.allocated += row.allocated.as_mib_f64();
            a.target += row.target.as_mib_f64();
            a.estimate += row.active_estimate.as_mib_f64();
            a.working_set += row.working_set.map_or(0.0, Bytes::as_mib_f64);
            a.throughput += row.throughput.unwrap_or(0.0);
            if row.throughput.unwrap_or(0.0) > 0.0 {
                a.latency += row.latency_ms.unwrap_or(0.0);
                a.latency_ticks += 1;
            }
            a.swap_ins += row.swap_ins.unwrap_or(0);
            a.refaults += row.refaults.unwrap_or(0);
            a.host_swap_ins += row.host_swap.and_then(|h| h.swap_ins).unwrap_or(0);
            a.balloon += row.balloon_size().as_mib_f64();
            a.host_swapped += row.host_swapped().as_mib_f64();
            a.blocked += u64::from(row.blocked);
            a.final_allocated = row.allocated.as_mib_f64();
            a.final_balloon = row.balloon_size().as_mib_f64();
            // Two-sided, on what the tenant holds and on what the policy wants it to hold: a
            // guest never grows past what it touched, so a target far above the working set
            // is not convergence even when the allocation looks right.
            let ws = row.working_set.map_or(0.0, Bytes::as_mib_f64);
            let in_band = |x: Bytes| (low * ws..=high * ws).contains(&x.as_mib_f64());
            let in_band = in_band(row.allocated) && in_band(row.target);
            a.in_band_since = match (in_band, a.in_band_since) {
                (true, None) => Some(tick.time_s),
                (true, since) => since,
                (false, _) => None,
            };
        }
    }

    /// The summary of `run` (the one this was made for, with its events, refusals and
    /// baseline) over the ticks added.
    pub fn finish(self, run: &Run) -> Summary {
        let ticks = self.ticks as f64;
        let mean = |sum: f64| {
            if ticks > 0.0 {
                round3(sum / ticks)
            } else {
                0.0
            }
        };
        let in_state = &self.in_state;
        let tenants = run
            .tenants
            .iter()
            .zip(self.acc)
            .map(|(meta, a)| tenant(run, meta, a))
            .collect();
        Summary {
            version: env!("CARGO_PKG_VERSION").to_string(),
            scenario: run.scenario.clone(),
            variant: run.variant.clone(),
            seed: run.seed,
            duration_s: round3(run.duration_s),
            tick_s: round3(run.tick_s),
            machine_mb: round3(run.machine_mb),
            policy: run.policy.clone(),
            convergence: Convergence {
                low: round3(self.low),
                high: round3(self.high),
                goal: run.convergence_goal,
            },
            headline: self.headline.map(HeadlineAcc::finish),
            tenants,
            host: HostSummary {
                time_in_state_s: TimeInState {
                    high: round3(in_state.high),
                    soft: round3(in_state.soft),
                    hard: round3(in_state.hard),
                    low: round3(in_state.low),
                },
                state_transitions: self.transitions,
                final_state: self.previous,
                mean_free_mb: mean(self.free_sum),
                min_free_mb: if self.min_free.is_finite() {
                    round3(self.min_free)
                } else {
                    0.0
                },
                mean_budget_mb: mean(self.budget_sum),
                refusals: run
                    .refusals
                    .iter()
                    .map(|r| RefusalSummary {
                        time_s: round3(r.time_s),
                        tenant: r.tenant.clone(),
                        reason: r.reason.clone(),
                    })
                    .collect(),
                sharing: self.sharing.map(|a| {
                    let n = a.ticks.max(1) as f64;
                    SharingSummary {
                        mean_shared_mb: round3(a.shared / n),
                        mean_reclaimed_mb: round3(a.reclaimed / n),
                        max_reclaimed_mb: round3(a.max_reclaimed),
                        mean_zero_mb: a.last.zero.map(|_| round3(a.zero / n)),
                        final_metadata_mb: a.last.metadata.map(|b| round3(b.as_mib_f64())),
                    }
                }),
                io_remap: self.io_remap,
            },
            events: run
                .events
                .iter()
                .map(|e| EventSummary {
                    time_s: round3(e.time_s),
                    description: e.description.clone(),
                })
                .collect(),
        }
    }
}

impl Ticks for Accumulator {
    fn tick(&mut self, tick: TickRecord) -> std::io::Result<()> {
        self.add(&tick);
        Ok(())
    }
}

/// The summary of a whole record: every tick fed to an [`Accumulator`].
pub fn summarize(record: &RunRecord) -> Summary {
    let mut acc = Accumulator::new(record);
    for tick in &record.ticks {
        acc.add(tick);
    }
    acc.finish(record)
}

fn tenant(run: &Run, meta: &TenantMeta, a: Acc) -> TenantSummary {
    let figures = (a.rows > 0).then(|| {
        let n = a.rows as f64;
        let mean_throughput = a.throughput / n;
        let degradation = run
            .baseline
            .as_ref()
            .and_then(|b| b.iter().find(|f| f.tenant == meta.id))
            .filter(|f| f.throughput > 0.0)
            .map(|f| round3(1.0 - mean_throughput / f.throughput));
        TenantFigures {
            ran_s: round3(n * run.tick_s),
            mean_allocated_mb: round3(a.allocated / n),
            final_allocated_mb: round3(a.final_allocated),
            mean_target_mb: round3(a.target / n),
            mean_active_estimate_mb: round3(a.estimate / n),
            mean_working_set_mb: round3(a.working_set / n),
            mean_throughput: round3(mean_throughput),
            mean_latency_ms: (a.latency_ticks > 0)
                .then(|| round3(a.latency / a.latency_ticks as f64)),
            degradation,
            swap_ins: a.swap_ins,
            refaults: a.refaults,
            host_swap_ins: a.host_swap_ins,
            mean_balloon_mb: round3(a.balloon / n),
            final_balloon_mb: round3(a.final_balloon),
            mean_host_swapped_mb: round3(a.host_swapped / n),
            converged_s: a.in_band_since.map(round3),
            blocked_ticks: a.blocked,
        }
    });
    TenantSummary {
        name: meta.name.clone(),
        estimator: meta.estimator.clone(),
        estimator_settings: meta.estimator_settings.clone(),
        min_mb: round3(meta.min_mb),
        max_mb: round3(meta.max_mb),
        shares: meta.shares,
        balloon_driver: meta.balloon_driver,
        ran: figures.is_some(),
        figures,
    }
}

/// Writes the summary as pretty JSON, newline-terminated, to `path`.
pub fn write_summary(path: &Path, summary: &Summary) -> std::io::Result<()> {
    let mut json = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    json.push('\n');
    std::fs::write(path, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::test_record::record;

    fn figures(s: &Summary, name: &str) -> TenantFigures {
        s.tenants
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.figures.clone())
            .unwrap_or_else(|| panic!("{name} has no figures"))
    }

    #[test]
    fn means_are_over_the_ticks_the_tenant_ran() {
        let s = summarize(&record());
        let a = figures(&s, "a");
        assert_eq!(a.ran_s, 4.0);
        assert_eq!(a.mean_allocated_mb, 112.5);
        assert_eq!(a.final_allocated_mb, 100.0);
        assert_eq!(a.mean_target_mb, 122.5);
        assert_eq!(a.mean_active_estimate_mb, 105.0);
        assert_eq!(a.mean_working_set_mb, 100.0);
        assert_eq!(a.mean_throughput, 75.0);
        assert_eq!((a.swap_ins, a.refaults, a.host_swap_ins), (4, 8, 0));
        let b = figures(&s, "b, <web>");
        assert_eq!(b.ran_s, 2.0);
        assert_eq!(b.mean_allocated_mb, 50.0);
    }

    #[test]
    fn mean_latency_counts_only_ticks_where_operations_completed() {
        let s = summarize(&record());
        assert_eq!(figures(&s, "a").mean_latency_ms, Some(2.0));
    }

    #[test]
    fn converged_s_is_the_start_of_the_last_in_band_stretch() {
        let s = summarize(&record());
        // a: in band at 0, out at 1 (150 > 1.3 x 100), in band from 2 to the end.
        assert_eq!(figures(&s, "a").converged_s, Some(2.0));
        // b: 50 MB against a 100 MB working set: never within 0.9 x.
        assert_eq!(figures(&s, "b, <web>").converged_s, None);
    }

    #[test]
    fn degradation_compares_against_the_baseline_throughput() {
        let s = summarize(&record());
        assert_eq!(figures(&s, "a").degradation, Some(0.25));
        assert_eq!(figures(&s, "b, <web>").degradation, Some(0.5));
        let mut no_base = record();
        no_base.run.baseline = None;
        assert_eq!(figures(&summarize(&no_base), "a").degradation, None);
    }

    #[test]
    fn time_in_states_and_transitions_come_from_the_ticks() {
        let h = summarize(&record()).host;
        assert_eq!(
            h.time_in_state_s,
            TimeInState {
                high: 2.0,
                soft: 2.0,
                hard: 0.0,
                low: 0.0
            }
        );
        assert_eq!(h.state_transitions, 2);
        assert_eq!(h.final_state, Some(ReclamationState::High));
        assert_eq!((h.mean_free_mb, h.min_free_mb), (25.0, 10.0));
        assert_eq!(h.refusals.len(), 1);
    }

    #[test]
    fn tenants_that_never_ran_keep_their_configuration() {
        let s = summarize(&record());
        let c = s.tenants.iter().find(|t| t.name == "c").unwrap();
        assert!(!c.ran);
        assert!(c.figures.is_none());
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["ran"], false);
        assert_eq!(json["max_mb"], 256.0);
        assert!(json.get("mean_allocated_mb").is_none());
    }

    #[test]
    fn json_keeps_field_order_and_flattens_figures() {
        let json = serde_json::to_string_pretty(&summarize(&record())).unwrap();
        let scenario = json.find("\"scenario\"").unwrap();
        let tenants = json.find("\"tenants\"").unwrap();
        let host = json.find("\"host\"").unwrap();
        assert!(scenario < tenants && tenants < host);
        assert!(json.contains("\"mean_allocated_mb\": 112.5"));
    }

    #[test]
    fn the_summary_records_the_version_and_every_policy_setting() {
        let json = serde_json::to_value(summarize(&record())).unwrap();
        assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(json["seed"], 3);
        assert_eq!(json["policy"]["tax_rate"], 0.5);
        for key in [
            "reclamation",
            "budget_bytes",
            "host_swap_per_tick_bytes",
            "balloon_stall_ticks",
            "reclaim_always",
            "limit_rails",
        ] {
            assert!(json["policy"].get(key).is_some(), "policy.{key}: {json}");
        }
        assert_eq!(json["tenants"][0]["estimator_settings"]["name"], "sampling");
        assert_eq!(json["tenants"][0]["estimator_settings"]["period_s"], 30.0);
    }

    #[test]
    fn empty_record_summarizes_without_nan() {
        let s = summarize(&RunRecord::default());
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            !json.contains("null,\"min_free") && !json.contains("NaN"),
            "{json}"
        );
        assert_eq!(s.host.min_free_mb, 0.0);
    }
}
