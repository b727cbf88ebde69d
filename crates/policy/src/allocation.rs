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
//! - fully active tenants with no binding bounds get targets proportional to their shares:
//!   each gets `floor(S * t)` pages for a common price `t`, or one page less on a tie.
//!
//! Computation, for `n` tenants, with no loop over pages of memory: Newton's method on the
//! continuous problem (the sum of `clamp(c^-1(S * t), min, ceiling)` is piecewise linear and
//! non-decreasing in `t`; safeguarded by bisection) finds a price where the whole pages
//! affordable fall short of the budget by less than about one per tenant, and a dearer one
//! where they reach it; one pass counts the pages at the first and lists the few between the
//! two, and a linear-time selection gives the rest of the budget to the cheapest of those.
//! Each step is `O(n)`; Newton needs a handful of steps (at most 200). The result does not
//! depend on the prices found (they only bound the candidates), so an [`Allocator`] that
//! allocates every tick starts the search from the last tick's price and usually needs one or
//! two steps; it keeps its growers' table and candidate list between rounds. About 0.27 ms for
//! 10,000 overcommitted tenants in release mode on the project's 2-vCPU development VM.

use memtide_model::{Pages, TaxRate, TenantId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One tenant's parameters for an allocation round.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocationRequest {
    pub id: TenantId,
    pub min: Pages,
    /// Highest target the tenant may get: its max, or lower when capped at its estimate.
    pub ceiling: Pages,
    pub shares: u64,
    /// Active pages the tax charges for: the estimate of the working set, or an upper
    /// confidence bound of it where the estimate is statistical (sampling).
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
    let mut targets = Vec::with_capacity(requests.len());
    Allocator::default().allocate_into(requests, budget, tax, &mut targets);
    targets
}

/// Allocation rounds that keep their working buffers: a caller that allocates every tick (the
/// controller) allocates no memory for a round once the buffers have grown to its tenants.
#[derive(Clone, Debug, Default)]
pub struct Allocator {
    /// The round's growers, read off the requests once, in request order.
    growers: Vec<Grower>,
    /// The round's candidate pages (see [`first_pages`]).
    pages: Vec<PageKey>,
    /// The last round's cheap price: the next round's price search starts there, since the
    /// tenants change little from one tick to the next. (Any start gives the same targets.)
    last_price: Option<f64>,
}

impl Allocator {
    /// [`allocate`] into `targets` (cleared first).
    pub fn allocate_into(
        &mut self,
        requests: &[AllocationRequest],
        budget: Pages,
        tax: TaxRate,
        targets: &mut Vec<Pages>,
    ) {
        targets.clear();
        let budget = u128::from(budget.0);
        let cost = IdleCost::of(tax);
        let (sum_low, sum_high, stats) = totals(requests, &mut self.growers);
        if sum_low >= budget {
            targets.extend(requests.iter().map(|r| r.min));
            return;
        }
        if sum_high <= budget {
            targets.extend(requests.iter().map(|r| Pages(high(r))));
            return;
        }

        // What the growers share: the budget less the mins of those that cannot grow.
        let goal = budget - (sum_low - stats.low);
        targets.extend(requests.iter().map(|r| r.min));
        if stats.high <= goal {
            for g in &self.growers {
                targets[g.at] = Pages(g.hi);
            }
        } else {
            let price = first_pages(
                &self.growers,
                cost,
                &stats,
                goal,
                self.last_price,
                targets,
                &mut self.pages,
            );
            self.last_price = Some(price);
        }
    }
}

/// A tenant's effective ceiling: its ceiling, or its min if that is higher.
fn high(r: &AllocationRequest) -> u64 {
    r.ceiling.0.max(r.min.0)
}

/// Most iterations of the price search; it normally needs fewer than ten.
const MAX_PRICE_ITERATIONS: usize = 200;

/// The idle page cost `k` and its inverse.
#[derive(Clone, Copy, Debug)]
struct IdleCost {
    k: f64,
    per_k: f64,
}

impl IdleCost {
    fn of(tax: TaxRate) -> IdleCost {
        let k = tax.idle_page_cost();
        IdleCost { k, per_k: 1.0 / k }
    }
}

