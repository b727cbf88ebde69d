//! Property tests of share-based allocation: budget, bounds, no revocation without overcommit, shares respected, monotone in shares, same as page-by-page revocation.

use memtide_model::{Pages, TaxRate, TenantId};
use memtide_policy::{allocate, AllocationRequest};
use proptest::prelude::*;

/// One generated tenant: (min, extra above min for the ceiling, shares, active).
fn tenant() -> impl Strategy<Value = (u64, u64, u64, u64)> {
    (0u64..5_000, 0u64..20_000, 0u64..2_000, 0u64..30_000)
}

fn requests(raw: &[(u64, u64, u64, u64)]) -> Vec<AllocationRequest> {
    raw.iter()
        .enumerate()
        .map(|(i, &(min, extra, shares, active))| AllocationRequest {
            id: TenantId(i as u32),
            min: Pages(min),
            ceiling: Pages(min + extra),
            shares,
            active: Pages(active),
        })
        .collect()
}

fn tax(tau: f64) -> TaxRate {
    TaxRate::new(tau).expect("generated tax rate is in [0, 0.95]")
}

/// The allocation done the slow way, one page at a time (ESX's min-funding revocation run in
/// reverse): start everyone at its min (everyone at its ceiling if that fits), then give each
/// next page to the tenant that would pay the least for it, i.e. whose cost per share after
/// taking it (one per active page, k per idle page, over its shares) is lowest; ties go to
/// the tenant listed first.
fn page_by_page(reqs: &[AllocationRequest], budget: Pages, tax: TaxRate) -> Vec<Pages> {
    let ceilings: Vec<u64> = reqs.iter().map(|r| r.ceiling.0.max(r.min.0)).collect();
    if ceilings.iter().sum::<u64>() <= budget.0 {
        return ceilings.into_iter().map(Pages).collect();
    }
    let k = tax.idle_page_cost();
    let key = |r: &AllocationRequest, page: u64| {
        let active = page.min(r.active.0);
        (active as f64 + k * (page - active) as f64) / r.shares as f64
    };
    let mut held: Vec<u64> = reqs.iter().map(|r| r.min.0).collect();
    let mut left = budget.0.saturating_sub(held.iter().sum());
    while left > 0 {
        let next = reqs
            .iter()
            .enumerate()
            .filter(|(i, r)| r.shares > 0 && held[*i] < ceilings[*i])
            .min_by(|(i, a), (j, b)| {
                key(a, held[*i] + 1)
                    .total_cmp(&key(b, held[*j] + 1))
                    .then(i.cmp(j))
            });
        let Some((i, _)) = next else {
            break;
        };
        held[i] += 1;
        left -= 1;
    }
    held.into_iter().map(Pages).collect()
}

/// Tenants, a budget of at least the sum of their mins, and a tax rate.
fn scenario() -> impl Strategy<Value = (Vec<AllocationRequest>, Pages, TaxRate)> {
    (
        prop::collection::vec(tenant(), 1..50),
        0u64..600_000,
        0.0f64..=0.95,
    )
        .prop_map(|(raw, extra_budget, tau)| {
            let reqs = requests(&raw);
            let mins: u64 = reqs.iter().map(|r| r.min.0).sum();
            (reqs, Pages(mins + extra_budget), tax(tau))
        })
}

