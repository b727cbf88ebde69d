//! A tenant's estimator table, read by its `kind`.

use crate::schema::{CommittedDoc, SamplingDoc, TwsDoc};
use memtide_config::{field_names, FieldPath};
use memtide_model::{EstimatorConfig, SamplingConfig, WorkingSetConfig};

use super::{Build, Result};

const ESTIMATOR_KINDS: &str = "\"sampling\", \"tws\" or \"committed\"";

impl Build<'_> {
    /// The estimator table (absent: sampling with its defaults). When an override changed
    /// `kind`, fields of the file's kind are dropped: a variant such as
    /// `tenants.*.estimator.kind=committed` works on tenants with tuned `tws` parameters.
    pub(super) fn estimator(
        &self,
        at: &FieldPath,
        value: Option<&toml::Value>,
    ) -> Result<EstimatorConfig> {
        let Some(value) = value else {
            return Ok(EstimatorConfig::Sampling(SamplingConfig::default()));
        };
        let (kind, mut rest) = self.doc.kind(at, value, Some("sampling"))?;
        let overridden = self.doc.is_overridden(&at.key("kind"));
        let mut keep_own = |fields: &[&str]| {
            if let (true, toml::Value::Table(t)) = (overridden, &mut rest) {
                t.retain(|k, _| fields.contains(&k));
            }
        };
        let unit = |v: f64| v > 0.0 && v <= 1.0;
        match kind.as_str() {
            "sampling" => {
                keep_own(field_names::<SamplingDoc>());
                let s: SamplingDoc = self.read(at, rest)?;
                let d = SamplingConfig::default();
                let sample_pages = s.sample_pages.unwrap_or(d.sample_pages);
                if !(1..=1_000_000).contains(&sample_pages) {
                    return Err(self.err(&at.key("sample_pages"), "must be in [1, 1000000]"));
                }
                Ok(EstimatorConfig::Sampling(SamplingConfig {
                    sample_pages,
                    period: match s.period {
                        Some(p) => self.period(&at.key("period"), p)?,
                        None => d.period,
                    },
                    slow_gain: match s.slow_gain {
                        Some(g) => {
                            self.number(&at.key("slow_gain"), g, unit, "must be in (0, 1]")?
                        }
                        None => d.slow_gain,
                    },
                    fast_gain: match s.fast_gain {
                        Some(g) => {
                            self.number(&at.key("fast_gain"), g, unit, "must be in (0, 1]")?
                        }
                        None => d.fast_gain,
                    },
                    headroom: match s.headroom {
                        Some(h) => self.number(
                            &at.key("headroom"),
                            h,
                            |v| (0.0..=100.0).contains(&v),
                            "must be in [0, 100]",
                        )?,
                        None => d.headroom,
                    },
                    wake: s.wake.unwrap_or(d.wake),
                }))
            }
            "tws" => {
                keep_own(field_names::<TwsDoc>());
                let w: TwsDoc = self.read(at, rest)?;
                let d = WorkingSetConfig::default();
                let cool_down = match w.cool_down {
                    Some(c) => self.time(&at.key("cool_down"), c)?,
                    None => d.cool_down,
                };
                Ok(EstimatorConfig::WorkingSet(WorkingSetConfig {
                    epoch: match w.epoch {
                        Some(e) => self.period(&at.key("epoch"), e)?,
                        None => d.epoch,
                    },
                    fast_step: match w.fast_step {
                        Some(s) => {
                            self.number(&at.key("fast_step"), s, unit, "must be in (0, 1]")?
                        }
                        None => d.fast_step,
                    },
                    slow_step: match w.slow_step {
                        Some(s) => {
                            self.number(&at.key("slow_step"), s, unit, "must be in (0, 1]")?
                        }
                        None => d.slow_step,
                    },
                    cool_down,
                    // The simulator runs TWS as published: no growing cool-down.
                    max_cool_down: cool_down,
                    committed_change: match w.committed_change {
                        Some(c) => self.number(
                            &at.key("committed_change"),
                            c,
                            |v| (0.0..=100.0).contains(&v),
                            "must be in [0, 100]",
                        )?,
                        None => d.committed_change,
                    },
                }))
            }
            "committed" => {
                keep_own(field_names::<CommittedDoc>());
                let _: CommittedDoc = self.read(at, rest)?;
                Ok(EstimatorConfig::Committed)
            }
            _ => Err(self.err(
                &at.key("kind"),
                format!("unknown estimator kind (expected {ESTIMATOR_KINDS})"),
            )),
        }
    }
}
