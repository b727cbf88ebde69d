//! memtide's side of one agent connection's balloon session as a state machine without sockets, threads or clocks: raw lines and times in, lines to write, a close and events out, the tenant's application balloon lever read from it.
//!
//! Two drivers run it: the daemon's hub (`crate::hub`, one [`Session`] per socket connection,
//! served over mio) and the simulator (`memtide-sim`'s `app`, one per simulated connection,
//! its agent's messages encoded to lines and memtide's answers decoded). Times are
//! `Duration`s on the driver's clock, real or simulated.
//!
//! What a session decides itself is the protocol (docs/balloon-protocol.md):
//! - **registration**: the first message must be `hello`; the driver says who it registers
//!   ([`Admitted`]) or refuses it (identity, one agent per tenant: the driver's business),
//!   and the session answers `welcome` or the refusal;
//! - **errors**: a line that cannot be read, or breaks the session's rules, gets one non-fatal
//!   `error`, and the 8th on a connection (`max_violations`) a fatal `violations` instead; an
//!   always-fatal code closes at once;
//! - **the lever** ([`Session::lever`]): the registered pool, the latest `stats` (hits and
//!   misses since the lever was last read, the curve in pages, durability rates over at
//!   least [`RATE_SPAN`]), the last target and its answer, and the silence since the last
//!   `stats` (or the `hello`);
//! - **targets**: the policy's pool rounded down to the granule within `[min_bytes,
//!   max_bytes]`, sent as a new `target` only when it differs from the last one sent; a
//!   takeover closes with `dead`, `deadline` or `dishonest`.
//!
//! Whether an agent is dead, stuck or dishonest is the policy's call
//! (`policy::mechanism::app_balloon`): it reads the lever's `silent_for`, `answer` and
//! `used`, and the driver hands its verdict back as [`AppMove::TakeOver`].

mod durability;

pub use durability::RATE_SPAN;

use durability::Syncs;
use memtide_balloon::line::Line;
use memtide_balloon::protocol::{
    AgentMessage, Bye, ErrorCode, ErrorMessage, Hello, MemtideMessage, PoolInfo, PoolKind,
    Progress, ProgressStatus, ProtocolError, Stats, Target, Welcome,
};
use memtide_model::{
    AppAnswer, AppBalloonLever, AppMove, AppStatus, Bytes, MissCurve, Pages, Takeover, TenantId,
};
use std::fmt;
use std::time::Duration;

/// How memtide speaks to its agents.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// Agents send `stats` at least this often (`welcome.stats_interval_ms`).
    pub stats_interval: Duration,
    /// No `stats` for this long: the policy counts the agent dead (`welcome.dead_after_ms`).
    pub dead_after: Duration,
    /// Errors on one connection before it is closed (the last is `violations`).
    pub max_violations: u32,
    /// A connection that has not said `hello` this long after it opened is closed.
    pub hello_within: Duration,
}

impl Default for SessionConfig {
    /// 1 s stats, dead after 5 s, 8 errors, `hello` within 5 s.
    fn default() -> SessionConfig {
        SessionConfig {
            stats_interval: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
            max_violations: 8,
            hello_within: Duration::from_secs(5),
        }
    }
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

/// Who a `hello` registers, as the driver admits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    pub tenant: TenantId,
    /// The tenant's name, for the `welcome`.
    pub name: String,
    /// The session's id, unique among the tenant's sessions (the lever's `session`).
    pub id: u64,
}

/// What a session asks its driver to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reply {
    /// Lines to write to the agent, in order (encoded messages, without the newline).
    pub lines: Vec<String>,
    /// Close the connection after them: the session reads nothing more.
    pub close: bool,
    /// What happened, for the world to record.
    pub events: Vec<AgentEvent>,
}

/// The latest target sent to an agent, and its answer so far.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sent {
    seq: u64,
    pool_bytes: u64,
    status: AppStatus,
    /// When it was sent, on the driver's clock.
    at: Duration,
}

