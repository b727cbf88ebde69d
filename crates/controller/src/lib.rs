//! memtide's control loop: one brain for every world, generic over the [`Host`] trait.

pub mod config;
pub mod controller;
pub mod fixture;
pub mod host;

pub use config::{ConfigError, ControllerConfig};
pub use controller::{Controller, ControllerError, TenantView};
pub use host::{Attach, Host, Joined, World};
