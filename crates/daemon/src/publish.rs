//! Turns each tick's observation, decision and host events into the published `Snapshot` (for the API, `/metrics` and `memtide status`) and into log lines.
//!
//! It reads model types only (the observation with each tenant's levers, the decision, the
//! world's events and the controller's view of each tenant), never the Linux host's own
//! state: what a world reports is all it publishes. Lifetime fault totals are the sums of the
//! observations' per-tick counts since the tenant was adopted.
//!
//! Per tick it formats only what changed: a tenant's reason line is formatted again only when
//! its figures changed, and the published decisions take the records added since the last tick
//! instead of a copy of all of them.

use crate::config::DaemonConfig;
use crate::log::{now_ms, Logger};
use memtide_api::{Counters, DecisionRecord, HostSnapshot, Snapshot, TenantSnapshot};
use memtide_controller::Controller;
use memtide_model::{Decision, HostObservation, LimitRail, Pages, Reason, TenantId, WorldEvent};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// Builds and publishes snapshots.
pub struct Publisher {
    shared: Arc<RwLock<Snapshot>>,
    started: Instant,
    dry_run: bool,
    kept: usize,
    decisions: VecDeque<DecisionRecord>,
    counters: Counters,
    host: HostSnapshot,
    /// The rail that held each tenant's limit last tick, so a hold is logged once.
    held: BTreeMap<TenantId, &'static str>,
    ticks: u64,
    last_now: Option<std::time::Duration>,
    /// Why each tenant that waits for its cgroup waits, as last recorded.
    waiting: BTreeMap<String, String>,
    /// The latest admission refusal, for a start where every tenant was refused.
    last_refusal: Option<String>,
    /// Each tenant's last reason and its line, formatted again only when the reason changes.
    reasons: BTreeMap<TenantId, (Reason, String)>,
    /// Decision records pushed since the last published snapshot (at most `kept` count).
    unpublished: usize,
    /// Each managed tenant's refaults (with swap-ins) and major faults since it was adopted.
    totals: BTreeMap<TenantId, (Option<u64>, Option<u64>)>,
}

/// A tenant the daemon manages, as the publisher names it.
#[derive(Clone, Debug)]
pub struct Managed {
    pub id: TenantId,
    pub name: String,
    pub cgroup: String,
    /// `adopted` or `launched`.
    pub origin: &'static str,
}

impl Publisher {
    pub fn new(config: &DaemonConfig, hierarchy: &str, parent: &str, budget: Pages) -> Publisher {
        let host = HostSnapshot {
            hierarchy: hierarchy.to_string(),
            parent: parent.to_string(),
            budget_bytes: budget.to_bytes().0,
            tax_rate: config.policy.tax_rate,
            state: "high".to_string(),
            ..HostSnapshot::default()
        };
        let snapshot = Snapshot {
            version: env!("CARGO_PKG_VERSION").to_string(),
            dry_run: config.daemon.dry_run,
            host: host.clone(),
            ..Snapshot::default()
        };
        Publisher {
            shared: Arc::new(RwLock::new(snapshot)),
            started: Instant::now(),
            dry_run: config.daemon.dry_run,
            kept: config.daemon.decisions_kept,
            decisions: VecDeque::new(),
            counters: Counters::default(),
            host,
            held: BTreeMap::new(),
            ticks: 0,
            last_now: None,
            waiting: BTreeMap::new(),
            last_refusal: None,
            totals: BTreeMap::new(),
            reasons: BTreeMap::new(),
            unpublished: 0,
        }
    }

    /// Records a `waiting` decision for each tenant (name, cgroup, why) that starts waiting for
    /// its cgroup, or waits for a new reason.
    pub fn waiting(&mut self, waiting: &[(String, String, String)]) {
        self.waiting
            .retain(|name, _| waiting.iter().any(|(n, _, _)| n == name));
        for (name, cgroup, why) in waiting {
            if self.waiting.get(name) != Some(why) {
                self.waiting.insert(name.clone(), why.clone());
                self.record(name, "waiting", &format!("{cgroup}: {why}"));
            }
        }
    }

