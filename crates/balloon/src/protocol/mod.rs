//! The balloon protocol's messages, version 1, as typed values: decoded from one line with every rule of docs/balloon-protocol.md, encoded to one line.
//!
//! Each direction has its enum: [`AgentMessage`] (what an agent sends: hello, progress, stats,
//! bye, error) and [`MemtideMessage`] (what memtide sends: welcome, target, bye, error).
//! `decode` reads one line (without its `\n`; a `\r` at its end is ignored) and answers the
//! message or a [`ProtocolError`] carrying the [`ErrorCode`] the reader answers with and a
//! one-line message naming the field and the value. `encode` writes the message as one line of
//! JSON without the newline; the fields come in the order of the doc.
//!
//! Decoding checks what one line can show: the framing (length, UTF-8, one JSON object), the
//! type, each field's presence, type and range (integers in `[0, 2^53 − 1]`, sequence numbers
//! from 1, no fraction or exponent; a `stats.curve`'s miss ratios, the one fraction, in
//! `[0, 1]`; a `stats.durability`'s settings in their own ranges), the rules between fields of
//! one message (`min_bytes ≤ pool_bytes ≤ max_bytes`, `used_bytes ≤ pool_bytes`, a curve
//! ascending by size with ratios never rising, ...), and the version. Fields it does not know
//! are ignored. What needs a session — a `progress` for an unknown `seq`, a message before the
//! `welcome`, counters that go down — is the reader's to check, not this module's. Encoding
//! does not check: build messages from checked values ([`PoolInfo::check`] does it for what an
//! agent registers, [`check_curve`] for a curve, [`check_durability`] for durability figures).

mod decode;
mod encode;

use std::fmt;

pub use crate::line::MAX_LINE_BYTES;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// The largest integer on the wire, 2^53 − 1: exact in every language's JSON.
pub const MAX_INTEGER: u64 = (1 << 53) - 1;

/// The longest `app` of a hello, in bytes.
pub const MAX_APP_BYTES: usize = 128;

/// The longest `reason` of a progress or a bye, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The most points of a `stats.curve`.
pub const MAX_CURVE_POINTS: usize = 16;

/// A miss ratio of 1 in parts per million (see [`CurvePoint`]).
pub const MISS_PPM_ONE: u32 = 1_000_000;

/// The most write I/O threads `stats.durability.write_io_threads` names (InnoDB's limit).
pub const MAX_WRITE_IO_THREADS: u32 = 64;

