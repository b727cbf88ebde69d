//! memtide's simulated host: a deterministic world of machine pages, guests, balloon drivers, host swap and workloads.
//!
//! A seed in, the same bytes out: all randomness comes from [`rng::SimRng`] seeded by the scenario.

pub mod config;
pub mod cost;
pub mod rng;
pub mod workload;
pub mod zipf;
