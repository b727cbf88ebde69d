//! memtide's simulated host: a deterministic world of machine pages, guests, balloon drivers, host swap and workloads.
//!
//! A seed in, the same bytes out: all randomness comes from [`rng::SimRng`] seeded by the scenario.

pub mod app;
pub mod balloon;
pub mod config;
pub mod cost;
pub mod disk;
pub mod guest;
pub mod machine;
pub mod paging;
pub mod pmap;
pub mod remap;
pub mod rng;
pub mod sampler;
pub mod sharing;
pub mod stats;
pub mod vm;
pub mod workload;
pub mod world;
pub mod zipf;

pub use stats::TickStats;
pub use world::{SimError, SimWorld};
