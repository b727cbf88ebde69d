//! Admission control: reserve min + overhead in machine memory and max - min in host swap (ESX section 6.2).

use memtide_model::{Pages, TenantSpec};

/// Reservations of admitted tenants against machine memory and host swap.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionLedger {
    machine: Pages,
    host_swap: Pages,
    reserved_machine: Pages,
    reserved_swap: Pages,
}

/// Why a tenant was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AdmissionRefusal {
    #[error("tenant {tenant}: min + overhead needs {need} of machine memory, only {available} unreserved")]
    MachineMemory { tenant: String, need: Pages, available: Pages },
    #[error("tenant {tenant}: max - min needs {need} of host swap, only {available} unreserved")]
    HostSwap { tenant: String, need: Pages, available: Pages },
}

impl AdmissionLedger {
    pub fn new(machine: Pages, host_swap: Pages) -> AdmissionLedger {
        AdmissionLedger { machine, host_swap, reserved_machine: Pages::ZERO, reserved_swap: Pages::ZERO }
    }

    pub fn try_admit(&mut self, spec: &TenantSpec) -> Result<(), AdmissionRefusal> {
        let _ = spec;
        todo!("policy helper implements")
    }

    pub fn release(&mut self, spec: &TenantSpec) {
        let _ = spec;
        todo!("policy helper implements")
    }

    pub fn reserved_machine(&self) -> Pages {
        self.reserved_machine
    }

    pub fn reserved_swap(&self) -> Pages {
        self.reserved_swap
    }
}
