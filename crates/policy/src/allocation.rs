//! Share-based allocation by min-funding revocation with the idle memory tax (ESX section 5).

use memtide_model::{Pages, TaxRate, TenantId};

/// One tenant's parameters for an allocation round.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocationRequest {
    pub id: TenantId,
    pub min: Pages,
    /// Highest target the tenant may get: its max, or lower when capped at its estimate.
    pub ceiling: Pages,
    pub shares: u64,
    /// Active estimate (working set) in pages.
    pub active: Pages,
}

/// ESX's adjusted shares-per-page ratio `rho = S / (P * (f + k*(1 - f)))`, `k = 1/(1 - tau)`.
pub fn adjusted_shares_per_page(shares: u64, allocated: Pages, active_fraction: f64, tax: TaxRate) -> f64 {
    let _ = (shares, allocated, active_fraction, tax);
    todo!("policy helper implements")
}

/// Targets (same order as `requests`) summing to at most `budget`, each within [min, ceiling].
pub fn allocate(requests: &[AllocationRequest], budget: Pages, tax: TaxRate) -> Vec<Pages> {
    let _ = (requests, budget, tax);
    todo!("policy helper implements")
}
