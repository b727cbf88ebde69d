//! The density benchmark's set-up, read from TOML (bench/density.toml is the default): the budget, the run's length, the SLO, the policies compared, the search over N, and the tenant mix.
//!
//! Every size and duration is written as memtide's configuration writes them (`"2G"`,
//! `"5m"`); unknown keys are errors, and each value is checked against its bounds, so a typo
//! stops the benchmark before any server starts.

use crate::density::DensityError;
use memtide_demand::{Demand, Slo};
pub use memtide_demand::{Policy, ServerKind};
use memtide_model::written::{parse_duration, parse_size};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSlo {
    p99: String,
    wake: String,
    min_requests: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
    server: ServerKind,
    keys: u64,
    value_bytes: String,
    demand: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    budget: String,
    duration: String,
    warmup: String,
    window: String,
    seed: u64,
    policies: Vec<Policy>,
    start: usize,
    step: usize,
    max: usize,
    slo: RawSlo,
    mix: Vec<RawKind>,
    #[serde(default)]
    memtide: RawMemtide,
    senpai: Option<String>,
}

/// `[memtide]`: the daemon's own tables for the memtide policies, checked by the daemon's
/// parser. Its `[daemon]`, `[host]`, `[balloon]` and tenants are the benchmark's.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemtide {
    #[serde(default)]
    policy: toml::Table,
    #[serde(default)]
    rails: toml::Table,
}

/// One kind of tenant of the mix.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantKind {
    pub server: ServerKind,
    pub keys: u64,
    pub value_bytes: u64,
    /// The pattern's text, as the load generator takes it.
    pub demand: String,
}

/// The benchmark's set-up.
#[derive(Clone, Debug, PartialEq)]
pub struct DensityConfig {
    pub budget: u64,
    pub duration: f64,
    pub warmup: f64,
    pub window: f64,
    pub seed: u64,
    pub policies: Vec<Policy>,
    pub start: usize,
    pub step: usize,
    pub max: usize,
    pub slo: Slo,
    pub mix: Vec<TenantKind>,
    /// The daemon's `[policy]` and `[rails]` tables for the memtide policies: the benchmark's
    /// defaults (tax 0.75, sampling period 10 s) with `[memtide.policy]` and
    /// `[memtide.rails]` written over them, as TOML ready to be written into its file.
    pub memtide_tables: String,
    /// Senpai's `senpai.py` for the `senpai` policy (`senpai = "..."`, relative to the set-up
    /// file's directory): github.com/facebookincubator/senpai, not shipped with memtide.
    pub senpai: Option<PathBuf>,
}

/// The most tenants a trial runs (each is a server and a load generator).
pub const MAX_TENANTS: usize = 200;

