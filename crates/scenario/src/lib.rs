//! memtide's scenario files: read a TOML scenario, apply `--set` overrides and variants, check every field, and build the runnable [`Scenario`].
//!
//! Every mistake a user can make is a [`ScenarioError`] whose `Display` is one line naming
//! file:line:col, the field (or override) and the value, e.g.
//! `scenarios/x.toml:9:7: tenants[1].min = "300M": must not exceed max = "256M"`.
//! Nothing here panics on any input. The schema is documented in `docs/scenarios.md`.
//!
//! Loading goes through `memtide_config`: parse the TOML text; apply the variant's `set`
//! overrides (when building a variant), then the caller's overrides in order (so the command
//! line always wins); read the serde schema (`schema`); read the tables that depend on their
//! kind, check relations between fields and convert sizes and times (`build`). Building the
//! base scenario also builds each of its variants, so a broken variant is reported before
//! anything runs.
//!
//! `schema` refuses unknown fields and reads estimators, workloads and events by their `kind`,
//! one struct per kind; `build` applies defaults, checks fields against each other and builds
//! `TenantSpec`s, `VmConfig`s, the `ControllerConfig` and timed events, sizes becoming pages
//! rounded to the nearest page; [`ScenarioError`] is a `ConfigError`, said of a variant, or
//! an unknown `--variant`.

mod build;
mod error;
mod scenario;
mod schema;

pub use error::ScenarioError;
pub use scenario::{
    Density, DensityKind, Event, Figure, Headline, Scenario, ScenarioTenant, TimedEvent, Variant,
};

use memtide_config::Document;
use std::path::Path;

/// Reads and builds the scenario file at `path` with `overrides` (`KEY=VALUE`) applied in order.
pub fn load(path: &Path, overrides: &[String]) -> Result<Scenario, ScenarioError> {
    parse_str(&memtide_config::read_file(path)?, path, overrides)
}

/// Like [`load`], for one variant: the variant's `set` overrides, then `overrides`.
pub fn load_variant(
    path: &Path,
    overrides: &[String],
    variant: &str,
) -> Result<Scenario, ScenarioError> {
    parse_str_variant(&memtide_config::read_file(path)?, path, overrides, variant)
}

/// Builds a scenario from its text; `source` names it in errors and gives the default name.
pub fn parse_str(
    text: &str,
    source: &Path,
    overrides: &[String],
) -> Result<Scenario, ScenarioError> {
    Loader { text, source }.base(overrides)
}

/// Like [`parse_str`], for one variant.
pub fn parse_str_variant(
    text: &str,
    source: &Path,
    overrides: &[String],
    variant: &str,
) -> Result<Scenario, ScenarioError> {
    let loader = Loader { text, source };
    let base = loader.base(overrides)?;
    let Some(v) = base.variants.iter().find(|v| v.name == variant) else {
        let message = if base.variants.is_empty() {
            "no such variant (the scenario defines none)".to_string()
        } else {
            let names: Vec<&str> = base.variants.iter().map(|v| v.name.as_str()).collect();
            format!("no such variant (variants: {})", names.join(", "))
        };
        return Err(ScenarioError::NoSuchVariant {
            file: source.to_path_buf(),
            variant: variant.to_string(),
            message,
        });
    };
    loader.variant(v, overrides)
}

/// One scenario text being loaded.
struct Loader<'a> {
    text: &'a str,
    source: &'a Path,
}

