//! The balloon protocol's messages as the simulated host and an application's agent exchange them in memory: the fields of docs/balloon-protocol.md, without the JSON lines.
//!
//! These types stand in for `memtide_balloon::protocol` (crates/balloon, written alongside
//! this), with its names and fields: `PoolInfo`, `Hello`, `Welcome`, `Target`, `Progress`
//! (`ProgressStatus`), `Stats`, `ErrorMessage` (`ErrorCode`), and the two directions
//! `AgentMessage` and `MemtideMessage`; sizes in bytes, times in milliseconds. Switching to
//! that crate is mechanical: add `memtide-balloon` to this crate's dependencies and replace
//! this module's body with `pub use memtide_balloon::protocol::{...}` of the same names
//! (`agent.rs` and `session.rs` build and match the messages only through these names and
//! fields). Only the variants the simulation sends are here.

/// What a pool is (`hello.kind`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// A database's buffer pool.
    BufferPool,
    /// A language runtime's heap.
    Heap,
    /// A cache.
    Cache,
}

/// What an agent says of its pool when it registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    pub app: String,
    pub kind: PoolKind,
    pub pool_bytes: u64,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub granule_bytes: u64,
}

/// `hello` (agent -> memtide).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The simulated process's id (the host does not check it: no process runs).
    pub pid: u32,
    pub pool: PoolInfo,
}

/// `welcome` (memtide -> agent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    pub tenant: String,
    pub stats_interval_ms: u64,
    pub dead_after_ms: u64,
}

/// `target` (memtide -> agent): resize the pool to `pool_bytes` within `deadline_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub seq: u64,
    pub pool_bytes: u64,
    pub deadline_ms: u64,
}

/// `progress.status`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ProgressStatus {
    Working,
    Done,
    Failed,
}

/// `progress` (agent -> memtide): where the resize for target `seq` stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub seq: u64,
    pub pool_bytes: u64,
    pub status: ProgressStatus,
    pub reason: Option<String>,
}

/// `stats` (agent -> memtide): the pool's figures; counters since the agent started.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// No statistics for `dead_after_ms`.
    Dead,
    /// A target not done by its deadline.
    Deadline,
    /// Done was reported but the tenant's memory did not fall.
    Dishonest,
}

/// `error` (either side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorMessage {
    pub code: ErrorCode,
    pub message: String,
    pub fatal: bool,
}

/// A message an agent sends memtide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentMessage {
    Hello(Hello),
    Progress(Progress),
    Stats(Stats),
    Error(ErrorMessage),
}

/// A message memtide sends an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemtideMessage {
    Welcome(Welcome),
    Target(Target),
    Error(ErrorMessage),
}
