//! The agents memtide serves, by tenant: which connection holds which tenant's session ([`crate::session::Session`], the protocol's state machine), identity against the world's tenants, one live agent per tenant, and the events a world records.
//!
//! Two sides use it. The event loop ([`crate::server`]) feeds it each connection's lines and
//! the time, and writes what it answers ([`HubHandler`]). A world (the Linux host) reads each
//! tenant's [`AppBalloonLever`], carries out the policy's [`AppMove`]s and takes the events
//! ([`Hub`]). Both hold the same state behind one mutex, taken once per line or per call: a
//! few microseconds, never across I/O (a line of a connection not yet registered takes it
//! twice: the peer's tenant is read from `/proc` between).
//!
//! What the hub decides itself is who an agent is: a `hello` must name the socket peer's pid,
//! that process must be in a tenant the world manages ([`Tenants`]) and still be the process
//! that connected once that was read (its pidfd, [`Peer::alive`]: a pid reused by a process
//! in another tenant is refused), and a tenant has one live agent. A connection that has not
//! said `hello` within `hello_within` is closed. Everything else of the protocol (errors
//! counted to `violations`, stats, targets, answers, durability rates, the lever) is the
//! session's, the same one the simulator drives. Times are `Duration`s since the hub began.

use crate::server::{ConnId, Handler, Outbox};
use crate::session::{Admitted, Reply, Session};
pub use crate::session::{AgentEvent, Closed, SessionConfig};
use crate::socket::Peer;
use memtide_balloon::line::Line;
use memtide_balloon::protocol::{ErrorCode, Hello, ProtocolError};
use memtide_model::{AppBalloonLever, AppMove, Pages, TenantId};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Who holds a process: the world's answer for identity (asked on the event loop's thread,
/// outside the hub's lock).
pub trait Tenants: Send + Sync {
    /// The tenant whose cgroup (or VM) holds process `pid`, with its name.
    fn tenant_of(&self, pid: u32) -> Option<(TenantId, String)>;
}

/// A connection: its peer, when it opened, and its session.
#[derive(Debug)]
struct Conn {
    peer: Arc<Peer>,
    opened: Duration,
    session: Session,
}

struct State {
    config: SessionConfig,
    conns: BTreeMap<ConnId, Conn>,
    /// Connections by when they opened (and that time), oldest first: each is looked at once,
    /// when `hello_within` has passed.
    hello_due: VecDeque<(Duration, ConnId)>,
    /// Each tenant's live agent's connection.
    agents: BTreeMap<TenantId, ConnId>,
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
    tenants: Arc<dyn Tenants>,
    wake: Arc<Mutex<Option<crate::server::Wake>>>,
    start: Instant,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    pub fn new(config: SessionConfig, tenants: Box<dyn Tenants>) -> Hub {
        Hub {
            state: Arc::new(Mutex::new(State {
                config,
                conns: BTreeMap::new(),
                hello_due: VecDeque::new(),
                agents: BTreeMap::new(),
                sessions: 0,
                events: Vec::new(),
                pending: Vec::new(),
            })),
            tenants: Arc::from(tenants),
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
        s.session(tenant)?.lever(used, now)
    }

    /// Carries out the policy's move for `tenant`: a target (sent when it differs from the
    /// last one sent), or a takeover (the agent gets that fatal error and is closed).
    pub fn apply(&self, tenant: TenantId, app_move: AppMove) {
        let now = self.start.elapsed();
        self.lock()
            .queue(tenant, |session| session.apply(app_move, now));
        self.wake();
    }

    /// A tenant the world no longer manages: its agent (if any) hears `bye` and is closed.
    pub fn forget(&self, tenant: TenantId) {
        self.lock().queue(tenant, Session::forget);
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
}

impl HubHandler {
    fn at(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.hub.start)
    }
}

impl Handler for HubHandler {
    fn opened(&mut self, conn: ConnId, peer: Peer, now: Instant) {
        let at = self.at(now);
        self.hub.lock().open(conn, peer, at);
    }

    fn line(&mut self, conn: ConnId, line: Line, now: Instant, out: &mut Outbox) {
        let at = self.at(now);
        // Who the peer is, for a hello this line may be: read from /proc outside the lock.
        let unregistered = self.hub.lock().unregistered_peer(conn);
        let identity = unregistered.map(|peer| identify(&peer, self.hub.tenants.as_ref()));
        self.hub.lock().on_line(conn, line, at, identity, out);
    }

    fn closed(&mut self, conn: ConnId, _now: Instant) {
        self.hub.lock().on_closed(conn);
    }

    fn poll(&mut self, now: Instant, out: &mut Outbox) {
        let at = self.at(now);
        let mut s = self.hub.lock();
        s.close_overdue(at, out);
        s.on_poll(out);
    }