impl Loader<'_> {
    /// The scenario with the caller's overrides; each variant is built too, as a check.
    fn base(&self, overrides: &[String]) -> Result<Scenario, ScenarioError> {
        let mut doc = Document::parse(self.source, self.text)?;
        doc.set(overrides)?;
        let base = doc.build(|d| build::build(d, self.source))?;
        for v in &base.variants {
            self.variant(v, overrides)?;
        }
        Ok(base)
    }

    /// One variant: the file, the variant's overrides, then the caller's.
    fn variant(&self, v: &Variant, overrides: &[String]) -> Result<Scenario, ScenarioError> {
        let in_variant =
            |e: memtide_config::ConfigError| ScenarioError::from(e).in_variant(&v.name);
        let mut doc = Document::parse(self.source, self.text)?;
        doc.set(&v.overrides).map_err(in_variant)?;
        doc.set(overrides)?;
        let mut scenario = doc
            .build(|d| build::build(d, self.source))
            .map_err(in_variant)?;
        scenario.variant = Some(v.name.clone());
        Ok(scenario)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{EstimatorConfig, Pages, TaxRate, TenantId};
    use std::time::Duration;

    const TEXT: &str = r#"
name = "t"
duration = "100s"
[host]
memory = "1G"
[[tenants]]
name = "a"
max = "256M"
[tenants.workload]
kind = "idle"
[[tenants]]
name = "b"
max = "512M"
[tenants.workload]
kind = "idle"
[[events]]
at = "50s"
kind = "stop_tenant"
tenant = "b"
[[events]]
at = "10s"
kind = "set_tax_rate"
tax_rate = 0.5
[[events]]
at = "10s"
kind = "set_tenant"
tenant = "a"
shares = 2000
[[variants]]
name = "tws"
set = ["tenants.*.estimator.kind=tws"]
"#;

    fn parse(overrides: &[&str]) -> Result<Scenario, ScenarioError> {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        parse_str(TEXT, Path::new("t.toml"), &o)
    }

    #[test]
    fn events_are_sorted_by_time_keeping_file_order_for_ties() {
        let s = parse(&[]).unwrap();
        let at: Vec<u64> = s.events.iter().map(|e| e.at.as_secs()).collect();
        assert_eq!(at, [10, 10, 50]);
        assert_eq!(
            s.events[0].event,
            Event::SetTaxRate(TaxRate::new(0.5).unwrap())
        );
        assert!(matches!(
            s.events[1].event,
            Event::SetTenant {
                tenant: TenantId(0),
                shares: Some(2000),
                ..
            }
        ));
        assert_eq!(s.events[2].event, Event::StopTenant(TenantId(1)));
    }

    #[test]
    fn overrides_change_the_built_scenario() {
        let s = parse(&["tenants.b.max=300M", "seed=9"]).unwrap();
        assert_eq!(s.tenants[1].spec.max, Pages::from_mib(300));
        assert_eq!(s.seed, 9);
    }

    #[test]
    fn variant_applies_its_overrides_and_the_command_line_wins() {
        let o = vec!["tenants.a.estimator.kind=committed".to_string()];
        let s = parse_str_variant(TEXT, Path::new("t.toml"), &o, "tws").unwrap();
        assert_eq!(s.variant.as_deref(), Some("tws"));
        assert_eq!(s.tenants[0].spec.estimator, EstimatorConfig::Committed);
        assert_eq!(s.tenants[1].spec.estimator.name(), "tws");
        assert!(s.tenants[1].vm.sampling.is_none());
    }

    #[test]
    fn unknown_variant_lists_the_known_ones() {
        let e = parse_str_variant(TEXT, Path::new("t.toml"), &[], "nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.toml: --variant nope: no such variant (variants: tws)"
        );
    }

    #[test]
    fn broken_variant_is_reported_when_loading_the_base() {
        let text = TEXT.replace("estimator.kind=tws", "max=0");
        let e = parse_str(&text, Path::new("t.toml"), &[]).unwrap_err();
        assert_eq!(e.variant(), Some("tws"));
        assert!(
            e.to_string()
                .contains("variant tws: tenants[0].max = 0: must be > 0"),
            "{e}"
        );
    }

    #[test]
    fn errors_point_at_the_line_unless_an_override_wrote_the_value() {
        let text = TEXT.replace("max = \"512M\"", "max = 0");
        let e = parse_str(&text, Path::new("t.toml"), &[]).unwrap_err();
        assert_eq!(e.line_col(), Some((13, 7)));
        let e = parse(&["tenants.b.max=0"]).unwrap_err();
        assert_eq!(e.line_col(), None);
        assert_eq!(e.to_string(), "t.toml: tenants[1].max = 0: must be > 0");
    }

    #[test]
    fn syntax_errors_give_line_and_column_on_one_line() {
        let e = parse_str("duration = \"10s\"\nhost = [\n", Path::new("x.toml"), &[]).unwrap_err();
        let shown = e.to_string();
        assert!(shown.starts_with("x.toml:"), "{shown}");
        assert!(e.line_col().is_some());
        assert_eq!(shown.lines().count(), 1, "{shown}");
    }

    #[test]
    fn missing_file_names_the_file() {
        let e = load(Path::new("/nonexistent/s.toml"), &[]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/s.toml: cannot read"),
            "{e}"
        );
    }

    #[test]
    fn tick_is_one_second_and_ticks_count_the_duration() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.host.tick, Duration::from_secs(1));
        assert_eq!(s.ticks(), 100);
    }

    fn error_of(text: &str, overrides: &[&str]) -> String {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        parse_str(text, Path::new("t.toml"), &o)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn an_unknown_field_names_its_path_and_points_at_it() {
        let text = TEXT.replace("max = \"256M\"", "max = \"256M\"\nmax_mb = 256");
        assert!(
            error_of(&text, &[])
                .starts_with("t.toml:9:10: tenants[0].max_mb = 256: unknown field `max_mb`"),
            "{}",
            error_of(&text, &[])
        );
    }

    #[test]
    fn a_wrong_type_a_bad_size_and_a_bad_duration_name_field_and_value() {
        let e = error_of(&TEXT.replace("shares = 2000", "shares = \"many\""), &[]);
        assert!(
            e.starts_with("t.toml:28:10: events[2].shares = \"many\": invalid type"),
            "{e}"
        );
        let e = error_of(&TEXT.replace("max = \"256M\"", "max = \"256 megs\""), &[]);
        assert!(
            e.starts_with(
                "t.toml:8:7: tenants[0].max = \"256 megs\": the size has an unknown unit \"megs\""
            ),
            "{e}"
        );
        let e = error_of(&TEXT.replace("at = \"50s\"", "at = \"50\""), &[]);
        assert!(
            e.starts_with("t.toml:17:6: events[0].at = \"50\": the duration has no unit"),
            "{e}"
        );
    }

    #[test]
    fn a_relation_error_points_at_the_field_it_names() {
        let e = error_of(
            &TEXT.replace("max = \"256M\"", "max = \"256M\"\nmin = \"300M\""),
            &[],
        );
        assert_eq!(
            e,
            "t.toml:9:7: tenants[0].min = \"300M\": must not exceed max = \"256M\""
        );
    }

    #[test]
    fn an_slo_needs_the_cache_table_and_an_agent_that_reports_its_curve() {
        let text = include_str!("../../../scenarios/gemini-pools.toml");
        assert!(parse_str(text, Path::new("g.toml"), &[]).is_ok());
        let e = error_of(
            &text.replace("[policy.cache]\nbudget = \"128M\"\n", ""),
            &[],
        );
        assert!(e.contains("tenants[0].slo: needs [policy.cache]"), "{e}");
        let e = error_of(&text.replacen("curve_window = \"20s\"", "", 1), &[]);
        assert!(
            e.contains("tenants[0].slo: needs a database workload whose agent reports its curve"),
            "{e}"
        );
        let e = error_of(text, &["tenants.rubis.slo.slack=0.1"]);
        assert!(
            e.contains("tenants[1].slo.slack = 0.1: applies to a strict SLO only"),
            "{e}"
        );
    }

    #[test]
    fn a_disk_tenant_needs_the_hosts_disk_and_sane_settings() {
        let text = include_str!("../../../scenarios/lai-growth.toml");
        let s = parse_str(text, Path::new("l.toml"), &[]).unwrap();
        let spec = s.tenants[0].spec.disk.unwrap();
        assert_eq!((spec.weight, spec.latency_target_us), (100, None));
        let s = parse_str(
            text,
            Path::new("l.toml"),
            &["tenants.0.disk.latency_target=20ms".to_string()],
        )
        .unwrap();
        assert_eq!(
            s.tenants[0].spec.disk.unwrap().latency_target_us,
            Some(20_000)
        );
        let without = text.replacen("[disk]\n", "[unused]\n", 1);
        let e = error_of(&without, &[]);
        assert!(e.contains("unknown field `unused`"), "{e}");
        let i = text.find("[disk]").unwrap();
        let j = text.find("[[tenants]]").unwrap();
        let e = error_of(&format!("{}{}", &text[..i], &text[j..]), &[]);
        assert!(
            e.contains("tenants[0].disk: needs the host's [disk] table"),
            "{e}"
        );
        for (set, says) in [
            (
                "tenants.0.disk.db.sync_binlog=0",
                "tenants[0].disk.db.sync_binlog = 0: must be >= 1",
            ),
            (
                "tenants.0.disk.write_share=1.5",
                "tenants[0].disk.write_share = 1.5: must be between 0 and 1",
            ),
            (
                "tenants.1.disk.growth.until=10",
                "tenants[1].disk.growth.until = 10: must be at least users = 1000",
            ),
            (
                "tenants.0.disk.cap_iops=0",
                "tenants[0].disk.cap_iops = 0: must be >= 1",
            ),
            ("disk.seek_us=-1", "disk.seek_us = -1"),
        ] {
            let e = error_of(text, &[set]);
            assert!(e.contains(says), "{set}: {e}");
        }
    }

    #[test]
    fn a_density_scenario_builds_n_seeded_tenants_for_its_policy() {
        let text = include_str!("../../../scenarios/density-small.toml");
        let s = parse_str(text, Path::new("d.toml"), &["density.tenants=12".into()]).unwrap();
        let d = s.density.as_ref().unwrap();
        assert_eq!((s.tenants.len(), d.policy.name()), (12, "kernel"));
        assert_eq!(s.duration, d.warmup + d.run, "the warm-up, then the load");
        assert_eq!(s.tenants[11].spec.name, "t0011");
        let seed_of = |t: &ScenarioTenant| match t.vm.workload {
            memtide_sim::workload::WorkloadConfig::Kv { seed, .. } => seed,
            _ => panic!("not a key-value server"),
        };
        assert_eq!(
            seed_of(&s.tenants[3]),
            memtide_demand::tenant_seed(s.seed, 3)
        );
        let sampling = parse_str_variant(text, Path::new("d.toml"), &[], "sampling").unwrap();
        assert_eq!(sampling.tenants[0].spec.estimator.name(), "sampling");
        assert!(sampling.tenants[0].vm.sampling.is_some());
    }

    #[test]
    fn density_errors_name_the_key() {
        let text = include_str!("../../../scenarios/density-small.toml");
        for (set, says) in [
            (
                "density.policy=app",
                "density.policy = \"app\": has no simulated counterpart",
            ),
            (
                "density.tenants=0",
                "density.tenants = 0: must be from 1 to 10000",
            ),
            ("density.step=0", "density.step = 0: must be at least 1"),
            (
                "density.mix.1.keys=0",
                "density.mix[1].keys = 0: must be from 1 to 100000000",
            ),
            (
                "density.cpu_us_per_access=1e300",
                "density.cpu_us_per_access = 1e300: must be <= 1000000 (a second)",
            ),
            (
                "density.cpu_us_per_access=0.001",
                "density.cpu_us_per_access = 0.001: must be >= 0.05",
            ),
            (
                "density.mix.2.demand=busy:rate=0",
                "density.mix[2].demand = \"busy:rate=0\"",
            ),
            ("policy.budget=0", "policy.budget = 0: must be > 0"),
        ] {
            let e = error_of(text, &[set]);
            assert!(e.starts_with("t.toml") && e.contains(says), "{set}: {e}");
        }
        let e = error_of(&text.replace("budget = \"2G\"\n", ""), &[]);
        assert!(e.contains("policy: needs budget"), "{e}");
        let with_tenant = format!("{text}\n[[tenants]]\nname = \"x\"\nmax = \"1G\"\n[tenants.workload]\nkind = \"idle\"\n");
        let e = error_of(&with_tenant, &[]);
        assert!(e.contains("builds its tenants from [[density.mix]]"), "{e}");
    }

    #[test]
    fn set_override_errors_name_the_override_or_the_field_it_wrote() {
        assert_eq!(
            error_of(TEXT, &["tenants.c.shares=3000"]),
            "t.toml: --set tenants.c.shares=3000: no element of tenants is named c"
        );
        assert_eq!(
            error_of(TEXT, &["duration=60"]),
            "t.toml: duration = 60: invalid type: integer `60`, expected a duration: write a \
             string with a unit such as \"500ms\", \"1s\" or \"2m\" (ms, s, m, h)"
        );
        let s = parse(&["duration=60s", "tenants.a.shares=3000"]).unwrap();
        assert_eq!(s.duration, Duration::from_secs(60));
        assert_eq!(s.tenants[0].spec.shares, 3000);
    }

    #[test]
    fn fields_of_another_estimator_kind_are_dropped_when_an_override_set_the_kind() {
        let text = TEXT.replace(
            "name = \"a\"\n",
            "name = \"a\"\nestimator = { kind = \"tws\", cool_down = \"4s\" }\n",
        );
        let e = error_of(&text.replace("\"tws\", cool", "\"sampling\", cool"), &[]);
        assert!(
            e.contains("tenants[0].estimator.cool_down = \"4s\": unknown field"),
            "{e}"
        );
        let o = vec!["tenants.a.estimator.kind=committed".to_string()];
        let s = parse_str(&text, Path::new("t.toml"), &o).unwrap();
        assert_eq!(s.tenants[0].spec.estimator, EstimatorConfig::Committed);
    }
}