/// Declares an enum whose variants travel as fixed strings, with `as_str`, `from_wire`, `ALL`
/// and `Display` (the wire string).
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in the order of the doc.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The string on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire,)+
                }
            }

            /// The value a wire string names, if any.
            pub fn from_wire(text: &str) -> Option<$name> {
                match text {
                    $($wire => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// What a pool is (`hello.kind`).
    pub enum PoolKind {
        /// A database's buffer pool.
        BufferPool = "buffer_pool",
        /// A language runtime's heap.
        Heap = "heap",
        /// A cache.
        Cache = "cache",
        /// Anything else.
        Other = "other",
    }
}

wire_enum! {
    /// Where a target stands (`progress.status`).
    pub enum ProgressStatus {
        /// The pool is moving towards the target.
        Working = "working",
        /// The pool is at the target and its memory is back with the OS.
        Done = "done",
        /// The application could not reach the target.
        Failed = "failed",
    }
}

wire_enum! {
    /// The code of an `error` message: what went wrong, as the doc's table lists them.
    pub enum ErrorCode {
        /// The line is not a JSON object, or not UTF-8.
        Malformed = "malformed",
        /// The line is over 65,536 bytes.
        TooLong = "too_long",
        /// `type` is missing or names no message of this version.
        UnknownType = "unknown_type",
        /// A field is missing, of the wrong type, or breaks its rule.
        BadField = "bad_field",
        /// A version the reader does not speak.
        Version = "version",
        /// A message other than `hello` before the `welcome`.
        NotRegistered = "not_registered",
        /// A second `hello` on the same connection.
        AlreadyRegistered = "already_registered",
        /// `hello.pid` is not the socket peer's, or that process is in no managed tenant.
        Identity = "identity",
        /// The tenant already has a live agent.
        Busy = "busy",
        /// A `progress` names a `seq` memtide never sent.
        UnknownSeq = "unknown_seq",
        /// Too many errors on this connection (8).
        Violations = "violations",
        /// No `stats` for `dead_after_ms`.
        Dead = "dead",
        /// A target was not `done` by its deadline.
        Deadline = "deadline",
        /// `done` was reported but the tenant's measured memory did not fall.
        Dishonest = "dishonest",
    }
}

impl ErrorCode {
    /// Whether an error with this code always closes the connection (`identity`, `busy`,
    /// `version`, `dead`, `deadline`, `dishonest`).
    pub fn always_fatal(self) -> bool {
        matches!(
            self,
            ErrorCode::Identity
                | ErrorCode::Busy
                | ErrorCode::Version
                | ErrorCode::Dead
                | ErrorCode::Deadline
                | ErrorCode::Dishonest
        )
    }
}

/// A line that cannot be read: the code to answer with, and a one-line message naming the
/// field and the value (`hello.min_bytes = 9000000000 > max_bytes = 8589934592`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ProtocolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ProtocolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ProtocolError {
        ProtocolError {
            code,
            message: message.into(),
        }
    }

    /// The `error` message that answers this error; fatal when asked or when the code always
    /// is.
    pub fn to_message(&self, fatal: bool) -> ErrorMessage {
        ErrorMessage {
            code: self.code,
            message: self.message.clone(),
            fatal: fatal || self.code.always_fatal(),
        }
    }
}

/// What an agent says of its pool when it registers: the `hello` without its version and pid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolInfo {
    /// What the application is (`mariadb`): 1 to 128 bytes, no control characters.
    pub app: String,
    pub kind: PoolKind,
    /// The pool's size now.
    pub pool_bytes: u64,
    /// The smallest size the application accepts.
    pub min_bytes: u64,
    /// The largest size it can grow to.
    pub max_bytes: u64,
    /// The unit the pool moves in (at least 1); targets are multiples of it.
    pub granule_bytes: u64,
}

impl PoolInfo {
    /// Checks the hello's rules: `app` of 1 to 128 bytes without control characters, every
    /// size at most 2^53 − 1, `min_bytes ≤ pool_bytes ≤ max_bytes`, `granule_bytes ≥ 1` and
    /// `granule_bytes ≤ max_bytes` when `max_bytes > 0`. The error is `bad_field`, naming the
    /// field as `hello.FIELD`.
    pub fn check(&self) -> Result<(), ProtocolError> {
        decode::check_pool(self)
    }

    /// Checks a target against this pool: a multiple of the granule within `[min_bytes,
    /// max_bytes]`. The error is `bad_field`, naming `target.pool_bytes` and the rule broken.
    pub fn check_target(&self, pool_bytes: u64) -> Result<(), ProtocolError> {
        let bad = |rule: String| {
            Err(ProtocolError::new(
                ErrorCode::BadField,
                format!("target.pool_bytes = {pool_bytes} {rule}"),
            ))
        };
        if pool_bytes < self.min_bytes {
            bad(format!("< min_bytes = {}", self.min_bytes))
        } else if pool_bytes > self.max_bytes {
            bad(format!("> max_bytes = {}", self.max_bytes))
        } else if !pool_bytes.is_multiple_of(self.granule_bytes.max(1)) {
            bad(format!(
                "is not a multiple of granule_bytes = {}",
                self.granule_bytes
            ))
        } else {
            Ok(())
        }
    }
}

/// `hello`: the agent registers its pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The application's process id, which must be the socket peer's.
    pub pid: u32,
    pub pool: PoolInfo,
}