    /// The reason of the latest admission refusal.
    pub fn last_refusal(&self) -> Option<String> {
        self.last_refusal.clone()
    }

    /// The snapshot the API serves.
    pub fn shared(&self) -> Arc<RwLock<Snapshot>> {
        Arc::clone(&self.shared)
    }

    /// Records a decision that is not a limit (admitted, refused, dropped) and counts it.
    pub fn record(&mut self, tenant: &str, outcome: &str, reason: &str) {
        match outcome {
            "admitted" => self.counters.admitted += 1,
            "refused" => {
                self.counters.refused += 1;
                self.last_refusal = Some(reason.to_string());
            }
            "dropped" => self.counters.dropped += 1,
            _ => {}
        }
        self.push(DecisionRecord {
            tick: self.ticks,
            at_unix_ms: now_ms(),
            tenant: tenant.to_string(),
            outcome: outcome.to_string(),
            reason: reason.to_string(),
            ..DecisionRecord::default()
        });
    }

    fn push(&mut self, record: DecisionRecord) {
        self.unpublished += 1;
        self.decisions.push_back(record);
        while self.decisions.len() > self.kept {
            self.decisions.pop_front();
        }
    }

    /// Publishes one tick. `managed` lists the managed tenants in config order.
    pub fn tick(
        &mut self,
        obs: &HostObservation,
        decision: &Decision,
        events: &[WorldEvent],
        controller: &Controller,
        managed: Vec<Managed>,
        log: &Logger,
    ) {
        self.ticks += 1;
        self.counters.ticks += 1;
        *self
            .counters
            .state_ticks
            .entry(decision.memory.state.name().to_string())
            .or_insert(0) += 1;
        let elapsed_s = self
            .last_now
            .map(|l| obs.now.saturating_sub(l).as_secs_f64())
            .filter(|&s| s > 0.0);
        self.last_now = Some(obs.now);
        let name_of = |id: TenantId| {
            managed
                .iter()
                .find(|m| m.id == id)
                .map(|m| m.name.clone())
                .unwrap_or_else(|| id.to_string())
        };

        for event in events {
            self.event(event, decision, &name_of, log);
        }
        let mut held_now: BTreeMap<TenantId, String> = BTreeMap::new();
        for action in &decision.actions {
            let Some(note) = action.reason.mechanism.limit else {
                continue;
            };
            let held = matches!(
                note.rail,
                LimitRail::BackoffFaults { .. }
                    | LimitRail::BackoffPressure { .. }
                    | LimitRail::Budget { .. }
            ) || (note.rail == LimitRail::Floor
                && note.to == note.from
                && action.target < note.to);
            if held {
                held_now.insert(action.id, format!("{}: {note}", note.rail.name()));
                self.counters.held += 1;
                if self.held.insert(action.id, note.rail.name()) != Some(note.rail.name()) {
                    let name = name_of(action.id);
                    log.info(
                        "hold",
                        &[
                            ("tenant", json!(name)),
                            ("reason", json!(action.reason.to_string())),
                        ],
                    );
                    self.push(DecisionRecord {
                        tick: self.ticks,
                        at_unix_ms: now_ms(),
                        tenant: name,
                        target_bytes: action.target.to_bytes().0,
                        limit_from_bytes: (!note.from_max).then(|| note.from.to_bytes().0),
                        limit_to_bytes: Some(note.to.to_bytes().0),
                        outcome: "hold".to_string(),
                        reason: action.reason.to_string(),
                    });
                }
            } else {
                self.held.remove(&action.id);
            }
        }

        self.host.machine_bytes = obs.machine.to_bytes().0;
        self.host.free_bytes = obs.free.to_bytes().0;
        self.host.budget_bytes = decision.memory.budget.to_bytes().0;
        self.host.swap_total_bytes = obs.host_swap_total.to_bytes().0;
        self.host.swap_free_bytes = obs
            .host_swap_total
            .saturating_sub(obs.host_swap_used)
            .to_bytes()
            .0;
        self.host.state = decision.memory.state.name().to_string();
        self.host.tax_rate = controller.config().tax_rate.value();
        self.host.pressure_some_avg10 = obs.pressure;

        self.totals
            .retain(|id, _| managed.iter().any(|m| m.id == *id));
        let mut tenants = Vec::with_capacity(managed.len());
        for Managed {
            id,
            name,
            cgroup,
            origin,
        } in &managed
        {
            let Some(view) = controller.tenant(*id) else {
                continue;
            };
            let o = obs.tenants.iter().find(|o| o.id == *id);
            let limit = o.and_then(|o| o.levers.limit);
            let a = decision.action(*id);
            let refaults = o.and_then(|o| match (o.refaults, o.swap_ins) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            });
            let totals = self.totals.entry(*id).or_default();
            totals.0 = add(totals.0, refaults);
            totals.1 = add(totals.1, limit.and_then(|l| l.major_faults));
            let (refaults_total, major_faults_total) = *totals;
            let bytes = |p: Option<Pages>| p.map(|p| p.to_bytes().0);
            tenants.push(TenantSnapshot {
                name: name.clone(),
                cgroup: cgroup.clone(),
                origin: origin.to_string(),
                min_bytes: view.spec.min.to_bytes().0,
                max_bytes: view.spec.max.to_bytes().0,
                shares: view.spec.shares,
                estimator: view.spec.estimator.name().to_string(),
                allocated_bytes: o.map_or(0, |o| o.allocated.to_bytes().0),
                target_bytes: a.map_or(0, |a| a.target.to_bytes().0),
                active_estimate_bytes: view.active_estimate.to_bytes().0,
                limit_bytes: limit.filter(|l| !l.unlimited).map(|l| l.limit.to_bytes().0),
                floor_bytes: a
                    .and_then(|a| a.reason.mechanism.limit)
                    .map_or(0, |n| n.floor.to_bytes().0),
                anon_bytes: bytes(o.and_then(|o| o.anon)),
                file_bytes: bytes(o.and_then(|o| o.file)),
                swap_bytes: bytes(o.and_then(|o| o.swapped)),
                refaults_total,
                refaults_per_s: refaults.zip(elapsed_s).map(|(n, s)| n as f64 / s),
                major_faults_total,
                pressure_some_avg10: limit.and_then(|l| l.pressure),
                mechanisms: a.map_or_else(Vec::new, |a| {
                    a.mechanisms.iter().map(|m| m.name().to_string()).collect()
                }),
                reason: a.map_or_else(String::new, |a| self.reason_line(a.id, &a.reason)),
                held: held_now.remove(id),
            });
            if self.dry_run {
                if let Some(a) = a {
                    log.info(
                        "decision",
                        &[
                            ("tenant", json!(name)),
                            ("target_bytes", json!(a.target.to_bytes().0)),
                            (
                                "limit_bytes",
                                json!(a.moves().limit.map(|l| l.to_bytes().0)),
                            ),
                            ("reason", json!(self.reason_line(a.id, &a.reason))),
                        ],
                    );
                }
            }
        }

