//! One runner for every world: tenants declared, admitted, attached, ticked and detached the same way whether the world is the simulated host, a Linux host or (next) QEMU VMs.
//!
//! A world implements `memtide_controller::World` (attach, observe, apply, run one tick,
//! detach, world-specific commands, re-adoption records). The [`Runner`] owns the world and the
//! [`Controller`](memtide_controller::Controller), carries out [`Change`]s (a tenant starts or
//! stops, the tax rate or a tenant's min/max/shares change, a world command) and ticks; a
//! [`Sink`] sees every tick and every change's outcome (the simulator records them, the daemon
//! publishes them). A [`Service`] runs a runner on a [`Clock`] (the [`VirtualClock`] of the
//! simulator, the [`WallClock`] of a real host): the tick loop, the changes due from a
//! [`Script`] (a scenario's timeline) or asked by [`request::Request`]s (the API), and the
//! [`state_file`], written by a [`StateSaver`] when due, which keeps what a restarted runner
//! needs: the world's records, the estimates and the changes made through the API. Its
//! [`Driver`] (the simulator's recorder, the daemon) plugs in the sink, when to stop and
//! reload, and what to do around ticks.
//!
//! Modules: `runner` ([`Runner`] with each tenant's `Status`: declared, running, waiting,
//! refused, stopped), `change` ([`Change`] and its `Outcome`), `service`, `clock` (the
//! `WallClock` waits in slices of at most 50 ms; the `VirtualClock` jumps from tick to tick),
//! `script`, `request` (the API's changes by tenant name in bytes, answered `Ok` or with a
//! `Refusal`, recorded as the state file's API changes), `saver` (when the state file is
//! written), `record` (`TickRecord`/`TenantRow`: one tick's record for every world, memory in
//! bytes, figures only some worlds know as `Option`, each lever nested as the world reported
//! it, so a figure a lever gains needs no second declaration; the `Reason` kept as data and
//! formatted only when written), `columns` (`TENANT_COLUMNS`: each per-tenant figure once,
//! with its `/metrics` family, its `memtide status` column and its timeline.csv column) and
//! [`state_file`] (written atomically; formats 1 and 2 read; refused while its writer runs).

mod change;
mod clock;
pub mod columns;
pub mod record;
pub mod request;
mod runner;
mod saver;
mod script;
mod service;
mod sink;
pub mod state_file;

#[cfg(test)]
mod fake;

pub use change::{Change, Outcome};
pub use clock::{Clock, VirtualClock, WallClock};
pub use record::{TenantRow, TickRecord};
pub use runner::{Runner, Status, Tenant};
pub use saver::StateSaver;
pub use script::Script;
pub use service::{Driver, Service};
pub use sink::{Sink, TickView};
