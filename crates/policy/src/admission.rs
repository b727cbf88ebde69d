//! Admission control: reserve min + overhead in machine memory and max - min in host swap (ESX section 6.2).
//!
//! A tenant may start only if both reservations fit in what is still unreserved; the swap
//! reservation guarantees that the tenant's memory can always be preserved, whatever the
//! pressure. Reservations are bookkeeping: actual allocations vary, and unused reservations
//! are not wasted. A refused tenant leaves the ledger unchanged.

use memtide_model::{Pages, TenantSpec};

/// What backs the memory between a tenant's min and its max, as refusals name it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Backing {
    /// ESX: the host's swap space.
    #[default]
    HostSwap,
    /// A Linux host with a budget: RAM outside the budget plus swap.
    OutsideBudget,
}

impl std::fmt::Display for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backing::HostSwap => "host swap",
            Backing::OutsideBudget => "memory outside the budget (RAM beyond the budget plus swap)",
        })
    }
}

/// Reservations of admitted tenants against machine memory and host swap.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionLedger {
    machine: Pages,
    host_swap: Pages,
    backing: Backing,
    reserved_machine: Pages,
    reserved_swap: Pages,
}

/// Why a tenant was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AdmissionRefusal {
    #[error("tenant {tenant}: min + overhead needs {need} of machine memory, only {available} unreserved")]
    MachineMemory {
        tenant: String,
        need: Pages,
        available: Pages,
    },
    #[error("tenant {tenant}: max - min needs {need} of {backing}, only {available} unreserved")]
    HostSwap {
        tenant: String,
        need: Pages,
        available: Pages,
        backing: Backing,
    },
}

/// Machine memory a tenant reserves: min + overhead (saturating).
fn machine_need(spec: &TenantSpec) -> Pages {
    Pages(spec.min.0.saturating_add(spec.overhead.0))
}

/// Host swap a tenant reserves: max - min (0 when max <= min).
fn swap_need(spec: &TenantSpec) -> Pages {
    spec.max.saturating_sub(spec.min)
}

impl AdmissionLedger {
    pub fn new(machine: Pages, host_swap: Pages) -> AdmissionLedger {
        AdmissionLedger::backed_by(machine, host_swap, Backing::HostSwap)
    }

    /// A ledger whose `backing` (what max - min is reserved in) is named as given in refusals.
    pub fn backed_by(machine: Pages, backing_pages: Pages, backing: Backing) -> AdmissionLedger {
        AdmissionLedger {
            machine,
            host_swap: backing_pages,
            backing,
            reserved_machine: Pages::ZERO,
            reserved_swap: Pages::ZERO,
        }
    }

    /// Reserves `spec`'s min + overhead of machine memory and max - min of host swap, or
    /// refuses (machine memory is checked first) and changes nothing.
    pub fn try_admit(&mut self, spec: &TenantSpec) -> Result<(), AdmissionRefusal> {
        let machine_need = machine_need(spec);
        let machine_available = self.unreserved_machine();
        if machine_need > machine_available {
            return Err(AdmissionRefusal::MachineMemory {
                tenant: spec.name.clone(),
                need: machine_need,
                available: machine_available,
            });
        }
        let swap_need = swap_need(spec);
        let swap_available = self.unreserved_swap();
        if swap_need > swap_available {
            return Err(AdmissionRefusal::HostSwap {
                tenant: spec.name.clone(),
                need: swap_need,
                available: swap_available,
                backing: self.backing,
            });
        }
        // Both fit in what is unreserved, so neither sum can exceed its total.
        self.reserved_machine = Pages(self.reserved_machine.0.saturating_add(machine_need.0));
        self.reserved_swap = Pages(self.reserved_swap.0.saturating_add(swap_need.0));
        Ok(())
    }

    /// Gives back the reservations of a previously admitted tenant (saturating at zero).
    pub fn release(&mut self, spec: &TenantSpec) {
        self.reserved_machine = self.reserved_machine.saturating_sub(machine_need(spec));
        self.reserved_swap = self.reserved_swap.saturating_sub(swap_need(spec));
    }

    pub fn reserved_machine(&self) -> Pages {
        self.reserved_machine
    }

    pub fn reserved_swap(&self) -> Pages {
        self.reserved_swap
    }

    /// Machine memory not yet reserved by any admitted tenant.
    pub fn unreserved_machine(&self) -> Pages {
        self.machine.saturating_sub(self.reserved_machine)
    }

