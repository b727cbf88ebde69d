//! The application balloon on the simulated host (ALB): an application's agent and memtide's session with it, speaking the balloon protocol (docs/balloon-protocol.md) as JSON lines over two in-memory queues in place of the socket.
//!
//! A tenant whose workload has an application pool (`cache`, `database`, `jvm`) and whose
//! scenario gives it an `agent` runs one [`Link`]: at power-on the agent connects and says
//! `hello`; at each observation memtide's side reads the lines the agent wrote and reports
//! the tenant's [`AppBalloonLever`]; each decision's move goes to the agent as a `target` or
//! a fatal `error`; each tick the agent resizes the pool and answers. memtide's side is the
//! daemon's own state machine (`memtide_agents::session::Session`), and every message is
//! encoded and decoded by `memtide_balloon::protocol`, so each simulated exchange also
//! checks the protocol's rules.

pub mod agent;
pub mod curve;

use crate::workload::Pool;
use agent::Agent;
pub use agent::{Behaviour, INFLATED_POOL};
use memtide_agents::session::{Admitted, Reply, Session, SessionConfig};
use memtide_balloon::line::Line;
use memtide_balloon::protocol::AgentMessage;
use memtide_model::{AppBalloonLever, AppMove, Pages, TenantId};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// An application's agent as a scenario sets it up (in the workload: the agent is a library
/// linked into the application).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(default)]
    pub behaviour: Behaviour,
    /// From this long after the application started the agent sends nothing more (its thread
    /// hung): memtide must count it dead.
    #[serde(default)]
    pub silent_from: Option<Duration>,
    /// The unit the pool moves in.
    #[serde(default = "default_granule")]
    pub granule: Pages,
    /// The agent samples its pool's requests and reports the miss-ratio curve of each window
    /// of this length in its statistics ([`curve`]; a database's buffer pool only).
    #[serde(default)]
    pub curve_window: Option<Duration>,
}

/// The unit a pool moves in unless its agent says otherwise: 1 MiB.
pub const DEFAULT_GRANULE: Pages = Pages(256);

fn default_granule() -> Pages {
    DEFAULT_GRANULE
}

/// What the agent wrote on the socket.
#[derive(Clone, Debug)]
enum Wire {
    /// It connected (its next line is its `hello`).
    Connect,
    Line(String),
}

/// An application's agent and memtide's session with it (see the module docs).
#[derive(Clone, Debug)]
pub struct Link {
    tenant: TenantId,
    agent: Agent,
    /// The id its next session will have (unique among the tenant's sessions).
    next_id: u64,
    /// memtide's side of the agent's connection: `None` once memtide closed it, until the
    /// agent connects again.
    session: Option<Session>,
    /// memtide's clock: the observations' elapsed times summed.
    clock: Duration,
    /// Lines memtide wrote that the agent has not read.
    to_agent: VecDeque<String>,
    /// What the agent wrote since memtide last read.
    to_memtide: VecDeque<Wire>,
}

impl Link {
    /// Starts `tenant`'s application at `now` with its agent, which connects and says hello
    /// for `pool`; its sessions are numbered from `first_id`.
    pub fn connect(
        config: AgentConfig,
        tenant: TenantId,
        first_id: u64,
        now: Duration,
        app: &str,
        pool: &Pool,
    ) -> Link {
        // The simulated process's id: no process runs, any number names it.
        let pid = 1000 + tenant.0;
        let agent = Agent::new(config, app, pid, now);
        let hello = AgentMessage::Hello(agent.hello(pool)).encode();
        Link {
            tenant,
            agent,
            next_id: first_id,
            session: None,
            clock: Duration::ZERO,
            to_agent: VecDeque::new(),
            to_memtide: VecDeque::from([Wire::Connect, Wire::Line(hello)]),
        }
    }

    /// The agent's tick at `now`: anonymous pages the pool gives up go to `released`.
    pub fn run(&mut self, now: Duration, tick: Duration, pool: &mut Pool, released: &mut Vec<u32>) {
        let reconnects = self.agent.is_closed();
        let mut written = VecDeque::new();
        self.agent
            .run(now, tick, pool, released, &mut self.to_agent, &mut written);
        if reconnects && !self.agent.is_closed() {
            self.to_memtide.push_back(Wire::Connect);
        }
        self.to_memtide.extend(written.into_iter().map(Wire::Line));
    }

    /// The end of the agent's tick at `now`: its statistics.
    pub fn report(&mut self, now: Duration, pool: &mut Pool) {
        let mut written = VecDeque::new();
        self.agent.report(now, pool, &mut written);
        self.to_memtide.extend(written.into_iter().map(Wire::Line));
    }

    /// memtide reads what the agent wrote over the last `elapsed` and reports the lever, with
    /// `used` the tenant's measured memory in use. Lines count as read now, but a
    /// connection's first (its `hello`) as read when the interval began: an agent that says
    /// hello and nothing more has been silent the whole interval.
    pub fn observe(&mut self, elapsed: Duration, used: Pages) -> Option<AppBalloonLever> {
        let from = self.clock;
        self.clock += elapsed;
        let mut first = false;
        for wire in std::mem::take(&mut self.to_memtide) {
            let line = match wire {
                Wire::Connect => {
                    self.session = Some(Session::new(SessionConfig::default()));
                    first = true;
                    continue;
                }
                Wire::Line(line) => line,
            };
            // Lines written to a connection memtide closed are not read.
            let Some(session) = &mut self.session else {
                continue;
            };
            let at = if std::mem::take(&mut first) {
                from
            } else {
                self.clock
            };
            let (tenant, next_id) = (self.tenant, &mut self.next_id);
            let reply = session.line(Line::Complete(line.into_bytes()), at, |_| {
                let id = *next_id;
                *next_id += 1;
                Ok(Admitted {
                    tenant,
                    name: tenant.to_string(),
                    id,
                })
            });
            self.deliver(reply);
        }
        self.session.as_mut()?.lever(used, self.clock)
    }

