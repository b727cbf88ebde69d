//! The agents memtide serves, by tenant: each connection's session (hello, stats, progress, errors counted), the target each tenant's pool is asked to reach, and the takeovers — an agent dead, stuck past its deadline or dishonest is closed and its tenant handed back to the OS.
//!
//! Two sides use it. The event loop ([`crate::server`]) feeds it each connection's lines
//! and the time, and writes what it answers ([`HubHandler`]). A world (the Linux host, the
//! simulator) reads each tenant's pool, says how large it wants it and what the tenant's
//! memory measures, and takes the events ([`Hub`]). Both hold the same state behind one
//! mutex, taken once per line or per call: a few microseconds, never across I/O.
//!
//! Rules (docs/balloon-protocol.md, "What memtide does with an agent"):
//! - **identity**: a `hello` must name the socket peer's pid, and that process must be in a
//!   tenant the world manages ([`Tenants`]); one live agent per tenant;
//! - **faults**: a line that cannot be read, or breaks the session's rules, gets one
//!   non-fatal `error`; the 8th on a connection gets a fatal `violations` instead;
//! - **targets**: what the world asks is kept within `[min_bytes, max_bytes]`, rounded down to
//!   the granule, and sent as a new `target` only when it differs from the pool and from the
//!   target in flight; each gets `deadline_base + deadline_per_gib` per GiB it moves;
//! - **takeover**: no `stats` for `dead_after` (dead), a target not `done` by its deadline
//!   (stuck), or `done` while the tenant's measured memory did not fall by half of what the
//!   agent said it gave back within `honesty_window` (dishonest): the agent gets that fatal
//!   error, is closed, and the tenant's takeover is recorded until an agent registers again.
//!
//! Times are `Duration`s since the hub began, so a simulated clock can drive it too.

use crate::server::{ConnId, Handler, Outbox};
use memtide_balloon::line::Line;
use memtide_balloon::protocol::{
    AgentMessage, Bye, ErrorCode, ErrorMessage, Hello, MemtideMessage, PoolInfo, PoolKind,
    Progress, ProgressStatus, ProtocolError, Stats, Target, Welcome,
};
use memtide_model::TenantId;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

const GIB: u64 = 1 << 30;

/// How the hub judges its agents.
#[derive(Clone, Debug, PartialEq)]
pub struct HubConfig {
    /// Agents send `stats` at least this often (`welcome.stats_interval_ms`).
    pub stats_interval: Duration,
    /// No `stats` for this long: the agent is dead (`welcome.dead_after_ms`).
    pub dead_after: Duration,
    /// Every target's deadline starts with this much...
    pub deadline_base: Duration,
    /// ...and gets this much more per GiB it moves the pool.
    pub deadline_per_gib: Duration,
    /// After `done`, the tenant's memory must fall by half the release within this long.
    pub honesty_window: Duration,
    /// Errors on one connection before it is closed (the last is `violations`).
    pub max_violations: u32,
}

impl Default for HubConfig {
    /// 1 s stats, dead after 5 s; deadlines of 10 s + 10 s per GiB (ALB Table 2: InnoDB
    /// grows 2 GiB in 16 s, a JVM in 19 s); 10 s to see a release; 8 errors.
    fn default() -> HubConfig {
        HubConfig {
            stats_interval: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
            deadline_base: Duration::from_secs(10),
            deadline_per_gib: Duration::from_secs(10),
            honesty_window: Duration::from_secs(10),
            max_violations: 8,
        }
    }
}

/// Who holds a process: the world's answer for identity.
pub trait Tenants: Send {
    /// The tenant whose cgroup (or VM) holds process `pid`, with its name.
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)>;
}

/// Why a tenant's agent was taken over by the OS mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// No `stats` for this long.
    Dead { silent: Duration },
    /// Target `seq` (`pool_bytes`) was not done within its deadline.
    Stuck {
        seq: u64,
        pool_bytes: u64,
        deadline: Duration,
    },
    /// It said it gave back `released` bytes; the tenant's memory fell by `fell`.
    Dishonest { released: u64, fell: u64 },
    /// The connection closed without `bye`.
    Vanished,
    /// Too many errors on its connection.
    Violations,
}

