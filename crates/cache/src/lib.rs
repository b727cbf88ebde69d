//! memtide's cache simulator (Gemini, VLDB 2008): block traces read as streams, single-size LRU replay, exact LRU miss-ratio curves from stack distances in one pass, SHARDS-sampled curves with their error against the exact ones, the two-level hierarchy (LRU/LRU, LRU/DEMOTE; quotas or shared) request by request, and exact latency surfaces over quota grids.
//!
//! Pure and streaming: no clock, no randomness but the hash that samples blocks, and no trace
//! is ever loaded whole; memory is proportional to the distinct blocks a trace touches.
//!
//! - `trace/`: [`TraceReader`] (the CSV block trace and libCacheSim's `oracleGeneral` records,
//!   plain or zstd-compressed, as iterators whose errors name the file, line or record, field
//!   and value) and [`TraceWriter`];
//! - `gen`: [`Generator`] over a [`Pattern`] (Zipf, loop, scan, mixtures, TPC-W-like,
//!   RUBiS-like), deterministic from a seed;
//! - `lru`: [`Lru`], blocks in one `Vec` as an intrusive list with an Fx map, with insert and
//!   remove for demotion between levels;
//! - `mrc`: [`StackDistances`] (Mattson's, each block's latest request marked in a bitset with
//!   a Fenwick tree over its words, compacted when the times run out) and [`MissRatioCurve`];
//! - `bytes`: curves by bytes for objects of varying sizes: [`ByteDistances`] (a Fenwick
//!   tree of sizes over request positions), the binned [`ByteCurve`] (miss ratio and byte miss
//!   ratio) and [`ByteShards`];
//! - `shards`: fixed-rate and fixed-size SHARDS with SHARDS_adj, a HyperLogLog estimating the
//!   footprint, and [`WindowedShards`], SHARDS as an application's agent runs it (one curve per
//!   window; the first window only warms the stack);
//! - `twolevel`: [`TwoLevel`], a buffer pool over a storage cache over disk, each level
//!   partitioned by quotas or shared, each request a buffer hit, storage hit or disk read under
//!   [`Latencies`];
//! - `surface`: [`Surface`], a tenant's exact latency surface over a quota grid (DEMOTE from
//!   one curve, LRU/LRU from the buffer level's miss stream per buffer quota);
//! - `partition`: the paper's utilities, IDEAL, hill climbing from uniform random starts (every
//!   climb kept), `sampled_search` (Gemini's loop of fitting surfaces to sampled points by
//!   inverse-distance weighting, climbing them and sampling more, greedily or at random) and
//!   the CONSERVATIVE, PROFILE and MRC baselines;
//! - `experiment`: `Experiment::run`, every plan on the apps' surfaces, SHARED and PROFILE
//!   simulated request by request; `scenario`: `CacheScenario`, `scenarios/cache/*.toml`.
//!
//! The command is the CLI's `cache/` (`memtide cache mrc`, `surface`, `gen`, `partition`).
//! See docs/cache.md.

pub mod bytes;
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

pub use bytes::{ByteCurve, ByteDistances, ByteShards, Reuse};
pub use gen::{Generator, Pattern};
pub use lru::Lru;
pub use mrc::{at_size, MissRatioCurve, StackDistances};
pub use shards::{Shards, WindowedShards};
pub use surface::Surface;
pub use trace::{Op, Request, TraceError, TraceReader, TraceWriter};
pub use twolevel::{Counts, Latencies, Policy, Served, TwoLevel};
