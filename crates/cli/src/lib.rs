//! The memtide command's library: run scenarios on the simulated host, write their outputs, benchmark, and print a daemon's status.

pub mod bench;
pub mod output;
pub mod progress;
pub mod record;
pub mod run;
pub mod settings;
pub mod status;
