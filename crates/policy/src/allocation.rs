//! Share-based allocation by min-funding revocation with the idle memory tax (ESX section 5).
//!
//! Every tenant pays a price for the pages it holds: `rho = S / (P * (f + k*(1 - f)))`, its
//! shares divided by the cost of its pages, where an active page costs 1 and an idle page
//! costs `k = 1/(1 - tau)`. Min-funding revocation takes pages from whoever pays the least, so
//! at equilibrium every tenant strictly between its min and its ceiling pays the same price.
//!
//! [`allocate`] computes that equilibrium directly instead of simulating revocation page by
//! page. With `A` the tenant's active pages, holding `P` pages costs `c(P) = P` for `P <= A`
//! and `A + k*(P - A)` beyond, so a tenant's allocation at a common "cost per share" `t = 1/rho`
//! is `c^-1(S * t)` clamped to `[min, ceiling]`, non-decreasing in `t`. The allocation is the
//! discrete form of that: page `j` of a tenant costs `c(j)` and becomes affordable at
//! `key = c(j) / S`; the budget goes to the pages with the smallest keys (ties to the tenant
//! listed first). This is exactly what revoking one page at a time from the lowest-`rho` tenant
//! converges to, and it has the properties the controller relies on:
//!
//! - each target is within `[min, max(min, ceiling)]`;
//! - if the ceilings fit in the budget, everyone gets its ceiling (no overcommit, no revocation);
//! - otherwise the targets sum to exactly the budget (or to what the tenants can take);
//! - if the mins alone exceed the budget, everyone gets its min: a min is a guarantee
//!   admission control made, never broken here (the sum then exceeds the budget);
//! - a tenant with 0 shares is entitled to nothing beyond its min under overcommit;
//! - raising one tenant's shares never lowers its target (the page order is monotone);
//! - fully active tenants with no binding bounds get targets proportional to their shares,
//!   each within one page of its exact share.
//!
//! Cost: `O(n log n)` for `n` tenants (a sort of at most `3n` breakpoints to find the
//! continuous equilibrium, then `O(n)` counting and a heap fix-up of at most about `n` pages);
//! no loop runs per page of memory.

use memtide_model::{Pages, TaxRate, TenantId};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

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
///
/// `P = 0` gives `f64::INFINITY` (a tenant holding nothing is never a revocation victim).
/// `f` is clamped to `[0, 1]`; a NaN fraction counts as fully active (no evidence of idleness,
/// so no tax).
pub fn adjusted_shares_per_page(
    shares: u64,
    allocated: Pages,
    active_fraction: f64,
    tax: TaxRate,
) -> f64 {
    if allocated.0 == 0 {
        return f64::INFINITY;
    }
    let f = if active_fraction.is_nan() {
        1.0
    } else {
        active_fraction.clamp(0.0, 1.0)
    };
    let k = tax.idle_page_cost();
    shares as f64 / (allocated.0 as f64 * (f + k * (1.0 - f)))
}

/// Targets (same order as `requests`) summing to at most `budget`, each within [min, ceiling].
///
/// A ceiling below the min is read as the min. See the module documentation for the
/// algorithm and the guarantees; in short:
/// - sum of mins >= budget: everyone gets its min (never below min, even if that exceeds
///   the budget);
/// - sum of ceilings <= budget: everyone gets its ceiling;
/// - otherwise the min-funding-revocation equilibrium with the idle memory tax, in whole
///   pages, summing to the budget; tenants with 0 shares get their min.
pub fn allocate(requests: &[AllocationRequest], budget: Pages, tax: TaxRate) -> Vec<Pages> {
    let lows: Vec<u64> = requests.iter().map(|r| r.min.0).collect();
    let highs: Vec<u64> = requests.iter().map(|r| r.ceiling.0.max(r.min.0)).collect();
    let sum_low: u128 = lows.iter().map(|&x| u128::from(x)).sum();
    let sum_high: u128 = highs.iter().map(|&x| u128::from(x)).sum();
    let budget_total = u128::from(budget.0);

    if sum_low >= budget_total {
        return lows.into_iter().map(Pages).collect();
    }
    if sum_high <= budget_total {
        return highs.into_iter().map(Pages).collect();
    }

    let k = tax.idle_page_cost();
    let growers: Vec<Grower> = requests
        .iter()
        .enumerate()
        .filter(|(i, r)| r.shares > 0 && highs[*i] > lows[*i])
        .map(|(i, r)| Grower::new(i, lows[i], highs[i], r.shares, r.active.0, k))
        .collect();

    let mut targets = lows;
    // Pages the growers share beyond their mins.
    let spare = budget_total - sum_low;
    let room: u128 = growers.iter().map(|g| u128::from(g.hi - g.lo)).sum();
    if room <= spare {
        for g in &growers {
            targets[g.index] = g.hi;
        }
        return targets.into_iter().map(Pages).collect();
    }

    let growers_low: u128 = growers.iter().map(|g| u128::from(g.lo)).sum();
    let counts = first_pages(&growers, growers_low + spare);
    for (g, n) in growers.iter().zip(counts) {
        targets[g.index] = n;
    }
    targets.into_iter().map(Pages).collect()
}

