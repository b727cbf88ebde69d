//! The application balloon on the simulated host (ALB): an application's agent and memtide's session with it, speaking the balloon protocol's messages (docs/balloon-protocol.md) over two in-memory queues in place of the socket.
//!
//! A tenant whose workload has an application pool (`cache`, `database`, `jvm`) and whose
//! scenario gives it an `agent` runs one [`Link`]: at power-on the agent says `hello`; at
//! each observation the host side reads what the agent sent and reports the tenant's
//! [`AppBalloonLever`]; each decision's move goes to the agent as a `target` or a fatal
//! `error`; each tick the agent resizes the pool and answers. The messages are
//! `memtide_balloon::protocol`'s, the same types the real socket carries as JSON lines.

pub mod agent;
pub mod curve;
pub mod session;

use crate::workload::Pool;
use agent::Agent;
pub use agent::Behaviour;
use memtide_balloon::protocol::{AgentMessage, MemtideMessage};
use memtide_model::{AppBalloonLever, AppMove, Pages, TenantId};
use serde::{Deserialize, Serialize};
use session::Session;
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

/// An application's agent and memtide's session with it (see the module docs).
#[derive(Clone, Debug)]
pub struct Link {
    tenant: TenantId,
    agent: Agent,
    /// The id its next session will have (unique among the tenant's sessions).
    next_id: u64,
    /// `None` until the host has read the agent's first hello.
    session: Option<Session>,
    to_agent: VecDeque<MemtideMessage>,
    to_memtide: VecDeque<AgentMessage>,
}

impl Link {
    /// Starts `tenant`'s application at `now` with its agent, which says hello for `pool`; its
    /// sessions are numbered from `first_id`.
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
        let hello = agent.hello(pool);
        Link {
            tenant,
            agent,
            next_id: first_id,
            session: None,
            to_agent: VecDeque::new(),
            to_memtide: VecDeque::from([AgentMessage::Hello(hello)]),
        }
    }

    /// The agent's tick at `now`: anonymous pages the pool gives up go to `released`.
    pub fn run(&mut self, now: Duration, tick: Duration, pool: &mut Pool, released: &mut Vec<u32>) {
        self.agent.run(
            now,
            tick,
            pool,
            released,
            &mut self.to_agent,
            &mut self.to_memtide,
        );
    }

    /// The end of the agent's tick at `now`: its statistics.
    pub fn report(&mut self, now: Duration, pool: &mut Pool) {
        self.agent.report(now, pool, &mut self.to_memtide);
    }

    /// memtide reads what the agent sent over the last `elapsed` (a hello opens a new session)
    /// and reports the lever, with `used` the tenant's measured memory in use.
    pub fn observe(&mut self, elapsed: Duration, used: Pages) -> Option<AppBalloonLever> {
        let hello = self
            .to_memtide
            .iter()
            .position(|m| matches!(m, AgentMessage::Hello(_)));
        if let Some(at) = hello {
            // What came before it was for a session now closed.
            if let Some(AgentMessage::Hello(hello)) = self.to_memtide.drain(..=at).next_back() {
                let tenant = self.tenant.to_string();
                self.session = Some(Session::open(
                    self.next_id,
                    hello,
                    &tenant,
                    &mut self.to_agent,
                ));
                self.next_id += 1;
            }
        }
        let session = self.session.as_mut()?;
        session.receive(&mut self.to_memtide, elapsed);
        session.lever(used)
    }

    /// Carries out the policy's move for the agent.
    pub fn apply(&mut self, app_move: Option<AppMove>) {
        if let Some(session) = &mut self.session {
            session.apply(app_move, &mut self.to_agent);
        }
    }
}