/// A registered agent.
#[derive(Clone, Debug)]
struct Agent {
    tenant: TenantId,
    id: u64,
    pool: PoolInfo,
    stats: Option<Stats>,
    /// When the last `stats` came (the `hello`'s time before the first).
    last_stats: Duration,
    /// Hits and misses when the lever was last read (deltas are reported).
    counted: Option<(u64, u64)>,
    /// The database's durability figures, when its agent reports them.
    syncs: Syncs,
    sent: Option<Sent>,
}

/// One connection's session (see the module docs).
#[derive(Clone, Debug)]
pub struct Session {
    config: SessionConfig,
    /// Errors answered on this connection.
    errors: u32,
    /// `None` until a `hello` is admitted.
    agent: Option<Agent>,
    /// The connection is to close: nothing more is read or sent.
    closed: bool,
}

impl Session {
    /// A connection's session before its `hello`.
    pub fn new(config: SessionConfig) -> Session {
        Session {
            config,
            errors: 0,
            agent: None,
            closed: false,
        }
    }

    /// The tenant its agent registered for (`None` before `hello`).
    pub fn tenant(&self) -> Option<TenantId> {
        self.agent.as_ref().map(|a| a.tenant)
    }

    /// Takes one line the agent sent, at `now`; `admit` says who a `hello` registers (or why
    /// not: its code should be always fatal, `identity` or `busy`).
    pub fn line(
        &mut self,
        line: Line,
        now: Duration,
        admit: impl FnOnce(&Hello) -> Result<Admitted, ProtocolError>,
    ) -> Reply {
        let mut reply = Reply::default();
        if self.closed {
            return reply;
        }
        let message = match line {
            Line::TooLong => Err(ProtocolError::new(
                ErrorCode::TooLong,
                "line over 65,536 bytes, dropped",
            )),
            Line::Complete(bytes) => AgentMessage::decode(&bytes),
        };
        let result = message.and_then(|m| self.message(m, now, admit, &mut reply));
        if let Err(e) = result {
            self.refuse(e, &mut reply);
        }
        reply
    }

