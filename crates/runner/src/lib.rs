//! One runner for every world: tenants declared, admitted, attached, ticked and detached the same way whether the world is the simulated host, a Linux host or (next) QEMU VMs.
//!
//! A world implements `memtide_controller::World` (attach, observe, apply, run one tick,
//! detach, world-specific commands, re-adoption records). The [`Runner`] owns the world and the
//! [`Controller`](memtide_controller::Controller), carries out [`Change`]s (a tenant starts or
//! stops, the tax rate or a tenant's min/max/shares change, a world command) and ticks; a
//! [`Sink`] sees every tick and every change's outcome (the simulator records them, the daemon
//! publishes them). A [`Script`] is changes at times: a scenario's timeline. The
//! [`state_file`] keeps what a restarted runner needs: the world's records, the estimates and
//! the changes made through the API.

mod change;
pub mod record;
mod runner;
mod script;
mod sink;
pub mod state_file;

pub use change::{Change, Outcome};
pub use record::{TenantRow, TickRecord};
pub use runner::{Runner, Status, Tenant};
pub use script::Script;
pub use sink::{Sink, TickView};
