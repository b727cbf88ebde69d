//! Every kind of bad scenario is answered with one line naming the file, the field and the value, never a panic; and a full example builds with the expected values and defaults.

use memtide_model::{EstimatorConfig, Pages, SamplingConfig, TaxRate, TenantId, WorkingSetConfig};
use memtide_scenario::{load, load_variant, parse_str, Event, ScenarioError};
use memtide_sim::config::{BalloonConfig, SamplingSetup};
use std::path::{Path, PathBuf};
use std::time::Duration;

const HEAD: &str = "duration_s = 100\n[host]\nmemory_mb = 1024\n";

fn tenant(name: &str, extra: &str) -> String {
    format!("[[tenants]]\nname = \"{name}\"\nmax_mb = 256\n{extra}\n[tenants.workload]\nkind = \"idle\"\n")
}

fn err(text: &str, overrides: &[&str]) -> ScenarioError {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    match parse_str(text, Path::new("scenarios/x.toml"), &o) {
        Ok(_) => panic!("accepted:\n{text}\noverrides {overrides:?}"),
        Err(e) => e,
    }
}

/// (case, scenario text, overrides, words the message must contain: file, field path, value).
fn cases() -> Vec<(&'static str, String, Vec<&'static str>, Vec<&'static str>)> {
    let two = format!("{HEAD}{}{}", tenant("a", ""), tenant("b", ""));
    vec![
        (
            "min above max",
            format!("{HEAD}{}", tenant("a", "min_mb = 300")),
            vec![],
            vec!["tenants[0].min_mb = 300", "must not exceed max_mb = 256"],
        ),
        (
            "unknown field",
            format!("{HEAD}{}", tenant("a", "bogus = 1")),
            vec![],
            vec!["tenants[0]", "unknown field `bogus`", "x.toml:7:1"],
        ),
        (
            "unknown top-level field",
            format!("bogus = 1\n{HEAD}"),
            vec![],
            vec!["x.toml:1:1: unknown field `bogus`"],
        ),
        ("tax rate of one or more", format!("{HEAD}[policy]\ntax_rate = 1.2\n"), vec![], vec!["policy.tax_rate = 1.2", "[0, 1)"]),
        (
            "negative size",
            format!("{HEAD}{}", tenant("a", "").replace("max_mb = 256", "max_mb = -5")),
            vec![],
            vec!["tenants[0].max_mb = -5", "must be > 0"],
        ),
        (
            "event names no tenant",
            format!("{two}[[events]]\nat_s = 5\nkind = \"stop_tenant\"\ntenant = \"nope\"\n"),
            vec![],
            vec!["events[0].tenant = \"nope\"", "no such tenant"],
        ),
        (
            "budget below the mins",
            format!("{HEAD}[policy]\nbudget_mb = 100\n{}{}", tenant("a", "min_mb = 200"), tenant("b", "min_mb = 100")),
            vec![],
            vec!["policy.budget_mb = 100", "below the sum of tenant min_mb (300)"],
        ),
        (
            "wrong type",
            format!("{HEAD}{}", tenant("a", "").replace("max_mb = 256", "max_mb = \"big\"")),
            vec![],
            vec!["tenants[0].max_mb = \"big\"", "must be a number"],
        ),
        (
            "wrong type in the host table",
            "duration_s = 10\n[host]\nmemory_mb = \"lots\"\n".to_string(),
            vec![],
            vec!["host.memory_mb = \"lots\"", "x.toml:3:1"],
        ),
        (
            "duplicate tenant names",
            format!("{HEAD}{}{}", tenant("a", ""), tenant("a", "")),
            vec![],
            vec!["tenants[1].name = \"a\"", "duplicate"],
        ),
        (
            "stop before start",
            format!("{HEAD}{}", tenant("a", "start_s = 20\nstop_s = 20")),
            vec![],
            vec!["tenants[0].stop_s = 20", "after start_s = 20"],
        ),
        (
            "start after the end",
            format!("{HEAD}{}", tenant("a", "start_s = 100")),
            vec![],
            vec!["tenants[0].start_s = 100", "before the end"],
        ),
        (
            "event after the end",
            format!("{HEAD}[[events]]\nat_s = 100\nkind = \"set_tax_rate\"\ntax_rate = 0.5\n"),
            vec![],
            vec!["events[0].at_s = 100", "[0, duration_s)"],
        ),
        (
            "negative event time",
            format!("{HEAD}[[events]]\nat_s = -1\nkind = \"set_tax_rate\"\ntax_rate = 0.5\n"),
            vec![],
            vec!["events[0].at_s = -1", ">= 0"],
        ),
        (
            "missing duration",
            "[host]\nmemory_mb = 1024\n".to_string(),
            vec![],
            vec!["duration_s", "required"],
        ),
        (
            "zero duration",
            "duration_s = 0\n[host]\nmemory_mb = 1024\n".to_string(),
            vec![],
            vec!["duration_s = 0", "must be > 0"],
        ),
        (
            "estimator field of another kind",
            format!("{HEAD}{}", tenant("a", "[tenants.estimator]\nkind = \"sampling\"\nfast_step = 0.1")),
            vec![],
            vec!["tenants[0].estimator.fast_step = 0.1", "not a field of the sampling estimator"],
        ),
        (
            "bad workload parameter",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax_mb = 256\n[tenants.workload]\nkind = \"toucher\"\nphases = [{{ at_s = 0, working_set_mb = -5 }}]\n"),
            vec![],
            vec!["tenants[0].workload", "working_set_mb", "-5"],
        ),
        (
            "wrong workload field type",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax_mb = 256\n[tenants.workload]\nkind = \"idle\"\nresident_mb = \"x\"\n"),
            vec![],
            vec!["tenants[0].workload.resident_mb = \"x\""],
        ),
        (
            "unknown workload kind",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax_mb = 256\n[tenants.workload]\nkind = \"nope\"\n"),
            vec![],
            vec!["tenants[0].workload.kind = \"nope\""],
        ),
        (
            "initial memory without a balloon driver",
            format!("{HEAD}{}", tenant("a", "initial_mb = 100\n[tenants.balloon]\nenabled = false")),
            vec![],
            vec!["tenants[0].initial_mb = 100", "balloon driver"],
        ),
        (
            "initial memory above max",
            format!("{HEAD}{}", tenant("a", "initial_mb = 300")),
            vec![],
            vec!["tenants[0].initial_mb = 300", "[kernel_mb, max_mb]"],
        ),
        (
            "misordered thresholds",
            format!("{HEAD}[policy]\nthresholds = {{ high = 0.01, soft = 0.04, hard = 0.02, low = 0.005 }}\n"),
            vec![],
            vec!["policy.thresholds", "high = 0.01"],
        ),
        (
            "bad override: no such element",
            two.clone(),
            vec!["tenants.vm9.max_mb=5"],
            vec!["--set tenants.vm9.max_mb=5", "no element of tenants is named vm9"],
        ),
        (
            "bad override value",
            two.clone(),
            vec!["policy.tax_rate=-1"],
            vec!["policy.tax_rate = -1", "[0, 1)"],
        ),
        (
            "override without a value",
            two.clone(),
            vec!["seed"],
            vec!["--set seed", "KEY=VALUE"],
        ),
        (
            "set_tenant above the configured max",
            format!("{two}[[events]]\nat_s = 5\nkind = \"set_tenant\"\ntenant = \"a\"\nmax_mb = 512\n"),
            vec![],
            vec!["events[0].max_mb = 512", "configured max_mb = 256"],
        ),
        (
            "duplicate variant",
            format!("{two}[[variants]]\nname = \"v\"\n[[variants]]\nname = \"v\"\n"),
            vec![],
            vec!["variants[1].name = \"v\"", "duplicate"],
        ),
        (
            "zero shares",
            format!("{HEAD}{}", tenant("a", "shares = 0")),
            vec![],
            vec!["tenants[0].shares = 0", ">= 1"],
        ),
        (
            "huge memory",
            "duration_s = 10\n[host]\nmemory_mb = 1e300\n".to_string(),
            vec![],
            vec!["host.memory_mb", "1 TiB"],
        ),
        (
            "syntax error",
            format!("{HEAD}[[tenants]\n"),
            vec![],
            vec!["x.toml:4:"],
        ),
        (
            "table expected",
            "duration_s = 10\nhost = 5\n".to_string(),
            vec![],
            vec!["host = 5", "must be a table"],
        ),
        (
            "negative seed",
            format!("seed = -1\n{HEAD}"),
            vec![],
            vec!["seed = -1"],
        ),
    ]
}

