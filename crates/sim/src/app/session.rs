//! memtide's side of one agent's session on the simulated host: what the agent registered and reported, turned into the tenant's application balloon lever; the policy's moves turned into `target` and `error` messages.
//!
//! The simulated host does what the daemon's balloon server will: it welcomes a `hello`, keeps
//! the latest target and its answer, counts the time since the last `stats`, sends a new
//! `target` (with the next `seq`) when the pool the policy asks for changes, and closes the
//! session with a fatal `error` naming the reason when the policy takes the tenant over. It
//! decides nothing itself: dead, stuck and dishonest are the policy's judgement.

use memtide_balloon::protocol::{
    AgentMessage, ErrorCode, ErrorMessage, Hello, MemtideMessage, ProgressStatus, Stats, Target,
    Welcome,
};
use memtide_model::{
    AppAnswer, AppBalloonLever, AppMove, AppStatus, MissCurve, Pages, Takeover, PAGE_SIZE,
};
use std::collections::VecDeque;
use std::time::Duration;

/// How often agents send statistics (the tick).
pub const STATS_INTERVAL: Duration = Duration::from_secs(1);
/// How long without statistics before the policy counts an agent dead (the doc's example).
pub const DEAD_AFTER: Duration = Duration::from_secs(5);

fn pages(bytes: u64) -> Pages {
    Pages(bytes / PAGE_SIZE)
}

/// One registered agent, as memtide sees it.
#[derive(Clone, Debug)]
pub struct Session {
    id: u64,
    hello: Hello,
    seq: u64,
    /// The latest target sent, and its answer.
    sent: Option<(Target, AppStatus)>,
    /// The latest statistics, and those of the previous observation.
    stats: Option<Stats>,
    seen: Option<Stats>,
    silent_for: Duration,
    closed: bool,
}

impl Session {
    /// Welcomes `hello` as session `id` of tenant `tenant`.
    pub fn open(
        id: u64,
        hello: Hello,
        tenant: &str,
        outbox: &mut VecDeque<MemtideMessage>,
    ) -> Session {
        outbox.push_back(MemtideMessage::Welcome(Welcome {
            tenant: tenant.to_string(),
            stats_interval_ms: STATS_INTERVAL.as_millis() as u64,
            dead_after_ms: DEAD_AFTER.as_millis() as u64,
        }));
        Session {
            id,
            hello,
            seq: 0,
            sent: None,
            stats: None,
            seen: None,
            silent_for: Duration::ZERO,
            closed: false,
        }
    }

    /// Reads what the agent sent since the last observation, `elapsed` ago.
    pub fn receive(&mut self, inbox: &mut VecDeque<AgentMessage>, elapsed: Duration) {
        self.seen = self.stats.clone();
        let mut heard = false;
        for message in inbox.drain(..) {
            if self.closed {
                break;
            }
            match message {
                AgentMessage::Stats(s) => {
                    self.stats = Some(s);
                    heard = true;
                }
                AgentMessage::Progress(p) => {
                    if let Some((t, status)) = &mut self.sent {
                        // An answer to an older target is ignored.
                        if p.seq == t.seq {
                            *status = match p.status {
                                ProgressStatus::Working => AppStatus::Working,
                                ProgressStatus::Done => AppStatus::Done,
                                ProgressStatus::Failed => AppStatus::Failed,
                            };
                        }
                    }
                }
                // The agent could not take the latest target.
                AgentMessage::Error(e) if e.code == ErrorCode::BadField => {
                    if let Some((_, status)) = &mut self.sent {
                        *status = AppStatus::Failed;
                    }
                }
                // A second hello, or an error memtide has no answer to.
                AgentMessage::Hello(_) | AgentMessage::Error(_) => {}
                // The agent left: the OS levers have the tenant from now on.
                AgentMessage::Bye(_) => self.closed = true,
            }
        }
        self.silent_for = if heard {
            Duration::ZERO
        } else {
            self.silent_for + elapsed
        };
    }

    /// The lever the policy plans with (`None` once closed); `used` is the tenant's measured
    /// memory in use.
    pub fn lever(&self, used: Pages) -> Option<AppBalloonLever> {
        if self.closed {
            return None;
        }
        let h = &self.hello.pool;
        let pool = self.stats.as_ref().map_or(h.pool_bytes, |s| s.pool_bytes);
        let delta = |f: fn(&Stats) -> u64| {
            self.stats
                .as_ref()
                .map(|now| f(now).saturating_sub(self.seen.as_ref().map_or(0, f)))
        };
        Some(AppBalloonLever {
            session: self.id,
            pool: pages(pool),
            pool_used: self.stats.as_ref().map(|s| pages(s.used_bytes)),
            min: pages(h.min_bytes),
            max: pages(h.max_bytes),
            granule: Pages(h.granule_bytes.div_ceil(PAGE_SIZE).max(1)),
            used,
            hits: delta(|s| s.hits),
            misses: delta(|s| s.misses),
            curve: self
                .stats
                .as_ref()
                .and_then(|s| MissCurve::of_bytes(s.curve_points()))
                .map(Box::new),
            durability: None,
            answer: self.sent.as_ref().map(|(t, status)| AppAnswer {
                target: pages(t.pool_bytes),
                status: *status,
            }),
            silent_for: self.silent_for,
            dead_after: DEAD_AFTER,
        })
    }

    /// Carries out the policy's move: a new target when the pool asked changes, or the end of
    /// the session.
    pub fn apply(&mut self, app_move: Option<AppMove>, outbox: &mut VecDeque<MemtideMessage>) {
        if self.closed {
            return;
        }
        match app_move {
            None => {}
            Some(AppMove::Target { pool, deadline }) => {
                let granule = self.hello.pool.granule_bytes.max(1);
                let pool_bytes = pool.to_bytes().0 / granule * granule;
                if self
                    .sent
                    .as_ref()
                    .is_some_and(|(t, _)| t.pool_bytes == pool_bytes)
                {
                    return;
                }
                self.seq += 1;
                let target = Target {
                    seq: self.seq,
                    pool_bytes,
                    deadline_ms: u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX),
                };
                outbox.push_back(MemtideMessage::Target(target.clone()));
                self.sent = Some((target, AppStatus::Sent));
            }
            Some(AppMove::TakeOver(why)) => {
                outbox.push_back(MemtideMessage::Error(ErrorMessage {
                    code: error_code(why),
                    message: why.to_string(),
                    fatal: true,
                }));
                self.closed = true;
            }
        }
    }
}

/// The error an agent is closed with when memtide takes its tenant over.
fn error_code(why: Takeover) -> ErrorCode {
    match why {
        Takeover::Stuck { .. } => ErrorCode::Deadline,
        Takeover::Dead { .. } => ErrorCode::Dead,
        Takeover::Dishonest { .. } => ErrorCode::Dishonest,
    }
}
