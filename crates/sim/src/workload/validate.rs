//! Checks on workload parameters, each turning a bad value into an error that names the
//! workload kind, the field and the value.

use super::{Job, Skew, TouchPhase, WorkloadError};

/// The least work per page access a workload may have, in µs. The simulator runs every access
/// one by one (about 80 to 150 million a second on one core); a closed-loop workload with no
/// work per access would run as many as fit in a tick, without bound.
pub const MIN_CPU_US_PER_ACCESS: f64 = 0.05;

/// The most work per page access, in µs: a second. More is no workload the simulator models
/// (a request that reads one page per second), and `1e300` overflowed the time it adds up.
pub const MAX_CPU_US_PER_ACCESS: f64 = 1e6;

/// The highest open-loop rate, accesses per simulated second: as many as the least work per
/// access allows, since the simulator runs each access one by one.
pub const MAX_ACCESSES_PER_S: f64 = 1.0 / MIN_CPU_US_PER_ACCESS * 1e6;

/// The steepest Zipf skew: at 10, page 2 is read 1,024 times less often than page 1 and
/// everything past the first few pages is never read; steeper says nothing more.
pub const MAX_ZIPF_THETA: f64 = 10.0;

/// Largest region a workload may declare, in MiB (1 TiB = 2^28 pages, well inside `u32`).
pub(super) const MAX_REGION_MB: f64 = 1024.0 * 1024.0;

/// Validates fields of one workload `kind`.
#[derive(Copy, Clone, Debug)]
pub(super) struct Check {
    pub(super) kind: &'static str,
}

impl Check {
    pub(super) fn error(
        &self,
        field: &str,
        value: impl ToString,
        rule: impl ToString,
    ) -> WorkloadError {
        WorkloadError::Invalid {
            kind: self.kind,
            field: field.to_string(),
            value: value.to_string(),
            rule: rule.to_string(),
        }
    }

    /// A finite number.
    pub(super) fn finite(&self, field: &str, v: f64) -> Result<f64, WorkloadError> {
        if v.is_finite() {
            Ok(v)
        } else {
            Err(self.error(field, v, "a finite number"))
        }
    }

    /// Each phase's start and working set in pages: every start a finite number >= 0 after
    /// the one before, and the first after `after` when given.
    pub(super) fn phases(
        &self,
        phases: &[TouchPhase],
        after: Option<f64>,
    ) -> Result<Vec<(f64, u32)>, WorkloadError> {
        let mut out = Vec::with_capacity(phases.len());
        for (i, p) in phases.iter().enumerate() {
            let at_field = format!("phases[{i}].at_s");
            self.non_negative(&at_field, p.at_s)?;
            let bound = match i {
                0 => after.map(|a| (a, a.to_string())),
                _ => {
                    let before = phases[i - 1].at_s;
                    Some((before, format!("phases[{}].at_s = {before}", i - 1)))
                }
            };
            if let Some((_, shown)) = bound.filter(|&(b, _)| p.at_s <= b) {
                return Err(self.error(&at_field, p.at_s, format!("> {shown}")));
            }
            let field = format!("phases[{i}].working_set_mb");
            out.push((p.at_s, self.size_mb(&field, p.working_set_mb)?));
        }
        Ok(out)
    }

    /// A finite number >= 0.
    pub(super) fn non_negative(&self, field: &str, v: f64) -> Result<f64, WorkloadError> {
        if self.finite(field, v)? >= 0.0 {
            Ok(v)
        } else {
            Err(self.error(field, v, ">= 0"))
        }
    }

    /// Work per page access, in µs: from [`MIN_CPU_US_PER_ACCESS`] to [`MAX_CPU_US_PER_ACCESS`].
    pub(super) fn work_per_access(&self, field: &str, v: f64) -> Result<f64, WorkloadError> {
        if self.finite(field, v)? > MAX_CPU_US_PER_ACCESS {
            return Err(self.error(field, v, format!("<= {MAX_CPU_US_PER_ACCESS} (a second)")));
        }
        if v >= MIN_CPU_US_PER_ACCESS {
            Ok(v)
        } else {
            Err(self.error(
                field,
                v,
                format!(
                    ">= {MIN_CPU_US_PER_ACCESS} (at most {} million accesses per simulated second: the simulator runs each one)",
                    1.0 / MIN_CPU_US_PER_ACCESS
                ),
            ))
        }
    }

    /// A finite number > 0.
    pub(super) fn positive(&self, field: &str, v: f64) -> Result<f64, WorkloadError> {
        if self.finite(field, v)? > 0.0 {
            Ok(v)
        } else {
            Err(self.error(field, v, "> 0"))
        }
    }

    /// A fraction in [0, 1].
    pub(super) fn fraction(&self, field: &str, v: f64) -> Result<f64, WorkloadError> {
        if (0.0..=1.0).contains(&self.finite(field, v)?) {
            Ok(v)
        } else {
            Err(self.error(field, v, "in [0, 1]"))
        }
    }

    /// A region size in MiB, returned in pages (rounded to the nearest page).
    pub(super) fn size_mb(&self, field: &str, mb: f64) -> Result<u32, WorkloadError> {
        self.non_negative(field, mb)?;
        if mb > MAX_REGION_MB {
            return Err(self.error(field, mb, format!("<= {MAX_REGION_MB} (1 TiB)")));
        }
        let pages = memtide_model::Pages::from_mib_f64(mb).0;
        // MAX_REGION_MB keeps this far below u32::MAX.
        Ok(u32::try_from(pages).unwrap_or(u32::MAX))
    }

    /// A skew whose Zipf exponent (if any) is in (0, [`MAX_ZIPF_THETA`]].
    pub(super) fn skew(&self, field: &str, skew: Skew) -> Result<Skew, WorkloadError> {
        if let Skew::Zipf { theta } = skew {
            let field = format!("{field}.theta");
            if self.positive(&field, theta)? > MAX_ZIPF_THETA {
                return Err(self.error(&field, theta, format!("<= {MAX_ZIPF_THETA}")));
            }
        }
        Ok(skew)
    }

    /// Jobs as `(at_s, accesses)`: each start a finite number >= 0 after the one before, each
    /// at least one operation of `accesses_per_op` accesses.
    pub(super) fn jobs(
        &self,
        jobs: &[Job],
        accesses_per_op: u32,
    ) -> Result<Vec<(f64, u64)>, WorkloadError> {
        let mut out = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.iter().enumerate() {
            let at_field = format!("jobs[{i}].at_s");
            self.non_negative(&at_field, j.at_s)?;
            if i > 0 && j.at_s <= jobs[i - 1].at_s {
                return Err(self.error(
                    &at_field,
                    j.at_s,
                    format!("> jobs[{}].at_s = {}", i - 1, jobs[i - 1].at_s),
                ));
            }
            if j.ops == 0 {
                return Err(self.error(&format!("jobs[{i}].ops"), 0, ">= 1"));
            }
            out.push((j.at_s, j.ops.saturating_mul(u64::from(accesses_per_op))));
        }
        Ok(out)
    }

    /// A count >= 1.
    pub(super) fn at_least_one(&self, field: &str, v: u32) -> Result<u32, WorkloadError> {
        if v >= 1 {
            Ok(v)
        } else {
            Err(self.error(field, v, ">= 1"))
        }
    }
}