    fn stopping(&mut self, _now: Instant, out: &mut Outbox) {
        let mut s = self.hub.lock();
        s.on_poll(out);
        for (&conn, c) in s.conns.iter_mut() {
            write(conn, c.session.stop(), out);
        }
        s.conns.clear();
        s.hello_due.clear();
        s.agents.clear();
    }
}

/// Writes `reply`'s lines to `conn`, and closes it after them if the session says so.
fn write(conn: ConnId, reply: Reply, out: &mut Outbox) {
    for line in reply.lines {
        out.send(conn, line);
    }
    if reply.close {
        out.close(conn);
    }
}

impl State {
    fn open(&mut self, conn: ConnId, peer: Peer, now: Duration) {
        let session = Session::new(self.config.clone());
        self.conns.insert(
            conn,
            Conn {
                peer: Arc::new(peer),
                opened: now,
                session,
            },
        );
        self.hello_due.push_back((now, conn));
    }

    /// The peer of `conn` while it has not registered (a hello may still come).
    fn unregistered_peer(&self, conn: ConnId) -> Option<Arc<Peer>> {
        let c = self.conns.get(&conn)?;
        c.session.tenant().is_none().then(|| c.peer.clone())
    }

    /// Closes the connections that have not said hello within `hello_within` of opening.
    fn close_overdue(&mut self, now: Duration, out: &mut Outbox) {
        let within = self.config.hello_within;
        while let Some(&(opened, conn)) = self.hello_due.front() {
            if now.saturating_sub(opened) < within {
                break;
            }
            self.hello_due.pop_front();
            // The same connection (its number may have been reused since), not yet closed.
            let Some(c) = self.conns.get_mut(&conn).filter(|c| c.opened == opened) else {
                continue;
            };
            let reply = c.session.hello_overdue();
            let reply = self.follow(conn, reply);
            write(conn, reply, out);
        }
    }

    /// The session of `tenant`'s live agent.
    fn session(&mut self, tenant: TenantId) -> Option<&mut Session> {
        let conn = self.agents.get(&tenant)?;
        self.conns.get_mut(conn).map(|c| &mut c.session)
    }

    /// Takes one line from `conn`; `identity` is its peer's, read before the lock was taken
    /// (`None` once registered: no hello is admitted then).
    fn on_line(
        &mut self,
        conn: ConnId,
        line: Line,
        now: Duration,
        identity: Option<Identity>,
        out: &mut Outbox,
    ) {
        let State {
            conns,
            agents,
            sessions,
            ..
        } = self;
        // A connection closed by us: what it still sends is not read.
        let Some(c) = conns.get_mut(&conn) else {
            return;
        };
        let peer = c.peer.pid;
        let reply = c.session.line(line, now, |hello| {
            admit(hello, peer, identity, agents, sessions)
        });
        let reply = self.follow(conn, reply);
        write(conn, reply, out);
    }

    /// Queues what `tenant`'s session answers the world's call `call` (nothing without a live
    /// agent), for the loop's next turn.
    fn queue(&mut self, tenant: TenantId, call: impl FnOnce(&mut Session) -> Reply) {
        let Some(&conn) = self.agents.get(&tenant) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let reply = call(&mut c.session);
        let mut reply = self.follow(conn, reply);
        let last = reply.lines.len();
        for (i, line) in reply.lines.drain(..).enumerate() {
            self.pending
                .push((conn, line, reply.close && i + 1 == last));
        }
    }

    /// Follows what `conn`'s session said happened: its events recorded, the tenant's live
    /// agent registered or gone, a closing connection no longer read.
    fn follow(&mut self, conn: ConnId, mut reply: Reply) -> Reply {
        for event in reply.events.drain(..) {
            match &event {
                AgentEvent::Registered { tenant, .. } => {
                    self.agents.insert(*tenant, conn);
                }
                AgentEvent::Closed { tenant, .. } => {
                    if self.agents.get(tenant) == Some(&conn) {
                        self.agents.remove(tenant);
                    }
                }
                AgentEvent::Answered { .. } => {}
            }
            self.events.push(event);
        }
        if reply.close {
            self.conns.remove(&conn);
        }
        reply
    }

    fn on_poll(&mut self, out: &mut Outbox) {
        for (conn, line, close) in std::mem::take(&mut self.pending) {
            out.send(conn, line);
            if close {
                out.close(conn);
            }
        }
    }