proptest! {
    #[test]
    fn targets_sum_to_at_most_the_budget((reqs, budget, tax) in scenario()) {
        let targets = allocate(&reqs, budget, tax);
        prop_assert_eq!(targets.len(), reqs.len());
        let sum: u64 = targets.iter().map(|t| t.0).sum();
        prop_assert!(sum <= budget.0, "sum {} > budget {}", sum, budget.0);
    }

    #[test]
    fn targets_stay_within_min_and_ceiling((reqs, budget, tax) in scenario()) {
        let targets = allocate(&reqs, budget, tax);
        for (r, t) in reqs.iter().zip(&targets) {
            prop_assert!(*t >= r.min && *t <= r.ceiling, "{:?} -> {:?}", r, t);
        }
    }

    #[test]
    fn overcommitted_budget_is_used_up_unless_everyone_with_shares_is_capped(
        (reqs, budget, tax) in scenario()
    ) {
        let targets = allocate(&reqs, budget, tax);
        let sum: u64 = targets.iter().map(|t| t.0).sum();
        let all_capped = reqs
            .iter()
            .zip(&targets)
            .all(|(r, t)| r.shares == 0 || *t == r.ceiling);
        prop_assert!(sum == budget.0 || all_capped);
    }

    #[test]
    fn everyone_gets_the_ceiling_when_ceilings_fit(
        raw in prop::collection::vec(tenant(), 1..50),
        slack in 0u64..10_000,
        tau in 0.0f64..=0.95,
    ) {
        let reqs = requests(&raw);
        let ceilings: u64 = reqs.iter().map(|r| r.ceiling.0).sum();
        let targets = allocate(&reqs, Pages(ceilings + slack), tax(tau));
        for (r, t) in reqs.iter().zip(&targets) {
            prop_assert_eq!(*t, r.ceiling);
        }
    }

    #[test]
    fn fully_active_unbounded_tenants_split_by_shares(
        shares in prop::collection::vec(1u64..2_000, 1..50),
        budget in 0u64..1_000_000,
        tau in 0.0f64..=0.95,
    ) {
        // Ceilings above the budget never bind; mins are 0; active >= ceiling everywhere.
        let reqs: Vec<AllocationRequest> = shares
            .iter()
            .enumerate()
            .map(|(i, &s)| AllocationRequest {
                id: TenantId(i as u32),
                min: Pages(0),
                ceiling: Pages(budget + 1),
                shares: s,
                active: Pages(budget + 1),
            })
            .collect();
        let targets = allocate(&reqs, Pages(budget), tax(tau));
        let sum: u64 = targets.iter().map(|t| t.0).sum();
        prop_assert_eq!(sum, budget);
        // Each target is its exact share B * S_i / T, off by at most one page plus the
        // tenant's part of the rounding (at most one page per tenant, shared by shares).
        let total_shares: u64 = shares.iter().sum();
        let n = shares.len() as f64;
        for (t, &s) in targets.iter().zip(&shares) {
            let exact = budget as f64 * s as f64 / total_shares as f64;
            let slack = 1.0 + n * s as f64 / total_shares as f64 + 1e-6;
            prop_assert!(
                (t.0 as f64 - exact).abs() <= slack,
                "target {} vs exact {} (shares {} of {})", t.0, exact, s, total_shares
            );
        }
        // Pairwise: the price per share agrees to within one page of either tenant.
        for (i, (ti, &si)) in targets.iter().zip(&shares).enumerate() {
            for (tj, &sj) in targets.iter().zip(&shares).skip(i + 1) {
                let gap = (ti.0 as f64 / si as f64 - tj.0 as f64 / sj as f64).abs();
                prop_assert!(gap <= 1.0 / si as f64 + 1.0 / sj as f64 + 1e-9);
            }
        }
    }

    #[test]
    fn raising_shares_never_lowers_the_target(
        (reqs, budget, tax) in scenario(),
        pick in any::<prop::sample::Index>(),
        raise in 1u64..5_000,
    ) {
        let i = pick.index(reqs.len());
        let before = allocate(&reqs, budget, tax);
        let mut raised = reqs.clone();
        raised[i].shares += raise;
        let after = allocate(&raised, budget, tax);
        prop_assert!(
            after[i] >= before[i],
            "tenant {} went from {:?} to {:?}", i, before[i], after[i]
        );
    }

    #[test]
    fn matches_page_by_page_min_funding_revocation(
        raw in prop::collection::vec((0u64..50, 0u64..150, 0u64..20, 0u64..250), 1..8),
        extra in 0u64..600,
        tau in 0.0f64..=0.95,
    ) {
        let reqs = requests(&raw);
        let mins: u64 = reqs.iter().map(|r| r.min.0).sum();
        let budget = Pages(mins + extra);
        let tax = tax(tau);
        prop_assert_eq!(allocate(&reqs, budget, tax), page_by_page(&reqs, budget, tax));
    }

    #[test]
    fn allocation_is_deterministic((reqs, budget, tax) in scenario()) {
        prop_assert_eq!(allocate(&reqs, budget, tax), allocate(&reqs, budget, tax));
    }
}
