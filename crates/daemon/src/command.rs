//! Run-time changes the API asks of the daemon's loop (tenant min/max/shares, the tax rate), already validated for type and range.

use std::sync::mpsc;

/// A change to apply at the next opportunity; the loop answers on `reply`.
#[derive(Debug)]
pub struct Request {
    pub change: Change,
    /// `Ok` once applied, or one line saying why it was refused (nothing changed then).
    pub reply: mpsc::Sender<Result<(), Refusal>>,
}

/// What to change. Sizes are bytes; absent fields keep their current value.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    Tenant {
        name: String,
        min_bytes: Option<u64>,
        max_bytes: Option<u64>,
        shares: Option<u64>,
    },
    TaxRate(f64),
}

/// Why the loop refused a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No tenant by that name (HTTP 404).
    UnknownTenant(String),
    /// The change is well-formed but not allowed, e.g. admission control refused it (HTTP 409).
    Conflict(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::UnknownTenant(name) => write!(f, "no tenant named {name:?}"),
            Refusal::Conflict(why) => f.write_str(why),
        }
    }
}
