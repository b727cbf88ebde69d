//! The agents memtide serves, by tenant: each connection's session (hello, stats, progress, errors counted), the tenant's application balloon lever as the policy reads it, and the moves the policy decides — a target sent, or an agent closed and its tenant taken over.
//!
//! Two sides use it. The event loop ([`crate::server`]) feeds it each connection's lines and
//! the time, and writes what it answers ([`HubHandler`]). A world (the Linux host) reads each
//! tenant's [`AppBalloonLever`], carries out the policy's [`AppMove`]s and takes the events
//! ([`Hub`]). Both hold the same state behind one mutex, taken once per line or per call: a
//! few microseconds, never across I/O.
//!
//! What the hub decides itself is the protocol (docs/balloon-protocol.md): a `hello` must name
//! the socket peer's pid, and that process must be in a tenant the world manages
//! ([`Tenants`]); one live agent per tenant; a line that cannot be read, or breaks the
//! session's rules, gets one non-fatal `error`, and the 8th on a connection a fatal
//! `violations` instead. Whether an agent is dead, stuck or dishonest is the policy's call
//! (`policy::mechanism::app_balloon`, the same for every world): it reads the lever's
//! `silent_for`, `answer` and `used`, and the world hands its verdict back as
//! [`AppMove::TakeOver`], which closes the agent with that error.
//!
//! Targets: the policy's pool is rounded down to the granule and kept within `[min_bytes,
//! max_bytes]`, and sent as a new `target` only when it differs from the last one sent.
//!
//! A database's durability figures (`stats.durability`) reach the lever as the settings last
//! reported and the counters as rates per second ([`memtide_model::Durability`]), each
//! measured over at least [`RATE_SPAN`] since an earlier reading: `None` until two readings
//! that far apart, and `None` for a counter that went backwards (the server restarted: the
//! rate starts again from that reading) or that the latest reading lacks, never a negative or
//! a zero standing for a gap.
//! Times are `Duration`s since the hub began, so a simulated clock could drive it too.

use crate::server::{ConnId, Handler, Outbox};
use memtide_balloon::line::Line;
use memtide_balloon::protocol::{
    AgentMessage, Bye, Durability as Reading, ErrorCode, ErrorMessage, Hello, MemtideMessage,
    PoolInfo, PoolKind, Progress, ProgressStatus, ProtocolError, Stats, Target, Welcome,
};
use memtide_model::{
    AppAnswer, AppBalloonLever, AppMove, AppStatus, Bytes, Durability, MissCurve, Pages, PerSecond,
    Takeover, TenantId,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How the hub speaks to its agents.
#[derive(Clone, Debug, PartialEq)]
pub struct HubConfig {
    /// Agents send `stats` at least this often (`welcome.stats_interval_ms`).
    pub stats_interval: Duration,
    /// No `stats` for this long: the policy counts the agent dead (`welcome.dead_after_ms`).
    pub dead_after: Duration,
    /// Errors on one connection before it is closed (the last is `violations`).
    pub max_violations: u32,
}

impl Default for HubConfig {
    /// 1 s stats, dead after 5 s, 8 errors.
    fn default() -> HubConfig {
        HubConfig {
            stats_interval: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
            max_violations: 8,
        }
    }
}

/// Who holds a process: the world's answer for identity.
pub trait Tenants: Send {
    /// The tenant whose cgroup (or VM) holds process `pid`, with its name.
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)>;
}

/// Why an agent's connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The agent said `bye` (with its reason).
    Bye(Option<String>),
    /// The connection closed without `bye`.
    Vanished,
    /// Too many errors on the connection.
    Violations,
    /// The policy took the tenant over from it.
    TakenOver(Takeover),
    /// The world no longer manages its tenant.
    Forgotten,
}

impl fmt::Display for Closed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Closed::Bye(Some(r)) => write!(f, "said bye: {r}"),
            Closed::Bye(None) => f.write_str("said bye"),
            Closed::Vanished => f.write_str("its connection closed without bye"),
            Closed::Violations => f.write_str("too many protocol errors"),
            Closed::TakenOver(why) => write!(f, "taken over: {why}"),
            Closed::Forgotten => f.write_str("its tenant is no longer managed"),
        }
    }
}

/// What happened to a tenant's agent, for the world to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentEvent {
    Registered {
        tenant: TenantId,
        app: String,
        kind: PoolKind,
        pid: u32,
    },
    /// The agent answered a target: `done` or `failed` (with its reason).
    Answered {
        tenant: TenantId,
        seq: u64,
        status: ProgressStatus,
        pool_bytes: u64,
        reason: Option<String>,
        /// From the target's sending to this answer.
        took: Duration,
    },
    /// The agent's connection ended.
    Closed { tenant: TenantId, why: Closed },
}

/// The shortest time a durability rate is measured over. An adapter reads its server's
/// counters on a clock of its own and its agent sends the last reading each second, so a
/// rate between two consecutive stats would now and then count one reading twice: 0 for one
/// interval and double the next. Over 5 s such a slip moves a rate by a fifth at most.
pub const RATE_SPAN: Duration = Duration::from_secs(5);

/// A database's durability figures as the hub follows them (see the module docs).
#[derive(Debug, Default)]
struct Syncs {
    /// The reading the rates are measured from, and when it came.
    base: Option<(Duration, Reading)>,
    /// The latest reading: a counter below it has gone backwards.
    last: Option<Reading>,
    /// What the lever reports.
    now: Option<Durability>,
}