/// A tenant that can take pages beyond its min: positive shares and a ceiling above its min.
/// Read off its request once per round, with the floating-point forms the price search needs,
/// into a table the search walks several times a round (it used to rebuild each grower from
/// its request in every pass).
#[derive(Clone, Copy, Debug)]
struct Grower {
    /// Its request's index.
    at: usize,
    lo: u64,
    hi: u64,
    active: u64,
    shares: f64,
    /// `lo`, `hi` and `active` as floating point.
    lo_f: f64,
    hi_f: f64,
    active_f: f64,
}

impl Grower {
    fn of(at: usize, r: &AllocationRequest) -> Option<Grower> {
        let hi = high(r);
        (r.shares > 0 && hi > r.min.0).then_some(Grower {
            at,
            lo: r.min.0,
            hi,
            active: r.active.0,
            shares: r.shares as f64,
            lo_f: r.min.0 as f64,
            hi_f: hi as f64,
            active_f: r.active.0 as f64,
        })
    }

    /// Cost of holding `pages`: one per active page, `k` per idle page.
    fn cost(&self, pages: u64, cost: IdleCost) -> f64 {
        // Branch-free: this runs a few times per tenant and call.
        let active = pages.min(self.active);
        active as f64 + cost.k * (pages - active) as f64
    }

    /// Cost per share at which page number `page` (1-based) becomes affordable. Non-decreasing
    /// in `page`, and non-increasing in the tenant's shares.
    fn key(&self, page: u64, cost: IdleCost) -> f64 {
        self.cost(page, cost) / self.shares
    }

    /// Pages a cost per share buys, `c^-1(S * price)`, before the clamp to `[lo, hi]`, and the
    /// derivative of that with respect to the price (from the right). Branch-free: this runs
    /// for every tenant at every Newton step.
    #[inline]
    fn unclamped(&self, price: f64, cost: IdleCost) -> (f64, f64) {
        let spent = self.shares * price;
        let active = self.active_f;
        let pages = spent.min(active) + (spent - active).max(0.0) * cost.per_k;
        let slope = if spent < active {
            self.shares
        } else {
            self.shares * cost.per_k
        };
        (pages, slope)
    }

    /// Continuous pages held at cost per share `price`, `clamp(c^-1(S * price), lo, hi)`, and
    /// the derivative of that with respect to the price (from the right).
    #[inline]
    fn continuous(&self, price: f64, cost: IdleCost) -> (f64, f64) {
        let (pages, slope) = self.unclamped(price, cost);
        let (lo, hi) = (self.lo_f, self.hi_f);
        let inside = (pages > lo) & (pages < hi);
        (pages.max(lo).min(hi), if inside { slope } else { 0.0 })
    }

    /// Pages held at cost per share `price`: the min plus every page in `(lo, hi]` whose key is
    /// at most `price`. Exact with respect to [`Grower::key`].
    #[inline]
    fn pages_at(&self, price: f64, cost: IdleCost) -> u64 {
        let (pages, _) = self.unclamped(price, cost);
        // Rounding moves the continuous allocation, and blurs which pages' keys compare below
        // the price, by a few ulps of the cost: under 2e-15 * k * (1 + pages) pages. A value
        // farther than `margin` from a whole page therefore decides every key comparison;
        // only values closer than that need the keys themselves.
        let margin = 1e-12 * (1.0 + pages.abs()) * cost.k;
        if pages < self.lo_f + 1.0 - margin {
            return self.lo;
        }
        if pages >= self.hi_f + margin {
            return self.hi;
        }
        // `as` truncates (floors, for pages >= 0), saturates and maps NaN to 0.
        let floor = pages as u64;
        let fraction = pages - floor as f64;
        if (fraction > margin) & (fraction < 1.0 - margin) {
            return floor.clamp(self.lo, self.hi);
        }
        self.pages_near_whole(pages, floor, margin, price, cost)
    }

    /// [`Grower::pages_at`] for a value within `margin` of a whole page.
    #[cold]
    fn pages_near_whole(
        &self,
        pages: f64,
        floor: u64,
        margin: f64,
        price: f64,
        cost: IdleCost,
    ) -> u64 {
        if margin < 0.25 {
            // The value is within `margin` of a whole page `m` in `[lo + 1, hi]`: every page
            // up to `m - 1` is affordable, none beyond `m`, and the key of `m` decides.
            let m = (pages.round() as u64).clamp(self.lo + 1, self.hi);
            return if self.key(m, cost) <= price { m } else { m - 1 };
        }
        // Astronomic page counts, where floating point cannot place the value within a page.
        let mut n = floor.clamp(self.lo, self.hi);
        while n < self.hi && self.key(n + 1, cost) <= price {
            n += 1;
        }
        while n > self.lo && self.key(n, cost) > price {
            n -= 1;
        }
        n
    }
}

