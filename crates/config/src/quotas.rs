//! Gemini's tables as scenario files and the daemon's config both write them: a tenant's `slo`, and the cache quotas' table (`[policy.cache]` in a scenario, `[cache]` for the daemon), checked into their values.

use crate::{ConfigError, Document, FieldPath, Size};
use memtide_model::curve::{DEFAULT_HIT_US, DEFAULT_MISS_US, DEFAULT_QUOTA_STEPS};
use memtide_model::{Pages, Slo};
use serde::{Deserialize, Serialize};

/// `slo = { kind = "strict", target_us = 500, slack = 0.1 }` or `{ kind = "best-effort" }`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "an slo table")]
pub struct SloDoc {
    pub kind: SloKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slack: Option<f64>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SloKind {
    Strict,
    BestEffort,
}

/// A strict SLO's target unless given: the paper's D.
pub const DEFAULT_TARGET_US: f64 = 500.0;

impl SloDoc {
    /// The SLO, checked (a strict target above 0, a slack of at least 0, neither given for best
    /// effort); `at` is the table's path in `doc`.
    pub fn build(&self, doc: &Document, at: &FieldPath) -> Result<Slo, ConfigError> {
        match self.kind {
            SloKind::BestEffort => {
                for (name, given) in [("target_us", self.target_us), ("slack", self.slack)] {
                    if given.is_some() {
                        return Err(doc.error(
                            &at.key(name),
                            "applies to a strict SLO only (this one is best-effort)",
                        ));
                    }
                }
                Ok(Slo::BestEffort)
            }
            SloKind::Strict => Slo::strict(
                self.target_us.unwrap_or(DEFAULT_TARGET_US),
                self.slack.unwrap_or(0.0),
            )
            .map_err(|e| doc.error(&at.key(e.field()), e.to_string())),
        }
    }
}

/// The cache quotas' table: the pool budget the SLO tenants share and the latency model.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "the cache quota table")]
pub struct QuotasDoc {
    /// False: the SLOs are kept but no quota is searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    pub budget: Size,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub miss_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
}

/// The table's values, checked.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct QuotaTable {
    pub budget: Pages,
    pub hit_us: f64,
    pub miss_us: f64,
    pub steps: u32,
}

impl QuotasDoc {
    /// The quotas (`None`: disabled), fields left out taken from `memtide_model::curve`'s
    /// defaults; `at` is the table's path in `doc`.
    pub fn build(&self, doc: &Document, at: &FieldPath) -> Result<Option<QuotaTable>, ConfigError> {
        if self.budget.bytes() == 0 {
            return Err(doc.error(&at.key("budget"), "must be more than 0"));
        }
        let hit_us = self.hit_us.unwrap_or(DEFAULT_HIT_US);
        if !(hit_us.is_finite() && hit_us >= 0.0) {
            return Err(doc.error(&at.key("hit_us"), "must be >= 0"));
        }
        let miss_us = self.miss_us.unwrap_or(DEFAULT_MISS_US);
        if !(miss_us.is_finite() && miss_us > hit_us) {
            return Err(doc.error(
                &at.key("miss_us"),
                format!("must be more than hit_us ({hit_us})"),
            ));
        }
        let steps = self.steps.unwrap_or(DEFAULT_QUOTA_STEPS);
        if !(2..=1024).contains(&steps) {
            return Err(doc.error(&at.key("steps"), "must be between 2 and 1024"));
        }
        Ok(self.enabled.unwrap_or(true).then_some(QuotaTable {
            budget: self.budget.to_pages(),
            hit_us,
            miss_us,
            steps,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[derive(Deserialize)]
    struct File {
        slo: SloDoc,
        cache: QuotasDoc,
    }

    fn built(text: &str) -> Result<(Slo, Option<QuotaTable>), String> {
        let doc = Document::parse(Path::new("c.toml"), text).map_err(|e| e.to_string())?;
        let f: File = doc.read(&FieldPath::root()).map_err(|e| e.to_string())?;
        let root = FieldPath::root();
        let slo = f
            .slo
            .build(&doc, &root.key("slo"))
            .map_err(|e| e.to_string())?;
        let q = f
            .cache
            .build(&doc, &root.key("cache"))
            .map_err(|e| e.to_string())?;
        Ok((slo, q))
    }

    #[test]
    fn the_tables_build_their_values_and_write_back_the_same() {
        let (slo, q) = built(
            "slo = { kind = \"strict\", target_us = 400, slack = 0.1 }\n\
             [cache]\nbudget = \"1G\"\nmiss_us = 5000\n",
        )
        .unwrap();
        assert_eq!(
            slo,
            Slo::Strict {
                target_us: 400.0,
                slack: 0.1
            }
        );
        let q = q.unwrap();
        assert_eq!(q.budget, Pages::from_mib(1024));
        assert_eq!((q.hit_us, q.miss_us, q.steps), (2.0, 5000.0, 64));
        let (slo, q) =
            built("slo = { kind = \"best-effort\" }\n[cache]\nbudget = \"1G\"\nenabled = false\n")
                .unwrap();
        assert_eq!(slo, Slo::BestEffort);
        assert_eq!(q, None);
    }

    #[test]
    fn mistakes_name_the_field_and_its_value() {
        for (text, expect) in [
            (
                "slo = { kind = \"strict\", target_us = -5 }\n[cache]\nbudget = \"1G\"\n",
                "slo.target_us = -5: must be more than 0",
            ),
            (
                "slo = { kind = \"best-effort\", slack = 0.1 }\n[cache]\nbudget = \"1G\"\n",
                "slo.slack = 0.1: applies to a strict SLO only",
            ),
            (
                "slo = { kind = \"strict\" }\n[cache]\nbudget = \"1G\"\nmiss_us = 1\nhit_us = 2\n",
                "cache.miss_us = 1: must be more than hit_us (2)",
            ),
            (
                "slo = { kind = \"strict\" }\n[cache]\nbudget = \"1G\"\nsteps = 1\n",
                "cache.steps = 1: must be between 2 and 1024",
            ),
            (
                "slo = { kind = \"strict\" }\n[cache]\nbudget = \"0\"\n",
                "cache.budget = \"0\": must be more than 0",
            ),
        ] {
            let e = built(text).unwrap_err();
            assert!(e.contains(expect), "{e} (expected {expect})");
        }
    }
}
