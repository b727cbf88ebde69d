//! The memtide command's library: run scenarios on the simulated host, write their outputs, benchmark.

pub mod bench;
pub mod output;
pub mod progress;
pub mod record;
pub mod run;
pub mod settings;