impl DensityConfig {
    /// Reads and checks `text`, which came from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<DensityConfig, DensityError> {
        let bad = |why: String| DensityError::Config {
            path: path.to_path_buf(),
            why,
        };
        let raw: Raw = toml::from_str(text).map_err(|e| bad(e.message().to_string()))?;
        let size = |key: &str, v: &str, lo: u64, hi: u64| -> Result<u64, DensityError> {
            let b = parse_size(v).map_err(|e| bad(format!("{key} = \"{v}\": {e}")))?;
            if !(lo..=hi).contains(&b) {
                return Err(bad(format!(
                    "{key} = \"{v}\": must be from {lo} to {hi} bytes"
                )));
            }
            Ok(b)
        };
        let secs = |key: &str, v: &str, lo: f64, hi: f64| -> Result<f64, DensityError> {
            let s = parse_duration(v)
                .map_err(|e| bad(format!("{key} = \"{v}\": {e}")))?
                .as_secs_f64();
            if !(lo..=hi).contains(&s) {
                return Err(bad(format!(
                    "{key} = \"{v}\": must be from {lo} s to {hi} s"
                )));
            }
            Ok(s)
        };
        let budget = size("budget", &raw.budget, 64 << 20, 1 << 40)?;
        let duration = secs("duration", &raw.duration, 10.0, 86_400.0)?;
        let warmup = secs("warmup", &raw.warmup, 0.0, 3_600.0)?;
        let window = secs("window", &raw.window, 1.0, 3_600.0)?;
        if window > duration {
            return Err(bad(format!(
                "window = \"{}\" is longer than duration = \"{}\"",
                raw.window, raw.duration
            )));
        }
        let p99 = secs("slo.p99", &raw.slo.p99, 1e-6, 60.0)?;
        let wake = secs("slo.wake", &raw.slo.wake, 0.0, 3_600.0)?;
        if raw.policies.is_empty() {
            return Err(bad("policies = []: name at least one".into()));
        }
        let mut policies = raw.policies.clone();
        policies.sort();
        policies.dedup();
        if policies.len() != raw.policies.len() {
            return Err(bad("policies: a policy is named twice".into()));
        }
        if !(1..=MAX_TENANTS).contains(&raw.start) || raw.start > raw.max || raw.max > MAX_TENANTS {
            return Err(bad(format!(
                "start = {}, max = {}: need 1 <= start <= max <= {MAX_TENANTS}",
                raw.start, raw.max
            )));
        }
        if raw.step == 0 {
            return Err(bad("step = 0: must be at least 1".into()));
        }
        if raw.mix.is_empty() {
            return Err(bad("mix: name at least one kind of tenant ([[mix]])".into()));
        }
        let mut mix = Vec::new();
        for (i, k) in raw.mix.iter().enumerate() {
            let key = |f: &str| format!("mix[{i}].{f}");
            if !(1..=10_000_000).contains(&k.keys) {
                return Err(bad(format!(
                    "{} = {}: must be from 1 to 10000000",
                    key("keys"),
                    k.keys
                )));
            }
            let value_bytes = size(&key("value_bytes"), &k.value_bytes, 1, 1 << 20)?;
            Demand::parse(&k.demand).map_err(|e| bad(format!("{}: {e}", key("demand"))))?;
            mix.push(TenantKind {
                server: k.server,
                keys: k.keys,
                value_bytes,
                demand: k.demand.clone(),
            });
        }
        let memtide_tables = memtide_tables(raw.memtide, budget).map_err(bad)?;
        let senpai = raw
            .senpai
            .as_ref()
            .map(|s| path.parent().unwrap_or_else(|| Path::new(".")).join(s));
        if senpai.is_none() && raw.policies.contains(&Policy::Senpai) {
            return Err(bad(
                "policies names \"senpai\": set senpai = the path of Senpai's senpai.py \
                 (github.com/facebookincubator/senpai)"
                    .into(),
            ));
        }
        Ok(DensityConfig {
            memtide_tables,
            senpai,
            budget,
            duration,
            warmup,
            window,
            seed: raw.seed,
            policies: raw.policies,
            start: raw.start,
            step: raw.step,
            max: raw.max,
            slo: Slo {
                p99_us: (p99 * 1e6).round() as u64,
                wake_s: wake,
                min_requests: raw.slo.min_requests,
            },
            mix,
        })
    }

    /// The kind of tenant `i`: the mix, repeated (so the first N tenants of a larger trial
    /// are those of a smaller one).
    pub fn kind(&self, i: usize) -> &TenantKind {
        &self.mix[i % self.mix.len()]
    }
}

