//! memtide's daemon: its configuration, the Linux host driven on the runner's wall-clock loop, the state file's Linux records, the JSON API, Prometheus metrics and structured logs.
//!
//! The API's wire types (the snapshot, request and error bodies) and its client live in
//! `memtide-api`; the daemon builds and serves them.
//!
//! - `config` (and `config/`): the configuration file on `memtide-config`, sections read
//!   straight into their types by serde with their defaults, the tenants' tables in `schema`
//!   and `tenant`, the checks across fields in `build`, and `check`, the one check against the
//!   host (the shared disk, a launched VM's files and memory, an adopted VM's cgroup through
//!   its QMP socket) behind a `HostProbe` trait; `DaemonConfig::load` (parse, then check) is
//!   also the SIGHUP reload;
//! - `run/`: `Running` checks and binds the API port before changing anything, declares the
//!   configured tenants (cgroups and `[tenant.vm]` VMs) in a `Runner<QemuHost>` and serves it
//!   on the `WallClock` with the API's requests and, unless in a dry run, a `StateSaver`;
//!   `Daemon`, its `Driver`, starts the tenants, publishes each tick, logs each API change,
//!   reloads on SIGHUP and runs one `shutdown` that every way out takes, `Drop` included.
//!   `prepare.rs` builds the host with the actuators its configuration turns on
//!   (`.with(...)`: the agents' hub as the application balloon, KSM with `[sharing] enabled`);
//! - `state_file`: the runner's state file over `memtide_qemu::Record`s (a Linux
//!   `TenantRecord` flattened, a VM's socket and found balloon; older formats load);
//! - `command`: the runner's request types under the names the API uses;
//! - `publish`: the snapshot, decision records, counters and log lines from each tick's
//!   `TickRecord` (page sharing, application pools and their resizes, cache quotas, advice);
//! - `api/`: a small HTTP/1.1 server on std::net serving `memtide-api`'s types, checking
//!   request bodies field by field into changes for the loop, and `/metrics`;
//! - `bounded`: a host command's output (`systemctl`, `virsh`) within a deadline, for the
//!   check against the host and `memtide discover`;
//! - `metrics` (the Prometheus text, from `memtide_runner::columns`), `log` (text or JSON
//!   lines).

pub mod api;
pub mod bounded;
pub mod command;
pub mod config;
pub mod history;
pub mod log;
pub mod metrics;
pub mod publish;
pub mod run;
pub mod state_file;
