//! ESX-style sampling counts for a Linux tenant: the bytes its processes touched in each sampling period (cleared accessed bits, then `Referenced:`), as a fraction of the tenant's max.
//!
//! ESX samples 100 random pages of a VM's configured memory each period and counts those
//! touched. Here the kernel's accessed bits answer for every mapped page instead of a sample: at
//! the start of a period memtide clears them (`/proc/PID/clear_refs`), and at its end reads how
//! much was referenced since (`/proc/PID/smaps_rollup`). The period's touched fraction is that
//! over the tenant's max, reported in thousandths. Only completed periods carry counts (reading
//! every tick would walk every page table every tick). Page cache read through `read(2)` is not
//! mapped and not counted.
//!
//! Pages the tenant faulted back in during the period (refaults and swap-ins, as the host
//! counted them each tick) count as touched too, added to the referenced bytes: a page that was
//! out when touched has its accessed bit set only if it is still in at the period's end, and
//! (read from the kernel's code, not measured apart) a tenant held under what it touches has
//! its accessed bits tested and cleared by the kernel's own LRU scan before memtide reads them.
//! A page both faulted back and still referenced counts twice; the sum is at most max. Measured
//! without it: Redis holding 171 MiB and serving random GETs at about 1,300 a second (under
//! TCG) read as 92 MiB, so each period's end took its limit below what it held again. Part of
//! that is the period itself: 40,000 GETs over 40,000 keys in 30 s touch about 63% of them.
//!
//! **Staggered periods.** Tenants adopted together would otherwise end their periods at the
//! same tick, and every ceiling would move at once: in the density benchmark 32 Redis and
//! memcached tenants ended theirs together 101 s in, the daemon moved 80 limits (51 down) in
//! 4 s, and the tenants' wake-ups then read back swap together and missed their p99 in the
//! same 10-s window. So each sampler's first period runs `period × (1 + phase)`, `phase` in
//! [0, 1) spread over the tenants by [`stagger`], and the later ones a period each: the ends
//! fall apart, each period is at least a full one (a short first period would count fewer
//! touched pages and bring a ceiling below the working set), and a tenant's first estimate
//! comes at most one period later.

mod actuator;

use crate::fs::smaps::{clear_referenced, read_referenced};
pub use actuator::Sampling;
use memtide_model::{Bytes, CompletedSample, Pages, SampleCounts};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The resolution of the reported fraction: `sampled` of a completed period.
pub const RESOLUTION: u32 = 1000;

/// A tenant's periods of referenced memory.
#[derive(Debug)]
pub struct AccessSampler {
    proc_root: PathBuf,
    period_len: Duration,
    /// The first period's length: `period_len` stretched by the tenant's phase.
    first_len: Duration,
    max: Bytes,
    period: u64,
    started: Option<Duration>,
    /// Pages faulted back in during the current period.
    faulted: u64,
}

/// The phase in [0, 1) of the `index`th tenant's periods: the fractional part of `index`
/// times the golden ratio's inverse, which spreads any run of consecutive indices nearly
/// evenly over the period (Weyl's sequence: no two of the first `n` closer than about
/// `0.38 / n`), however many tenants come.
pub fn stagger(index: u32) -> f64 {
    const INVERSE_GOLDEN: f64 = 0.618_033_988_749_894_9;
    (f64::from(index) * INVERSE_GOLDEN).fract()
}

impl AccessSampler {
    /// A sampler whose first period runs `period_len × (1 + phase)` (`phase` clamped to
    /// [0, 1)), the later ones `period_len`.
    pub fn new(proc_root: &Path, period_len: Duration, max: Bytes, phase: f64) -> AccessSampler {
        let phase = if phase.is_finite() {
            phase.clamp(0.0, 0.999)
        } else {
            0.0
        };
        AccessSampler {
            proc_root: proc_root.to_path_buf(),
            period_len,
            first_len: period_len.mul_f64(1.0 + phase),
            max,
            period: 0,
            started: None,
            faulted: 0,
        }
    }