    fn on_closed(&mut self, conn: ConnId) {
        if let Some(mut c) = self.conns.remove(&conn) {
            let reply = c.session.vanished();
            self.follow(conn, reply);
        }
    }
}

/// A connection's peer's tenant and name, or why it has none.
type Identity = Result<(TenantId, String), ProtocolError>;

/// The tenant of `peer`'s process, read from the world ([`Tenants`]), if that process is still
/// the one that connected after the reading: a pid names a process only while it lives, so a
/// peer that exited since it connected may have left its pid to a process in another tenant.
fn identify(peer: &Peer, tenants: &dyn Tenants) -> Identity {
    let Some(pid) = peer.pid else {
        return Err(ProtocolError::new(
            ErrorCode::Identity,
            "the socket peer's credentials could not be read",
        ));
    };
    let tenant = tenants.tenant_of(pid);
    if !peer.alive() {
        return Err(ProtocolError::new(
            ErrorCode::Identity,
            format!("process {pid} that connected has exited; its pid no longer proves who sends"),
        ));
    }
    tenant.ok_or_else(|| {
        ProtocolError::new(
            ErrorCode::Identity,
            format!("process {pid} is in no tenant memtide manages"),
        )
    })
}

/// Who `hello` registers: the socket peer's own pid, in a managed tenant (`identity`) without
/// a live agent; the session gets the next id.
fn admit(
    hello: &Hello,
    peer: Option<u32>,
    identity: Option<Identity>,
    agents: &BTreeMap<TenantId, ConnId>,
    sessions: &mut u64,
) -> Result<Admitted, ProtocolError> {
    if peer != Some(hello.pid) {
        let peer = peer.map_or("unknown".to_string(), |p| p.to_string());
        return Err(ProtocolError::new(
            ErrorCode::Identity,
            format!(
                "hello.pid = {} is not the socket peer's pid ({peer})",
                hello.pid
            ),
        ));
    }
    let (tenant, name) = identity.unwrap_or_else(|| {
        Err(ProtocolError::new(
            ErrorCode::Identity,
            "the socket peer's tenant was not read",
        ))
    })?;
    if agents.contains_key(&tenant) {
        return Err(ProtocolError::new(
            ErrorCode::Busy,
            format!("tenant {name} already has a live agent"),
        ));
    }
    *sessions += 1;
    Ok(Admitted {
        tenant,
        name,
        id: *sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_balloon::protocol::ProgressStatus;
    use memtide_model::{AppStatus, Bytes, Takeover};

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
        Hub::new(SessionConfig::default(), Box::new(Fake))
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
        let peer = hub.lock().unregistered_peer(ConnId(conn));
        let identity = peer.map(|p| identify(&p, hub.tenants.as_ref()));
        hub.lock().on_line(
            ConnId(conn),
            Line::Complete(line.as_bytes().to_vec()),
            at,
            identity,
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

    /// A connection from `pid` at time 0, its pidfd on a live process (this one).
    fn open(hub: &Hub, conn: usize, pid: u32) {
        open_at(hub, conn, pid, s(0));
    }

    fn open_at(hub: &Hub, conn: usize, pid: u32, at: Duration) {
        let pidfd = crate::socket::pidfd_open(std::process::id());
        let peer = Peer::from_parts(Some(pid), Some(0), pidfd);
        hub.lock().open(ConnId(conn), peer, at);
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
    fn a_hello_from_a_peer_that_exited_is_refused_though_its_pid_is_now_a_tenant_s() {
        let h = hub();
        // Process 100 connected and exited; its pid now names tenant db's process.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pidfd = crate::socket::pidfd_open(child.id());
        child.wait().unwrap();
        h.lock()
            .open(ConnId(0), Peer::from_parts(Some(100), Some(0), pidfd), s(0));
        let (lines, closed) = feed(&h, 0, &hello(100), s(0));
        assert!(
            lines[0].contains(r#""code":"identity""#) && lines[0].contains("has exited"),
            "{lines:?}"
        );
        assert_eq!(closed, vec![ConnId(0)]);
        assert!(
            h.lever(DB, Pages::ZERO, s(0)).is_none(),
            "not welcomed as db"
        );
    }

    #[test]
    fn a_connection_without_hello_is_closed_once_hello_within_has_passed() {
        let h = hub();
        open_at(&h, 0, 100, s(0));
        registered(&h, 1, 200);
        open_at(&h, 2, 300, s(3));
        let mut out = Outbox::default();
        h.lock().close_overdue(s(4), &mut out);
        assert!(out.close.is_empty(), "none is 5 s old yet");
        h.lock().close_overdue(s(5), &mut out);
        assert_eq!(out.close, vec![ConnId(0)], "the registered agent stays");
        assert!(
            out.lines[0].1.contains(r#""code":"not_registered""#)
                && out.lines[0].1.contains(r#""fatal":true"#),
            "{:?}",
            out.lines
        );
        // Connection 2's number reused by a newer connection: it is timed from its own open.
        h.lock().on_closed(ConnId(2));
        open_at(&h, 2, 300, s(7));
        let mut out = Outbox::default();
        h.lock().close_overdue(s(9), &mut out);
        assert!(out.close.is_empty(), "{:?}", out.close);
        h.lock().close_overdue(s(12), &mut out);
        assert_eq!(out.close, vec![ConnId(2)]);
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