/// Most iterations of the price search; it normally needs fewer than ten.
const MAX_PRICE_ITERATIONS: usize = 200;

/// A tenant that can take pages beyond its min: positive shares and a ceiling above its min.
struct Grower {
    index: usize,
    lo: u64,
    hi: u64,
    shares: f64,
    per_share: f64,
    active: u64,
    k: f64,
    per_k: f64,
    cost_lo: f64,
    cost_hi: f64,
}

impl Grower {
    fn new(index: usize, lo: u64, hi: u64, shares: u64, active: u64, k: f64) -> Grower {
        let shares = shares as f64;
        let mut g = Grower {
            index,
            lo,
            hi,
            shares,
            per_share: 1.0 / shares,
            active,
            k,
            per_k: 1.0 / k,
            cost_lo: 0.0,
            cost_hi: 0.0,
        };
        g.cost_lo = g.cost(lo);
        g.cost_hi = g.cost(hi);
        g
    }

    /// Cost of holding `pages`: one per active page, `k` per idle page.
    fn cost(&self, pages: u64) -> f64 {
        if pages <= self.active {
            pages as f64
        } else {
            self.active as f64 + self.k * (pages - self.active) as f64
        }
    }

    /// Cost per share at which page number `page` (1-based) becomes affordable. Non-decreasing
    /// in `page`, and non-increasing in the tenant's shares.
    fn key(&self, page: u64) -> f64 {
        self.cost(page) * self.per_share
    }

    /// Continuous pages held at cost per share `price`, `clamp(c^-1(S * price), lo, hi)`, and
    /// the derivative of that with respect to the price (from the right).
    fn continuous(&self, price: f64) -> (f64, f64) {
        let cost = self.shares * price;
        if !(cost > self.cost_lo) {
            return (self.lo as f64, 0.0);
        }
        if cost >= self.cost_hi {
            return (self.hi as f64, 0.0);
        }
        let active = self.active as f64;
        if cost < active {
            (cost, self.shares)
        } else {
            (active + (cost - active) * self.per_k, self.shares * self.per_k)
        }
    }

    /// Pages held at cost per share `price`: the min plus every page in `(lo, hi]` whose key is
    /// at most `price`. Exact with respect to [`Grower::key`].
    fn pages_at(&self, price: f64) -> u64 {
        let (guess, _) = self.continuous(price);
        // `as` saturates and maps NaN to 0; the clamp and the loops below fix the rest.
        let mut n = (guess.floor() as u64).clamp(self.lo, self.hi);
        while n < self.hi && self.key(n + 1) <= price {
            n += 1;
        }
        while n > self.lo && self.key(n) > price {
            n -= 1;
        }
        n
    }
}

/// Sum of the growers' continuous allocations at `price`, and its slope.
fn continuous_total(growers: &[Grower], price: f64) -> (f64, f64) {
    growers.iter().fold((0.0, 0.0), |(sum, slope), g| {
        let (p, s) = g.continuous(price);
        (sum + p, slope + s)
    })
}