/// `welcome`: memtide registered the agent for a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The tenant the agent is registered for (not empty).
    pub tenant: String,
    /// The agent sends `stats` at least this often (at least 1).
    pub stats_interval_ms: u64,
    /// memtide counts the agent dead after this long without `stats` (at least
    /// `stats_interval_ms`).
    pub dead_after_ms: u64,
}

/// `target`: resize the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Grows by at least 1 with each target of a session (at least 1).
    pub seq: u64,
    /// The size to reach: a multiple of the granule within `[min_bytes, max_bytes]`.
    pub pool_bytes: u64,
    /// Answer `done` within this long (at least 1).
    pub deadline_ms: u64,
}

/// `progress`: where the pool stands on a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The target this answers.
    pub seq: u64,
    /// The pool's size now.
    pub pool_bytes: u64,
    pub status: ProgressStatus,
    /// Why, for `failed` (at most 1,024 bytes).
    pub reason: Option<String>,
}

/// `stats`: the pool's statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// The pool's size now.
    pub pool_bytes: u64,
    /// The part holding data, at most `pool_bytes`.
    pub used_bytes: u64,
    /// Counts since the agent started, never decreasing within a session.
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    /// Pool memory not yet written back, at most `pool_bytes`.
    pub dirty_bytes: u64,
    /// A database's durability settings and sync counters, when the agent reports them
    /// ([`Durability`]). Sent before the curve, and only when present.
    pub durability: Option<Durability>,
    /// The pool's sampled LRU miss-ratio curve (SHARDS), when the agent reports one: 1 to
    /// [`MAX_CURVE_POINTS`] points, sizes strictly ascending from 1 byte, miss ratios in
    /// [0, 1] never rising ([`check_curve`]). Sent last, and only when present.
    pub curve: Option<Vec<CurvePoint>>,
}

impl Stats {
    /// The curve's points as (pool bytes, miss ratio), ascending by size; none without a
    /// curve. What a reader turns into its own curve type (`memtide_model::MissCurve`).
    pub fn curve_points(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.curve
            .iter()
            .flatten()
            .map(|point| (point.pool_bytes, point.miss_ratio()))
    }
}

/// One point of a pool's miss-ratio curve (`stats.curve`): the share of requests an LRU pool
/// of `pool_bytes` would miss, as the agent estimated it from a sample of the pool's requests.
///
/// The ratio is held in parts per million, rounded, so that a decoded message is exact and
/// [`Stats`] stays `Eq`; on the wire it is the fraction `miss_ppm / 1,000,000` (a JSON
/// number, the one field of the protocol that is not an integer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CurvePoint {
    /// The pool's size: 1 to 2^53 − 1 bytes.
    pub pool_bytes: u64,
    /// The miss ratio in parts per million: 0 to [`MISS_PPM_ONE`].
    pub miss_ppm: u32,
}

impl CurvePoint {
    /// The point of a pool of `pool_bytes` missing `miss_ratio` of its requests, rounded to a
    /// part per million. A ratio outside [0, 1], or NaN, is kept out of range (`u32::MAX`
    /// parts per million) so that [`check_curve`] refuses it rather than reading another
    /// ratio.
    pub fn new(pool_bytes: u64, miss_ratio: f64) -> CurvePoint {
        let miss_ppm = if (0.0..=1.0).contains(&miss_ratio) {
            (miss_ratio * f64::from(MISS_PPM_ONE)).round() as u32
        } else {
            u32::MAX
        };
        CurvePoint {
            pool_bytes,
            miss_ppm,
        }
    }

    /// The miss ratio, `miss_ppm / 1,000,000`.
    pub fn miss_ratio(&self) -> f64 {
        f64::from(self.miss_ppm) / f64::from(MISS_PPM_ONE)
    }
}

/// Checks a curve built in code against the rules `stats.curve` is decoded with: 1 to
/// [`MAX_CURVE_POINTS`] points, each size in `[1, 2^53 − 1]` and above the previous one, each
/// miss ratio in [0, 1] and at most the previous one's (an LRU pool never misses more when
/// larger). The error is `bad_field`, naming `stats.curve[INDEX][0]` (the size) or `[1]` (the
/// ratio) and the value.
pub fn check_curve(points: &[CurvePoint]) -> Result<(), ProtocolError> {
    decode::check_curve(
        points.len(),
        points.iter().map(|p| (p.pool_bytes, p.miss_ratio())),
    )
}