impl Syncs {
    /// Takes the durability figures of a `stats` received at `now` (`None`: the stats had
    /// none, and rates start again from the next reading).
    fn read(&mut self, reading: Option<&Reading>, now: Duration) {
        let Some(r) = reading else {
            *self = Syncs::default();
            return;
        };
        let mut d = self.now.unwrap_or_default();
        d.flush_log_at_trx_commit = r.flush_log_at_trx_commit;
        d.sync_binlog = r.sync_binlog;
        d.log_buffer = r.log_buffer_bytes.map(Bytes);
        d.write_io_threads = r.write_io_threads;
        let is = counters(r);
        let was = self.last.as_ref().map(counters);
        let back = |i: usize| {
            was.and_then(|w| w[i])
                .zip(is[i])
                .is_some_and(|(was, is)| is < was)
        };
        let restarted = (0..is.len()).any(back);
        for (i, rate) in rates(&mut d).into_iter().enumerate() {
            if is[i].is_none() || back(i) {
                *rate = None;
            }
        }
        match self.base {
            Some((at, base)) if !restarted && now.saturating_sub(at) >= RATE_SPAN => {
                let from = counters(&base);
                for (i, rate) in rates(&mut d).into_iter().enumerate() {
                    *rate = from[i]
                        .zip(is[i])
                        .and_then(|(was, is)| PerSecond::between(was, is, now - at));
                }
                self.base = Some((now, *r));
            }
            Some(_) if !restarted => {}
            _ => self.base = Some((now, *r)),
        }
        self.last = Some(*r);
        self.now = Some(d);
    }
}

/// A reading's counters, in the order of [`rates`].
fn counters(r: &Reading) -> [Option<u64>; 5] {
    [
        r.data_fsyncs,
        r.log_fsyncs,
        r.log_waits,
        r.binlog_commits,
        r.binlog_group_commits,
    ]
}

/// The rates of the counters of [`counters`].
fn rates(d: &mut Durability) -> [&mut Option<PerSecond>; 5] {
    [
        &mut d.data_fsyncs,
        &mut d.log_fsyncs,
        &mut d.log_waits,
        &mut d.binlog_commits,
        &mut d.binlog_group_commits,
    ]
}

/// The latest target sent to an agent, and its answer so far.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sent {
    seq: u64,
    pool_bytes: u64,
    status: AppStatus,
    /// When it was queued for sending, since the hub started.
    at: Duration,
}

#[derive(Debug)]
struct Agent {
    conn: ConnId,
    session: u64,
    pool: PoolInfo,
    stats: Option<Stats>,
    last_stats: Duration,
    /// Hits and misses when the lever was last read (deltas are reported).
    counted: Option<(u64, u64)>,
    /// The database's durability figures, when its agent reports them.
    syncs: Syncs,
    sent: Option<Sent>,
}

#[derive(Debug)]
struct Conn {
    pid: Option<u32>,
    errors: u32,
    tenant: Option<TenantId>,
}

struct State {
    config: HubConfig,
    tenants: Box<dyn Tenants>,
    conns: BTreeMap<ConnId, Conn>,
    agents: BTreeMap<TenantId, Agent>,
    sessions: u64,
    events: Vec<AgentEvent>,
    /// Lines the world's calls decided on, and whether the connection closes after them:
    /// written on the loop's next turn.
    pending: Vec<(ConnId, String, bool)>,
}

