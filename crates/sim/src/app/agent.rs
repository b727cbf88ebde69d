//! The agent inside a simulated application: it registers the workload's pool with memtide, answers targets by resizing the pool at the pool's own pace, and reports the pool's statistics every tick, as an SDK's agent does over the socket: it reads memtide's lines with the protocol's decoder and writes its messages with its encoder.
//!
//! A resize moves the pool a page at a time at its [`ResizeCost`](crate::workload::pool::ResizeCost)
//! per page (ALB Table 2 by default), so a tick moves `tick / cost` pages; each tick of a
//! resize answers `progress working`, and the tick it reaches the target `done`. A heap runs
//! a full collection before its pages move. How the agent
//! behaves is the scenario's ([`Behaviour`]): the faults memtide must survive are agents that
//! refuse, get stuck, lie, or fall silent.

use super::AgentConfig;
use crate::workload::Pool;
use memtide_balloon::protocol::{
    AgentMessage, CurvePoint, ErrorCode, ErrorMessage, Hello, MemtideMessage, PoolInfo, Progress,
    ProgressStatus as Status, Stats, Target,
};
use memtide_model::PAGE_SIZE;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// How a simulated agent answers targets.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// Resizes the pool as asked and says done.
    #[default]
    Comply,
    /// Answers every target `failed`, leaving the pool as it is.
    Refuse,
    /// Answers `working` forever and never resizes.
    Stuck,
    /// Says done at once and reports the target as its pool, but frees nothing.
    Dishonest,
    /// Registers and reports a pool of [`INFLATED_POOL`] (its max too), all of it data, and
    /// answers every target `working` forever: a liar that never says done.
    Inflated,
}

/// The pool an [`Behaviour::Inflated`] agent claims: 1 TiB, in pages.
pub const INFLATED_POOL: u32 = 1 << 28;

/// A resize under way.
#[derive(Copy, Clone, Debug)]
struct Resize {
    seq: u64,
    /// The pool it moves to, in pages.
    to: u32,
    /// Time earned toward the next page, in nanoseconds.
    credit_ns: u64,
}

/// One application's agent.
#[derive(Clone, Debug)]
pub struct Agent {
    config: AgentConfig,
    /// When the application started (the agent falls silent `silent_from` after it).
    started: Duration,
    registered: bool,
    /// Closed by a fatal error from memtide: it sends nothing more.
    closed: bool,
    resize: Option<Resize>,
    /// A target a stuck agent keeps answering `working`.
    stuck: Option<u64>,
    /// The pool a dishonest agent claims, in pages.
    claimed: Option<u32>,
    /// The application's name and process id, for its hello.
    app: String,
    pid: u32,
    /// The latest target's seq this session (a target must have a higher one).
    last_seq: u64,
    /// Closed, it connects again at this time; the wait doubles each time, to 30 s.
    reconnect_at: Duration,
    backoff: Duration,
}

/// The first wait before connecting again (a tick), and the longest.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

fn bytes(pages: u32) -> u64 {
    u64::from(pages) * PAGE_SIZE
}

impl Agent {
    /// An agent for application `app` (process `pid`) started at `started`.
    pub fn new(config: AgentConfig, app: &str, pid: u32, started: Duration) -> Agent {
        let inflated = config.behaviour == Behaviour::Inflated;
        Agent {
            config,
            started,
            registered: false,
            closed: false,
            resize: None,
            stuck: None,
            claimed: inflated.then_some(INFLATED_POOL),
            app: app.to_string(),
            pid,
            last_seq: 0,
            reconnect_at: Duration::ZERO,
            backoff: BACKOFF_FIRST,
        }
    }

    /// The `hello` that registers `pool`.
    pub fn hello(&self, pool: &Pool) -> Hello {
        Hello {
            pid: self.pid,
            pool: PoolInfo {
                app: self.app.clone(),
                kind: pool.kind(),
                pool_bytes: bytes(self.claimed.unwrap_or(pool.size())),
                min_bytes: bytes(pool.min()),
                max_bytes: bytes(self.max(pool)),
                granule_bytes: self.config.granule.to_bytes().0.max(1),
            },
        }
    }

    /// The largest pool the agent says the application accepts (an inflated one claims its
    /// whole pool).
    fn max(&self, pool: &Pool) -> u32 {
        match self.config.behaviour {
            Behaviour::Inflated => INFLATED_POOL,
            _ => pool.max(),
        }
    }

    /// Whether memtide closed the agent's connection (it connects again after its back-off).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The start of a tick at `now` of length `tick`: reads memtide's lines, moves a resize
    /// under way (anonymous pages the pool gives up go to `released`), and writes its answers
    /// to `outbox`. Closed by a fatal error, it says hello again after its back-off. A line it
    /// cannot decode is answered with a non-fatal error, as the SDK's agent does.
    pub fn run(
        &mut self,
        now: Duration,
        tick: Duration,
        pool: &mut Pool,
        released: &mut Vec<u32>,
        inbox: &mut VecDeque<String>,
        outbox: &mut VecDeque<String>,
    ) {
        for line in inbox.drain(..) {
            if self.closed {
                break;
            }
            let message = match MemtideMessage::decode(line.as_bytes()) {
                Ok(message) => message,
                Err(e) => {
                    send(outbox, AgentMessage::Error(e.to_message(false)));
                    continue;
                }
            };
            match message {
                MemtideMessage::Welcome(_) => {
                    self.registered = true;
                    self.backoff = BACKOFF_FIRST;
                }
                MemtideMessage::Target(t) => self.take(&t, pool, outbox),
                // memtide closes the connection after a bye as after a fatal error.
                MemtideMessage::Bye(_)
                | MemtideMessage::Error(ErrorMessage { fatal: true, .. }) => {
                    self.closed = true;
                    self.registered = false;
                    self.resize = None;
                    self.stuck = None;
                    self.last_seq = 0;
                    self.reconnect_at = now + self.backoff;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                }
                MemtideMessage::Error(_) => {}
            }
        }
        if self.closed {
            if now < self.reconnect_at {
                return;
            }
            self.closed = false;
            send(outbox, AgentMessage::Hello(self.hello(pool)));
        }
        let mut answers = Vec::new();
        if let Some(seq) = self.stuck {
            answers.push(progress(seq, pool.size(), Status::Working));
        }
        if let Some(r) = &mut self.resize {
            let status = step(r, tick, pool, released);
            answers.push(progress(r.seq, pool.size(), status));
            if status == Status::Done {
                pool.finish();
                self.resize = None;
            }
        }
        if !self.silent(now) && self.registered {
            for answer in answers {
                send(outbox, AgentMessage::Progress(answer));
            }
        }
    }

