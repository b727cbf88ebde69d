//! Changes asked from outside a run while it goes (an API request: a tenant's min/max/shares by name, the tax rate), already checked for type and range, and the service's answer.

use memtide_model::TaxRate;
use std::sync::mpsc;

/// A change to carry out at the service's next chance; it answers on `reply`.
#[derive(Debug)]
pub struct Request {
    pub change: Change,
    /// `Ok` once carried out, or why it was refused (nothing changed then).
    pub reply: mpsc::Sender<Result<(), Refusal>>,
}

/// What to change. Tenants by name, sizes in bytes; absent fields keep their current value.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    Tenant {
        name: String,
        min_bytes: Option<u64>,
        max_bytes: Option<u64>,
        shares: Option<u64>,
    },
    TaxRate(TaxRate),
}

/// One readable line for logs: `tenant "db": min=256.0 MiB shares=2000` (only the fields
/// given), `tax_rate=0.5`.
impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::TaxRate(t) => write!(f, "tax_rate={}", t.value()),
            Change::Tenant {
                name,
                min_bytes,
                max_bytes,
                shares,
            } => {
                write!(f, "tenant {name:?}:")?;
                if let Some(b) = min_bytes {
                    write!(f, " min={}", memtide_model::Bytes(*b))?;
                }
                if let Some(b) = max_bytes {
                    write!(f, " max={}", memtide_model::Bytes(*b))?;
                }
                if let Some(n) = shares {
                    write!(f, " shares={n}")?;
                }
                Ok(())
            }
        }
    }
}

/// Why the service refused a change.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reads_as_one_line_with_only_the_fields_given() {
        let change = Change::Tenant {
            name: "db".to_string(),
            min_bytes: Some(256 << 20),
            max_bytes: None,
            shares: Some(2000),
        };
        assert_eq!(
            change.to_string(),
            "tenant \"db\": min=256.0 MiB shares=2000"
        );
        assert_eq!(
            Change::TaxRate(TaxRate::new(0.5).unwrap()).to_string(),
            "tax_rate=0.5"
        );
    }
}