/// The hub, as a world holds it (cheap to clone; every clone is the same hub).
#[derive(Clone)]
pub struct Hub {
    state: Arc<Mutex<State>>,
    wake: Arc<Mutex<Option<crate::server::Wake>>>,
    start: Instant,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    pub fn new(config: HubConfig, tenants: Box<dyn Tenants>) -> Hub {
        Hub {
            state: Arc::new(Mutex::new(State {
                config,
                tenants,
                conns: BTreeMap::new(),
                agents: BTreeMap::new(),
                sessions: 0,
                events: Vec::new(),
                pending: Vec::new(),
            })),
            wake: Arc::new(Mutex::new(None)),
            start: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves state that is still whole (every change is
        // one assignment), so carry on with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The time on the hub's clock: since it began.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The event loop's side of this hub, on the hub's clock.
    pub fn handler(&self) -> HubHandler {
        HubHandler { hub: self.clone() }
    }

    /// Lets the world's calls wake the event loop (targets and closes are written there).
    pub fn set_wake(&self, wake: crate::server::Wake) {
        *self.wake.lock().unwrap_or_else(PoisonError::into_inner) = Some(wake);
    }

    fn wake(&self) {
        if let Some(w) = self
            .wake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            w.wake();
        }
    }

    /// `tenant`'s application balloon while it has a live agent, with `used` the tenant's
    /// memory as the world measures it; hits and misses are counted since the last call.
    pub fn lever(&self, tenant: TenantId, used: Pages, now: Duration) -> Option<AppBalloonLever> {
        let mut s = self.lock();
        let dead_after = s.config.dead_after;
        let a = s.agents.get_mut(&tenant)?;
        let counts = a.stats.as_ref().map(|st| (st.hits, st.misses));
        let (hits, misses) = match (counts, a.counted) {
            (Some((h, m)), Some((h0, m0))) => {
                (Some(h.saturating_sub(h0)), Some(m.saturating_sub(m0)))
            }
            (Some((h, m)), None) => (Some(h), Some(m)),
            (None, _) => (None, None),
        };
        if counts.is_some() {
            a.counted = counts;
        }
        Some(AppBalloonLever {
            session: a.session,
            pool: pages(a.pool.pool_bytes),
            pool_used: a.stats.as_ref().map(|st| pages(st.used_bytes)),
            min: Bytes(a.pool.min_bytes).to_pages_ceil(),
            max: pages(a.pool.max_bytes),
            granule: Bytes(a.pool.granule_bytes).to_pages_ceil().max(Pages(1)),
            used,
            hits,
            misses,
            // A curve with two sizes within one page has no form in pages and is dropped; it
            // is no violation, as the protocol allows any ascending sizes.
            curve: a
                .stats
                .as_ref()
                .and_then(|s| MissCurve::of_bytes(s.curve_points()))
                .map(Box::new),
            durability: a.syncs.now.map(Box::new),
            answer: a.sent.as_ref().map(|t| AppAnswer {
                target: pages(t.pool_bytes),
                status: t.status,
            }),
            silent_for: now.saturating_sub(a.last_stats),
            dead_after,
        })
    }

    /// Carries out the policy's move for `tenant`: a target (sent when it differs from the
    /// last one sent), or a takeover (the agent gets that fatal error and is closed).
    pub fn apply(&self, tenant: TenantId, app_move: AppMove) {
        {
            let mut s = self.lock();
            match app_move {
                AppMove::Target { pool, deadline } => {
                    s.target(tenant, pool, deadline, self.start.elapsed())
                }
                AppMove::TakeOver(why) => {
                    let code = match why {
                        Takeover::Stuck { .. } => ErrorCode::Deadline,
                        Takeover::Dead { .. } => ErrorCode::Dead,
                        Takeover::Dishonest { .. } => ErrorCode::Dishonest,
                    };
                    s.end(
                        tenant,
                        error_line(code, why.to_string(), true),
                        Closed::TakenOver(why),
                    );
                }
            }
        }
        self.wake();
    }

    /// A tenant the world no longer manages: its agent (if any) hears `bye` and is closed.
    pub fn forget(&self, tenant: TenantId) {
        {
            let mut s = self.lock();
            let bye = MemtideMessage::Bye(Bye {
                reason: Some("memtide no longer manages this tenant".into()),
            });
            s.end(tenant, bye.encode(), Closed::Forgotten);
        }
        self.wake();
    }

    /// What happened since the last call.
    pub fn drain_events(&self) -> Vec<AgentEvent> {
        std::mem::take(&mut self.lock().events)
    }
}

/// Whole pages of `bytes` (a pool's size counts what it holds).
fn pages(bytes: u64) -> Pages {
    Bytes(bytes).to_pages_floor()
}

/// The event loop's side of a [`Hub`].
pub struct HubHandler {
    hub: Hub,
}

impl HubHandler {
    fn at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.hub.start)
    }
}

impl Handler for HubHandler {
    fn opened(&mut self, conn: ConnId, pid: Option<i32>, _now: Instant) {
        let pid = pid.and_then(|p| u32::try_from(p).ok());
        self.hub.lock().conns.insert(
            conn,
            Conn {
                pid,
                errors: 0,
                tenant: None,
            },
        );
    }

    fn line(&mut self, conn: ConnId, line: Line, now: Instant, out: &mut Outbox) {
        let at = self.at(now);
        self.hub.lock().on_line(conn, line, at, out);
    }

    fn closed(&mut self, conn: ConnId, _now: Instant) {
        self.hub.lock().on_closed(conn);
    }

    fn poll(&mut self, _now: Instant, out: &mut Outbox) {
        self.hub.lock().on_poll(out);
    }

    fn stopping(&mut self, _now: Instant, out: &mut Outbox) {
        let mut s = self.hub.lock();
        s.on_poll(out);
        let bye = MemtideMessage::Bye(Bye {
            reason: Some("memtide is stopping".into()),
        })
        .encode();
        for (&conn, _) in s.conns.iter() {
            out.send(conn, bye.clone());
            out.close(conn);
        }
        s.conns.clear();
        s.agents.clear();
    }
}

fn error_line(code: ErrorCode, message: impl Into<String>, fatal: bool) -> String {
    MemtideMessage::Error(ErrorMessage {
        code,
        message: message.into(),
        fatal: fatal || code.always_fatal(),
    })
    .encode()
}

impl State {
    fn on_line(&mut self, conn: ConnId, line: Line, now: Duration, out: &mut Outbox) {
        if !self.conns.contains_key(&conn) {
            return; // closed by us: what it still sends is not read
        }
        let msg = match line {
            Line::TooLong => Err(ProtocolError::new(
                ErrorCode::TooLong,
                "line over 65,536 bytes, dropped",
            )),
            Line::Complete(bytes) => AgentMessage::decode(&bytes),
        };
        let result = msg.and_then(|m| self.on_message(conn, m, now, out));
        if let Err(e) = result {
            self.refuse(conn, e, out);
        }
    }