    /// Host swap not yet reserved by any admitted tenant.
    pub fn unreserved_swap(&self) -> Pages {
        self.host_swap.saturating_sub(self.reserved_swap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::TenantId;

    fn spec(name: &str, min_mib: u64, max_mib: u64, overhead_mib: u64) -> TenantSpec {
        TenantSpec {
            overhead: Pages::from_mib(overhead_mib),
            ..TenantSpec::new(
                TenantId(0),
                name,
                Pages::from_mib(min_mib),
                Pages::from_mib(max_mib),
            )
        }
    }

    #[test]
    fn tenant_that_fits_reserves_min_plus_overhead_and_max_minus_min() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(1024), Pages::from_mib(1024));
        assert_eq!(ledger.try_admit(&spec("web", 128, 256, 32)), Ok(()));
        assert_eq!(ledger.reserved_machine(), Pages::from_mib(160));
        assert_eq!(ledger.reserved_swap(), Pages::from_mib(128));
        assert_eq!(ledger.unreserved_machine(), Pages::from_mib(864));
        assert_eq!(ledger.unreserved_swap(), Pages::from_mib(896));
    }

    #[test]
    fn tenant_is_refused_when_machine_memory_is_short() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(300), Pages::from_mib(1024));
        assert_eq!(ledger.try_admit(&spec("a", 128, 256, 32)), Ok(()));
        assert_eq!(
            ledger.try_admit(&spec("b", 128, 256, 32)),
            Err(AdmissionRefusal::MachineMemory {
                tenant: "b".to_string(),
                need: Pages::from_mib(160),
                available: Pages::from_mib(140),
            })
        );
    }

    #[test]
    fn tenant_is_refused_when_host_swap_is_short() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(1024), Pages::from_mib(100));
        assert_eq!(
            ledger.try_admit(&spec("db", 128, 256, 32)),
            Err(AdmissionRefusal::HostSwap {
                tenant: "db".to_string(),
                need: Pages::from_mib(128),
                available: Pages::from_mib(100),
                backing: Backing::HostSwap,
            })
        );
        let mut linux = AdmissionLedger::backed_by(
            Pages::from_mib(1024),
            Pages::from_mib(100),
            Backing::OutsideBudget,
        );
        let msg = linux
            .try_admit(&spec("db", 128, 256, 32))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("RAM beyond the budget plus swap"), "{msg}");
        assert!(!msg.contains("host swap"), "{msg}");
    }

    #[test]
    fn refusal_leaves_the_ledger_unchanged() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(1024), Pages::from_mib(200));
        assert_eq!(ledger.try_admit(&spec("a", 128, 256, 32)), Ok(()));
        let before = ledger.clone();
        assert!(ledger.try_admit(&spec("b", 128, 256, 32)).is_err());
        assert!(ledger.try_admit(&spec("c", 2048, 4096, 32)).is_err());
        assert_eq!(ledger, before);
    }

    #[test]
    fn release_restores_the_reservation() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(300), Pages::from_mib(1024));
        let a = spec("a", 128, 256, 32);
        assert_eq!(ledger.try_admit(&a), Ok(()));
        assert!(ledger.try_admit(&spec("b", 128, 256, 32)).is_err());
        ledger.release(&a);
        assert_eq!(ledger.reserved_machine(), Pages::ZERO);
        assert_eq!(ledger.reserved_swap(), Pages::ZERO);
        assert_eq!(ledger.try_admit(&spec("b", 128, 256, 32)), Ok(()));
    }

    #[test]
    fn release_of_an_unknown_tenant_saturates_at_zero() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(300), Pages::from_mib(1024));
        ledger.release(&spec("ghost", 128, 256, 32));
        assert_eq!(ledger.reserved_machine(), Pages::ZERO);
        assert_eq!(ledger.reserved_swap(), Pages::ZERO);
    }

    #[test]
    fn huge_specs_are_refused_without_overflow() {
        let mut ledger = AdmissionLedger::new(Pages::from_mib(300), Pages::from_mib(1024));
        let mut huge = spec("huge", 0, 0, 0);
        huge.min = Pages(u64::MAX);
        huge.overhead = Pages(u64::MAX);
        assert!(matches!(
            ledger.try_admit(&huge),
            Err(AdmissionRefusal::MachineMemory { .. })
        ));
    }
}
