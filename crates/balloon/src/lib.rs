//! memtide's application balloon protocol: the wire messages, the line framing, the agent an application links to shrink and grow its own pool when memtide asks, and the protocol's test vectors.
//!
//! Databases, language runtimes and caches size a pool at start and assume it stays resident.
//! With this protocol memtide asks the application to resize the pool itself instead of paging
//! it out behind its back (docs/balloon-protocol.md). This crate depends on `serde`,
//! `serde_json` and `thiserror` only — no other memtide crate — so an application links it
//! alone, and the daemon uses the same `protocol` and `line` modules for the server side.
//!
//! - [`protocol`]: [`AgentMessage`] and [`MemtideMessage`], decoded from one line with every
//!   rule of the doc into a [`ProtocolError`] (an [`ErrorCode`] and a message naming the field
//!   and the value) when the line breaks one, and encoded to one line;
//! - [`line`](mod@line): [`LineSplitter`], the bounded framing (65,536 bytes a line with its newline),
//!   for blocking and non-blocking readers, and [`LineReader`] over a blocking stream;
//! - [`agent`]: [`Agent`], the SDK: the pool's facts and three callbacks (shrink, grow,
//!   statistics) in, a thread that keeps the application registered with memtide out;
//! - [`vectors`]: test support — `protocol/vectors/` loaded, and a [`vectors::Player`] that
//!   plays either side of an exchange.
//!
//! A `stats` message may carry the pool's miss-ratio `curve` (`CurvePoint`s) and a database's
//! `durability` (its durability settings and fsync counters). A line longer than 64 KiB is
//! reported once and dropped. The agent registers, answers targets with progress, sends
//! stats and reconnects with back-off. The vectors are used by this crate's tests,
//! memtide-agents' and the SDKs' (`sdk/`: Go, Python, Java and C, each in its own build).
//!
//! [`AgentMessage`]: protocol::AgentMessage
//! [`MemtideMessage`]: protocol::MemtideMessage
//! [`ProtocolError`]: protocol::ProtocolError
//! [`ErrorCode`]: protocol::ErrorCode
//! [`LineSplitter`]: line::LineSplitter
//! [`LineReader`]: line::LineReader
//! [`Agent`]: agent::Agent

pub mod agent;
pub mod line;
pub mod protocol;
pub mod vectors;
