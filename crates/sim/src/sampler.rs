//! ESX statistical working-set sampling: each period, mark a few random guest-physical pages and count how many the guest touches.
//!
//! At the start of each period `sample_pages` distinct PPNs are drawn uniformly from
//! `[0, max)` (without replacement; all of them if the VM is smaller) and marked in the
//! pmap, standing for ESX's invalidated mappings. The first guest access to a marked PPN in
//! the period clears the mark and counts as touched (see `vm.rs`). Ballooned PPNs are never
//! accessed, so they are never touched. At the end of a period the counts are kept as
//! `completed` until the next observation reports them.

use crate::config::SamplingSetup;
use crate::pmap::Pmap;
use crate::rng::SimRng;
use memtide_model::{CompletedSample, SampleCounts};
use std::collections::HashSet;
use std::time::Duration;

/// Sampling of one VM.
#[derive(Clone, Debug)]
pub struct Sampler {
    sample_pages: u32,
    period: Duration,
    index: u64,
    start: Duration,
    /// Pages marked this period (the pmap keeps which).
    sampled: u32,
    touched: u32,
    completed: Option<CompletedSample>,
    rng: SimRng,
}

impl Sampler {
    /// Sampling with `setup` (its period must be non-zero), starting its first period at
    /// `now` by marking pages of `pmap`.
    pub fn start(setup: &SamplingSetup, now: Duration, rng: SimRng, pmap: &mut Pmap) -> Sampler {
        let mut s = Sampler {
            sample_pages: setup.sample_pages,
            period: setup.period,
            index: 0,
            start: now,
            sampled: 0,
            touched: 0,
            completed: None,
            rng,
        };
        s.choose(pmap);
        s
    }

    fn choose(&mut self, pmap: &mut Pmap) {
        let max = pmap.len();
        let n = self.sample_pages.min(max);
        let chosen = if u64::from(n) * 2 > u64::from(max) {
            // Dense: a partial Fisher-Yates shuffle of all PPNs.
            let mut all: Vec<u32> = (0..max).collect();
            for i in 0..n as usize {
                let j = i + self.rng.below((all.len() - i) as u64) as usize;
                all.swap(i, j);
            }
            all.truncate(n as usize);
            all
        } else {
            // Sparse: redraw on a repeat.
            let mut chosen = Vec::with_capacity(n as usize);
            let mut drawn = HashSet::with_capacity(n as usize);
            while chosen.len() < n as usize {
                let ppn = self.rng.below(u64::from(max)) as u32;
                if drawn.insert(ppn) {
                    chosen.push(ppn);
                }
            }
            chosen
        };
        pmap.mark_sampled(&chosen);
        self.sampled = n;
        self.touched = 0;
    }

    /// A marked page was touched (the caller cleared its mark).
    #[inline]
    pub fn touch(&mut self) {
        self.touched += 1;
    }

    /// Ends every period that is over at `now` and starts the next.
    pub fn roll(&mut self, now: Duration, pmap: &mut Pmap) {
        while now >= self.start + self.period && !self.period.is_zero() {
            pmap.clear_sampled();
            self.completed = Some(CompletedSample {
                sampled: self.sampled,
                touched: self.touched,
            });
            self.index += 1;
            self.start += self.period;
            self.choose(pmap);
        }
    }

    /// The counts so far; a finished period's counts are reported once.
    pub fn observe(&mut self) -> SampleCounts {
        SampleCounts {
            period: self.index,
            sampled: self.sampled,
            touched: self.touched,
            completed: self.completed.take(),
        }
    }

    /// Removes every mark (for power-off).
    pub fn clear(&mut self, pmap: &mut Pmap) {
        pmap.clear_sampled();
        self.sampled = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(n: u32, secs: u64) -> SamplingSetup {
        SamplingSetup {
            sample_pages: n,
            period: Duration::from_secs(secs),
        }
    }

    fn marked(p: &Pmap) -> u32 {
        (0..p.len()).filter(|&i| p.is_sampled(i)).count() as u32
    }

    #[test]
    fn marks_distinct_pages_sparse_and_dense() {
        for (n, max) in [(10, 1000), (90, 100), (200, 50)] {
            let mut p = Pmap::new(max);
            let mut s = Sampler::start(&setup(n, 30), Duration::ZERO, SimRng::new(1), &mut p);
            let expected = n.min(max);
            assert_eq!(marked(&p), expected);
            assert_eq!(s.observe().sampled, expected);
        }
    }

    #[test]
    fn a_period_ends_with_its_counts_reported_once() {
        let mut p = Pmap::new(1000);
        let mut s = Sampler::start(&setup(10, 30), Duration::ZERO, SimRng::new(2), &mut p);
        let first = (0..1000).find(|&i| p.is_sampled(i)).unwrap();
        assert!(p.take_sampled(first));
        s.touch();
        s.roll(Duration::from_secs(29), &mut p);
        let c = s.observe();
        assert_eq!((c.period, c.touched, c.completed), (0, 1, None));
        s.roll(Duration::from_secs(30), &mut p);
        let c = s.observe();
        assert_eq!((c.period, c.touched), (1, 0));
        assert_eq!(
            c.completed,
            Some(CompletedSample {
                sampled: 10,
                touched: 1
            })
        );
        assert_eq!(s.observe().completed, None);
        assert_eq!(marked(&p), 10);
    }
}