/// Totals over the growers.
struct GrowerStats {
    count: u128,
    low: u128,
    high: u128,
    shares: f64,
}

/// Sums of all mins, of all effective ceilings, and the growers' totals, in one pass that also
/// lists the growers in `growers` (cleared first).
fn totals(requests: &[AllocationRequest], growers: &mut Vec<Grower>) -> (u128, u128, GrowerStats) {
    growers.clear();
    let mut low: u128 = 0;
    let mut high_sum: u128 = 0;
    let mut stats = GrowerStats {
        count: 0,
        low: 0,
        high: 0,
        shares: 0.0,
    };
    for (at, r) in requests.iter().enumerate() {
        low += u128::from(r.min.0);
        high_sum += u128::from(high(r));
        if let Some(g) = Grower::of(at, r) {
            stats.count += 1;
            stats.low += u128::from(g.lo);
            stats.high += u128::from(g.hi);
            stats.shares += g.shares;
            growers.push(g);
        }
    }
    (low, high_sum, stats)
}

/// The growers' continuous allocations summed at one price, with the slope of that sum.
#[derive(Clone, Copy, Debug)]
struct Point {
    price: f64,
    sum: f64,
    slope: f64,
}

impl Point {
    fn at(growers: &[Grower], cost: IdleCost, price: f64) -> Point {
        // Four running sums: with one, each grower's addition would wait for the one before.
        // (The order of the additions does not matter: any price serves `first_pages`.)
        let mut sum = [0.0; 4];
        let mut slope = [0.0; 4];
        let mut chunks = growers.chunks_exact(4);
        for chunk in &mut chunks {
            for (lane, g) in chunk.iter().enumerate() {
                let (p, s) = g.continuous(price, cost);
                sum[lane] += p;
                slope[lane] += s;
            }
        }
        for (lane, g) in chunks.remainder().iter().enumerate() {
            let (p, s) = g.continuous(price, cost);
            sum[lane] += p;
            slope[lane] += s;
        }
        Point {
            price,
            sum: (sum[0] + sum[1]) + (sum[2] + sum[3]),
            slope: (slope[0] + slope[1]) + (slope[2] + slope[3]),
        }
    }
}

/// A price at which the continuous allocations sum to within `[least, most]` (or as close as
/// floating point allows), searched in `[below, above]` (`above` may be infinite) from
/// `start`: Newton's method on the piecewise-linear, non-decreasing sum, aiming at the middle
/// of the window, safeguarded by doubling and bisection. [`first_pages`] copes with any
/// answer; a good one is faster.
fn solve_price(
    growers: &[Grower],
    cost: IdleCost,
    (least, most): (f64, f64),
    start: Point,
    (mut below, mut above): (f64, f64),
) -> Point {
    let aim = least + (most - least) / 2.0;
    let mut point = start;
    for _ in 0..MAX_PRICE_ITERATIONS {
        if point.sum >= least && point.sum <= most {
            break;
        }
        if point.sum < least {
            below = below.max(point.price);
        } else {
            above = above.min(point.price);
        }
        let newton = if point.slope > 0.0 {
            point.price + (aim - point.sum) / point.slope
        } else {
            f64::NAN
        };
        let price = if newton > below && newton < above {
            newton
        } else if above.is_infinite() {
            if below > 0.0 {
                below * 2.0
            } else {
                1.0
            }
        } else if below > 0.0 && above > 16.0 * below {
            // The bracket spans orders of magnitude: halve it geometrically.
            (below.sqrt() * above.sqrt()).clamp(below, above)
        } else {
            below + (above - below) / 2.0
        };
        if !(price > below && price < above) {
            // The bracket has shrunk to floating-point resolution.
            return Point::at(growers, cost, above);
        }
        point = Point::at(growers, cost, price);
    }
    point
}