    /// Whether the agent has fallen silent by `now`.
    fn silent(&self, now: Duration) -> bool {
        self.config
            .silent_from
            .is_some_and(|s| now >= self.started + s)
    }

    /// The end of a tick at `now`: the pool's statistics, as the accesses left it.
    pub fn report(&self, now: Duration, pool: &mut Pool, outbox: &mut VecDeque<String>) {
        if self.closed || !self.registered || self.silent(now) {
            return;
        }
        let curve = pool.curve(now).map(|c| {
            c.points()
                .map(|(size, ratio)| CurvePoint::new(size.to_bytes().0, ratio))
                .collect()
        });
        let c = pool.counters();
        let size = self.claimed.unwrap_or(pool.size());
        let used = match self.config.behaviour {
            Behaviour::Inflated => size,
            _ => c.used.min(size),
        };
        send(
            outbox,
            AgentMessage::Stats(Stats {
                pool_bytes: bytes(size),
                used_bytes: bytes(used),
                hits: c.hits,
                misses: c.misses,
                evictions: c.evictions,
                dirty_bytes: bytes(c.dirty.min(size)),
                durability: None,
                curve,
            }),
        );
    }

    /// Takes a new target, which supersedes any under way; one that breaks a rule is answered
    /// `bad_field` and otherwise ignored (a resize under way goes on).
    fn take(&mut self, t: &Target, pool: &Pool, outbox: &mut VecDeque<String>) {
        let granule = self.config.granule.to_bytes().0.max(1);
        let (min, max) = (bytes(pool.min()), bytes(self.max(pool)));
        let broken = if t.seq <= self.last_seq {
            Some(format!(
                "target.seq = {} must be above the last, {}",
                t.seq, self.last_seq
            ))
        } else if !t.pool_bytes.is_multiple_of(granule) || !(min..=max).contains(&t.pool_bytes) {
            Some(format!(
                "target.pool_bytes = {} must be a multiple of {granule} in [{min}, {max}]",
                t.pool_bytes
            ))
        } else {
            None
        };
        if let Some(message) = broken {
            let error = ErrorMessage {
                code: ErrorCode::BadField,
                message,
                fatal: false,
            };
            send(outbox, AgentMessage::Error(error));
            return;
        }
        self.last_seq = t.seq;
        self.resize = None;
        self.stuck = None;
        let to = (t.pool_bytes / PAGE_SIZE) as u32;
        match self.config.behaviour {
            Behaviour::Comply => {
                self.resize = Some(Resize {
                    seq: t.seq,
                    to,
                    credit_ns: 0,
                })
            }
            Behaviour::Refuse => send(
                outbox,
                AgentMessage::Progress(Progress {
                    reason: Some("pages pinned by running queries".to_string()),
                    ..progress(t.seq, pool.size(), Status::Failed)
                }),
            ),
            Behaviour::Stuck | Behaviour::Inflated => self.stuck = Some(t.seq),
            Behaviour::Dishonest => {
                self.claimed = Some(to);
                send(
                    outbox,
                    AgentMessage::Progress(progress(t.seq, to, Status::Done)),
                );
            }
        }
    }
}

/// Writes `message` as its line.
fn send(outbox: &mut VecDeque<String>, message: AgentMessage) {
    outbox.push_back(message.encode());
}

fn progress(seq: u64, pool: u32, status: Status) -> Progress {
    Progress {
        seq,
        pool_bytes: bytes(pool),
        status,
        reason: None,
    }
}

/// Moves a resize by one tick, once the pool is ready (a heap collects first); where it
/// stands.
fn step(r: &mut Resize, tick: Duration, pool: &mut Pool, released: &mut Vec<u32>) -> Status {
    let size = pool.size();
    if size == r.to {
        return Status::Done;
    }
    if !pool.prepare() {
        return Status::Working;
    }
    let cost = pool.resize_cost();
    let per_page = if r.to < size {
        cost.shrink_ns_per_page
    } else {
        cost.grow_ns_per_page
    };
    let want = size.abs_diff(r.to);
    r.credit_ns = r
        .credit_ns
        .saturating_add(u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX));
    let pages = match per_page {
        0 => want,
        ns => (r.credit_ns / ns).min(u64::from(want)) as u32,
    };
    r.credit_ns -= u64::from(pages) * per_page;
    if r.to < size {
        pool.shrink(pages, released);
    } else {
        pool.grow(pages);
    }
    if pool.size() == r.to {
        Status::Done
    } else {
        Status::Working
    }
}