/// Cost per share at which the continuous allocations sum to `goal` (within half a page, or
/// as close as floating point allows), searched in `[below, above]` from `start`: Newton's
/// method on the piecewise-linear, non-decreasing sum, safeguarded by bisection. Only an
/// approximation is needed: [`first_pages`] makes the page counts exact.
fn solve_price(growers: &[Grower], goal: f64, start: f64, mut below: f64, mut above: f64) -> f64 {
    let mut price = start.clamp(below, above);
    for _ in 0..MAX_PRICE_ITERATIONS {
        let (sum, slope) = continuous_total(growers, price);
        if (sum - goal).abs() <= 0.5 {
            return price;
        }
        if sum < goal {
            below = below.max(price);
        } else {
            above = above.min(price);
        }
        let newton = if slope > 0.0 {
            price + (goal - sum) / slope
        } else {
            f64::NAN
        };
        price = if newton > below && newton < above {
            newton
        } else if below > 0.0 && above > 16.0 * below {
            // The bracket spans orders of magnitude: halve it geometrically.
            (below.sqrt() * above.sqrt()).clamp(below, above)
        } else {
            below + (above - below) / 2.0
        };
        if !(price > below && price < above) {
            // The bracket has shrunk to floating-point resolution.
            return above;
        }
    }
    above
}

/// Page counts (one per grower, within `[lo, hi]`) holding the first `goal` pages of the
/// global order: by key, then by grower. Assumes `sum(lo) < goal < sum(hi)`.
///
/// Finds two prices from the continuous problem: `cheap`, where the continuous sum is the
/// goal, so the whole pages affordable there are at most the goal; and `dear`, where it
/// exceeds the goal by more than one page per grower, so the whole pages affordable there
/// (each grower lags its continuous allocation by less than one page) are at least the goal.
/// The pages with keys between the two prices, about 1.5 per grower, are the candidates for
/// the rest of the budget; a linear-time selection picks the cheapest.
fn first_pages(growers: &[Grower], goal: u128) -> Vec<u64> {
    let max_price = growers.iter().map(|g| g.key(g.hi)).fold(0.0, f64::max);
    let lows: u128 = growers.iter().map(|g| u128::from(g.lo)).sum();
    let room: u128 = growers.iter().map(|g| u128::from(g.hi)).sum();
    let all_shares: f64 = growers.iter().map(|g| g.shares).sum();
    // Exact when every grower is active, unbounded and without a min; a start for Newton.
    let start = goal.saturating_sub(lows) as f64 / all_shares;
    let cheap = solve_price(growers, goal as f64, start, 0.0, max_price);
    let aim = goal + growers.len() as u128 + 1;
    let dear = if aim >= room {
        max_price
    } else {
        solve_price(growers, aim as f64, cheap, cheap, max_price)
    };

    let limit = 4 * growers.len() + 64;
    let mut counts = Vec::with_capacity(growers.len());
    let mut candidates: Vec<PageKey> = Vec::with_capacity(2 * growers.len() + 2);
    let mut overflow = false;
    for (i, g) in growers.iter().enumerate() {
        let n = g.pages_at(cheap);
        counts.push(n);
        if overflow {
            continue;
        }
        let up = g.pages_at(dear).max(n);
        if up - n > (limit - candidates.len()) as u64 {
            overflow = true;
            continue;
        }
        candidates.extend((n + 1..=up).map(|page| PageKey::of(g, i, page)));
    }

    let held: u128 = counts.iter().map(|&n| u128::from(n)).sum();
    if held > goal {
        // Only from floating-point noise in the price: drop the dearest pages.
        drop_dearest(growers, &mut counts, held - goal);
        return counts;
    }
    let missing = goal - held;
    if missing == 0 {
        return counts;
    }
    if overflow || (candidates.len() as u128) < missing {
        // Floating-point trouble (astronomic page counts): take the pages one by one.
        add_cheapest_one_by_one(growers, &mut counts, missing);
        return counts;
    }
    let take = missing as usize;
    if take < candidates.len() {
        candidates.select_nth_unstable(take - 1);
    }
    for page in &candidates[..take] {
        counts[page.grower] += 1;
    }
    counts
}

/// Adds the `missing` cheapest pages not yet held, one at a time from a heap.
fn add_cheapest_one_by_one(growers: &[Grower], counts: &mut [u64], missing: u128) {
    let mut missing = missing;
    let mut next: BinaryHeap<Reverse<PageKey>> = growers
        .iter()
        .enumerate()
        .filter(|(i, g)| counts[*i] < g.hi)
        .map(|(i, g)| Reverse(PageKey::of(g, i, counts[i] + 1)))
        .collect();
    while missing > 0 {
        let Some(Reverse(page)) = next.pop() else {
            break;
        };
        let i = page.grower;
        counts[i] += 1;
        missing -= 1;
        if counts[i] < growers[i].hi {
            next.push(Reverse(PageKey::of(&growers[i], i, counts[i] + 1)));
        }
    }
}

