//! Turns each tick's record and host events into the published `Snapshot` (for the API, `/metrics` and `memtide status`) and into log lines.
//!
//! It reads the tick's `TickRecord` (the record every world writes, the one the simulator's
//! timeline comes from), the world's events and the controller's view of each tenant, never
//! the Linux host's own state: what a world reports is all it publishes. Lifetime fault totals
//! are the sums of the records' per-tick counts since the tenant was adopted, and so are the
//! disk operations and bytes of a tenant whose I/O `[io]` manages.
//!
//! Per tick it formats only what changed: a tenant's reason line is formatted again only when
//! its figures changed, and the published decisions take the records added since the last tick
//! instead of a copy of all of them.

use crate::api::{Published, SharedSnapshot};
use crate::config::DaemonConfig;
use crate::log::{now_ms, Logger};
use memtide_api::{
    AdviceSnapshot, AppSnapshot, Counters, DecisionRecord, DiskSnapshot, HostSnapshot,
    ResizeSnapshot, SharingSnapshot, Snapshot, TenantSnapshot, VmSnapshot,
};
use memtide_controller::Controller;
use memtide_model::{AppStep, LimitRail, Pages, Reason, Stall, TenantId, WorldEvent};
use memtide_runner::{TenantRow, TickRecord};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// Builds and publishes snapshots.
pub struct Publisher {
    shared: SharedSnapshot,
    started: Instant,
    dry_run: bool,
    kept: usize,
    decisions: VecDeque<DecisionRecord>,
    counters: Counters,
    host: HostSnapshot,
    /// The rail that held each tenant's limit last tick, so a hold is logged once.
    held: BTreeMap<TenantId, &'static str>,
    ticks: u64,
    /// The previous record's time, for per-second rates.
    last_time_s: Option<f64>,
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
    /// Each tenant's application pool, from its agent's events (the pool's figures are the
    /// tick's note's when the planner wrote one).
    apps: BTreeMap<TenantId, AppSnapshot>,
    /// Each I/O tenant's disk operations and bytes since it was adopted.
    disk_totals: BTreeMap<TenantId, (u64, u64)>,
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
            tax_rate: config.policy.tax_rate.value(),
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
            shared: Arc::new(Published::new(snapshot)),
            started: Instant::now(),
            dry_run: config.daemon.dry_run,
            kept: config.daemon.decisions_kept,
            decisions: VecDeque::new(),
            counters: Counters::default(),
            host,
            held: BTreeMap::new(),
            ticks: 0,
            last_time_s: None,
            waiting: BTreeMap::new(),
            last_refusal: None,
            totals: BTreeMap::new(),
            reasons: BTreeMap::new(),
            unpublished: 0,
            apps: BTreeMap::new(),
            disk_totals: BTreeMap::new(),
        }
    }

    /// An agent registered for `tenant`: the application holds it (again).
    pub fn app_registered(&mut self, tenant: TenantId, app: &str, kind: &str, pid: u32) {
        let a = self.apps.entry(tenant).or_default();
        a.app = app.to_string();
        a.kind = kind.to_string();
        a.pid = Some(pid);
        a.held_by = "app".to_string();
        a.why = None;
    }

    /// `tenant`'s agent answered a target.
    pub fn app_answered(&mut self, tenant: TenantId, answer: ResizeSnapshot) {
        if let Some(a) = self.apps.get_mut(&tenant) {
            a.pool_bytes = answer.pool_bytes;
            a.last_resize = Some(answer);
        }
    }

    /// `tenant`'s agent is gone (`why`): the OS mechanism holds the tenant; `takeover` is
    /// the reason's code when memtide took the tenant over from it.
    pub fn app_closed(&mut self, tenant: TenantId, why: String, takeover: Option<&str>) {
        if let Some(a) = self.apps.get_mut(&tenant) {
            a.pid = None;
            a.held_by = "os".to_string();
            a.why = Some(why);
            if let Some(code) = takeover {
                *a.takeovers.entry(code.to_string()).or_default() += 1;
            }
        }
    }

    /// Counts a failed attempt to restore a tenant let go.
    pub fn restore_failed(&mut self) {
        self.counters.restore_failures += 1;
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
    pub fn shared(&self) -> SharedSnapshot {
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
        record: &TickRecord,
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
            .entry(record.state.name().to_string())
            .or_insert(0) += 1;
        let elapsed_s = self
            .last_time_s
            .map(|l| record.time_s - l)
            .filter(|&s| s > 0.0);
        self.last_time_s = Some(record.time_s);
        let name_of = |id: TenantId| {
            managed
                .iter()
                .find(|m| m.id == id)
                .map(|m| m.name.clone())
                .unwrap_or_else(|| id.to_string())
        };

        for event in events {
            self.event(event, record, &name_of, log);
        }
        let mut held_now = self.holds(record, &name_of, log);
        self.host_figures(record, controller, elapsed_s);

        self.totals
            .retain(|id, _| managed.iter().any(|m| m.id == *id));
        self.apps
            .retain(|id, _| managed.iter().any(|m| m.id == *id));
        self.disk_totals
            .retain(|id, _| managed.iter().any(|m| m.id == *id));
        let mut tenants = Vec::with_capacity(managed.len());
        for m in &managed {
            let Some(view) = controller.tenant(m.id) else {
                continue;
            };
            let row = record.row(m.id);
            let held = held_now.remove(&m.id);
            tenants.push(self.tenant_snapshot(m, view, row, held, elapsed_s));
            if self.dry_run {
                if let Some(r) = row {
                    log.info(
                        "decision",
                        &[
                            ("tenant", json!(m.name)),
                            ("target_bytes", json!(r.target.0)),
                            (
                                "limit_bytes",
                                json!(r.reason.mechanism.moves().limit.map(|l| l.to_bytes().0)),
                            ),
                            ("reason", json!(self.reason_line(r.tenant, &r.reason))),
                        ],
                    );
                }
            }
        }

        self.reasons
            .retain(|id, _| managed.iter().any(|m| m.id == *id));
        let shared = Arc::clone(&self.shared);
        shared.publish_with(|old| Snapshot {
            api_version: memtide_api::API_VERSION,
            version: env!("CARGO_PKG_VERSION").to_string(),
            dry_run: self.dry_run,
            ticks: self.ticks,
            uptime_s: self.started.elapsed().as_secs_f64(),
            host: self.host.clone(),
            tenants,
            decisions: self.published_decisions(std::mem::take(&mut old.decisions)),
            counters: self.counters.clone(),
        });
    }

    /// The tenants whose limit a rail holds away from their target this tick, with why; logs
    /// and records a hold when its rail changes.
    fn holds(
        &mut self,
        record: &TickRecord,
        name_of: &dyn Fn(TenantId) -> String,
        log: &Logger,
    ) -> BTreeMap<TenantId, String> {
        let mut held_now = BTreeMap::new();
        for row in &record.rows {
            let Some(note) = row.reason.mechanism.limit else {
                continue;
            };
            let held = matches!(
                note.rail,
                LimitRail::BackoffFaults { .. }
                    | LimitRail::BackoffPressure { .. }
                    | LimitRail::BackoffThrottled { .. }
                    | LimitRail::BackoffRefused
                    | LimitRail::Budget { .. }
            ) || (note.rail == LimitRail::Floor
                && note.to == note.from
                && row.target < note.to.to_bytes());
            if held {
                held_now.insert(row.tenant, format!("{}: {note}", note.rail.name()));
                self.counters.held += 1;
                if self.held.insert(row.tenant, note.rail.name()) != Some(note.rail.name()) {
                    let name = name_of(row.tenant);
                    log.info(
                        "hold",
                        &[
                            ("tenant", json!(name)),
                            ("reason", json!(row.reason.to_string())),
                        ],
                    );
                    self.push(DecisionRecord {
                        tick: self.ticks,
                        at_unix_ms: now_ms(),
                        tenant: name,
                        target_bytes: row.target.0,
                        limit_from_bytes: (!note.from_max).then(|| note.from.to_bytes().0),
                        limit_to_bytes: Some(note.to.to_bytes().0),
                        outcome: "hold".to_string(),
                        reason: row.reason.to_string(),
                    });
                }
            } else {
                self.held.remove(&row.tenant);
            }
        }

        held_now
    }

    /// The host's figures from the tick's record.
    fn host_figures(
        &mut self,
        record: &TickRecord,
        controller: &Controller,
        elapsed_s: Option<f64>,
    ) {
        self.host.machine_bytes = record.machine.0;
        self.host.free_bytes = record.free.0;
        self.host.budget_bytes = record.budget.0;
        self.host.swap_total_bytes = record.host_swap_total.0;
        self.host.swap_free_bytes = record
            .host_swap_total
            .saturating_sub(record.host_swap_used)
            .0;
        self.host.state = record.state.name().to_string();
        self.host.tax_rate = controller.config().tax_rate.value();
        self.host.pressure_some_avg10 = record.pressure;
        self.host.sharing = record.sharing.map(|s| SharingSnapshot {
            shared_bytes: s.shared.to_bytes().0,
            reclaimed_bytes: s.reclaimed().to_bytes().0,
            zero_bytes: s.zero.map(|z| z.to_bytes().0),
            metadata_bytes: s.metadata.map(|m| m.0),
            scan_rate_pages_per_s: record.scan_rate.map_or(0, |r| r.pages_per_sec),
            scanned_pages_per_s: s.scanned.zip(elapsed_s).map(|(n, t)| n as f64 / t),
            scanner_cpu: s.cpu.zip(elapsed_s).map(|(c, t)| c.as_secs_f64() / t),
        });
    }

    /// One managed tenant as the API shows it, from the controller's view and its row of the
    /// tick (`None` before its first tick); adds the row's counts to its lifetime totals.
    fn tenant_snapshot(
        &mut self,
        m: &Managed,
        view: memtide_controller::TenantView<'_>,
        row: Option<&TenantRow>,
        held: Option<String>,
        elapsed_s: Option<f64>,
    ) -> TenantSnapshot {
        let id = &m.id;
        let refaults = row.and_then(|r| match (r.refaults, r.swap_ins) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        });
        let totals = self.totals.entry(*id).or_default();
        totals.0 = add(totals.0, refaults);
        totals.1 = add(totals.1, row.and_then(|r| r.limit?.major_faults));
        let (refaults_total, major_faults_total) = *totals;
        let disk = row.and_then(|r| {
            let io = r.disk?;
            let totals = self.disk_totals.entry(*id).or_default();
            totals.0 = totals.0.saturating_add(io.ops);
            totals.1 = totals.1.saturating_add(io.bytes.0);
            Some(disk_snapshot(io, r.reason.disk, *totals, elapsed_s))
        });
        TenantSnapshot {
            name: m.name.clone(),
            cgroup: m.cgroup.clone(),
            origin: m.origin.to_string(),
            min_bytes: view.spec.min.to_bytes().0,
            max_bytes: view.spec.max.to_bytes().0,
            shares: view.spec.shares,
            estimator: view.spec.estimator.name().to_string(),
            allocated_bytes: row.map_or(0, |r| r.allocated.0),
            target_bytes: row.map_or(0, |r| r.target.0),
            active_estimate_bytes: view.active_estimate.to_bytes().0,
            limit_bytes: row.and_then(TenantRow::limit_in_force).map(|l| l.0),
            floor_bytes: row
                .and_then(|r| r.reason.mechanism.limit)
                .map_or(0, |n| n.floor.to_bytes().0),
            anon_bytes: row.and_then(|r| r.anon).map(|b| b.0),
            file_bytes: row.and_then(|r| r.file).map(|b| b.0),
            swap_bytes: row.and_then(|r| r.swapped).map(|b| b.0),
            refaults_total,
            refaults_per_s: refaults.zip(elapsed_s).map(|(n, s)| n as f64 / s),
            major_faults_total,
            pressure_some_avg10: row.and_then(|r| r.limit?.pressure),
            figures: memtide_runner::columns::record_figures(row),
            mechanisms: row.map_or_else(Vec::new, |r| {
                r.mechanisms.iter().map(|m| m.name().to_string()).collect()
            }),
            reason: row.map_or_else(String::new, |r| self.reason_line(r.tenant, &r.reason)),
            held,
            app: self.apps.get_mut(id).map(|a| {
                if let Some(note) = row.and_then(|r| r.reason.mechanism.app_balloon) {
                    a.pool_bytes = note.pool.to_bytes().0;
                    a.wanted_bytes = Some(note.wanted.to_bytes().0);
                    // A session in its agent's back-off is connected but ignored: the OS
                    // holds the tenant until the policy trusts it again.
                    match note.step {
                        AppStep::Distrusted { why, left } => {
                            a.held_by = "os".to_string();
                            a.why = Some(format!(
                                "distrusted for {:.0} s more (was {why})",
                                left.as_secs_f64()
                            ));
                        }
                        AppStep::TakenOver(_) => {}
                        _ if a.pid.is_some() => {
                            a.held_by = "app".to_string();
                            a.why = None;
                        }
                        _ => {}
                    }
                }
                a.clone()
            }),
            shared_bytes: row.and_then(|r| r.sharing).map(|s| s.shared.to_bytes().0),
            sharing_profit_bytes: row.and_then(|r| r.sharing?.profit),
            cache: row.and_then(|r| r.reason.cache).map(cache_snapshot),
            disk,
            advice: row.map_or_else(Vec::new, advice),
            vm: row.and_then(|r| vm_snapshot(r, elapsed_s)),
        }
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

    /// Logs what happened between ticks: limits raised for tenants stalled at their limit
    /// (recorded as decisions too) and read-backs of swap that ended.
    pub fn between_ticks(&mut self, events: Vec<WorldEvent>, managed: &[Managed], log: &Logger) {
        let name_of = |id: TenantId| {
            managed
                .iter()
                .find(|m| m.id == id)
                .map_or_else(|| id.to_string(), |m| m.name.clone())
        };
        for event in events {
            match event {
                WorldEvent::Rescued {
                    id,
                    from,
                    to,
                    stall,
                } => self.rescued(from, to, stall, &name_of(id), log),
                WorldEvent::SwappedIn { id, .. } => swapped_in(&event, &name_of(id), log),
                _ => {}
            }
        }
    }

    fn rescued(&mut self, from: Pages, to: Pages, stall: Stall, name: &str, log: &Logger) {
        self.counters.limit_raised += 1;
        let reason = stall.reason();
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

    /// A limit moved from `from` to `to` this tick, `written` or not (a dry run): counted,
    /// logged and recorded.
    fn limit_event(
        &mut self,
        id: TenantId,
        (from, to, written): (Option<Pages>, Pages, bool),
        record: &TickRecord,
        name_of: &dyn Fn(TenantId) -> String,
        log: &Logger,
    ) {
        let target_of = |id: TenantId| record.row(id).map_or(0, |r| r.target.0);
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
        let reason = record
            .row(id)
            .map(|r| self.reason_line(id, &r.reason))
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

    fn event(
        &mut self,
        event: &WorldEvent,
        record: &TickRecord,
        name_of: &dyn Fn(TenantId) -> String,
        log: &Logger,
    ) {
        let target_of = |id: TenantId| record.row(id).map_or(0, |r| r.target.0);
        match *event {
            WorldEvent::Limit {
                id,
                from,
                to,
                written,
            } => self.limit_event(id, (from, to, written), record, name_of, log),
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
            WorldEvent::AdapterFailed { id, ref error } => {
                log.warn(
                    "adapter_failed",
                    &[("tenant", json!(name_of(id))), ("error", json!(error))],
                );
            }
            WorldEvent::StrayAdapterKilled { id, pid } => {
                log.warn(
                    "stray_adapter_killed",
                    &[("tenant", json!(name_of(id))), ("pid", json!(pid))],
                );
            }
            WorldEvent::Rescued {
                id,
                from,
                to,
                stall,
            } => self.rescued(from, to, stall, &name_of(id), log),
            WorldEvent::SwappedIn { id, .. } => swapped_in(event, &name_of(id), log),
            WorldEvent::SharingFailed { ref error } => {
                log.warn("sharing_failed", &[("error", json!(error))]);
            }
            WorldEvent::IsolatedMerged { id, pages } => {
                log.warn(
                    "isolated_merged",
                    &[
                        ("tenant", json!(name_of(id))),
                        ("merged_bytes", json!(pages.to_bytes().0)),
                        (
                            "why",
                            json!("its own processes asked the kernel to merge (madvise or prctl); memtide cannot undo that"),
                        ),
                    ],
                );
            }
            WorldEvent::Balloon {
                id,
                from,
                size,
                written,
            } => {
                let reason = record
                    .row(id)
                    .map(|r| self.reason_line(id, &r.reason))
                    .unwrap_or_default();
                log.info(
                    "balloon",
                    &[
                        ("tenant", json!(name_of(id))),
                        ("from_bytes", json!(from.to_bytes().0)),
                        ("to_bytes", json!(size.to_bytes().0)),
                        ("written", json!(written)),
                        ("reason", json!(reason)),
                    ],
                );
            }
            WorldEvent::Blocked { id, blocked } => {
                log.warn(
                    if blocked { "vm_paused" } else { "vm_resumed" },
                    &[("tenant", json!(name_of(id)))],
                );
            }
            WorldEvent::VmFailed { id, ref error } => {
                log.warn(
                    "vm_failed",
                    &[("tenant", json!(name_of(id))), ("error", json!(error))],
                );
            }
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

/// A VM tenant's balloon and host swap as the API shows them, from its row and its
/// decision's notes (`None` for a tenant without a balloon: not a VM).
fn vm_snapshot(r: &TenantRow, elapsed_s: Option<f64>) -> Option<VmSnapshot> {
    let b = r.reason.mechanism.balloon?;
    Some(VmSnapshot {
        balloon_bytes: b.size.to_bytes().0,
        balloon_target_bytes: b.target.map(|t| t.to_bytes().0),
        balloon_limit_bytes: b.limit.map(|l| l.to_bytes().0),
        stalled: b.stalled,
        host_swapped_bytes: r.host_swapped().0,
        host_swap_out_bytes: r
            .reason
            .mechanism
            .host_swap
            .map_or(0, |h| h.out.to_bytes().0),
        blocked: r.blocked,
        guest_swap_ins_per_s: r.swap_ins.zip(elapsed_s).map(|(n, s)| n as f64 / s),
    })
}

/// A tenant's cache quota as the API shows it, from its decision's note.
fn cache_snapshot(c: memtide_model::CacheNote) -> memtide_api::CacheSnapshot {
    let (slo, target_us, slack) = match c.slo {
        memtide_model::Slo::Strict { target_us, slack } => ("strict", Some(target_us), Some(slack)),
        memtide_model::Slo::BestEffort => ("best_effort", None, None),
    };
    memtide_api::CacheSnapshot {
        slo: slo.to_string(),
        target_us,
        slack,
        quota_bytes: c.quota.to_bytes().0,
        budget_bytes: c.budget.to_bytes().0,
        predicted_latency_us: f64::from(c.latency_us),
        utility: f64::from(c.utility),
    }
}

/// Lai et al.'s mitigations its database's figures call for, with the evidence (none without
/// durability figures from its agent).
fn advice(row: &TenantRow) -> Vec<AdviceSnapshot> {
    let Some(d) = row.durability.as_deref() else {
        return Vec::new();
    };
    memtide_policy::advice::advise(d, row.disk.as_ref())
        .iter()
        .map(|a| AdviceSnapshot {
            setting: a.setting.name().to_string(),
            value: a.value,
            suggested: a.suggested,
            line: a.to_string(),
        })
        .collect()
}

/// A tenant's share of the disk as the API shows it: the tick's I/O (`io`), the planner's note
/// (`None` for a tenant without a disk spec), its totals (operations, bytes) and the tick's
/// length in seconds.
fn disk_snapshot(
    io: memtide_model::DiskIo,
    note: Option<memtide_model::DiskNote>,
    (ops_total, bytes_total): (u64, u64),
    elapsed_s: Option<f64>,
) -> DiskSnapshot {
    DiskSnapshot {
        weight: note.map(|n| n.weight).or(io.weight),
        base_weight: note.map(|n| n.base),
        boost: note.map(|n| 1u32 << n.boost),
        cap_iops: io.cap_iops,
        ops_per_s: elapsed_s.map(|s| io.ops as f64 / s),
        bytes_per_s: elapsed_s.map(|s| io.bytes.0 as f64 / s),
        latency_ms: io.latency_us.map(|us| us / 1000.0),
        target_ms: note
            .and_then(|n| n.target_us)
            .map(|us| f64::from(us) / 1000.0),
        ops_total,
        bytes_total,
    }
}

/// Logs a read-back of a tenant's swap that ended (`swapped_in`, or `swap_in_failed` with
/// the error).
fn swapped_in(event: &WorldEvent, name: &str, log: &Logger) {
    let WorldEvent::SwappedIn {
        asked,
        advised,
        processes,
        took,
        ref error,
        ..
    } = *event
    else {
        return;
    };
    let fields = [
        ("tenant", json!(name)),
        ("swapped_bytes", json!(asked.to_bytes().0)),
        ("advised_bytes", json!(advised.0)),
        ("processes", json!(processes)),
        ("took_ms", json!((took.as_secs_f64() * 1e4).round() / 10.0)),
        ("error", json!(error)),
    ];
    match error {
        Some(_) => log.warn("swap_in_failed", &fields),
        None => log.info("swapped_in", &fields[..5]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_tenant_shows_the_planned_weight_its_rates_and_the_latency_against_its_target() {
        let io = memtide_model::DiskIo {
            weight: Some(200),
            ops: 500,
            bytes: memtide_model::Bytes(2 << 20),
            latency_us: Some(12_300.0),
            ..memtide_model::DiskIo::default()
        };
        let note = memtide_model::DiskNote {
            weight: 400,
            was: Some(200),
            base: 100,
            boost: 2,
            latency_us: Some(12_300.0),
            target_us: Some(5000),
        };
        let d = disk_snapshot(io, Some(note), (1500, 6 << 20), Some(0.5));
        assert_eq!(
            (d.weight, d.base_weight, d.boost),
            (Some(400), Some(100), Some(4))
        );
        assert_eq!(
            (d.ops_per_s, d.bytes_per_s),
            (Some(1000.0), Some(4194304.0))
        );
        assert_eq!((d.latency_ms, d.target_ms), (Some(12.3), Some(5.0)));
        assert_eq!((d.ops_total, d.bytes_total), (1500, 6 << 20));
        // Without a note, the weight read; without a tick before, no rates.
        let d = disk_snapshot(io, None, (0, 0), None);
        assert_eq!((d.weight, d.boost, d.ops_per_s), (Some(200), None, None));
    }

    fn publisher(kept: usize) -> Publisher {
        let mut config = DaemonConfig::default();
        config.daemon.decisions_kept = kept;
        Publisher::new(&config, "v1", "/memtide", Pages::from_mib(64))
    }

    /// Publishes the decisions as `tick` does, and checks them against all records.
    fn publish(p: &mut Publisher) -> Vec<DecisionRecord> {
        let shared = p.shared();
        shared.publish_with(|old| Snapshot {
            decisions: p.published_decisions(std::mem::take(&mut old.decisions)),
            ..Snapshot::default()
        });
        let all: Vec<DecisionRecord> = p.decisions.iter().cloned().collect();
        assert_eq!(shared.snapshot().decisions, all);
        all
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
        p.shared().publish_with(|_| Snapshot::default());
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