    /// True when an observation at `now` starts or completes a period, and so needs the
    /// tenant's processes; in between, `observe` does not look at them.
    pub fn wants_pids(&self, now: Duration) -> bool {
        match self.started {
            None => true,
            Some(started) => now.saturating_sub(started) >= self.current_len(),
        }
    }

    /// The length of the period under way: the first is stretched by the phase.
    fn current_len(&self) -> Duration {
        if self.period == 0 {
            self.first_len
        } else {
            self.period_len
        }
    }

    /// One observation at `now` of the tenant's processes `pids`, which faulted `faulted`
    /// pages back in since the last one: starts a period (clearing their accessed bits) or,
    /// when one has run its length, completes it with the referenced and faulted fraction and
    /// starts the next.
    pub fn observe(
        &mut self,
        now: Duration,
        pids: &[u32],
        faulted: u64,
    ) -> Result<SampleCounts, String> {
        let mut completed = None;
        self.faulted = self.faulted.saturating_add(faulted);
        match self.started {
            None => {
                self.clear(pids)?;
                self.started = Some(now);
                self.faulted = 0;
            }
            Some(started) if now.saturating_sub(started) >= self.current_len() => {
                let mut referenced = 0u64;
                for &pid in pids {
                    if let Some(b) =
                        read_referenced(&self.proc_root, pid).map_err(|e| e.to_string())?
                    {
                        referenced = referenced.saturating_add(b.0);
                    }
                }
                let faulted = Pages(self.faulted).to_bytes().0;
                completed = Some(CompletedSample {
                    sampled: RESOLUTION,
                    touched: touched(referenced.saturating_add(faulted), self.max),
                });
                self.period += 1;
                self.clear(pids)?;
                self.started = Some(now);
                self.faulted = 0;
            }
            Some(_) => {}
        }
        Ok(SampleCounts {
            period: self.period,
            sampled: 0,
            touched: 0,
            completed,
        })
    }