/// Drops the `surplus` dearest pages held above the mins, one at a time from a heap.
fn drop_dearest(growers: &[Grower], counts: &mut [u64], surplus: u128) {
    let mut surplus = surplus;
    let mut last: BinaryHeap<PageKey> = growers
        .iter()
        .enumerate()
        .filter(|(i, g)| counts[*i] > g.lo)
        .map(|(i, g)| PageKey::of(g, i, counts[i]))
        .collect();
    while surplus > 0 {
        let Some(page) = last.pop() else {
            break;
        };
        let i = page.grower;
        counts[i] -= 1;
        surplus -= 1;
        if counts[i] > growers[i].lo {
            last.push(PageKey::of(&growers[i], i, counts[i]));
        }
    }
}

/// A page in the global allocation order: by key, ties to the tenant listed first. (Pages of
/// one tenant with equal keys are interchangeable: only how many a tenant gets matters.)
#[derive(Clone, Copy, Debug)]
struct PageKey {
    key: f64,
    grower: usize,
}

impl PageKey {
    fn of(g: &Grower, grower: usize, page: u64) -> PageKey {
        PageKey {
            key: g.key(page),
            grower,
        }
    }
}

impl PartialEq for PageKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PageKey {}

impl PartialOrd for PageKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PageKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key
            .total_cmp(&other.key)
            .then(self.grower.cmp(&other.grower))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tax(tau: f64) -> TaxRate {
        TaxRate::new(tau).expect("valid tax rate in test")
    }

    fn req(id: u32, min: Pages, ceiling: Pages, shares: u64, active: Pages) -> AllocationRequest {
        AllocationRequest {
            id: TenantId(id),
            min,
            ceiling,
            shares,
            active,
        }
    }

    fn mib(m: u64) -> Pages {
        Pages::from_mib(m)
    }

    #[test]
    fn rho_matches_the_paper_formula() {
        // 1000 / (100 * (0.5 + 4 * 0.5)) = 4.0
        let rho = adjusted_shares_per_page(1000, Pages(100), 0.5, tax(0.75));
        assert!((rho - 4.0).abs() < 1e-12);
        // tau = 0: pure shares per page, whatever the activity.
        let rho = adjusted_shares_per_page(1000, Pages(100), 0.1, tax(0.0));
        assert!((rho - 10.0).abs() < 1e-12);
        // fully idle at tau = 0.75: every page costs 4.
        let rho = adjusted_shares_per_page(1000, Pages(100), 0.0, tax(0.75));
        assert!((rho - 2.5).abs() < 1e-12);
    }

    #[test]
    fn rho_is_infinite_for_an_empty_tenant_and_clamps_the_fraction() {
        assert_eq!(
            adjusted_shares_per_page(1000, Pages(0), 0.5, tax(0.75)),
            f64::INFINITY
        );
        let above = adjusted_shares_per_page(1000, Pages(100), 7.0, tax(0.75));
        assert!((above - 10.0).abs() < 1e-12);
        let below = adjusted_shares_per_page(1000, Pages(100), -3.0, tax(0.75));
        assert!((below - 2.5).abs() < 1e-12);
        let nan = adjusted_shares_per_page(1000, Pages(100), f64::NAN, tax(0.75));
        assert!((nan - 10.0).abs() < 1e-12);
    }

    #[test]
    fn no_tax_splits_fig7_budget_equally_whatever_the_activity() {
        // ESX Fig. 7: two 256 MB VMs, equal shares, ~360 MB available, tau = 0.
        let requests = [
            req(0, Pages(0), mib(256), 1000, mib(10)),
            req(1, Pages(0), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(360), tax(0.0));
        assert_eq!(targets, vec![mib(180), mib(180)]);
    }

    #[test]
    fn idle_tax_moves_memory_to_active_tenant() {
        // ESX Fig. 7 at tau = 0.75: the idle VM's memory goes to the active one.
        let requests = [
            req(0, Pages(0), mib(256), 1000, mib(10)),
            req(1, Pages(0), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(360), tax(0.75));
        assert_eq!(targets, vec![mib(104), mib(256)]);
    }

    #[test]
    fn idle_tax_equalises_adjusted_prices_when_no_bound_binds() {
        let requests = [
            req(0, Pages(0), mib(1024), 1000, mib(10)),
            req(1, Pages(0), mib(1024), 1000, mib(1024)),
        ];
        let t = tax(0.75);
        let targets = allocate(&requests, mib(360), t);
        assert_eq!(targets[0] + targets[1], mib(360));
        let rho = |i: usize| {
            let p = targets[i];
            let f = requests[i].active.0.min(p.0) as f64 / p.0 as f64;
            adjusted_shares_per_page(requests[i].shares, p, f, t)
        };
        assert!((rho(0) - rho(1)).abs() / rho(1) < 1e-3);
        // idle tenant: 10 + (P0 - 10) * 4 = P1 and P0 + P1 = 360 => P0 = 78 MiB.
        assert!((targets[0].as_mib_f64() - 78.0).abs() < 0.01);
    }

    #[test]
    fn fully_active_tenants_split_by_shares() {
        let requests = [
            req(0, Pages(0), mib(1024), 1000, mib(1024)),
            req(1, Pages(0), mib(1024), 1000, mib(1024)),
            req(2, Pages(0), mib(1024), 2000, mib(1024)),
        ];
        let targets = allocate(&requests, mib(400), tax(0.75));
        assert_eq!(targets, vec![mib(100), mib(100), mib(200)]);
    }

    #[test]
    fn min_is_honoured_against_higher_shares() {
        let requests = [
            req(0, mib(150), mib(256), 1, mib(256)),
            req(1, Pages(0), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(360), tax(0.75));
        assert_eq!(targets, vec![mib(150), mib(210)]);
    }

    #[test]
    fn ceiling_is_honoured_and_the_rest_goes_to_others() {
        let requests = [
            req(0, Pages(0), mib(100), 1000, mib(256)),
            req(1, Pages(0), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(300), tax(0.75));
        assert_eq!(targets, vec![mib(100), mib(200)]);
    }

    #[test]
    fn everyone_gets_the_ceiling_without_overcommit() {
        let requests = [
            req(0, Pages(0), mib(100), 1, mib(0)),
            req(1, mib(10), mib(200), 0, mib(0)),
        ];
        let targets = allocate(&requests, mib(300), tax(0.75));
        assert_eq!(targets, vec![mib(100), mib(200)]);
    }

    #[test]
    fn mins_are_kept_when_they_exceed_the_budget() {
        let requests = [
            req(0, mib(200), mib(256), 1000, mib(256)),
            req(1, mib(200), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(300), tax(0.75));
        assert_eq!(targets, vec![mib(200), mib(200)]);
    }

    #[test]
    fn zero_shares_get_only_the_min_under_overcommit() {
        let requests = [
            req(0, mib(20), mib(256), 0, mib(256)),
            req(1, Pages(0), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(200), tax(0.75));
        assert_eq!(targets, vec![mib(20), mib(180)]);
    }

    #[test]
    fn ceiling_below_min_is_read_as_min() {
        let requests = [
            req(0, mib(50), mib(10), 1000, mib(256)),
            req(1, Pages(0), mib(256), 1000, mib(256)),
        ];
        let targets = allocate(&requests, mib(100), tax(0.75));
        assert_eq!(targets, vec![mib(50), mib(50)]);
    }

    #[test]
    fn leftover_pages_go_to_the_tenant_listed_first_on_ties() {
        let requests = [
            req(0, Pages(0), Pages(10), 1, Pages(10)),
            req(1, Pages(0), Pages(10), 1, Pages(10)),
            req(2, Pages(0), Pages(10), 1, Pages(10)),
        ];
        let targets = allocate(&requests, Pages(7), tax(0.75));
        assert_eq!(targets, vec![Pages(3), Pages(2), Pages(2)]);
    }

    #[test]
    fn empty_request_list_gets_nothing() {
        assert!(allocate(&[], mib(100), tax(0.75)).is_empty());
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let requests = [
            req(0, Pages(0), Pages(u64::MAX), u64::MAX, Pages(u64::MAX)),
            req(1, Pages(u64::MAX / 2), Pages(u64::MAX), 1, Pages(0)),
            req(2, Pages(0), Pages(1 << 40), 3, Pages(1 << 20)),
        ];
        let targets = allocate(&requests, Pages(u64::MAX), tax(0.99));
        assert_eq!(targets.len(), 3);
        assert!(targets[1] >= Pages(u64::MAX / 2));
    }
}