    /// Answers an error: fatal ones close; others count, and the last allowed is
    /// `violations`.
    fn refuse(&mut self, conn: ConnId, e: ProtocolError, out: &mut Outbox) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.errors += 1;
        if e.code.always_fatal() {
            out.send(conn, error_line(e.code, e.message, true));
            self.close(conn, Closed::Vanished, out);
        } else if c.errors >= self.config.max_violations {
            let message = format!(
                "{} errors on this connection (the last: {}: {}); closing",
                c.errors, e.code, e.message
            );
            out.send(conn, error_line(ErrorCode::Violations, message, true));
            self.close(conn, Closed::Violations, out);
        } else {
            out.send(conn, error_line(e.code, e.message, false));
        }
    }

    fn on_message(
        &mut self,
        conn: ConnId,
        msg: AgentMessage,
        now: Duration,
        out: &mut Outbox,
    ) -> Result<(), ProtocolError> {
        let tenant = self.conns.get(&conn).and_then(|c| c.tenant);
        match (tenant, msg) {
            (None, AgentMessage::Hello(h)) => self.hello(conn, h, now, out),
            (None, AgentMessage::Bye(b)) => {
                self.close(conn, Closed::Bye(b.reason), out);
                Ok(())
            }
            (None, other) => Err(ProtocolError::new(
                ErrorCode::NotRegistered,
                format!("{} before hello", kind_of(&other)),
            )),
            (Some(_), AgentMessage::Hello(_)) => Err(ProtocolError::new(
                ErrorCode::AlreadyRegistered,
                "a second hello on this connection",
            )),
            (Some(t), AgentMessage::Stats(s)) => self.stats(t, s, now),
            (Some(t), AgentMessage::Progress(p)) => self.progress(t, p, now),
            (Some(_), AgentMessage::Bye(b)) => {
                self.close(conn, Closed::Bye(b.reason), out);
                Ok(())
            }
            (Some(_), AgentMessage::Error(e)) => {
                if e.fatal {
                    self.close(conn, Closed::Vanished, out);
                }
                Ok(())
            }
        }
    }

    fn hello(
        &mut self,
        conn: ConnId,
        h: Hello,
        now: Duration,
        out: &mut Outbox,
    ) -> Result<(), ProtocolError> {
        let peer = self.conns.get(&conn).and_then(|c| c.pid);
        if peer != Some(h.pid) {
            let peer = peer.map_or("unknown".to_string(), |p| p.to_string());
            return Err(ProtocolError::new(
                ErrorCode::Identity,
                format!(
                    "hello.pid = {} is not the socket peer's pid ({peer})",
                    h.pid
                ),
            ));
        }
        let Some((tenant, name)) = self.tenants.tenant_of(h.pid) else {
            return Err(ProtocolError::new(
                ErrorCode::Identity,
                format!("process {} is in no tenant memtide manages", h.pid),
            ));
        };
        if self.agents.contains_key(&tenant) {
            return Err(ProtocolError::new(
                ErrorCode::Busy,
                format!("tenant {name} already has a live agent"),
            ));
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.tenant = Some(tenant);
        }
        self.sessions += 1;
        self.events.push(AgentEvent::Registered {
            tenant,
            app: h.pool.app.clone(),
            kind: h.pool.kind,
            pid: h.pid,
        });
        self.agents.insert(
            tenant,
            Agent {
                conn,
                session: self.sessions,
                pool: h.pool,
                stats: None,
                last_stats: now,
                counted: None,
                syncs: Syncs::default(),
                sent: None,
            },
        );
        let welcome = MemtideMessage::Welcome(Welcome {
            tenant: name,
            stats_interval_ms: millis(self.config.stats_interval),
            dead_after_ms: millis(self.config.dead_after),
        });
        out.send(conn, welcome.encode());
        Ok(())
    }

    fn stats(&mut self, tenant: TenantId, s: Stats, now: Duration) -> Result<(), ProtocolError> {
        let Some(a) = self.agents.get_mut(&tenant) else {
            return Ok(());
        };
        if s.pool_bytes > a.pool.max_bytes {
            return Err(ProtocolError::new(
                ErrorCode::BadField,
                format!(
                    "stats.pool_bytes = {} > max_bytes = {}",
                    s.pool_bytes, a.pool.max_bytes
                ),
            ));
        }
        if let Some(prev) = &a.stats {
            for (field, was, is) in [
                ("hits", prev.hits, s.hits),
                ("misses", prev.misses, s.misses),
                ("evictions", prev.evictions, s.evictions),
            ] {
                if is < was {
                    return Err(ProtocolError::new(
                        ErrorCode::BadField,
                        format!("stats.{field} = {is} < {was} before: counters never decrease"),
                    ));
                }
            }
        }
        a.pool.pool_bytes = s.pool_bytes;
        a.last_stats = now;
        a.syncs.read(s.durability.as_ref(), now);
        a.stats = Some(s);
        Ok(())
    }

    fn progress(
        &mut self,
        tenant: TenantId,
        p: Progress,
        now: Duration,
    ) -> Result<(), ProtocolError> {
        let Some(a) = self.agents.get_mut(&tenant) else {
            return Ok(());
        };
        let latest = a.sent.as_ref().map_or(0, |t| t.seq);
        if p.seq > latest {
            return Err(ProtocolError::new(
                ErrorCode::UnknownSeq,
                format!("progress.seq = {} was never sent (latest {latest})", p.seq),
            ));
        }
        if p.pool_bytes > a.pool.max_bytes {
            return Err(ProtocolError::new(
                ErrorCode::BadField,
                format!(
                    "progress.pool_bytes = {} > max_bytes = {}",
                    p.pool_bytes, a.pool.max_bytes
                ),
            ));
        }
        // An older target's answer, or one after this target's end: nothing to do.
        let Some(sent) = a
            .sent
            .as_mut()
            .filter(|t| t.seq == p.seq && matches!(t.status, AppStatus::Sent | AppStatus::Working))
        else {
            return Ok(());
        };
        a.pool.pool_bytes = p.pool_bytes;
        sent.status = match p.status {
            ProgressStatus::Working => AppStatus::Working,
            ProgressStatus::Done => AppStatus::Done,
            ProgressStatus::Failed => AppStatus::Failed,
        };
        if p.status != ProgressStatus::Working {
            self.events.push(AgentEvent::Answered {
                tenant,
                seq: p.seq,
                status: p.status,
                pool_bytes: p.pool_bytes,
                reason: p.reason,
                took: now.saturating_sub(sent.at),
            });
        }
        Ok(())
    }

    /// Queues a target of `pool` for `tenant`'s agent, on its granule within its min and max,
    /// unless it is the last one sent.
    fn target(&mut self, tenant: TenantId, pool: Pages, deadline: Duration, now: Duration) {
        let Some(a) = self.agents.get_mut(&tenant) else {
            return;
        };
        let g = a.pool.granule_bytes.max(1);
        let (lo, hi) = (a.pool.min_bytes.div_ceil(g) * g, a.pool.max_bytes / g * g);
        let want = (pool.to_bytes().0 / g * g).clamp(lo.min(hi), hi);
        if a.sent.as_ref().is_some_and(|t| t.pool_bytes == want) {
            return;
        }
        let seq = a.sent.as_ref().map_or(0, |t| t.seq) + 1;
        a.sent = Some(Sent {
            seq,
            pool_bytes: want,
            status: AppStatus::Sent,
            at: now,
        });
        let target = MemtideMessage::Target(Target {
            seq,
            pool_bytes: want,
            deadline_ms: millis(deadline).max(1),
        });
        self.pending.push((a.conn, target.encode(), false));
    }

    /// Ends `tenant`'s agent: `line` is its last, then its connection closes.
    fn end(&mut self, tenant: TenantId, line: String, why: Closed) {
        if let Some(a) = self.agents.remove(&tenant) {
            self.conns.remove(&a.conn);
            self.pending.push((a.conn, line, true));
            self.events.push(AgentEvent::Closed { tenant, why });
        }
    }

    fn on_poll(&mut self, out: &mut Outbox) {
        for (conn, line, close) in std::mem::take(&mut self.pending) {
            out.send(conn, line);
            if close {
                out.close(conn);
            }
        }
    }

    /// Closes `conn` (after what was sent to it); its agent, if any, is gone for `why`.
    fn close(&mut self, conn: ConnId, why: Closed, out: &mut Outbox) {
        if let Some(c) = self.conns.remove(&conn) {
            if let Some(t) = c.tenant {
                if self.agents.remove(&t).is_some() {
                    self.events.push(AgentEvent::Closed { tenant: t, why });
                }
            }
        }
        out.close(conn);
    }

    fn on_closed(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            if let Some(t) = c
                .tenant
                .filter(|t| self.agents.get(t).is_some_and(|a| a.conn == conn))
            {
                self.agents.remove(&t);
                self.events.push(AgentEvent::Closed {
                    tenant: t,
                    why: Closed::Vanished,
                });
            }
        }
    }
}