/// The daemon's `[policy]` and `[rails]` for the memtide policies, `set` written over the
/// benchmark's defaults, checked by the daemon's own parser (with a `[host]` of `budget`).
fn memtide_tables(set: RawMemtide, budget: u64) -> Result<String, String> {
    // The benchmark's defaults: the ESX tax, and a sampling period short enough for a
    // 5-minute run.
    let mut policy = toml::Table::new();
    policy.insert("tax_rate".into(), toml::Value::Float(0.75));
    policy.insert("sampling_period".into(), toml::Value::String("10s".into()));
    policy.extend(set.policy);
    let mut tables = toml::Table::new();
    tables.insert("policy".into(), toml::Value::Table(policy));
    if !set.rails.is_empty() {
        tables.insert("rails".into(), toml::Value::Table(set.rails));
    }
    let text = toml::to_string(&tables).map_err(|e| format!("[memtide]: {e}"))?;
    let check = format!("{text}\n[host]\nparent = \"/memtide-density\"\nbudget = \"{budget}\"\n");
    // The daemon's message names the field as in its own file (`rails.shrink_step`); here
    // that is `memtide.rails.shrink_step`, and the line of the text above means nothing.
    memtide_daemon::config::DaemonConfig::parse(&check, Path::new("[memtide]"))
        .map_err(|e| format!("memtide.{}", e.detail()))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: &str = include_str!("../../../../bench/density.toml");

    #[test]
    fn the_default_set_up_parses() {
        let c = DensityConfig::parse(DEFAULT, Path::new("bench/density.toml")).unwrap();
        assert!(c.policies.contains(&Policy::Static) && c.policies.contains(&Policy::Kernel));
        assert!(c.mix.iter().any(|k| k.server == ServerKind::Memcached));
        assert_eq!(c.kind(c.mix.len()), &c.mix[0]);
    }

    #[test]
    fn the_guest_set_up_names_senpai_beside_itself() {
        let c = DensityConfig::parse(
            include_str!("../../../../bench/density-guest.toml"),
            Path::new("/usr/local/lib/bench/density.toml"),
        )
        .unwrap();
        assert!(c.policies.contains(&Policy::Senpai));
        assert_eq!(
            c.senpai.as_deref(),
            Some(Path::new("/usr/local/lib/bench/senpai.py"))
        );
        let host = DensityConfig::parse(DEFAULT, Path::new("bench/density.toml")).unwrap();
        assert_eq!(host.senpai, None);
        assert_eq!(
            c.mix.iter().map(|k| &k.demand[..6]).collect::<Vec<_>>(),
            host.mix.iter().map(|k| &k.demand[..6]).collect::<Vec<_>>(),
            "the guest's mix is the host's, scaled"
        );
    }

    #[test]
    fn memtide_tables_write_over_the_benchmark_s_defaults() {
        let plain = DensityConfig::parse(DEFAULT, Path::new("d.toml")).unwrap();
        assert!(plain.memtide_tables.contains("tax_rate = 0.75"));
        assert!(!plain.memtide_tables.contains("[rails]"));
        let text = DEFAULT
            .replacen(
                "tax_rate = 0.75\nsampling_period = \"10s\"",
                "tax_rate = 0.5",
                1,
            )
            .replacen(
                "# [memtide.rails]\n# floor_margin",
                "[memtide.rails]\nfloor_margin",
                1,
            );
        let set = DensityConfig::parse(&text, Path::new("d.toml")).unwrap();
        let tables: toml::Table = toml::from_str(&set.memtide_tables).unwrap();
        assert_eq!(tables["policy"]["tax_rate"].as_float(), Some(0.5));
        assert_eq!(tables["policy"]["sampling_period"].as_str(), Some("10s"));
        assert_eq!(tables["rails"]["floor_margin"].as_str(), Some("32M"));
    }

    #[test]
    fn bad_set_ups_name_the_key_and_the_file() {
        for (change, says) in [
            (("budget = \"2G\"", "budget = \"2Q\""), "budget = \"2Q\""),
            (
                ("budget = \"2G\"", "budget = \"1M\""),
                "must be from 67108864",
            ),
            (
                ("window = \"10s\"", "window = \"1h\""),
                "longer than duration",
            ),
            (("seed = 1", "seed = 1\nspeed = 2"), "unknown field `speed`"),
            (("step = 4", "step = 0"), "step = 0"),
            (("start = 12", "start = 0"), "need 1 <= start <= max"),
            (("\"static\",", "\"static\", \"static\","), "named twice"),
            (("\"static\",", "\"statik\","), "unknown variant `statik`"),
            (
                ("\"static\",", "\"senpai\", \"static\","),
                "set senpai = the path of Senpai's senpai.py",
            ),
            (("rate=400\"", "rate=0\""), "mix[0].demand"),
            (
                (
                    "# [memtide.rails]\n# floor_margin",
                    "[memtide.rails]\nshrink_step = 2.0\n#",
                ),
                "memtide.rails.shrink_step = 2.0",
            ),
            (
                ("tax_rate = 0.75", "tax_rate = \"x\""),
                "memtide.policy.tax_rate",
            ),
            (
                (
                    "[memtide.policy]",
                    "[memtide.host]\nbudget = \"1G\"\n[memtide.policy]",
                ),
                "unknown field `host`",
            ),
        ] {
            assert!(DEFAULT.contains(change.0), "{change:?}");
            let text = DEFAULT.replacen(change.0, change.1, 1);
            let err = DensityConfig::parse(&text, Path::new("d.toml"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(says) && err.starts_with("d.toml"),
                "{change:?}: {err}"
            );
        }
    }
}