        self.reasons
            .retain(|id, _| managed.iter().any(|m| m.id == *id));
        let lock = Arc::clone(&self.shared);
        let Ok(mut shared) = lock.write() else {
            return;
        };
        let decisions = self.published_decisions(std::mem::take(&mut shared.decisions));
        *shared = Snapshot {
            api_version: memtide_api::API_VERSION,
            version: env!("CARGO_PKG_VERSION").to_string(),
            dry_run: self.dry_run,
            ticks: self.ticks,
            uptime_s: self.started.elapsed().as_secs_f64(),
            host: self.host.clone(),
            tenants,
            decisions,
            counters: self.counters.clone(),
        };
    }

    /// `id`'s reason as one line: the line formatted last time when the reason is the same.
    fn reason_line(&mut self, id: TenantId, reason: &Reason) -> String {
        match self.reasons.get(&id) {
            Some((last, line)) if last == reason => line.clone(),
            _ => {
                let line = reason.to_string();
                self.reasons.insert(id, (*reason, line.clone()));
                line
            }
        }
    }

    /// The decisions to publish, made from those published last time (`published`): the
    /// records pushed since are appended and the oldest dropped, so a tick copies only its new
    /// records. Rebuilt from all records when `published` is not what this publisher left.
    fn published_decisions(&mut self, mut published: Vec<DecisionRecord>) -> Vec<DecisionRecord> {
        let fresh = std::mem::take(&mut self.unpublished).min(self.decisions.len());
        let kept_before = self.decisions.len() - fresh;
        let matches = published.len() >= kept_before
            && published.len() <= self.kept
            && published.last() == self.decisions.range(..kept_before).next_back();
        if !matches {
            return self.decisions.iter().cloned().collect();
        }
        published.extend(self.decisions.range(kept_before..).cloned());
        let excess = published.len() - self.decisions.len();
        published.drain(..excess);
        published
    }

    /// Logs and records limits raised between ticks for tenants stalled at their limit.
    pub fn rescues(&mut self, events: Vec<WorldEvent>, managed: &[Managed], log: &Logger) {
        for event in events {
            if let WorldEvent::Rescued { id, from, to } = event {
                let name = managed
                    .iter()
                    .find(|m| m.id == id)
                    .map_or_else(|| id.to_string(), |m| m.name.clone());
                self.rescued(from, to, &name, log);
            }
        }
    }

    fn rescued(&mut self, from: Pages, to: Pages, name: &str, log: &Logger) {
        self.counters.limit_raised += 1;
        let reason = "stalled at its limit (out of memory, killer held off): raised at once";
        log.warn(
            "rescued",
            &[
                ("tenant", json!(name)),
                ("from_bytes", json!(from.to_bytes().0)),
                ("to_bytes", json!(to.to_bytes().0)),
                ("reason", json!(reason)),
            ],
        );
        self.push(DecisionRecord {
            tick: self.ticks,
            at_unix_ms: now_ms(),
            tenant: name.to_string(),
            limit_from_bytes: Some(from.to_bytes().0),
            limit_to_bytes: Some(to.to_bytes().0),
            outcome: "raise".to_string(),
            reason: reason.to_string(),
            ..DecisionRecord::default()
        });
    }

    fn event(
        &mut self,
        event: &WorldEvent,
        decision: &Decision,
        name_of: &dyn Fn(TenantId) -> String,
        log: &Logger,
    ) {
        let target_of = |id: TenantId| decision.action(id).map_or(0, |a| a.target.to_bytes().0);
        match *event {
            WorldEvent::Limit {
                id,
                from,
                to,
                written,
            } => {
                let outcome = if !written {
                    self.counters.dry_run += 1;
                    "dry_run"
                } else if from.is_some_and(|from| to > from) {
                    self.counters.limit_raised += 1;
                    "raise"
                } else {
                    self.counters.limit_lowered += 1;
                    "lower"
                };
                let name = name_of(id);
                let reason = decision
                    .action(id)
                    .map(|a| self.reason_line(id, &a.reason))
                    .unwrap_or_default();
                log.info(
                    "limit",
                    &[
                        ("tenant", json!(name)),
                        ("outcome", json!(outcome)),
                        ("from_bytes", json!(from.map(|f| f.to_bytes().0))),
                        ("to_bytes", json!(to.to_bytes().0)),
                        ("reason", json!(reason)),
                    ],
                );
                self.push(DecisionRecord {
                    tick: self.ticks,
                    at_unix_ms: now_ms(),
                    tenant: name,
                    target_bytes: target_of(id),
                    limit_from_bytes: from.map(|f| f.to_bytes().0),
                    limit_to_bytes: Some(to.to_bytes().0),
                    outcome: outcome.to_string(),
                    reason,
                });
            }
            WorldEvent::WriteFailed { id, to, ref error } => {
                self.counters.write_failures += 1;
                let name = name_of(id);
                log.warn(
                    "write_failed",
                    &[
                        ("tenant", json!(name)),
                        ("to_bytes", json!(to.to_bytes().0)),
                        ("error", json!(error)),
                    ],
                );
                self.push(DecisionRecord {
                    tick: self.ticks,
                    at_unix_ms: now_ms(),
                    tenant: name,
                    target_bytes: target_of(id),
                    limit_to_bytes: Some(to.to_bytes().0),
                    outcome: "write_failed".to_string(),
                    reason: error.clone(),
                    ..DecisionRecord::default()
                });
            }
            WorldEvent::BelowFloor { id, to, floor } => {
                self.counters.held += 1;
                log.error(
                    "below_floor",
                    &[
                        ("tenant", json!(name_of(id))),
                        ("to_bytes", json!(to.to_bytes().0)),
                        ("floor_bytes", json!(floor.to_bytes().0)),
                    ],
                );
            }
            WorldEvent::ReadFailed { id, ref error } => {
                log.warn(
                    "read_failed",
                    &[("tenant", json!(name_of(id))), ("error", json!(error))],
                );
            }
            WorldEvent::SamplerFailed { id, ref error } => {
                log.warn(
                    "sampler_failed",
                    &[("tenant", json!(name_of(id))), ("error", json!(error))],
                );
            }
            WorldEvent::Rescued { id, from, to } => self.rescued(from, to, &name_of(id), log),
            // The loop logs these itself.
            WorldEvent::Gone { .. } | WorldEvent::RestoreFailed { .. } => {}
        }
    }
}