    /// Carries out the policy's move for the agent.
    pub fn apply(&mut self, app_move: Option<AppMove>) {
        if let (Some(session), Some(app_move)) = (&mut self.session, app_move) {
            let reply = session.apply(app_move, self.clock);
            self.deliver(reply);
        }
    }

    /// Writes what memtide's side answered to the agent, and closes the connection after it
    /// if the session says so (the events are the daemon's to log; the simulator keeps none).
    fn deliver(&mut self, reply: Reply) {
        self.to_agent.extend(reply.lines);
        if reply.close {
            self.session = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::CostModel;
    use crate::workload::{Pace, Workload, WorkloadConfig};
    use memtide_balloon::protocol::MemtideMessage;
    use memtide_model::{AppStatus, Takeover};

    const TICK: Duration = Duration::from_secs(1);
    const FIRST: u64 = 1 << 32;

    /// A cache of 300 MiB of items in a pool of 200 MiB (down to 16).
    fn cache() -> Workload {
        let config = WorkloadConfig::Cache {
            items_mb: 300.0,
            pool_mb: 200.0,
            min_pool_mb: 16.0,
            shrink_s_per_gib: 7.94,
            grow_s_per_gib: 1.51,
            agent: None,
            jobs: None,
            pace: Pace::default(),
        };
        Workload::new(&config, &CostModel::default()).unwrap()
    }

    fn link(behaviour: Behaviour, workload: &Workload) -> Link {
        let config = AgentConfig {
            behaviour,
            silent_from: None,
            granule: DEFAULT_GRANULE,
            curve_window: None,
        };
        Link::connect(
            config,
            TenantId(3),
            FIRST,
            Duration::ZERO,
            "cache",
            workload.pool().unwrap(),
        )
    }

    /// The `error` lines on the wire, either way, as the real decoders read them.
    fn errors(link: &Link) -> Vec<String> {
        let from_memtide = link.to_agent.iter().filter(|l| {
            matches!(
                MemtideMessage::decode(l.as_bytes()),
                Ok(MemtideMessage::Error(_)) | Err(_)
            )
        });
        let from_agent = link.to_memtide.iter().filter_map(|w| match w {
            Wire::Line(l) => matches!(
                AgentMessage::decode(l.as_bytes()),
                Ok(AgentMessage::Error(_)) | Err(_)
            )
            .then_some(l),
            Wire::Connect => None,
        });
        from_memtide.chain(from_agent).cloned().collect()
    }

    /// One tick at `t` s: memtide observes and carries out `app_move`, then the agent runs
    /// and reports; the lever observed.
    fn tick(
        link: &mut Link,
        workload: &mut Workload,
        t: u64,
        app_move: Option<AppMove>,
    ) -> Option<AppBalloonLever> {
        let lever = link.observe(TICK, Pages(60_000));
        link.apply(app_move);
        let now = Duration::from_secs(t);
        let pool = workload.pool_mut().unwrap();
        link.run(now, TICK, pool, &mut Vec::new());
        link.report(now + TICK, pool);
        lever
    }

    #[test]
    fn a_complying_agent_s_lines_keep_every_protocol_rule_and_its_pool_moves() {
        let mut workload = cache();
        let mut link = link(Behaviour::Comply, &workload);
        let target = AppMove::Target {
            pool: Pages::from_mib(100),
            deadline: Duration::from_secs(30),
        };
        let mut last = None;
        for t in 0..30 {
            last = tick(&mut link, &mut workload, t, (t >= 2).then_some(target));
            assert_eq!(errors(&link), Vec::<String>::new(), "at {t} s");
        }
        let lever = last.expect("registered");
        assert_eq!(lever.session, FIRST);
        assert_eq!(lever.pool, Pages::from_mib(100));
        assert_eq!(lever.answer.map(|a| a.status), Some(AppStatus::Done));
        assert_eq!(lever.silent_for, Duration::ZERO);
    }

    #[test]
    fn a_taken_over_agent_comes_back_on_a_new_connection_and_session() {
        let mut workload = cache();
        let mut link = link(Behaviour::Stuck, &workload);
        let first = tick(&mut link, &mut workload, 0, None).expect("registered");
        assert_eq!(
            (first.session, first.silent_for),
            (FIRST, TICK),
            "silent since the interval began"
        );
        tick(&mut link, &mut workload, 1, None);
        let why = Takeover::Stuck {
            deadline: Duration::from_secs(20),
        };
        tick(&mut link, &mut workload, 2, Some(AppMove::TakeOver(why)));
        // The agent read the fatal error at 2 s, and says hello again 1 s later: memtide reads
        // it at the next observation.
        assert_eq!(tick(&mut link, &mut workload, 3, None), None);
        let back = tick(&mut link, &mut workload, 4, None).expect("registered again");
        assert_eq!(
            (back.session, back.answer, back.silent_for),
            (FIRST + 1, None, TICK)
        );
    }
}
