//! Who the disk serves next: start-time fair queueing by weight, work-conserving as BFQ and ESX's disk shares are, and per-tenant IOPS caps as token buckets, which are not.
//!
//! **Fair queueing (SFQ).** Each tenant's queue is FIFO. A request's start tag is the later of
//! the virtual time and its tenant's last finish tag; its finish tag adds its estimated cost
//! divided by the tenant's weight; the disk serves the smallest start tag and the virtual time
//! becomes it. A tenant with nothing queued loses no credit and takes none: when one tenant
//! is idle, the other gets the whole disk (work-conserving); when both are busy, the disk time
//! splits by weight.
//!
//! **Caps.** A capped tenant's request also needs a token; tokens arrive at `cap` per second
//! and at most `cap / 20` (50 ms worth, at least one) are kept. A capped tenant without a token
//! is not served even when the disk is idle: the "selfish" isolation of the paper.
//!
//! Cost O(tenants) per dispatch.

use super::device::Us;

/// A per-tenant IOPS cap.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    iops: u32,
    per_us: f64,
    depth: f64,
    tokens: f64,
    at: Us,
}

impl TokenBucket {
    pub fn new(iops: u32, now: Us) -> TokenBucket {
        let depth = (f64::from(iops) / 20.0).max(1.0);
        TokenBucket {
            iops,
            per_us: f64::from(iops) / 1e6,
            depth,
            tokens: depth,
            at: now,
        }
    }

    fn refill(&mut self, now: Us) {
        let added = (now.saturating_sub(self.at)) as f64 * self.per_us;
        self.tokens = (self.tokens + added).min(self.depth);
        self.at = now;
    }

    /// The cap, operations a second.
    pub fn iops(&self) -> u32 {
        self.iops
    }

    /// When a token is there: `now` or later.
    pub fn ready_at(&mut self, now: Us) -> Us {
        self.refill(now);
        if self.tokens >= 1.0 {
            now
        } else {
            now + ((1.0 - self.tokens) / self.per_us).ceil() as Us
        }
    }

    pub fn take(&mut self, now: Us) {
        self.refill(now);
        self.tokens -= 1.0;
    }
}

/// One tenant's place in the scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct Share {
    pub weight: u32,
    pub cap: Option<TokenBucket>,
    finish: f64,
}

impl Share {
    pub fn new(weight: u32, cap_iops: Option<u32>, now: Us) -> Share {
        Share {
            weight: weight.max(1),
            cap: cap_iops.map(|c| TokenBucket::new(c, now)),
            finish: 0.0,
        }
    }
}

/// The fair queue's virtual time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FairQueue {
    vtime: f64,
}

/// The choice among the tenants with work queued.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Serve this tenant's head request now.
    Serve(usize),
    /// Nothing may go before this time (every tenant with work is capped and out of tokens).
    Wait(Us),
    /// No work queued.
    Idle,
}

impl FairQueue {
    /// Picks among `candidates` (each tenant with work queued: its index and its share).
    pub fn pick<'a>(
        &self,
        now: Us,
        candidates: impl Iterator<Item = (usize, &'a mut Share)>,
    ) -> Pick {
        let mut best: Option<(f64, usize)> = None;
        let mut wait: Option<Us> = None;
        for (i, share) in candidates {
            if let Some(cap) = &mut share.cap {
                let ready = cap.ready_at(now);
                if ready > now {
                    wait = Some(wait.map_or(ready, |w: Us| w.min(ready)));
                    continue;
                }
            }
            let start = self.vtime.max(share.finish);
            if best.is_none_or(|(s, _)| start < s) {
                best = Some((start, i));
            }
        }
        match (best, wait) {
            (Some((_, i)), _) => Pick::Serve(i),
            (None, Some(at)) => Pick::Wait(at),
            (None, None) => Pick::Idle,
        }
    }

    /// Charges `share` for serving a request of `cost` µs now.
    pub fn charge(&mut self, now: Us, share: &mut Share, cost: f64) {
        let start = self.vtime.max(share.finish);
        share.finish = start + cost / f64::from(share.weight);
        self.vtime = start;
        if let Some(cap) = &mut share.cap {
            cap.take(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `n` requests of equal cost from always-busy tenants; how many each got.
    fn split(shares: &mut [Share], n: usize) -> Vec<usize> {
        let mut q = FairQueue::default();
        let mut got = vec![0; shares.len()];
        for step in 0..n {
            let now = step as Us * 1000;
            let pick = q.pick(now, shares.iter_mut().enumerate());
            let Pick::Serve(i) = pick else {
                panic!("{pick:?}")
            };
            q.charge(now, &mut shares[i], 1000.0);
            got[i] += 1;
        }
        got
    }

    #[test]
    fn busy_tenants_split_the_disk_by_weight() {
        let mut shares = [Share::new(100, None, 0), Share::new(300, None, 0)];
        assert_eq!(split(&mut shares, 400), vec![100, 300]);
    }

    #[test]
    fn a_capped_tenant_waits_for_its_token_even_on_an_idle_disk() {
        let mut s = Share::new(100, Some(1000), 0);
        let mut q = FairQueue::default();
        // 50 tokens to start with (50 ms worth), then one per ms.
        let mut now = 0;
        for _ in 0..50 {
            assert_eq!(q.pick(now, std::iter::once((0, &mut s))), Pick::Serve(0));
            q.charge(now, &mut s, 10.0);
        }
        assert_eq!(q.pick(now, std::iter::once((0, &mut s))), Pick::Wait(1000));
        now = 1000;
        assert_eq!(q.pick(now, std::iter::once((0, &mut s))), Pick::Serve(0));
    }

    #[test]
    fn an_idle_tenant_banks_no_credit() {
        let mut q = FairQueue::default();
        let mut a = Share::new(100, None, 0);
        let mut b = Share::new(100, None, 0);
        for step in 0..100 {
            q.charge(step * 1000, &mut a, 1000.0);
        }
        // b arrives late: it starts at the virtual time, not 100 requests ahead.
        let mut got = [0, 0];
        for step in 100..140 {
            let pick = q.pick(step * 1000, [(0, &mut a), (1, &mut b)].into_iter());
            let Pick::Serve(i) = pick else { panic!() };
            let s = if i == 0 { &mut a } else { &mut b };
            q.charge(step * 1000, s, 1000.0);
            got[i] += 1;
        }
        assert!(got[0] >= 19 && got[1] <= 21, "{got:?}");
    }
}