/// `stats.durability`: a database's durability settings and its sync counters (Lai et al.: the
/// fsyncs of co-located databases are what they contend for on a shared disk), under InnoDB's
/// and MariaDB's names. Every field is optional: a server that lacks a figure leaves it out,
/// never 0. memtide reports them and advises; it never changes them.
///
/// The counters count since the server started: unlike `hits` they fall back when the server
/// restarts (an adapter outlives its server), and memtide then has no rate for that interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Durability {
    /// `innodb_flush_log_at_trx_commit`: 0, 1, 2 or 3 (MariaDB's; as 1).
    pub flush_log_at_trx_commit: Option<u8>,
    /// `sync_binlog`: the binary log is fsynced every this many group commits; 0: never by
    /// the server.
    pub sync_binlog: Option<u32>,
    /// `innodb_log_buffer_size`, at least 1.
    pub log_buffer_bytes: Option<u64>,
    /// `innodb_write_io_threads`: 1 to [`MAX_WRITE_IO_THREADS`].
    pub write_io_threads: Option<u32>,
    /// `Innodb_data_fsyncs`: InnoDB's fsyncs (on MariaDB 10.8 and later the redo log's too).
    pub data_fsyncs: Option<u64>,
    /// `Innodb_os_log_fsyncs`: redo log fsyncs, where the server counts them apart.
    pub log_fsyncs: Option<u64>,
    /// `Innodb_log_waits`: redo records that waited for room in the log buffer.
    pub log_waits: Option<u64>,
    /// `Binlog_commits`: transactions written to the binary log.
    pub binlog_commits: Option<u64>,
    /// `Binlog_group_commits`: the binary log's group commits.
    pub binlog_group_commits: Option<u64>,
}

impl Durability {
    /// Each field's name on the wire and the integers it takes, in the order of the doc.
    pub(crate) const FIELDS: [(&'static str, u64, u64); 9] = [
        ("flush_log_at_trx_commit", 0, 3),
        ("sync_binlog", 0, u32::MAX as u64),
        ("log_buffer_bytes", 1, MAX_INTEGER),
        ("write_io_threads", 1, MAX_WRITE_IO_THREADS as u64),
        ("data_fsyncs", 0, MAX_INTEGER),
        ("log_fsyncs", 0, MAX_INTEGER),
        ("log_waits", 0, MAX_INTEGER),
        ("binlog_commits", 0, MAX_INTEGER),
        ("binlog_group_commits", 0, MAX_INTEGER),
    ];

    /// The fields' values in the order of [`Durability::FIELDS`].
    pub(crate) fn values(&self) -> [Option<u64>; 9] {
        [
            self.flush_log_at_trx_commit.map(u64::from),
            self.sync_binlog.map(u64::from),
            self.log_buffer_bytes,
            self.write_io_threads.map(u64::from),
            self.data_fsyncs,
            self.log_fsyncs,
            self.log_waits,
            self.binlog_commits,
            self.binlog_group_commits,
        ]
    }
}

/// Checks durability figures built in code against the rules `stats.durability` is decoded
/// with: `flush_log_at_trx_commit` 0 to 3, `log_buffer_bytes` from 1, `write_io_threads` 1 to
/// [`MAX_WRITE_IO_THREADS`], every figure at most 2^53 − 1. The error is `bad_field`, naming
/// `stats.durability.FIELD` and the value.
pub fn check_durability(durability: &Durability) -> Result<(), ProtocolError> {
    decode::check_durability(durability)
}

/// `bye`: the sender closes the connection after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bye {
    /// At most 1,024 bytes.
    pub reason: Option<String>,
}

/// `error`: the sender could not read a line, or refuses the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorMessage {
    pub code: ErrorCode,
    /// One line naming what is wrong.
    pub message: String,
    /// The sender closes the connection after this line.
    pub fatal: bool,
}