    /// The tenant's application balloon while the agent is registered, with `used` the
    /// tenant's memory as the world measures it, at `now`; hits and misses are counted since
    /// the last call.
    pub fn lever(&mut self, used: Pages, now: Duration) -> Option<AppBalloonLever> {
        let dead_after = self.config.dead_after;
        let a = self.agent.as_mut().filter(|_| !self.closed)?;
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
            session: a.id,
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
            durability: a.syncs.figures().map(Box::new),
            answer: a.sent.as_ref().map(|t| AppAnswer {
                target: pages(t.pool_bytes),
                status: t.status,
            }),
            silent_for: now.saturating_sub(a.last_stats),
            dead_after,
        })
    }

    /// Carries out the policy's move at `now`: a target (sent when it differs from the last
    /// one sent), or a takeover (the agent gets that fatal error and is closed).
    pub fn apply(&mut self, app_move: AppMove, now: Duration) -> Reply {
        match app_move {
            AppMove::Target { pool, deadline } => self.target(pool, deadline, now),
            AppMove::TakeOver(why) => {
                let code = match why {
                    Takeover::Stuck { .. } => ErrorCode::Deadline,
                    Takeover::Dead { .. } => ErrorCode::Dead,
                    Takeover::Dishonest { .. } => ErrorCode::Dishonest,
                };
                self.end(
                    error_line(code, why.to_string(), true),
                    Closed::TakenOver(why),
                )
            }
        }
    }

    /// The world no longer manages the tenant: the agent hears `bye` and is closed.
    pub fn forget(&mut self) -> Reply {
        self.end(
            bye_line("memtide no longer manages this tenant"),
            Closed::Forgotten,
        )
    }

    /// memtide is stopping: `bye` to the agent, registered or not, and no event.
    pub fn stop(&mut self) -> Reply {
        if self.closed {
            return Reply::default();
        }
        self.closed = true;
        Reply {
            lines: vec![bye_line("memtide is stopping")],
            close: true,
            events: Vec::new(),
        }
    }

    /// `hello_within` has passed since the connection opened: a connection that has not said
    /// `hello` hears a fatal `not_registered` and is closed; a registered agent is left alone.
    pub fn hello_overdue(&mut self) -> Reply {
        let mut reply = Reply::default();
        if self.closed || self.agent.is_some() {
            return reply;
        }
        let message = format!(
            "no hello within {} ms of connecting; closing",
            self.config.hello_within.as_millis()
        );
        reply
            .lines
            .push(error_line(ErrorCode::NotRegistered, message, true));
        self.close(Closed::Vanished, &mut reply);
        reply
    }

    /// The connection closed under the session: its agent, if any, vanished.
    pub fn vanished(&mut self) -> Reply {
        let mut reply = Reply::default();
        if !self.closed {
            self.closed = true;
            if let Some(a) = &self.agent {
                reply.events.push(AgentEvent::Closed {
                    tenant: a.tenant,
                    why: Closed::Vanished,
                });
            }
        }
        reply
    }

    /// Ends a registered agent: `line` is its last, then its connection closes.
    fn end(&mut self, line: String, why: Closed) -> Reply {
        match &self.agent {
            Some(a) if !self.closed => {
                self.closed = true;
                Reply {
                    lines: vec![line],
                    close: true,
                    events: vec![AgentEvent::Closed {
                        tenant: a.tenant,
                        why,
                    }],
                }
            }
            _ => Reply::default(),
        }
    }

    /// Closes after what `reply` holds; the agent, if any, is gone for `why`.
    fn close(&mut self, why: Closed, reply: &mut Reply) {
        self.closed = true;
        reply.close = true;
        if let Some(a) = &self.agent {
            reply.events.push(AgentEvent::Closed {
                tenant: a.tenant,
                why,
            });
        }
    }

    /// Answers an error: fatal ones close; others count, and the last allowed is
    /// `violations`.
    fn refuse(&mut self, e: ProtocolError, reply: &mut Reply) {
        self.errors += 1;
        if e.code.always_fatal() {
            reply.lines.push(error_line(e.code, e.message, true));
            self.close(Closed::Vanished, reply);
        } else if self.errors >= self.config.max_violations {
            let message = format!(
                "{} errors on this connection (the last: {}: {}); closing",
                self.errors, e.code, e.message
            );
            reply
                .lines
                .push(error_line(ErrorCode::Violations, message, true));
            self.close(Closed::Violations, reply);
        } else {
            reply.lines.push(error_line(e.code, e.message, false));
        }
    }

    fn message(
        &mut self,
        message: AgentMessage,
        now: Duration,
        admit: impl FnOnce(&Hello) -> Result<Admitted, ProtocolError>,
        reply: &mut Reply,
    ) -> Result<(), ProtocolError> {
        let registered = self.agent.is_some();
        match message {
            AgentMessage::Hello(h) if !registered => self.hello(h, now, admit, reply),
            AgentMessage::Hello(_) => Err(ProtocolError::new(
                ErrorCode::AlreadyRegistered,
                "a second hello on this connection",
            )),
            AgentMessage::Bye(b) => {
                self.close(Closed::Bye(b.reason), reply);
                Ok(())
            }
            other if !registered => Err(ProtocolError::new(
                ErrorCode::NotRegistered,
                format!("{} before hello", kind_of(&other)),
            )),
            AgentMessage::Stats(s) => self.stats(s, now),
            AgentMessage::Progress(p) => self.progress(p, now, reply),
            AgentMessage::Error(e) => {
                if e.fatal {
                    self.close(Closed::Vanished, reply);
                }
                Ok(())
            }
        }
    }

    fn hello(
        &mut self,
        h: Hello,
        now: Duration,
        admit: impl FnOnce(&Hello) -> Result<Admitted, ProtocolError>,
        reply: &mut Reply,
    ) -> Result<(), ProtocolError> {
        let who = admit(&h)?;
        reply.events.push(AgentEvent::Registered {
            tenant: who.tenant,
            app: h.pool.app.clone(),
            kind: h.pool.kind,
            pid: h.pid,
        });
        self.agent = Some(Agent {
            tenant: who.tenant,
            id: who.id,
            pool: h.pool,
            stats: None,
            last_stats: now,
            counted: None,
            syncs: Syncs::default(),
            sent: None,
        });
        let welcome = MemtideMessage::Welcome(Welcome {
            tenant: who.name,
            stats_interval_ms: millis(self.config.stats_interval),
            dead_after_ms: millis(self.config.dead_after),
        });
        reply.lines.push(welcome.encode());
        Ok(())
    }

    fn stats(&mut self, s: Stats, now: Duration) -> Result<(), ProtocolError> {
        let Some(a) = &mut self.agent else {
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
        p: Progress,
        now: Duration,
        reply: &mut Reply,
    ) -> Result<(), ProtocolError> {
        let Some(a) = &mut self.agent else {
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
            reply.events.push(AgentEvent::Answered {
                tenant: a.tenant,
                seq: p.seq,
                status: p.status,
                pool_bytes: p.pool_bytes,
                reason: p.reason,
                took: now.saturating_sub(sent.at),
            });
        }
        Ok(())
    }

    /// A target of `pool` for the agent, on its granule within its min and max, unless it is
    /// the last one sent.
    fn target(&mut self, pool: Pages, deadline: Duration, now: Duration) -> Reply {
        let mut reply = Reply::default();
        let Some(a) = self.agent.as_mut().filter(|_| !self.closed) else {
            return reply;
        };
        let g = a.pool.granule_bytes.max(1);
        let (lo, hi) = (a.pool.min_bytes.div_ceil(g) * g, a.pool.max_bytes / g * g);
        let want = (pool.to_bytes().0 / g * g).clamp(lo.min(hi), hi);
        if a.sent.as_ref().is_some_and(|t| t.pool_bytes == want) {
            return reply;
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
        reply.lines.push(target.encode());
        reply
    }
}

/// Whole pages of `bytes` (a pool's size counts what it holds).
fn pages(bytes: u64) -> Pages {
    Bytes(bytes).to_pages_floor()
}

fn error_line(code: ErrorCode, message: impl Into<String>, fatal: bool) -> String {
    MemtideMessage::Error(ErrorMessage {
        code,
        message: message.into(),
        fatal: fatal || code.always_fatal(),
    })
    .encode()
}

fn bye_line(reason: &str) -> String {
    MemtideMessage::Bye(Bye {
        reason: Some(reason.into()),
    })
    .encode()
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

    const MIB: u64 = 1 << 20;
    const DB: TenantId = TenantId(1);

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn mib(n: u64) -> Pages {
        Bytes(n * MIB).to_pages_floor()
    }

    /// Admits any hello for tenant 1 ("db") as session 7.
    fn db(_: &Hello) -> Result<Admitted, ProtocolError> {
        Ok(Admitted {
            tenant: DB,
            name: "db".into(),
            id: 7,
        })
    }

    /// Feeds `message`, encoded, at `at`.
    fn send(session: &mut Session, message: AgentMessage, at: Duration) -> Reply {
        session.line(Line::Complete(message.encode().into_bytes()), at, db)
    }

    /// The messages of `reply`, decoded as an agent reads them.
    fn read(reply: &Reply) -> Vec<MemtideMessage> {
        reply
            .lines
            .iter()
            .map(|l| MemtideMessage::decode(l.as_bytes()).expect(l))
            .collect()
    }

    fn hello() -> AgentMessage {
        AgentMessage::Hello(Hello {
            pid: 100,
            pool: PoolInfo {
                app: "mariadb".into(),
                kind: PoolKind::BufferPool,
                pool_bytes: 512 * MIB,
                min_bytes: 64 * MIB,
                max_bytes: 1024 * MIB,
                granule_bytes: MIB,
            },
        })
    }

    fn stats(pool: u64, hits: u64, misses: u64) -> AgentMessage {
        AgentMessage::Stats(Stats {
            pool_bytes: pool,
            used_bytes: pool / 2,
            hits,
            misses,
            evictions: 0,
            dirty_bytes: 0,
            durability: None,
            curve: None,
        })
    }

    fn progress(seq: u64, pool: u64, status: ProgressStatus) -> AgentMessage {
        AgentMessage::Progress(Progress {
            seq,
            pool_bytes: pool,
            status,
            reason: None,
        })
    }

    /// A session whose agent registered at `at`.
    fn registered(at: Duration) -> Session {
        let mut session = Session::new(SessionConfig::default());
        let reply = send(&mut session, hello(), at);
        assert!(matches!(read(&reply)[..], [MemtideMessage::Welcome(_)]));
        session
    }

    fn target(pool: Pages) -> AppMove {
        AppMove::Target {
            pool,
            deadline: Duration::from_millis(12_500),
        }
    }

    #[test]
    fn an_admitted_hello_is_welcomed_registered_and_fills_the_lever() {
        let mut session = Session::new(SessionConfig::default());
        assert_eq!(session.lever(mib(600), s(0)), None, "no lever before hello");
        let reply = send(&mut session, hello(), s(3));
        assert_eq!(
            read(&reply),
            [MemtideMessage::Welcome(Welcome {
                tenant: "db".into(),
                stats_interval_ms: 1000,
                dead_after_ms: 5000,
            })]
        );
        assert!(!reply.close);
        assert_eq!(
            reply.events,
            [AgentEvent::Registered {
                tenant: DB,
                app: "mariadb".into(),
                kind: PoolKind::BufferPool,
                pid: 100,
            }]
        );
        assert_eq!(session.tenant(), Some(DB));
        let lever = session.lever(mib(600), s(4)).unwrap();
        assert_eq!(
            (
                lever.session,
                lever.pool,
                lever.min,
                lever.max,
                lever.granule
            ),
            (7, mib(512), mib(64), mib(1024), mib(1))
        );
        assert_eq!(lever.silent_for, s(1), "silent since the hello");
    }

    #[test]
    fn a_refused_hello_gets_the_driver_s_error_and_closes() {
        let mut session = Session::new(SessionConfig::default());
        let reply = session.line(Line::Complete(hello().encode().into_bytes()), s(0), |_| {
            Err(ProtocolError::new(
                ErrorCode::Busy,
                "tenant db already has a live agent",
            ))
        });
        assert!(matches!(
            &read(&reply)[..],
            [MemtideMessage::Error(ErrorMessage {
                code: ErrorCode::Busy,
                fatal: true,
                ..
            })]
        ));
        assert!(reply.close && reply.events.is_empty());
        assert_eq!(session.tenant(), None);
    }

    #[test]
    fn messages_before_hello_are_not_registered_errors_and_the_eighth_error_closes() {
        let mut session = Session::new(SessionConfig::default());
        let reply = send(&mut session, stats(MIB, 0, 0), s(0));
        assert!(matches!(
            &read(&reply)[..],
            [MemtideMessage::Error(ErrorMessage {
                code: ErrorCode::NotRegistered,
                fatal: false,
                ..
            })]
        ));
        for _ in 0..6 {
            let reply = session.line(Line::TooLong, s(0), db);
            assert!(!reply.close);
        }
        let reply = session.line(Line::Complete(b"garbage".to_vec()), s(0), db);
        assert!(matches!(
            &read(&reply)[..],
            [MemtideMessage::Error(ErrorMessage {
                code: ErrorCode::Violations,
                fatal: true,
                ..
            })]
        ));
        assert!(reply.close);
        assert_eq!(
            send(&mut session, hello(), s(1)),
            Reply::default(),
            "a closed session reads nothing"
        );
    }

    #[test]
    fn silence_counts_from_the_last_stats() {
        let mut session = registered(s(0));
        assert!(send(&mut session, stats(512 * MIB, 10, 1), s(2))
            .lines
            .is_empty());
        assert_eq!(session.lever(mib(600), s(2)).unwrap().silent_for, s(0));
        assert_eq!(session.lever(mib(600), s(9)).unwrap().silent_for, s(7));
    }

    #[test]
    fn the_lever_reports_hits_and_misses_since_it_was_last_read() {
        let mut session = registered(s(0));
        send(&mut session, stats(512 * MIB, 100, 10), s(1));
        let first = session.lever(mib(600), s(1)).unwrap();
        assert_eq!((first.hits, first.misses), (Some(100), Some(10)));
        send(&mut session, stats(512 * MIB, 130, 15), s(2));
        send(&mut session, stats(512 * MIB, 160, 20), s(3));
        let next = session.lever(mib(600), s(3)).unwrap();
        assert_eq!((next.hits, next.misses), (Some(60), Some(10)));
    }

    #[test]
    fn a_target_goes_out_once_on_the_granule_and_its_answer_ends_it() {
        let mut session = registered(s(0));
        let reply = session.apply(target(Pages(300 * 256 + 3)), s(1));
        assert_eq!(
            read(&reply),
            [MemtideMessage::Target(Target {
                seq: 1,
                pool_bytes: 300 * MIB,
                deadline_ms: 12_500,
            })]
        );
        assert_eq!(
            session.apply(target(Pages(300 * 256 + 3)), s(1)),
            Reply::default(),
            "the same target is not sent again"
        );
        send(
            &mut session,
            progress(1, 400 * MIB, ProgressStatus::Working),
            s(2),
        );
        let lever = session.lever(mib(600), s(2)).unwrap();
        assert_eq!(
            (lever.pool, lever.answer.unwrap().status),
            (mib(400), AppStatus::Working)
        );
        let reply = send(
            &mut session,
            progress(1, 300 * MIB, ProgressStatus::Done),
            s(4),
        );
        assert_eq!(
            reply.events,
            [AgentEvent::Answered {
                tenant: DB,
                seq: 1,
                status: ProgressStatus::Done,
                pool_bytes: 300 * MIB,
                reason: None,
                took: s(3),
            }]
        );
        send(
            &mut session,
            progress(1, 200 * MIB, ProgressStatus::Failed),
            s(5),
        );
        let answer = session.lever(mib(600), s(5)).unwrap().answer.unwrap();
        assert_eq!(
            (answer.target, answer.status),
            (mib(300), AppStatus::Done),
            "a target's end is final"
        );
    }

    #[test]
    fn a_takeover_closes_with_its_code_and_the_lever_is_gone() {
        let mut session = registered(s(0));
        let why = Takeover::Dead { silent_for: s(6) };
        let reply = session.apply(AppMove::TakeOver(why), s(6));
        assert!(matches!(
            &read(&reply)[..],
            [MemtideMessage::Error(ErrorMessage {
                code: ErrorCode::Dead,
                fatal: true,
                ..
            })]
        ));
        assert!(reply.close);
        assert_eq!(
            reply.events,
            [AgentEvent::Closed {
                tenant: DB,
                why: Closed::TakenOver(why)
            }]
        );
        assert_eq!(session.lever(mib(600), s(6)), None);
        assert_eq!(session.apply(target(mib(300)), s(7)), Reply::default());
    }

    #[test]
    fn bye_a_vanished_connection_and_stopping_end_the_session() {
        let mut session = registered(s(0));
        let reply = send(
            &mut session,
            AgentMessage::Bye(Bye {
                reason: Some("restart".into()),
            }),
            s(1),
        );
        assert!(reply.close && reply.lines.is_empty());
        assert_eq!(
            reply.events,
            [AgentEvent::Closed {
                tenant: DB,
                why: Closed::Bye(Some("restart".into()))
            }]
        );
        assert_eq!(session.vanished(), Reply::default(), "already closed");
        let mut session = registered(s(0));
        assert_eq!(
            session.vanished().events,
            [AgentEvent::Closed {
                tenant: DB,
                why: Closed::Vanished
            }]
        );
        let mut session = Session::new(SessionConfig::default());
        let reply = session.stop();
        assert!(matches!(&read(&reply)[..], [MemtideMessage::Bye(_)]));
        assert!(reply.close && reply.events.is_empty());
    }
}