    fn clear(&self, pids: &[u32]) -> Result<(), String> {
        for &pid in pids {
            clear_referenced(&self.proc_root, pid).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// `referenced / max` in thousandths, at most [`RESOLUTION`]; a zero max counts as all touched.
fn touched(referenced: u64, max: Bytes) -> u32 {
    if max.0 == 0 {
        return RESOLUTION;
    }
    let t = (referenced as f64 / max.0 as f64 * f64::from(RESOLUTION)).round();
    t.clamp(0.0, f64::from(RESOLUTION)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(root: &Path, pid: u32, referenced_kb: u64) {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("smaps_rollup"),
            format!("0-1 ---p 0 00:00 0 [rollup]\nRss: 1 kB\nReferenced: {referenced_kb} kB\n"),
        )
        .unwrap();
        std::fs::write(dir.join("clear_refs"), "").unwrap();
    }

    #[test]
    fn a_period_completes_once_with_the_referenced_fraction_of_max() {
        let root = tempfile::tempdir().unwrap();
        fake_proc(root.path(), 10, 256 * 1024);
        fake_proc(root.path(), 11, 0);
        let mut s = AccessSampler::new(root.path(), Duration::from_secs(10), Bytes(1 << 30), 0.0);
        let at = Duration::from_secs;
        assert!(s.wants_pids(at(0)));
        let first = s.observe(at(0), &[10, 11], 0).unwrap();
        assert!(!s.wants_pids(at(5)));
        assert!(s.wants_pids(at(10)));
        assert_eq!((first.period, first.completed), (0, None));
        assert_eq!(
            std::fs::read_to_string(root.path().join("proc/10/clear_refs")).unwrap(),
            "1",
            "the period starts by clearing the accessed bits"
        );
        assert_eq!(s.observe(at(5), &[10, 11], 0).unwrap().completed, None);
        let done = s.observe(at(10), &[10, 11], 0).unwrap();
        assert_eq!(done.period, 1);
        assert_eq!(
            done.completed,
            Some(CompletedSample {
                sampled: RESOLUTION,
                touched: 250
            })
        );
        assert_eq!(s.observe(at(11), &[10, 11], 0).unwrap().completed, None);
    }

    #[test]
    fn pages_faulted_back_in_the_period_count_as_touched() {
        let root = tempfile::tempdir().unwrap();
        fake_proc(root.path(), 10, 256 * 1024);
        let mut s = AccessSampler::new(root.path(), Duration::from_secs(10), Bytes(1 << 30), 0.0);
        let at = Duration::from_secs;
        // Faults before the first period started are not its.
        s.observe(at(0), &[10], 1 << 20).unwrap();
        // 64 MiB and 192 MiB of 4 KiB pages faulted back over the period.
        s.observe(at(5), &[], 16_384).unwrap();
        let done = s.observe(at(10), &[10], 49_152).unwrap();
        assert_eq!(
            done.completed.unwrap().touched,
            500,
            "256 MiB referenced + 256 MiB faulted"
        );
        // The next period starts from nothing.
        let next = s.observe(at(20), &[10], 0).unwrap();
        assert_eq!(next.completed.unwrap().touched, 250);
    }

    #[test]
    fn a_process_gone_at_the_period_end_adds_nothing() {
        let root = tempfile::tempdir().unwrap();
        fake_proc(root.path(), 10, 512 * 1024);
        let mut s = AccessSampler::new(root.path(), Duration::from_secs(1), Bytes(1 << 30), 0.0);
        s.observe(Duration::ZERO, &[10, 99], 0).unwrap();
        let done = s.observe(Duration::from_secs(1), &[10, 99], 0).unwrap();
        assert_eq!(done.completed.unwrap().touched, 500);
    }

    #[test]
    fn the_first_period_is_stretched_by_the_phase_and_the_next_ones_are_not() {
        let root = tempfile::tempdir().unwrap();
        fake_proc(root.path(), 10, 256 * 1024);
        let mut s = AccessSampler::new(root.path(), Duration::from_secs(10), Bytes(1 << 30), 0.5);
        let at = Duration::from_secs;
        s.observe(at(0), &[10], 0).unwrap();
        assert!(!s.wants_pids(at(10)), "a full period is not yet the first");
        assert_eq!(s.observe(at(10), &[10], 0).unwrap().completed, None);
        assert!(s.wants_pids(at(15)));
        assert!(s.observe(at(15), &[10], 0).unwrap().completed.is_some());
        assert!(!s.wants_pids(at(24)));
        assert!(s.observe(at(25), &[10], 0).unwrap().completed.is_some());
    }

    #[test]
    fn stagger_spreads_consecutive_tenants_over_the_period() {
        for n in [2u32, 8, 32, 100] {
            let mut phases: Vec<f64> = (0..n).map(stagger).collect();
            phases.sort_by(f64::total_cmp);
            assert!(phases.iter().all(|p| (0.0..1.0).contains(p)));
            let closest = phases
                .windows(2)
                .map(|w| w[1] - w[0])
                .fold(f64::INFINITY, f64::min);
            assert!(
                closest >= 0.3 / f64::from(n),
                "{n} tenants: two phases {closest} apart"
            );
        }
    }

    #[test]
    fn a_phase_out_of_range_is_clamped_not_a_period_of_two_or_of_nothing() {
        let root = tempfile::tempdir().unwrap();
        let period = Duration::from_secs(10);
        for (phase, first) in [(-1.0, 10.0), (f64::NAN, 10.0), (7.0, 19.99)] {
            let s = AccessSampler::new(root.path(), period, Bytes(1 << 30), phase);
            assert!((s.first_len.as_secs_f64() - first).abs() < 1e-6, "{phase}");
        }
    }

    #[test]
    fn touched_is_clamped_to_the_resolution() {
        assert_eq!(touched(2 << 30, Bytes(1 << 30)), RESOLUTION);
        assert_eq!(touched(0, Bytes(1 << 30)), 0);
        assert_eq!(touched(5, Bytes(0)), RESOLUTION);
    }
}