impl fmt::Display for Takeover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Takeover::Dead { silent } => {
                write!(f, "agent dead: no stats for {:.1} s", silent.as_secs_f64())
            }
            Takeover::Stuck {
                seq,
                pool_bytes,
                deadline,
            } => write!(
                f,
                "agent stuck: target {seq} ({pool_bytes} bytes) not done within {:.1} s",
                deadline.as_secs_f64()
            ),
            Takeover::Dishonest { released, fell } => write!(
                f,
                "agent dishonest: said it released {released} bytes, the tenant's memory fell {fell}"
            ),
            Takeover::Vanished => f.write_str("agent gone: its connection closed without bye"),
            Takeover::Violations => f.write_str("agent closed: too many protocol errors"),
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
    },
    /// The agent said `bye`.
    Left {
        tenant: TenantId,
        reason: Option<String>,
    },
    TakenOver {
        tenant: TenantId,
        why: Takeover,
    },
}

/// A target sent and not answered yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    pub seq: u64,
    pub pool_bytes: u64,
    /// The pool's size when it was sent.
    pub from_bytes: u64,
    pub sent: Duration,
    pub deadline: Duration,
}

/// A tenant's pool as its live agent reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolView {
    pub app: String,
    pub kind: PoolKind,
    /// The agent's process.
    pub pid: u32,
    /// The pool's size, by the latest `stats` or `progress`.
    pub pool_bytes: u64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub granule_bytes: u64,
    /// The latest `stats`, if any came yet.
    pub stats: Option<Stats>,
    pub in_flight: Option<InFlight>,
}

/// A shrink the agent said it finished, waiting for the tenant's memory to show it.
#[derive(Clone, Debug)]
struct Release {
    released: u64,
    /// The tenant's memory measured when the target was sent.
    before: u64,
    until: Duration,
}

#[derive(Debug)]
struct Agent {
    conn: ConnId,
    pid: u32,
    pool: PoolInfo,
    stats: Option<Stats>,
    last_stats: Duration,
    seq: u64,
    in_flight: Option<InFlight>,
    /// The tenant's memory measured when the target in flight was sent.
    before: Option<u64>,
    release: Option<Release>,
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
    /// The pool size the world wants, by tenant.
    asks: BTreeMap<TenantId, u64>,
    /// The tenant's memory as the world last measured it.
    measured: BTreeMap<TenantId, u64>,
    takeovers: BTreeMap<TenantId, Takeover>,
    events: Vec<AgentEvent>,
    /// Connections the world's calls decided to close, with their last line.
    to_close: Vec<(ConnId, String)>,
}

