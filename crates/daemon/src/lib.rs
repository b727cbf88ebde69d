//! memtide's daemon: its configuration, the Linux host driven on the runner's wall-clock loop, the state file's Linux records, the JSON API, Prometheus metrics and structured logs.
//!
//! The API's wire types (the snapshot, request and error bodies) and its client live in
//! `memtide-api`; the daemon builds and serves them.

pub mod api;
pub mod command;
pub mod config;
pub mod log;
pub mod metrics;
pub mod publish;
pub mod run;
pub mod state_file;