/// A message an agent sends to memtide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentMessage {
    Hello(Hello),
    Progress(Progress),
    Stats(Stats),
    Bye(Bye),
    Error(ErrorMessage),
}

/// A message memtide sends to an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemtideMessage {
    Welcome(Welcome),
    Target(Target),
    Bye(Bye),
    Error(ErrorMessage),
}

impl AgentMessage {
    /// Decodes a line an agent sent (without its `\n`), with every rule of the doc.
    pub fn decode(line: &[u8]) -> Result<AgentMessage, ProtocolError> {
        decode::agent_message(line)
    }

    /// The message as one line of JSON, without the newline.
    pub fn encode(&self) -> String {
        encode::to_line(self)
    }
}

impl MemtideMessage {
    /// Decodes a line memtide sent (without its `\n`), with every rule of the doc.
    pub fn decode(line: &[u8]) -> Result<MemtideMessage, ProtocolError> {
        decode::memtide_message(line)
    }

    /// The message as one line of JSON, without the newline.
    pub fn encode(&self) -> String {
        encode::to_line(self)
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary, for a reason or a message that
/// must fit its field.
pub(crate) fn truncate_to(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> PoolInfo {
        PoolInfo {
            app: "mariadb".into(),
            kind: PoolKind::BufferPool,
            pool_bytes: 512 << 20,
            min_bytes: 64 << 20,
            max_bytes: 1 << 30,
            granule_bytes: 1 << 20,
        }
    }

    #[test]
    fn wire_names_round_trip_for_every_value() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(*code));
        }
        for kind in PoolKind::ALL {
            assert_eq!(PoolKind::from_wire(&kind.to_string()), Some(*kind));
        }
        for status in ProgressStatus::ALL {
            assert_eq!(ProgressStatus::from_wire(status.as_str()), Some(*status));
        }
        assert_eq!(ErrorCode::ALL.len(), 14);
        assert_eq!(ErrorCode::from_wire("Malformed"), None);
    }

    #[test]
    fn only_the_doc_s_six_codes_are_always_fatal() {
        let fatal: Vec<&str> = ErrorCode::ALL
            .iter()
            .filter(|code| code.always_fatal())
            .map(|code| code.as_str())
            .collect();
        assert_eq!(
            fatal,
            [
                "version",
                "identity",
                "busy",
                "dead",
                "deadline",
                "dishonest"
            ]
        );
    }

    #[test]
    fn an_error_answering_an_always_fatal_code_is_fatal() {
        let version = ProtocolError::new(ErrorCode::Version, "welcome.version = 2");
        assert!(version.to_message(false).fatal);
        let malformed = ProtocolError::new(ErrorCode::Malformed, "not JSON");
        assert!(!malformed.to_message(false).fatal);
        assert!(malformed.to_message(true).fatal);
    }

    #[test]
    fn a_target_is_checked_against_granule_min_and_max() {
        let pool = pool();
        assert_eq!(pool.check_target(256 << 20), Ok(()));
        assert_eq!(pool.check_target(64 << 20), Ok(()));
        assert_eq!(pool.check_target(1 << 30), Ok(()));
        let off = pool.check_target((256 << 20) + 1).unwrap_err();
        assert_eq!(off.code, ErrorCode::BadField);
        assert_eq!(
            off.message,
            "target.pool_bytes = 268435457 is not a multiple of granule_bytes = 1048576"
        );
        assert_eq!(
            pool.check_target(32 << 20).unwrap_err().message,
            "target.pool_bytes = 33554432 < min_bytes = 67108864"
        );
        assert_eq!(
            pool.check_target(2 << 30).unwrap_err().message,
            "target.pool_bytes = 2147483648 > max_bytes = 1073741824"
        );
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncate_to("abc", 8), "abc");
        assert_eq!(truncate_to("abcdef", 3), "abc");
        assert_eq!(truncate_to("aé", 2), "a");
    }
}