/// The hub, as a world holds it (cheap to clone; every clone is the same hub).
#[derive(Clone)]
pub struct Hub {
    state: Arc<Mutex<State>>,
    wake: Arc<Mutex<Option<crate::server::Wake>>>,
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
                asks: BTreeMap::new(),
                measured: BTreeMap::new(),
                takeovers: BTreeMap::new(),
                events: Vec::new(),
                to_close: Vec::new(),
            })),
            wake: Arc::new(Mutex::new(None)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves state that is still whole (every change is
        // one assignment), so carry on with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The event loop's side of this hub, with its time starting at `start`.
    pub fn handler(&self, start: Instant) -> HubHandler {
        HubHandler {
            hub: self.clone(),
            start,
        }
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

    /// `tenant`'s pool, if it has a live agent.
    pub fn pool(&self, tenant: TenantId) -> Option<PoolView> {
        let s = self.lock();
        s.agents.get(&tenant).map(|a| PoolView {
            app: a.pool.app.clone(),
            kind: a.pool.kind,
            pid: a.pid,
            pool_bytes: a.pool.pool_bytes,
            min_bytes: a.pool.min_bytes,
            max_bytes: a.pool.max_bytes,
            granule_bytes: a.pool.granule_bytes,
            stats: a.stats.clone(),
            in_flight: a.in_flight.clone(),
        })
    }

    /// Why `tenant`'s last agent was taken over, until another registers.
    pub fn takeover(&self, tenant: TenantId) -> Option<Takeover> {
        self.lock().takeovers.get(&tenant).cloned()
    }

    /// Asks `tenant`'s pool to be `pool_bytes` (sent as a target on the loop's next turn if
    /// it changes anything); `None` withdraws the ask.
    pub fn ask(&self, tenant: TenantId, pool_bytes: Option<u64>) {
        {
            let mut s = self.lock();
            match pool_bytes {
                Some(b) => s.asks.insert(tenant, b),
                None => s.asks.remove(&tenant),
            };
        }
        self.wake();
    }

    /// The tenant's memory as the world measures it now (what a release must lower).
    /// Checks a pending release: fallen by half → honest; past its window → dishonest.
    pub fn measured(&self, tenant: TenantId, bytes: u64, now: Duration) {
        let closed = {
            let mut s = self.lock();
            s.measured.insert(tenant, bytes);
            s.check_release(tenant, bytes, now)
        };
        if closed {
            self.wake();
        }
    }

    /// A tenant the world no longer manages: its agent (if any) is closed with `bye`.
    pub fn forget(&self, tenant: TenantId) {
        {
            let mut s = self.lock();
            s.asks.remove(&tenant);
            s.measured.remove(&tenant);
            s.takeovers.remove(&tenant);
            if let Some(a) = s.agents.remove(&tenant) {
                s.conns.remove(&a.conn);
                let bye = MemtideMessage::Bye(Bye {
                    reason: Some("memtide no longer manages this tenant".into()),
                });
                s.to_close.push((a.conn, bye.encode()));
            }
        }
        self.wake();
    }

    /// What happened since the last call.
    pub fn drain_events(&self) -> Vec<AgentEvent> {
        std::mem::take(&mut self.lock().events)
    }
}

/// The event loop's side of a [`Hub`].
pub struct HubHandler {
    hub: Hub,
    start: Instant,
}

impl HubHandler {
    fn at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.start)
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

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        let at = self.at(now);
        self.hub.lock().on_poll(at, out);
    }

    fn stopping(&mut self, _now: Instant, out: &mut Outbox) {
        let mut s = self.hub.lock();
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
            self.refuse(conn, e, now, out);
        }
    }

    /// Answers an error: fatal ones close; others count, and the last allowed is
    /// `violations`.
    fn refuse(&mut self, conn: ConnId, e: ProtocolError, now: Duration, out: &mut Outbox) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.errors += 1;
        if e.code.always_fatal() {
            out.send(conn, error_line(e.code, e.message, true));
            self.close(conn, None, now, out);
        } else if c.errors >= self.config.max_violations {
            let message = format!(
                "{} errors on this connection (the last: {}: {}); closing",
                c.errors, e.code, e.message
            );
            out.send(conn, error_line(ErrorCode::Violations, message, true));
            self.close(conn, Some(Takeover::Violations), now, out);
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
            (None, AgentMessage::Bye(_)) => {
                self.close(conn, None, now, out);
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
            (Some(t), AgentMessage::Bye(b)) => {
                self.events.push(AgentEvent::Left {
                    tenant: t,
                    reason: b.reason,
                });
                self.close(conn, None, now, out);
                Ok(())
            }
            (Some(_), AgentMessage::Error(e)) => {
                if e.fatal {
                    self.close(conn, Some(Takeover::Vanished), now, out);
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
        self.takeovers.remove(&tenant);
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
                pid: h.pid,
                pool: h.pool,
                stats: None,
                last_stats: now,
                seq: 0,
                in_flight: None,
                before: None,
                release: None,
            },
        );
        let welcome = MemtideMessage::Welcome(Welcome {
            tenant: name,
            stats_interval_ms: millis(self.config.stats_interval),
            dead_after_ms: millis(self.config.dead_after),
        });
        out.send(conn, welcome.encode());
        self.send_target(tenant, now, out);
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
        if p.seq > a.seq {
            return Err(ProtocolError::new(
                ErrorCode::UnknownSeq,
                format!("progress.seq = {} was never sent (latest {})", p.seq, a.seq),
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
        // An older target's answer, or a second answer to this one: nothing to do.
        let Some(flight) = a.in_flight.clone().filter(|f| f.seq == p.seq) else {
            return Ok(());
        };
        a.pool.pool_bytes = p.pool_bytes;
        if p.status == ProgressStatus::Working {
            return Ok(());
        }
        a.in_flight = None;
        if p.status == ProgressStatus::Done {
            let released = flight.from_bytes.saturating_sub(p.pool_bytes);
            if released > 0 {
                if let Some(before) = a.before {
                    a.release = Some(Release {
                        released,
                        before,
                        until: now + self.config.honesty_window,
                    });
                }
            }
        }
        self.events.push(AgentEvent::Answered {
            tenant,
            seq: p.seq,
            status: p.status,
            pool_bytes: p.pool_bytes,
            reason: p.reason,
        });
        Ok(())
    }

    /// Sends `tenant`'s target if what the world asks differs from the pool and from the
    /// target in flight.
    fn send_target(&mut self, tenant: TenantId, now: Duration, out: &mut Outbox) {
        let Some(&ask) = self.asks.get(&tenant) else {
            return;
        };
        let config = &self.config;
        let Some(a) = self.agents.get_mut(&tenant) else {
            return;
        };
        let g = a.pool.granule_bytes.max(1);
        let want = ask.clamp(a.pool.min_bytes, a.pool.max_bytes) / g * g;
        let want = want.max(a.pool.min_bytes.div_ceil(g) * g);
        if a.in_flight
            .as_ref()
            .map_or(a.pool.pool_bytes, |f| f.pool_bytes)
            == want
        {
            return;
        }
        let moved = want.abs_diff(a.pool.pool_bytes);
        let deadline =
            config.deadline_base + config.deadline_per_gib.mul_f64(moved as f64 / GIB as f64);
        a.seq += 1;
        a.in_flight = Some(InFlight {
            seq: a.seq,
            pool_bytes: want,
            from_bytes: a.pool.pool_bytes,
            sent: now,
            deadline: now + deadline,
        });
        // A release is judged against the memory measured when it was asked for.
        a.before = self.measured.get(&tenant).copied();
        a.release = None;
        let target = MemtideMessage::Target(Target {
            seq: a.seq,
            pool_bytes: want,
            deadline_ms: millis(deadline).max(1),
        });
        out.send(a.conn, target.encode());
    }

    fn check_release(&mut self, tenant: TenantId, bytes: u64, now: Duration) -> bool {
        let Some(a) = self.agents.get_mut(&tenant) else {
            return false;
        };
        let Some(r) = a.release.clone() else {
            return false;
        };
        let fell = r.before.saturating_sub(bytes);
        if fell.saturating_mul(2) >= r.released {
            a.release = None;
            return false;
        }
        if now < r.until {
            return false;
        }
        let conn = a.conn;
        let why = Takeover::Dishonest {
            released: r.released,
            fell,
        };
        let line = error_line(ErrorCode::Dishonest, why.to_string(), true);
        self.take_over(tenant, why);
        self.conns.remove(&conn);
        self.to_close.push((conn, line));
        true
    }

    fn on_poll(&mut self, now: Duration, out: &mut Outbox) {
        for (conn, line) in std::mem::take(&mut self.to_close) {
            out.send(conn, line);
            out.close(conn);
        }
        let tenants: Vec<TenantId> = self.agents.keys().copied().collect();
        for tenant in tenants {
            let Some(a) = self.agents.get(&tenant) else {
                continue;
            };
            let conn = a.conn;
            let silent = now.saturating_sub(a.last_stats);
            let stuck = a.in_flight.as_ref().filter(|f| now >= f.deadline).cloned();
            if silent >= self.config.dead_after {
                let why = Takeover::Dead { silent };
                out.send(conn, error_line(ErrorCode::Dead, why.to_string(), true));
                self.close(conn, Some(why), now, out);
            } else if let Some(f) = stuck {
                let why = Takeover::Stuck {
                    seq: f.seq,
                    pool_bytes: f.pool_bytes,
                    deadline: f.deadline.saturating_sub(f.sent),
                };
                out.send(conn, error_line(ErrorCode::Deadline, why.to_string(), true));
                self.close(conn, Some(why), now, out);
            } else {
                self.send_target(tenant, now, out);
            }
        }
    }

    fn take_over(&mut self, tenant: TenantId, why: Takeover) {
        self.agents.remove(&tenant);
        self.takeovers.insert(tenant, why.clone());
        self.events.push(AgentEvent::TakenOver { tenant, why });
    }

    /// Closes `conn` (after what was sent to it); its agent, if any, is gone, taken over
    /// for `why` when given.
    fn close(&mut self, conn: ConnId, why: Option<Takeover>, _now: Duration, out: &mut Outbox) {
        if let Some(c) = self.conns.remove(&conn) {
            if let Some(t) = c.tenant {
                match why {
                    Some(why) => self.take_over(t, why),
                    None => {
                        self.agents.remove(&t);
                    }
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
                self.take_over(t, Takeover::Vanished);
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

    fn poll(hub: &Hub, at: Duration) -> (Vec<String>, Vec<ConnId>) {
        let mut out = Outbox::default();
        hub.lock().on_poll(at, &mut out);
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

    fn stats(pool: u64, hits: u64) -> String {
        format!(
            r#"{{"type":"stats","pool_bytes":{pool},"used_bytes":0,"hits":{hits},"misses":0,"evictions":0,"dirty_bytes":0}}"#
        )
    }

    fn registered(hub: &Hub, conn: usize, pid: u32) {
        open(hub, conn, pid);
        let (lines, _) = feed(hub, conn, &hello(pid), s(0));
        assert!(lines[0].contains(r#""type":"welcome""#), "{lines:?}");
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
        let pool = h.pool(DB).unwrap();
        assert_eq!((pool.pool_bytes, pool.pid), (512 * MIB, 100));
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
        assert!(h.pool(DB).is_none() && h.pool(TenantId(2)).is_none());
    }

    #[test]
    fn a_second_agent_for_a_tenant_is_busy() {
        let h = hub();
        registered(&h, 0, 100);
        open(&h, 1, 100);
        let (lines, closed) = feed(&h, 1, &hello(100), s(0));
        assert!(lines[0].contains(r#""code":"busy""#), "{lines:?}");
        assert_eq!(closed, vec![ConnId(1)]);
        assert!(h.pool(DB).is_some(), "the first agent stays");
    }

    #[test]
    fn an_ask_becomes_one_target_rounded_to_the_granule_within_min_and_max() {
        let h = hub();
        registered(&h, 0, 100);
        h.ask(DB, Some(300 * MIB + 12345));
        let (lines, _) = poll(&h, s(1));
        assert_eq!(
            lines,
            vec![format!(
                r#"{{"type":"target","seq":1,"pool_bytes":{},"deadline_ms":12070}}"#,
                300 * MIB
            )]
        );
        assert!(
            poll(&h, s(2)).0.is_empty(),
            "the same ask is not sent again"
        );
        h.ask(DB, Some(1));
        let (lines, _) = poll(&h, s(2));
        assert!(lines[0].contains(&format!(r#""seq":2,"pool_bytes":{}"#, 64 * MIB)));
    }

    #[test]
    fn done_updates_the_pool_and_a_stale_or_unknown_seq_is_told_apart() {
        let h = hub();
        registered(&h, 0, 100);
        h.ask(DB, Some(256 * MIB));
        poll(&h, s(1));
        let done = |seq: u64| {
            format!(
                r#"{{"type":"progress","seq":{seq},"pool_bytes":{},"status":"done"}}"#,
                256 * MIB
            )
        };
        let (lines, _) = feed(&h, 0, &done(7), s(2));
        assert!(lines[0].contains(r#""code":"unknown_seq""#), "{lines:?}");
        assert!(feed(&h, 0, &done(1), s(2)).0.is_empty());
        assert_eq!(h.pool(DB).unwrap().pool_bytes, 256 * MIB);
        assert!(h.pool(DB).unwrap().in_flight.is_none());
        let events = h.drain_events();
        assert!(matches!(
            events.last(),
            Some(AgentEvent::Answered {
                seq: 1,
                status: ProgressStatus::Done,
                ..
            })
        ));
    }

    #[test]
    fn an_agent_without_stats_for_dead_after_is_taken_over() {
        let h = hub();
        registered(&h, 0, 100);
        feed(&h, 0, &stats(512 * MIB, 10), s(3));
        assert!(poll(&h, s(7)).0.is_empty(), "4 s of silence is allowed");
        let (lines, closed) = poll(&h, s(8));
        assert!(lines[0].contains(r#""code":"dead""#), "{lines:?}");
        assert_eq!(closed, vec![ConnId(0)]);
        assert!(h.pool(DB).is_none());
        assert!(matches!(h.takeover(DB), Some(Takeover::Dead { .. })));
    }

    #[test]
    fn a_target_not_done_by_its_deadline_is_taken_over() {
        let h = hub();
        registered(&h, 0, 100);
        h.ask(DB, Some(0));
        poll(&h, s(0));
        let deadline = h.pool(DB).unwrap().in_flight.unwrap().deadline;
        assert_eq!(deadline, Duration::from_millis(14_375)); // 10 s + 448 MiB at 10 s/GiB
        for t in 1..=14 {
            feed(&h, 0, &stats(512 * MIB, t), s(t));
            assert!(poll(&h, s(t)).0.is_empty());
        }
        feed(&h, 0, &stats(512 * MIB, 15), s(15));
        let (lines, closed) = poll(&h, s(15));
        assert!(lines[0].contains(r#""code":"deadline""#), "{lines:?}");
        assert_eq!(closed, vec![ConnId(0)]);
        assert!(matches!(
            h.takeover(DB),
            Some(Takeover::Stuck { seq: 1, .. })
        ));
    }

    #[test]
    fn done_without_the_memory_falling_is_dishonest() {
        let h = hub();
        registered(&h, 0, 100);
        h.measured(DB, 900 * MIB, s(0));
        h.ask(DB, Some(256 * MIB));
        poll(&h, s(0));
        let done = format!(
            r#"{{"type":"progress","seq":1,"pool_bytes":{},"status":"done"}}"#,
            256 * MIB
        );
        feed(&h, 0, &done, s(1));
        h.measured(DB, 890 * MIB, s(5));
        assert!(h.pool(DB).is_some(), "within the window");
        h.measured(DB, 880 * MIB, s(11));
        assert!(h.pool(DB).is_none());
        let (lines, closed) = poll(&h, s(11));
        assert!(lines[0].contains(r#""code":"dishonest""#), "{lines:?}");
        assert_eq!(closed, vec![ConnId(0)]);
        assert_eq!(
            h.takeover(DB),
            Some(Takeover::Dishonest {
                released: 256 * MIB,
                fell: 20 * MIB
            })
        );
    }

    #[test]
    fn done_with_the_memory_falling_by_half_the_release_is_honest() {
        let h = hub();
        registered(&h, 0, 100);
        h.measured(DB, 900 * MIB, s(0));
        h.ask(DB, Some(256 * MIB));
        poll(&h, s(0));
        let done = format!(
            r#"{{"type":"progress","seq":1,"pool_bytes":{},"status":"done"}}"#,
            256 * MIB
        );
        feed(&h, 0, &done, s(1));
        h.measured(DB, 760 * MIB, s(2));
        h.measured(DB, 760 * MIB, s(30));
        assert!(h.pool(DB).is_some() && h.takeover(DB).is_none());
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
        assert!(feed(&h, 0, &stats(512 * MIB, 10), s(1)).0.is_empty());
        let (lines, _) = feed(&h, 0, &stats(512 * MIB, 9), s(2));
        assert!(lines[0].contains("stats.hits = 9 < 10"), "{lines:?}");
    }

    #[test]
    fn bye_leaves_without_a_takeover_and_a_vanished_agent_is_one() {
        let h = hub();
        registered(&h, 0, 100);
        let (_, closed) = feed(&h, 0, r#"{"type":"bye"}"#, s(1));
        assert_eq!(closed, vec![ConnId(0)]);
        assert!(h.pool(DB).is_none() && h.takeover(DB).is_none());
        registered(&h, 1, 100);
        h.lock().on_closed(ConnId(1));
        assert_eq!(h.takeover(DB), Some(Takeover::Vanished));
        registered(&h, 2, 100);
        assert_eq!(h.takeover(DB), None, "a new agent clears the takeover");
    }
}