/// Sets the growers' targets to their pages at `cheap` and lists in `pages` (cleared first)
/// the pages affordable at `dear` but not at `cheap`. Returns the whole pages held at `cheap`,
/// and whether the list is complete: it is abandoned at `limit` pages (floating-point
/// trouble).
fn candidates(
    growers: &[Grower],
    cost: IdleCost,
    (cheap, dear): (f64, f64),
    limit: usize,
    targets: &mut [Pages],
    pages: &mut Vec<PageKey>,
) -> (u128, bool) {
    pages.clear();
    let mut complete = true;
    let mut held: u128 = 0;
    for (i, g) in growers.iter().enumerate() {
        let n = g.pages_at(cheap, cost);
        targets[g.at] = Pages(n);
        held += u128::from(n);
        // Keys do not decrease from page to page: the candidates are the pages after `n` up
        // to the first whose key is above `dear`, usually one or two.
        let mut page = n + 1;
        while complete && page <= g.hi {
            let key = g.key(page, cost);
            if key > dear {
                break;
            }
            if pages.len() == limit {
                complete = false;
                break;
            }
            pages.push(PageKey::new(key, i));
            page += 1;
        }
    }
    (held, complete)
}

/// Sets the growers' targets to the first `goal` pages of the global order (by key, ties to
/// the tenant listed first); the other targets are left alone. Assumes the growers' mins sum
/// to less than `goal` and their ceilings to more.
///
/// Finds two prices from the continuous problem: `cheap`, where the continuous sum is at most
/// the goal, so the whole pages affordable there are too; and `dear`, where it exceeds the
/// goal by more than one page per grower, so the whole pages affordable there (each grower
/// lags its continuous allocation by less than one page) are at least the goal. The pages
/// between the two prices, a few per grower, are the candidates for the rest of the budget;
/// a linear-time selection picks the cheapest. The search for `cheap` starts from `warm` (a
/// price that was right recently) where given; returns `cheap`.
fn first_pages(
    growers: &[Grower],
    cost: IdleCost,
    stats: &GrowerStats,
    goal: u128,
    warm: Option<f64>,
    targets: &mut [Pages],
    pages: &mut Vec<PageKey>,
) -> f64 {
    // Without a warm start: exact when every grower is active, unbounded and without a min.
    let start = warm
        .filter(|p| p.is_finite() && *p > 0.0)
        .unwrap_or_else(|| goal.saturating_sub(stats.low) as f64 / stats.shares);
    let slack = (stats.count as f64 / 8.0).max(0.5);
    let goal_f = goal as f64;
    let bracket = (0.0, f64::INFINITY);
    let start = Point::at(growers, cost, start.clamp(bracket.0, bracket.1));
    let cheap = solve_price(growers, cost, (goal_f - slack, goal_f), start, bracket);

    let enough = goal + stats.count + 1;
    let window = (enough as f64, enough as f64 + slack);
    // One Newton step from `cheap` usually lands in the window; the page counts check it.
    let step = cheap.price + (window.0 + slack / 2.0 - cheap.sum) / cheap.slope;
    let dear = if enough >= stats.high {
        f64::INFINITY
    } else if step > cheap.price && step.is_finite() {
        step
    } else {
        solve_price(growers, cost, window, cheap, (cheap.price, f64::INFINITY)).price
    };

    // Far more than 1.5 candidates per grower only with astronomic page counts.
    let limit = usize::try_from(16 * stats.count + 1024).unwrap_or(usize::MAX);
    let (held, mut complete) =
        candidates(growers, cost, (cheap.price, dear), limit, targets, pages);
    if held > goal {
        // Only from floating-point noise in the price: drop the dearest pages.
        drop_dearest(growers, cost, targets, held - goal);
        return cheap.price;
    }
    let missing = goal - held;
    if missing == 0 {
        return cheap.price;
    }
    if !complete || (pages.len() as u128) < missing {
        // The Newton step fell short: search the dear price properly and collect again.
        let dear = solve_price(growers, cost, window, cheap, (cheap.price, f64::INFINITY));
        // The same cheap price: the same pages held, and so the same `missing`.
        (_, complete) = candidates(
            growers,
            cost,
            (cheap.price, dear.price),
            limit,
            targets,
            pages,
        );
    }
    if complete && pages.len() as u128 >= missing {
        let take = missing as usize;
        if take < pages.len() {
            pages.select_nth_unstable(take - 1);
        }
        for page in &pages[..take] {
            targets[growers[page.grower].at].0 += 1;
        }
    } else {
        // Floating-point trouble (astronomic page counts): take the pages one by one.
        add_cheapest(growers, cost, targets, missing);
    }
    cheap.price
}