/// A lifetime total plus this tick's count (a missing count keeps the total).
fn add(total: Option<u64>, delta: Option<u64>) -> Option<u64> {
    match (total, delta) {
        (t, Some(d)) => Some(t.unwrap_or(0).saturating_add(d)),
        (t, None) => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publisher(kept: usize) -> Publisher {
        let mut config = DaemonConfig::default();
        config.daemon.decisions_kept = kept;
        Publisher::new(&config, "v1", "/memtide", Pages::from_mib(64))
    }

    /// Publishes the decisions as `tick` does, and checks them against all records.
    fn publish(p: &mut Publisher) -> Vec<DecisionRecord> {
        let lock = p.shared();
        let mut shared = lock.write().unwrap();
        shared.decisions = p.published_decisions(std::mem::take(&mut shared.decisions));
        let all: Vec<DecisionRecord> = p.decisions.iter().cloned().collect();
        assert_eq!(shared.decisions, all);
        shared.decisions.clone()
    }

    #[test]
    fn published_decisions_take_the_new_records_and_drop_the_oldest() {
        let mut p = publisher(3);
        assert!(publish(&mut p).is_empty());
        for (records, want) in [
            (vec!["a"], vec!["a"]),
            (vec![], vec!["a"]),
            (vec!["b", "c"], vec!["a", "b", "c"]),
            (vec!["d"], vec!["b", "c", "d"]),
            (vec!["e", "f", "g", "h"], vec!["f", "g", "h"]),
            (vec!["i", "j", "k"], vec!["i", "j", "k"]),
        ] {
            for r in records {
                p.record(r, "admitted", "");
            }
            let names: Vec<String> = publish(&mut p).into_iter().map(|d| d.tenant).collect();
            assert_eq!(names, want);
        }
        // Someone else replaced the published list: rebuilt from all records.
        p.shared().write().unwrap().decisions.clear();
        p.record("l", "admitted", "");
        let names: Vec<String> = publish(&mut p).into_iter().map(|d| d.tenant).collect();
        assert_eq!(names, vec!["j", "k", "l"]);
    }

    #[test]
    fn a_reason_line_is_formatted_again_only_when_the_reason_changes() {
        let mut p = publisher(10);
        let id = TenantId(3);
        let mut reason =
            memtide_model::TenantAction::none(id, memtide_model::ReclamationState::High).reason;
        let first = p.reason_line(id, &reason);
        assert_eq!(first, reason.to_string());
        assert_eq!(p.reason_line(id, &reason), first);
        reason.mechanism.state = memtide_model::ReclamationState::Low;
        let changed = p.reason_line(id, &reason);
        assert_eq!(changed, reason.to_string());
        assert_ne!(changed, first);
    }
}