#[test]
fn every_bad_input_gives_one_line_naming_file_field_and_value() {
    for (case, text, overrides, words) in cases() {
        let e = err(&text, &overrides);
        let shown = e.to_string();
        assert_eq!(shown.lines().count(), 1, "{case}: not one line: {shown}");
        assert!(
            shown.starts_with("scenarios/x.toml"),
            "{case}: no file: {shown}"
        );
        for w in words {
            assert!(shown.contains(w), "{case}: {shown:?} lacks {w:?}");
        }
    }
}

#[test]
fn missing_file_is_one_line_naming_it() {
    let e = load(Path::new("/nonexistent/dir/s.toml"), &[]).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.starts_with("/nonexistent/dir/s.toml: cannot read"),
        "{shown}"
    );
    assert_eq!(shown.lines().count(), 1);
}

#[test]
fn unknown_variant_is_one_line_naming_it() {
    let path = write_tmp(
        "variants.toml",
        &format!(
            "{HEAD}{}[[variants]]\nname = \"tws\"\nset = [\"tenants.*.estimator.kind=tws\"]\n",
            tenant("a", "")
        ),
    );
    let e = load_variant(&path, &[], "nope").unwrap_err();
    assert!(
        e.to_string()
            .ends_with("--variant nope: no such variant (variants: tws)"),
        "{e}"
    );
    let s = load_variant(&path, &[], "tws").unwrap();
    assert_eq!(s.tenants[0].spec.estimator.name(), "tws");
}

