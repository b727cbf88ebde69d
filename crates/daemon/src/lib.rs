//! memtide's daemon: its configuration, the tick loop on a Linux host, the state file, the JSON API, Prometheus metrics and structured logs.

pub mod command;
pub mod config;
pub mod snapshot;