/// Adds the `missing` cheapest pages not yet held, one at a time from a heap.
fn add_cheapest(growers: &[Grower], cost: IdleCost, targets: &mut [Pages], missing: u128) {
    let mut missing = missing;
    let mut next: BinaryHeap<Reverse<PageKey>> = growers
        .iter()
        .enumerate()
        .filter(|(_, g)| targets[g.at].0 < g.hi)
        .map(|(i, g)| Reverse(PageKey::of(g, i, targets[g.at].0 + 1, cost)))
        .collect();
    while missing > 0 {
        let Some(Reverse(page)) = next.pop() else {
            break;
        };
        let g = &growers[page.grower];
        targets[g.at].0 += 1;
        missing -= 1;
        if targets[g.at].0 < g.hi {
            next.push(Reverse(PageKey::of(
                g,
                page.grower,
                targets[g.at].0 + 1,
                cost,
            )));
        }
    }
}

/// Drops the `surplus` dearest pages held above the mins, one at a time from a heap.
fn drop_dearest(growers: &[Grower], cost: IdleCost, targets: &mut [Pages], surplus: u128) {
    let mut surplus = surplus;
    let mut last: BinaryHeap<PageKey> = growers
        .iter()
        .enumerate()
        .filter(|(_, g)| targets[g.at].0 > g.lo)
        .map(|(i, g)| PageKey::of(g, i, targets[g.at].0, cost))
        .collect();
    while surplus > 0 {
        let Some(page) = last.pop() else {
            break;
        };
        let g = &growers[page.grower];
        targets[g.at].0 -= 1;
        surplus -= 1;
        if targets[g.at].0 > g.lo {
            last.push(PageKey::of(g, page.grower, targets[g.at].0, cost));
        }
    }
}

/// A page in the global allocation order: by key, ties to the tenant listed first (growers are
/// listed in request order). (Pages of one tenant with equal keys are interchangeable: only
/// how many a tenant gets matters.) The key is stored as an integer that orders like
/// `f64::total_cmp`, so comparisons are plain integer comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct PageKey {
    key: i64,
    /// Index of its grower.
    grower: usize,
}

impl PageKey {
    /// Page `page` of grower number `index`.
    fn of(grower: &Grower, index: usize, page: u64, cost: IdleCost) -> PageKey {
        PageKey::new(grower.key(page, cost), index)
    }

    /// A page whose key is `key`, of grower number `index`.
    fn new(key: f64, index: usize) -> PageKey {
        // The mapping `f64::total_cmp` uses: flip the magnitude bits of negative numbers.
        let bits = key.to_bits() as i64;
        PageKey {
            key: bits ^ (((bits >> 63) as u64) >> 1) as i64,
            grower: index,
        }
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
    fn astronomic_page_counts_still_fill_the_budget() {
        let requests = [
            req(0, Pages(1 << 58), Pages(1 << 61), 7, Pages(1 << 59)),
            req(1, Pages(0), Pages(1 << 61), 3, Pages(1 << 61)),
            req(2, Pages(12345), Pages(1 << 60), 1000, Pages(0)),
        ];
        let budget = Pages((1 << 61) + 987_654_321);
        let targets = allocate(&requests, budget, tax(0.75));
        assert_eq!(targets.iter().map(|t| t.0).sum::<u64>(), budget.0);
        for (r, t) in requests.iter().zip(&targets) {
            assert!(*t >= r.min && *t <= r.ceiling);
        }
    }

    #[test]
    fn many_tenants_fill_the_budget_exactly() {
        let requests: Vec<AllocationRequest> = (0..2_000u32)
            .map(|i| {
                let max = 10_000 + u64::from(i % 97) * 1_000;
                req(
                    i,
                    Pages(max / 4),
                    Pages(max),
                    1 + u64::from(i % 13) * 100,
                    Pages(u64::from(i % 7) * max / 6),
                )
            })
            .collect();
        let ceilings: u64 = requests.iter().map(|r| r.ceiling.0).sum();
        let budget = Pages(ceilings / 2 + 3);
        let targets = allocate(&requests, budget, tax(0.75));
        assert_eq!(targets.iter().map(|t| t.0).sum::<u64>(), budget.0);
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