#[test]
fn garbage_never_panics() {
    let texts = [
        "",
        "\u{0}",
        "duration_s = 1e400",
        "duration_s = nan\n[host]\nmemory_mb = 1",
        "duration_s = 10\n[host]\nmemory_mb = inf",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[tenants]]\n",
        "duration_s = 10\n[host]\nmemory_mb = 1\ntenants = 5",
        "duration_s = 10\n[host]\nmemory_mb = 1\ntenants = [1, 2]",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[events]]\nat_s = 1e308\nkind = \"x\"",
        "duration_s = 9223372036854775807\n[host]\nmemory_mb = 1",
        "duration_s = 10\nseed = 9223372036854775807\n[host]\nmemory_mb = 1",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[tenants]]\nname = \"\"\nmax_mb = 1\n[tenants.workload]\nkind = \"idle\"",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[tenants]]\nname = \"a\"\nmax_mb = 1\nestimator = { kind = \"tws\", epoch_s = 1e300 }\n[tenants.workload]\nkind = \"idle\"",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[tenants]]\nname = \"a\"\nmax_mb = 1\n[tenants.workload]\nkind = \"toucher\"\nphases = [{ at_s = 1e300, working_set_mb = 1e300 }]",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[variants]]\nname = \"v\"\nset = [\"variants.0.set=[]\", \"x.y.z=1\"]",
        "duration_s = 10\n[host]\nmemory_mb = 1\n[[variants]]\nname = \"v\"\nset = [\"duration_s=-1\"]",
    ];
    for text in texts {
        for overrides in [
            vec![],
            vec!["tenants.*.max_mb=1e20".to_string(), "x=".to_string()],
        ] {
            if let Err(e) = parse_str(text, Path::new("g.toml"), &overrides) {
                assert_eq!(e.to_string().lines().count(), 1, "{text:?}: {e}");
                assert!(e.to_string().starts_with("g.toml"), "{e}");
            }
        }
    }
}

