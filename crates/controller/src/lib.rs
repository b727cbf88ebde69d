//! memtide's control loop: one brain for every world, generic over the [`Host`] trait.
//!
//! - `host`: [`Host`] (`observe`, `apply`) and [`World`], a tenant's whole life in a world:
//!   `attach` (adopt, launch or power on, answering [`Attach`]: attached, with how it
//!   [`Joined`], waiting or refused),
//!   `detach` (giving back what the world changed), `run` one tick, world-specific commands
//!   (each answering its world's `Done`), and the records a restarted runner re-adopts from;
//! - `controller`: [`Controller`] admits tenants and each tick turns one
//!   `HostObservation` into one `Decision`: estimators, then the reclamation state, then
//!   targets by allocation, then `memtide_policy::mechanism::plan` for each tenant's levers
//!   (with a cache budget configured, Gemini's quotas first: `search_quotas`). It never knows
//!   which world it drives nor which levers a tenant has: there is no mechanism fork here;
//! - `config`: [`ControllerConfig`], its settings, checked into [`ConfigError`]s.

pub mod config;
pub mod controller;
pub mod fixture;
pub mod host;

pub use config::{ConfigError, ControllerConfig};
pub use controller::{Controller, ControllerError, TenantView};
pub use host::{Attach, Host, Joined, World};
