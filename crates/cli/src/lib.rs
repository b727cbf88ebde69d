//! The memtide command's library: run scenarios on the simulated host, write their outputs, benchmark, print a daemon's status, and run the cache simulator.

pub mod bench;
pub mod cache;
pub mod output;
pub mod progress;
pub mod record;
pub mod run;
pub mod settings;
pub mod status;
