//! The balloon protocol's messages as the simulated host and an application's agent exchange them in memory: the fields of docs/balloon-protocol.md, without the JSON lines.
//!
//! These types stand in for `memtide_balloon::protocol` (crates/balloon, being written
//! alongside). When it lands, this module becomes a re-export of its `Hello`, `Welcome`,
//! `Target`, `Progress`, `Stats` and `Error` (the field names and units are the doc's:
//! bytes, milliseconds, sequence numbers), and `agent.rs` and `session.rs` keep building and
//! matching them as they do: the switch is a change of `use` lines and of the two enums below
//! (the wire crate's message enum in their place).

use memtide_model::Takeover;

/// The protocol version the simulated agents and host speak.
pub const VERSION: u32 = 1;

/// What a pool is (`hello.kind`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PoolKind {
    BufferPool,
    Heap,
    Cache,
}

/// `hello` (agent -> memtide): the application and its pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u32,
    pub app: String,
    pub kind: PoolKind,
    /// The simulated process's id (the host does not check it: no process runs).
    pub pid: u32,
    pub pool_bytes: u64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub granule_bytes: u64,
}

/// `welcome` (memtide -> agent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub version: u32,
    pub tenant: String,
    pub stats_interval_ms: u64,
    pub dead_after_ms: u64,
}

/// `target` (memtide -> agent): resize the pool to `pool_bytes` within `deadline_ms`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub seq: u64,
    pub pool_bytes: u64,
    pub deadline_ms: u64,
}

/// `progress.status`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Working,
    Done,
    Failed,
}

/// `progress` (agent -> memtide): where the resize for target `seq` stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub seq: u64,
    pub pool_bytes: u64,
    pub status: Status,
    pub reason: Option<String>,
}

/// `stats` (agent -> memtide): the pool's figures; counters since the agent started.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub pool_bytes: u64,
    pub used_bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub dirty_bytes: u64,
}

/// `error.code`, the ones the simulated host and agents send.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// A target the agent cannot take (off its granule, outside its min and max).
    BadField,
    /// A target not done by its deadline.
    Deadline,
    /// No statistics for `dead_after_ms`.
    Dead,
    /// Done was reported but the tenant's memory did not fall.
    Dishonest,
}

impl From<Takeover> for ErrorCode {
    /// The error an agent is closed with when memtide takes its tenant over.
    fn from(why: Takeover) -> ErrorCode {
        match why {
            Takeover::Stuck { .. } => ErrorCode::Deadline,
            Takeover::Dead { .. } => ErrorCode::Dead,
            Takeover::Dishonest { .. } => ErrorCode::Dishonest,
        }
    }
}

/// `error` (either side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    pub fatal: bool,
}

/// A message memtide sends an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToAgent {
    Welcome(Welcome),
    Target(Target),
    Error(Error),
}

/// A message an agent sends memtide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToMemtide {
    Hello(Hello),
    Progress(Progress),
    Stats(Stats),
    Error(Error),
}