fn write_tmp(name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scenario-bad-input");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const FULL: &str = r#"
name = "full-example"
description = "every table"
duration_s = 1200
seed = 7
baseline = true
convergence = { low = 0.8, high = 1.5 }

[host]
memory_mb = 512
host_swap_mb = 1024

[policy]
tax_rate = 0.5
budget_mb = 360
host_swap_mb_per_s = 16
balloon_stall_ticks = 5
thresholds = { high = 0.08, soft = 0.05, hard = 0.03, low = 0.01 }

[cost]
disk_read_us = 4000

[[tenants]]
name = "vm1"
max_mb = 256
[tenants.workload]
kind = "idle"
resident_mb = 100

[[tenants]]
name = "vm2"
min_mb = 64
max_mb = 2048
shares = 2000
overhead_mb = 40
kernel_mb = 32
guest_swap_mb = 512
initial_mb = 263.3
start_s = 60
stop_s = 600
cap_at_estimate = false
[tenants.estimator]
kind = "tws"
cool_down_s = 4
[tenants.balloon]
rate_mb_per_s = 64
limit_mb = 1900
[tenants.workload]
kind = "toucher"
phases = [{ at_s = 0, working_set_mb = 300 }]

[[events]]
at_s = 900
kind = "set_tenant"
tenant = "vm2"
min_mb = 128
[[events]]
at_s = 600
kind = "set_workload"
tenant = "vm1"
workload = { kind = "idle" }

[[variants]]
name = "committed"
set = ["tenants.*.estimator.kind=committed"]
"#;

#[test]
fn full_example_builds_with_expected_values_and_defaults() {
    let s = parse_str(FULL, Path::new("scenarios/full.toml"), &[]).unwrap();
    assert_eq!(s.name, "full-example");
    assert_eq!(s.description, "every table");
    assert_eq!(s.source, PathBuf::from("scenarios/full.toml"));
    assert_eq!(s.duration, Duration::from_secs(1200));
    assert_eq!((s.seed, s.baseline, s.convergence), (7, true, (0.8, 1.5)));
    assert_eq!(s.host.machine, Pages::from_mib(512));
    assert_eq!(s.host.host_swap, Pages::from_mib(1024));
    assert_eq!(s.host.tick, Duration::from_secs(1));
    assert_eq!(s.cost.disk_read_us, 4000.0);
    assert_eq!(s.controller.tax_rate, TaxRate::new(0.5).unwrap());
    assert_eq!(s.controller.budget, Some(Pages::from_mib(360)));
    assert_eq!(s.controller.host_swap_per_tick, Pages::from_mib(16));
    assert_eq!(s.controller.balloon_stall_ticks, 5);
    assert_eq!(s.controller.thresholds.high, 0.08);

    // vm1: all defaults.
    let a = &s.tenants[0];
    assert_eq!(a.spec.id, TenantId(0));
    assert_eq!(
        (a.spec.min, a.spec.max, a.spec.shares),
        (Pages::ZERO, Pages::from_mib(256), 1000)
    );
    assert_eq!(a.spec.overhead, Pages::from_mib(32));
    assert_eq!(
        a.spec.estimator,
        EstimatorConfig::Sampling(SamplingConfig::default())
    );
    assert!(!a.spec.cap_at_estimate, "sampling defaults to not capping");
    assert_eq!(a.vm.max, a.spec.max);
    assert_eq!(a.vm.overhead, a.spec.overhead);
    assert_eq!(a.vm.kernel, Pages::from_mib(16));
    assert_eq!(a.vm.guest_swap, Pages::from_mib(256));
    assert_eq!(
        a.vm.balloon,
        Some(BalloonConfig {
            rate_per_s: Pages::from_mib(128),
            limit: Pages::from_mib(240)
        })
    );
    assert_eq!(a.vm.initial_balloon, Pages::ZERO);
    assert_eq!(
        a.vm.sampling,
        Some(SamplingSetup {
            sample_pages: 100,
            period: Duration::from_secs(30)
        })
    );
    assert_eq!((a.start, a.stop), (Duration::ZERO, None));

    // vm2: everything given.
    let b = &s.tenants[1];
    assert_eq!(b.spec.id, TenantId(1));
    assert_eq!(
        (b.spec.min, b.spec.max, b.spec.shares),
        (Pages::from_mib(64), Pages::from_mib(2048), 2000)
    );
    assert_eq!(b.spec.overhead, Pages::from_mib(40));
    assert_eq!(
        b.spec.estimator,
        EstimatorConfig::WorkingSet(WorkingSetConfig {
            cool_down: Duration::from_secs(4),
            max_cool_down: Duration::from_secs(4),
            ..WorkingSetConfig::default()
        })
    );
    assert!(
        !b.spec.cap_at_estimate,
        "explicit false wins over the tws default"
    );
    assert_eq!(b.vm.kernel, Pages::from_mib(32));
    assert_eq!(b.vm.guest_swap, Pages::from_mib(512));
    assert_eq!(
        b.vm.balloon,
        Some(BalloonConfig {
            rate_per_s: Pages::from_mib(64),
            limit: Pages::from_mib(1900)
        })
    );
    assert_eq!(
        b.vm.initial_balloon,
        Pages::from_mib(2048) - Pages::from_mib_f64(263.3)
    );
    assert_eq!(b.vm.sampling, None);
    assert_eq!(
        (b.start, b.stop),
        (Duration::from_secs(60), Some(Duration::from_secs(600)))
    );

    // Events in time order.
    assert_eq!(s.events.len(), 2);
    assert_eq!(s.events[0].at, Duration::from_secs(600));
    assert!(matches!(
        s.events[0].event,
        Event::SetWorkload {
            tenant: TenantId(0),
            ..
        }
    ));
    assert_eq!(
        s.events[1].event,
        Event::SetTenant {
            tenant: TenantId(1),
            min: Some(Pages::from_mib(128)),
            max: None,
            shares: None
        }
    );
    assert_eq!(s.variants.len(), 1);
    assert_eq!(
        s.variants[0].overrides,
        ["tenants.*.estimator.kind=committed"]
    );
}

#[test]
fn tws_and_committed_cap_at_the_estimate_by_default() {
    let s = parse_str(
        FULL,
        Path::new("full.toml"),
        &[
            "tenants.vm1.estimator.kind=committed".into(),
            "tenants.vm2.cap_at_estimate=true".into(),
        ],
    )
    .unwrap();
    assert!(s.tenants[0].spec.cap_at_estimate);
    assert_eq!(s.tenants[0].vm.sampling, None);
}

#[test]
fn every_shipped_scenario_builds_with_each_variant() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios"));
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
    {
        let s = load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
        for v in &s.variants {
            load_variant(&path, &[], &v.name).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