fn kind_of(m: &AgentMessage) -> &'static str {
    match m {
        AgentMessage::Hello(_) => "hello",
        AgentMessage::Progress(_) => "progress",
        AgentMessage::Stats(_) => "stats",
        AgentMessage::Bye(_) => "bye",
        AgentMessage::Error(_) => "error",
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Process 100 is in tenant 1 ("db"), 200 in tenant 2 ("web"); nobody else.
    struct Fake;

    impl Tenants for Fake {
        fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)> {
            match pid {
                100 => Some((TenantId(1), "db".into())),
                200 => Some((TenantId(2), "web".into())),
                _ => None,
            }
        }
    }

    const MIB: u64 = 1 << 20;
    const DB: TenantId = TenantId(1);

    fn hub() -> Hub {
        Hub::new(HubConfig::default(), Box::new(Fake))
    }

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn mib(n: u64) -> Pages {
        Bytes(n * MIB).to_pages_floor()
    }

    /// Feeds `line` from `conn` at `at`, returning what the hub answered and closed.
    fn feed(hub: &Hub, conn: usize, line: &str, at: Duration) -> (Vec<String>, Vec<ConnId>) {
        let mut out = Outbox::default();
        hub.lock().on_line(
            ConnId(conn),
            Line::Complete(line.as_bytes().to_vec()),
            at,
            &mut out,
        );
        (out.lines.into_iter().map(|l| l.1).collect(), out.close)
    }

    /// What the world's calls queued, as the loop's next turn writes it.
    fn poll(hub: &Hub) -> (Vec<String>, Vec<ConnId>) {
        let mut out = Outbox::default();
        hub.lock().on_poll(&mut out);
        (out.lines.into_iter().map(|l| l.1).collect(), out.close)
    }

    fn open(hub: &Hub, conn: usize, pid: u32) {
        hub.lock().conns.insert(
            ConnId(conn),
            Conn {
                pid: Some(pid),
                errors: 0,
                tenant: None,
            },
        );
    }

    fn hello(pid: u32) -> String {
        format!(
            r#"{{"type":"hello","version":1,"app":"mariadb","kind":"buffer_pool","pid":{pid},"pool_bytes":{},"min_bytes":{},"max_bytes":{},"granule_bytes":{}}}"#,
            512 * MIB,
            64 * MIB,
            1024 * MIB,
            MIB
        )
    }

    fn stats(pool: u64, used: u64, hits: u64, misses: u64) -> String {
        format!(
            r#"{{"type":"stats","pool_bytes":{pool},"used_bytes":{used},"hits":{hits},"misses":{misses},"evictions":0,"dirty_bytes":0}}"#
        )
    }

    fn progress(seq: u64, pool: u64, status: &str) -> String {
        format!(r#"{{"type":"progress","seq":{seq},"pool_bytes":{pool},"status":"{status}"}}"#)
    }

    fn registered(hub: &Hub, conn: usize, pid: u32) {
        open(hub, conn, pid);
        let (lines, _) = feed(hub, conn, &hello(pid), s(0));
        assert!(lines[0].contains(r#""type":"welcome""#), "{lines:?}");
    }

    fn target(pool: Pages) -> AppMove {
        AppMove::Target {
            pool,
            deadline: Duration::from_millis(12_500),
        }
    }

    #[test]
    fn a_hello_from_a_managed_process_is_welcomed_for_its_tenant() {
        let h = hub();
        open(&h, 0, 100);
        let (lines, closed) = feed(&h, 0, &hello(100), s(0));
        assert_eq!(
            lines,
            vec![
                r#"{"type":"welcome","version":1,"tenant":"db","stats_interval_ms":1000,"dead_after_ms":5000}"#
            ]
        );
        assert!(closed.is_empty());
        let lever = h.lever(DB, mib(600), s(0)).unwrap();
        assert_eq!(
            (lever.pool, lever.min, lever.max, lever.granule),
            (mib(512), mib(64), mib(1024), mib(1))
        );
        assert_eq!(
            (lever.session, lever.used, lever.hits, lever.answer),
            (1, mib(600), None, None)
        );
    }

    #[test]
    fn a_hello_for_another_pid_or_an_unmanaged_process_is_refused_and_closed() {
        let h = hub();
        open(&h, 0, 100);
        let (lines, closed) = feed(&h, 0, &hello(200), s(0));
        assert!(lines[0].contains(r#""code":"identity""#) && lines[0].contains("(100)"));
        assert_eq!(closed, vec![ConnId(0)]);
        open(&h, 1, 300);
        let (lines, closed) = feed(&h, 1, &hello(300), s(0));
        assert!(lines[0].contains("in no tenant"), "{lines:?}");
        assert_eq!(closed, vec![ConnId(1)]);
        assert!(h.lever(DB, Pages::ZERO, s(0)).is_none());
    }

    #[test]
    fn a_second_agent_for_a_tenant_is_busy() {
        let h = hub();
        registered(&h, 0, 100);
        open(&h, 1, 100);
        let (lines, closed) = feed(&h, 1, &hello(100), s(0));
        assert!(lines[0].contains(r#""code":"busy""#), "{lines:?}");
        assert_eq!(closed, vec![ConnId(1)]);
        assert!(
            h.lever(DB, Pages::ZERO, s(0)).is_some(),
            "the first agent stays"
        );
    }

    #[test]
    fn the_lever_counts_hits_and_misses_since_it_was_last_read_and_the_silence() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats(512 * MIB, 400 * MIB, 100, 10), s(1));
        let first = h.lever(DB, mib(700), s(1)).unwrap();
        assert_eq!(
            (first.hits, first.misses, first.pool_used),
            (Some(100), Some(10), Some(mib(400)))
        );
        feed(&h, 0, &stats(512 * MIB, 410 * MIB, 160, 12), s(2));
        let second = h.lever(DB, mib(700), s(4)).unwrap();
        assert_eq!((second.hits, second.misses), (Some(60), Some(2)));
        assert_eq!(second.silent_for, s(2));
        assert_eq!(second.outside(), Some(mib(290)));
    }

    #[test]
    fn the_agent_s_miss_ratio_curve_is_in_the_lever_in_pages() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats(512 * MIB, 400 * MIB, 100, 10), s(1));
        assert_eq!(h.lever(DB, mib(700), s(1)).unwrap().curve, None);
        let with_curve = stats(512 * MIB, 400 * MIB, 100, 10).replace(
            '}',
            &format!(
                r#","curve":[[{},0.61],[{},0.4],[{},0.05]]}}"#,
                128 * MIB,
                256 * MIB + 1,
                1024 * MIB
            ),
        );
        assert!(feed(&h, 0, &with_curve, s(2)).0.is_empty());
        let curve = h.lever(DB, mib(700), s(2)).unwrap().curve.unwrap();
        let points: Vec<(Pages, f64)> = curve.points().collect();
        assert_eq!(
            points,
            [
                (mib(128), 0.61),
                (Pages(mib(256).0 + 1), 0.4),
                (mib(1024), 0.05)
            ]
        );
        feed(&h, 0, &stats(512 * MIB, 400 * MIB, 100, 10), s(3));
        assert_eq!(
            h.lever(DB, mib(700), s(3)).unwrap().curve,
            None,
            "the latest stats have no curve"
        );
    }

    #[test]
    fn a_curve_with_two_sizes_within_a_page_is_dropped_and_the_stats_kept() {
        let h = hub();
        registered(&h, 0, 100);
        let line = stats(512 * MIB, 400 * MIB, 100, 10)
            .replace('}', r#","curve":[[4097,0.5],[8192,0.4],[12288,0.3]]}"#);
        assert!(feed(&h, 0, &line, s(1)).0.is_empty(), "no error is sent");
        let lever = h.lever(DB, mib(700), s(1)).unwrap();
        assert_eq!((lever.curve, lever.hits), (None, Some(100)));
    }

    /// A stats with durability figures: the settings of a MariaDB with the paper's bad ones,
    /// and `data_fsyncs` and `binlog_commits` as given (no other counter).
    fn stats_with_syncs(fsyncs: u64, commits: u64) -> String {
        stats(512 * MIB, 400 * MIB, 100, 10).replace(
            '}',
            &format!(
                r#","durability":{{"flush_log_at_trx_commit":1,"sync_binlog":1,"log_buffer_bytes":16777216,"write_io_threads":4,"data_fsyncs":{fsyncs},"binlog_commits":{commits}}}}}"#
            ),
        )
    }

    fn durability(h: &Hub, at: Duration) -> Option<Durability> {
        h.lever(DB, mib(700), at).unwrap().durability.map(|d| *d)
    }

    fn per_s(n: u64) -> Option<PerSecond> {
        Some(PerSecond::from_milli(n * 1000))
    }

    #[test]
    fn durability_settings_are_in_the_lever_as_reported_and_rates_wait_for_a_second_reading() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats(512 * MIB, 400 * MIB, 100, 10), s(1));
        assert_eq!(durability(&h, s(1)), None, "no figures reported");
        assert!(feed(&h, 0, &stats_with_syncs(1000, 500), s(2)).0.is_empty());
        let first = durability(&h, s(2)).unwrap();
        assert_eq!(
            first,
            Durability {
                flush_log_at_trx_commit: Some(1),
                sync_binlog: Some(1),
                log_buffer: Some(Bytes(16 << 20)),
                write_io_threads: Some(4),
                ..Durability::default()
            },
            "settings at once, no rate from one reading"
        );
    }

    #[test]
    fn durability_counters_become_rates_over_at_least_the_span() {
        let h = hub();
        registered(&h, 0, 100);
        // 120 fsyncs and 100 commits a second, read every second.
        for t in 0..=5 {
            feed(
                &h,
                0,
                &stats_with_syncs(1000 + 120 * t, 500 + 100 * t),
                s(10 + t),
            );
            let d = durability(&h, s(10 + t)).unwrap();
            if t < 5 {
                assert_eq!(d.data_fsyncs, None, "only {t} s since the first reading");
            } else {
                assert_eq!((d.data_fsyncs, d.binlog_commits), (per_s(120), per_s(100)));
                assert_eq!((d.log_waits, d.log_fsyncs), (None, None), "not reported");
            }
        }
        // A reading repeated (the adapter's clock slipped) moves the next span's rate, not to 0.
        feed(&h, 0, &stats_with_syncs(1600, 1000), s(16));
        feed(&h, 0, &stats_with_syncs(1600, 1000), s(17));
        assert_eq!(durability(&h, s(17)).unwrap().data_fsyncs, per_s(120));
        for t in 18..=20 {
            feed(&h, 0, &stats_with_syncs(1000 + 120 * (t - 10), 1000), s(t));
        }
        let d = durability(&h, s(20)).unwrap();
        assert_eq!(d.data_fsyncs, per_s(120));
        assert_eq!(d.binlog_commits, Some(PerSecond::ZERO), "idle: a rate of 0");
    }

    #[test]
    fn a_counter_that_goes_backwards_has_no_rate_until_a_span_after_it() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats_with_syncs(1000, 500), s(0));
        feed(&h, 0, &stats_with_syncs(1600, 1000), s(5));
        assert_eq!(durability(&h, s(5)).unwrap().data_fsyncs, per_s(120));
        // The server restarted: its counters start again from about 0.
        assert!(
            feed(&h, 0, &stats_with_syncs(30, 1100), s(6)).0.is_empty(),
            "no violation"
        );
        let d = durability(&h, s(6)).unwrap();
        assert_eq!(
            d.data_fsyncs, None,
            "went backwards: no rate, never a negative"
        );
        assert_eq!(d.binlog_commits, per_s(100), "kept going: its rate stands");
        feed(&h, 0, &stats_with_syncs(130, 1200), s(8));
        assert_eq!(durability(&h, s(8)).unwrap().data_fsyncs, None);
        feed(&h, 0, &stats_with_syncs(530, 1600), s(11));
        let d = durability(&h, s(11)).unwrap();
        assert_eq!((d.data_fsyncs, d.binlog_commits), (per_s(100), per_s(100)));
    }

    #[test]
    fn a_counter_missing_from_the_latest_reading_has_no_rate_at_once() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats_with_syncs(1000, 500), s(0));
        feed(&h, 0, &stats_with_syncs(1500, 1000), s(5));
        assert_eq!(durability(&h, s(5)).unwrap().binlog_commits, per_s(100));
        let no_commits = stats_with_syncs(1600, 0).replace(r#","binlog_commits":0"#, "");
        feed(&h, 0, &no_commits, s(6));
        let d = durability(&h, s(6)).unwrap();
        assert_eq!((d.binlog_commits, d.data_fsyncs), (None, per_s(100)));
    }

    #[test]
    fn stats_without_durability_clear_it_and_rates_start_again() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats_with_syncs(1000, 500), s(0));
        feed(&h, 0, &stats_with_syncs(1500, 1000), s(5));
        feed(&h, 0, &stats(512 * MIB, 400 * MIB, 100, 10), s(6));
        assert_eq!(durability(&h, s(6)), None);
        feed(&h, 0, &stats_with_syncs(1600, 1100), s(7));
        assert_eq!(
            durability(&h, s(7)).unwrap().data_fsyncs,
            None,
            "a first reading again"
        );
    }

    #[test]
    fn a_target_is_rounded_to_the_granule_within_min_and_max_and_sent_once() {
        let h = hub();
        registered(&h, 0, 100);
        h.apply(DB, target(Pages(300 * 256 + 3)));
        assert_eq!(
            poll(&h).0,
            vec![format!(
                r#"{{"type":"target","seq":1,"pool_bytes":{},"deadline_ms":12500}}"#,
                300 * MIB
            )]
        );
        h.apply(DB, target(Pages(300 * 256 + 3)));
        assert!(poll(&h).0.is_empty(), "the same target is not sent again");
        h.apply(DB, target(Pages(1)));
        assert!(poll(&h).0[0].contains(&format!(r#""seq":2,"pool_bytes":{}"#, 64 * MIB)));
        let answer = h.lever(DB, Pages::ZERO, s(0)).unwrap().answer.unwrap();
        assert_eq!((answer.target, answer.status), (mib(64), AppStatus::Sent));
    }

    #[test]
    fn progress_moves_the_answer_and_a_stale_or_unknown_seq_is_told_apart() {
        let h = hub();
        registered(&h, 0, 100);
        h.apply(DB, target(mib(256)));
        poll(&h);
        let (lines, _) = feed(&h, 0, &progress(7, 256 * MIB, "done"), s(2));
        assert!(lines[0].contains(r#""code":"unknown_seq""#), "{lines:?}");
        assert!(feed(&h, 0, &progress(1, 400 * MIB, "working"), s(2))
            .0
            .is_empty());
        let lever = h.lever(DB, Pages::ZERO, s(2)).unwrap();
        assert_eq!(
            (lever.pool, lever.answer.unwrap().status),
            (mib(400), AppStatus::Working)
        );
        assert!(feed(&h, 0, &progress(1, 256 * MIB, "done"), s(3))
            .0
            .is_empty());
        let lever = h.lever(DB, Pages::ZERO, s(3)).unwrap();
        assert_eq!(
            (lever.pool, lever.answer.unwrap().status),
            (mib(256), AppStatus::Done)
        );
        // Sent at about 0 s on the hub's clock, answered at 3 s.
        assert!(matches!(
            h.drain_events().last(),
            Some(AgentEvent::Answered {
                seq: 1,
                status: ProgressStatus::Done,
                took,
                ..
            }) if *took > s(2) && *took <= s(3)
        ));
        feed(&h, 0, &progress(1, 300 * MIB, "failed"), s(4));
        assert_eq!(
            h.lever(DB, Pages::ZERO, s(4))
                .unwrap()
                .answer
                .unwrap()
                .status,
            AppStatus::Done,
            "a target's end is final"
        );
    }

    #[test]
    fn a_takeover_closes_the_agent_with_its_code_and_the_tenant_has_no_lever() {
        for (why, code) in [
            (Takeover::Dead { silent_for: s(6) }, "dead"),
            (Takeover::Stuck { deadline: s(20) }, "deadline"),
            (
                Takeover::Dishonest {
                    claimed: mib(256),
                    measured: mib(20),
                },
                "dishonest",
            ),
        ] {
            let h = hub();
            registered(&h, 0, 100);
            h.apply(DB, AppMove::TakeOver(why));
            let (lines, closed) = poll(&h);
            assert!(
                lines[0].contains(&format!(r#""code":"{code}""#))
                    && lines[0].contains(r#""fatal":true"#),
                "{lines:?}"
            );
            assert_eq!(closed, vec![ConnId(0)]);
            assert!(h.lever(DB, Pages::ZERO, s(0)).is_none());
            assert!(h.drain_events().contains(&AgentEvent::Closed {
                tenant: DB,
                why: Closed::TakenOver(why)
            }));
        }
    }

    #[test]
    fn the_eighth_error_closes_with_violations() {
        let h = hub();
        open(&h, 0, 100);
        for i in 0..7 {
            let (lines, closed) = feed(&h, 0, "garbage", s(i));
            assert!(lines[0].contains(r#""code":"malformed","#) && closed.is_empty());
        }
        let (lines, closed) = feed(&h, 0, "garbage", s(8));
        assert!(
            lines[0].contains(r#""code":"violations""#) && lines[0].contains(r#""fatal":true"#)
        );
        assert_eq!(closed, vec![ConnId(0)]);
        assert!(
            feed(&h, 0, &hello(100), s(9)).0.is_empty(),
            "a closed connection is not read"
        );
    }

    #[test]
    fn counters_that_go_back_are_refused() {
        let h = hub();
        registered(&h, 0, 100);
        assert!(feed(&h, 0, &stats(512 * MIB, 0, 10, 0), s(1)).0.is_empty());
        let (lines, _) = feed(&h, 0, &stats(512 * MIB, 0, 9, 0), s(2));
        assert!(lines[0].contains("stats.hits = 9 < 10"), "{lines:?}");
    }

    #[test]
    fn bye_and_a_vanished_agent_are_closes_and_a_new_agent_a_new_session() {
        let h = hub();
        registered(&h, 0, 100);
        let (_, closed) = feed(&h, 0, r#"{"type":"bye","reason":"restart"}"#, s(1));
        assert_eq!(closed, vec![ConnId(0)]);
        registered(&h, 1, 100);
        h.lock().on_closed(ConnId(1));
        let closes: Vec<Closed> = h
            .drain_events()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::Closed { why, .. } => Some(why),
                _ => None,
            })
            .collect();
        assert_eq!(
            closes,
            vec![Closed::Bye(Some("restart".into())), Closed::Vanished]
        );
        registered(&h, 2, 100);
        assert_eq!(h.lever(DB, Pages::ZERO, s(2)).unwrap().session, 3);
    }

    #[test]
    fn a_forgotten_tenant_s_agent_hears_bye() {
        let h = hub();
        registered(&h, 0, 100);
        h.forget(DB);
        let (lines, closed) = poll(&h);
        assert!(lines[0].starts_with(r#"{"type":"bye""#), "{lines:?}");
        assert_eq!(closed, vec![ConnId(0)]);
    }
}
