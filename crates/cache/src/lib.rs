//! memtide's cache simulator (Gemini, VLDB 2008): block traces read as streams, single-size LRU replay, exact LRU miss-ratio curves from stack distances in one pass, SHARDS-sampled curves with their error against the exact ones, the two-level hierarchy (LRU/LRU, LRU/DEMOTE; quotas or shared) request by request, and exact latency surfaces over quota grids.
//!
//! Pure and streaming: no clock, no randomness but the hash that samples blocks, and no trace
//! is ever loaded whole; memory is proportional to the distinct blocks a trace touches.

pub mod experiment;
pub mod gen;
pub mod lru;
pub mod mrc;
pub mod partition;
pub mod scenario;
pub mod shards;
pub mod surface;
pub mod trace;
pub mod twolevel;

pub use gen::{Generator, Pattern};
pub use lru::Lru;
pub use mrc::{at_size, MissRatioCurve, StackDistances};
pub use shards::{Shards, WindowedShards};
pub use surface::Surface;
pub use trace::{Op, Request, TraceError, TraceReader, TraceWriter};
pub use twolevel::{Counts, Latencies, Policy, Served, TwoLevel};
