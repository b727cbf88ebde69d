//! Demand patterns and service levels for the density benchmark: what load each tenant gets, fixed by a seed, and how its latency is judged, the same on the real host and in the simulator.
//!
//! - `pattern`: [`Demand`] (bursty, diurnal, busy; parsed from one line of text) and its
//!   [`Schedule`] over a run, from a seed ([`tenant_seed`] gives each tenant its own);
//! - `policy`: the [`Policy`]s compared and the [`ServerKind`]s run, named alike on the real
//!   host and in the simulator, and static sizing's rule ([`static_limit`], [`static_fit`]);
//! - `slo`: a load generator's [`Window`]s, a tenant's [`Slo`], the [`Attainment`] of its
//!   active windows and each wake-up's time back within it.
//!
//! Pure: no clock, I/O or randomness beyond the seed (the model crate's clippy.toml applies).

mod pattern;
mod policy;
mod slo;

pub use pattern::{tenant_seed, Demand, Schedule, MAX_LENGTH_S, MAX_RATE};
pub use policy::{static_fit, static_limit, Policy, ServerKind};
pub use slo::{attainment, wake_time, Attainment, Second, Slo, Window};

/// What is wrong with a pattern or a schedule's length.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DemandError {
    #[error("demand pattern `{text}`: {why}")]
    Pattern { text: String, why: String },
    #[error("run length {length} s: must be more than 0 and at most {MAX_LENGTH_S} s")]
    Length { length: f64 },
}
