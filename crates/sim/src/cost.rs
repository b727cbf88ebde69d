//! The sim's stated cost model: what each kind of memory access costs in time (see docs/cost-model.md).

use crate::workload::MIN_CPU_US_PER_ACCESS;
use serde::{Deserialize, Serialize};

/// Time costs of memory events, in microseconds of the tenant's time. A tenant runs one
/// tick (1 s) per tick; the accesses it completes in that time give its throughput.
///
/// Every access costs `cpu_us_per_access` (or the workload's own figure) plus the stall of
/// what it hit; docs/cost-model.md states the whole model. The defaults are round numbers
/// for a 2010s server with a rotating or SATA-class swap/data disk: a page-cache miss or a
/// swap-in costs about 200 accesses' worth of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// First touch of a page the host has not backed yet (zero-fill, minor fault).
    pub minor_fault_us: f64,
    /// Guest reads an anonymous page back from its own swap device.
    pub guest_swap_in_us: f64,
    /// Guest writes an anonymous page to its own swap device (amortised, asynchronous).
    pub guest_swap_out_us: f64,
    /// Page-cache miss: the guest reads a file block from disk (refaults cost the same); an
    /// application's random read into its own pool.
    pub disk_read_us: f64,
    /// One page of an application's sequential read into its own pool (a database's scan,
    /// read ahead).
    pub disk_seq_read_us: f64,
    /// The host reads a page of the tenant back from host swap.
    pub host_swap_in_us: f64,
    /// The host writes a victim page to host swap.
    pub host_swap_out_us: f64,
    /// Default work per page access when a workload does not say (`cpu_us_per_access`).
    pub cpu_us_per_access: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            minor_fault_us: 1.0,
            guest_swap_in_us: 200.0,
            guest_swap_out_us: 50.0,
            disk_read_us: 200.0,
            disk_seq_read_us: 20.0,
            host_swap_in_us: 250.0,
            host_swap_out_us: 50.0,
            cpu_us_per_access: 10.0,
        }
    }
}

/// A cost a scenario got wrong; the message names the field and value, e.g.
/// `cost.disk_read_us = -1 must be a finite number >= 0`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cost.{field} = {value} must be a finite number >= {least}")]
pub struct CostError {
    pub field: &'static str,
    pub value: f64,
    /// The least the field may be: 0, or `MIN_CPU_US_PER_ACCESS` for the work per access.
    pub least: f64,
}

impl CostModel {
    /// Every field with its TOML name and the least it may be, in declaration order.
    pub fn fields(&self) -> [(&'static str, f64, f64); 8] {
        [
            ("minor_fault_us", self.minor_fault_us, 0.0),
            ("guest_swap_in_us", self.guest_swap_in_us, 0.0),
            ("guest_swap_out_us", self.guest_swap_out_us, 0.0),
            ("disk_read_us", self.disk_read_us, 0.0),
            ("disk_seq_read_us", self.disk_seq_read_us, 0.0),
            ("host_swap_in_us", self.host_swap_in_us, 0.0),
            ("host_swap_out_us", self.host_swap_out_us, 0.0),
            (
                "cpu_us_per_access",
                self.cpu_us_per_access,
                MIN_CPU_US_PER_ACCESS,
            ),
        ]
    }

    /// Checks that every cost is a finite number at least its least (0, and
    /// `MIN_CPU_US_PER_ACCESS` for the work per access); the first bad one is reported.
    pub fn validate(&self) -> Result<(), CostError> {
        match self
            .fields()
            .into_iter()
            .find(|&(_, v, least)| !(v.is_finite() && v >= least))
        {
            Some((field, value, least)) => Err(CostError {
                field,
                value,
                least,
            }),
            None => Ok(()),
        }
    }

    /// Microseconds to whole nanoseconds, rounded; negative or NaN give 0, huge values
    /// saturate. For integer accounting of the costs above.
    pub fn ns(us: f64) -> u64 {
        if us.is_nan() || us <= 0.0 {
            0
        } else {
            (us * 1000.0).round() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_numbers() {
        let c = CostModel::default();
        assert_eq!(
            c.fields(),
            [
                ("minor_fault_us", 1.0, 0.0),
                ("guest_swap_in_us", 200.0, 0.0),
                ("guest_swap_out_us", 50.0, 0.0),
                ("disk_read_us", 200.0, 0.0),
                ("disk_seq_read_us", 20.0, 0.0),
                ("host_swap_in_us", 250.0, 0.0),
                ("host_swap_out_us", 50.0, 0.0),
                ("cpu_us_per_access", 10.0, MIN_CPU_US_PER_ACCESS),
            ]
        );
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn defaults_make_a_miss_cost_twenty_accesses() {
        let c = CostModel::default();
        assert_eq!(c.disk_read_us / c.cpu_us_per_access, 20.0);
        assert!(c.host_swap_in_us > c.guest_swap_in_us);
    }

    #[test]
    fn partial_toml_keeps_other_defaults() {
        let c: CostModel = toml::from_str("disk_read_us = 100.0").unwrap();
        assert_eq!(c.disk_read_us, 100.0);
        assert_eq!(c.host_swap_in_us, 250.0);
        assert!(toml::from_str::<CostModel>("disk_us = 1.0").is_err());
    }

    #[test]
    fn validate_names_the_bad_field() {
        let c = CostModel {
            disk_read_us: -1.0,
            ..CostModel::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "cost.disk_read_us = -1 must be a finite number >= 0"
        );
        let c = CostModel {
            cpu_us_per_access: f64::NAN,
            ..CostModel::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "cpu_us_per_access");
    }

    #[test]
    fn ns_rounds_and_clamps() {
        assert_eq!(CostModel::ns(10.0), 10_000);
        assert_eq!(CostModel::ns(0.0004), 0);
        assert_eq!(CostModel::ns(0.0006), 1);
        assert_eq!(CostModel::ns(-5.0), 0);
        assert_eq!(CostModel::ns(f64::NAN), 0);
        assert_eq!(CostModel::ns(f64::INFINITY), u64::MAX);
    }
}
