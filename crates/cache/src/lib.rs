//! memtide's cache simulator (Gemini, VLDB 2008): block traces read as streams, single-size LRU replay, exact LRU miss-ratio curves from stack distances in one pass, and SHARDS-sampled curves with their error against the exact ones.
//!
//! Pure and streaming: no clock, no randomness but the hash that samples blocks, and no trace
//! is ever loaded whole; memory is proportional to the distinct blocks a trace touches.

pub mod lru;
pub mod mrc;
pub mod shards;
pub mod trace;

pub use lru::Lru;
pub use mrc::{MissRatioCurve, StackDistances};
pub use shards::Shards;
pub use trace::{Op, Request, TraceError, TraceReader};
