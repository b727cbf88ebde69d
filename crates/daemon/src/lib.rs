//! memtide's daemon: its configuration, the tick loop on a Linux host, the state file, the JSON API, Prometheus metrics and structured logs.

pub mod api;
pub mod command;
pub mod config;
pub mod log;
pub mod metrics;
pub mod publish;
pub mod run;
pub mod snapshot;
pub mod state_file;
pub mod status;
