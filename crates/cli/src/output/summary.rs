//! The run's summary: per-tenant and host figures computed from a [`RunRecord`], written as summary.json.
//!
//! Every float is rounded to three decimals and fields keep their declared order, so the
//! same record always gives the same bytes.

use super::round3;
use crate::record::{RunRecord, TenantMeta};
use crate::settings::{EstimatorSettings, PolicySettings};
use memtide_model::{Bytes, ReclamationState};
use serde::Serialize;
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
    pub tenants: Vec<TenantSummary>,
    pub host: HostSummary,
    /// Scenario events as they took effect.
    pub events: Vec<EventSummary>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Convergence {
    pub low: f64,
    pub high: f64,
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

/// Computes the summary of a run.
pub fn summarize(record: &RunRecord) -> Summary {
    let (low, high) = (record.convergence_low, record.convergence_high);
    let index: std::collections::BTreeMap<_, usize> = record
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id, i))
        .collect();
    let mut acc: Vec<Acc> = record.tenants.iter().map(|_| Acc::default()).collect();
    let mut in_state = TimeInState::default();
    let mut transitions = 0;
    let (mut free_sum, mut min_free, mut budget_sum) = (0.0, f64::INFINITY, 0.0);
    let mut previous: Option<ReclamationState> = None;

    for tick in &record.ticks {
        in_state.add(tick.state, record.tick_s);
        if previous.is_some_and(|p| p != tick.state) {
            transitions += 1;
        }
        previous = Some(tick.state);
        free_sum += tick.free.as_mib_f64();
        min_free = f64::min(min_free, tick.free.as_mib_f64());
        budget_sum += tick.budget.as_mib_f64();
        for row in &tick.rows {
            let Some(a) = index.get(&row.tenant).map(|&i| &mut acc[i]) else {
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
            a.host_swap_ins += row.host_swap_ins.unwrap_or(0);
            a.balloon += row.balloon.as_mib_f64();
            a.host_swapped += row.host_swapped.as_mib_f64();
            a.blocked += u64::from(row.blocked);
            a.final_allocated = row.allocated.as_mib_f64();
            a.final_balloon = row.balloon.as_mib_f64();
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

    let ticks = record.ticks.len() as f64;
    let mean = |sum: f64| {
        if ticks > 0.0 {
            round3(sum / ticks)
        } else {
            0.0
        }
    };
    let tenants = record
        .tenants
        .iter()
        .zip(acc)
        .map(|(meta, a)| tenant(record, meta, a))
        .collect();
    Summary {
        version: env!("CARGO_PKG_VERSION").to_string(),
        scenario: record.scenario.clone(),
        variant: record.variant.clone(),
        seed: record.seed,
        duration_s: round3(record.duration_s),
        tick_s: round3(record.tick_s),
        machine_mb: round3(record.machine_mb),
        policy: record.policy.clone(),
        convergence: Convergence {
            low: round3(low),
            high: round3(high),
        },
        tenants,
        host: HostSummary {
            time_in_state_s: TimeInState {
                high: round3(in_state.high),
                soft: round3(in_state.soft),
                hard: round3(in_state.hard),
                low: round3(in_state.low),
            },
            state_transitions: transitions,
            final_state: previous,
            mean_free_mb: mean(free_sum),
            min_free_mb: if min_free.is_finite() {
                round3(min_free)
            } else {
                0.0
            },
            mean_budget_mb: mean(budget_sum),
            refusals: record
                .refusals
                .iter()
                .map(|r| RefusalSummary {
                    time_s: round3(r.time_s),
                    tenant: r.tenant.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
        },
        events: record
            .events
            .iter()
            .map(|e| EventSummary {
                time_s: round3(e.time_s),
                description: e.description.clone(),
            })
            .collect(),
    }
}

fn tenant(record: &RunRecord, meta: &TenantMeta, a: Acc) -> TenantSummary {
    let figures = (a.rows > 0).then(|| {
        let n = a.rows as f64;
        let mean_throughput = a.throughput / n;
        let degradation = record
            .baseline
            .as_ref()
            .and_then(|b| b.iter().find(|f| f.tenant == meta.id))
            .filter(|f| f.throughput > 0.0)
            .map(|f| round3(1.0 - mean_throughput / f.throughput));
        TenantFigures {
            ran_s: round3(n * record.tick_s),
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

/// Writes `summary.json` (pretty JSON, newline-terminated) into `dir`.
pub fn write_summary(dir: &Path, summary: &Summary) -> std::io::Result<()> {
    let mut json = serde_json::to_string_pretty(summary).map_err(std::io::Error::other)?;
    json.push('\n');
    std::fs::write(dir.join("summary.json"), json)
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
        no_base.baseline = None;
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
