//! Every kind of bad scenario is answered with one line naming the file, the field and the value, never a panic; and a full example builds with the expected values and defaults.

use memtide_model::{EstimatorConfig, Pages, SamplingConfig, TaxRate, TenantId, WorkingSetConfig};
use memtide_scenario::{load, load_variant, parse_str, Event, ScenarioError};
use memtide_sim::config::{BalloonConfig, SamplingSetup};
use std::path::{Path, PathBuf};
use std::time::Duration;

const HEAD: &str = "duration = \"100s\"\n[host]\nmemory = \"1G\"\n";

fn tenant(name: &str, extra: &str) -> String {
    format!("[[tenants]]\nname = \"{name}\"\nmax = \"256M\"\n{extra}\n[tenants.workload]\nkind = \"idle\"\n")
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
            format!("{HEAD}{}", tenant("a", "min = \"300M\"")),
            vec![],
            vec!["x.toml:7:7: tenants[0].min = \"300M\": must not exceed max = \"256M\""],
        ),
        (
            "unknown field",
            format!("{HEAD}{}", tenant("a", "bogus = 1")),
            vec![],
            vec!["x.toml:7:9: tenants[0].bogus = 1: unknown field `bogus`"],
        ),
        (
            "a container with a balloon",
            format!(
                "{HEAD}{}[tenants.balloon]\nrate_per_s = \"1M\"\n",
                tenant("a", "kind = \"container\"")
            ),
            vec![],
            vec!["x.toml:", "tenants[0].balloon", "a container has no balloon driver"],
        ),
        (
            "an unknown kind of tenant",
            format!("{HEAD}{}", tenant("a", "kind = \"pod\"")),
            vec![],
            vec!["x.toml:7:8: tenants[0].kind = \"pod\": unknown variant `pod`, expected `vm` or `container`"],
        ),
        (
            "unknown top-level field",
            format!("bogus = 1\n{HEAD}"),
            vec![],
            vec!["x.toml:1:9: bogus = 1: unknown field `bogus`"],
        ),
        ("tax rate of one or more", format!("{HEAD}[policy]\ntax_rate = 1.2\n"), vec![], vec!["policy.tax_rate = 1.2", "[0, 1)"]),
        (
            "zero size",
            format!("{HEAD}{}", tenant("a", "").replace("max = \"256M\"", "max = 0")),
            vec![],
            vec!["tenants[0].max = 0", "must be > 0"],
        ),
        (
            "negative size",
            format!("{HEAD}{}", tenant("a", "").replace("max = \"256M\"", "max = -5")),
            vec![],
            vec!["tenants[0].max = -5", "negative"],
        ),
        (
            "event names no tenant",
            format!("{two}[[events]]\nat = \"5s\"\nkind = \"stop_tenant\"\ntenant = \"nope\"\n"),
            vec![],
            vec!["events[0].tenant = \"nope\"", "no such tenant"],
        ),
        (
            "budget below the mins",
            format!("{HEAD}[policy]\nbudget = \"100M\"\n{}{}", tenant("a", "min = \"200M\""), tenant("b", "min = \"100M\"")),
            vec![],
            vec!["x.toml:5:10: policy.budget = \"100M\"", "below the sum of the tenants' min (\"300M\")"],
        ),
        (
            "wrong type",
            format!("{HEAD}{}", tenant("a", "").replace("max = \"256M\"", "max = true")),
            vec![],
            vec!["tenants[0].max = true", "expected a size"],
        ),
        (
            "wrong type in the host table",
            "duration = \"10s\"\n[host]\nmemory = [1]\n".to_string(),
            vec![],
            vec!["x.toml:3:10: host.memory = [1]", "expected a size"],
        ),
        (
            "bad size",
            "duration = \"10s\"\n[host]\nmemory = \"lots\"\n".to_string(),
            vec![],
            vec!["x.toml:3:10: host.memory = \"lots\": the size does not start with a number"],
        ),
        (
            "size in decimal units",
            "duration = \"10s\"\n[host]\nmemory = \"512MB\"\n".to_string(),
            vec![],
            vec!["host.memory = \"512MB\"", "ambiguous"],
        ),
        (
            "duration without a unit",
            "duration = 10\n[host]\nmemory = \"1G\"\n".to_string(),
            vec![],
            vec!["x.toml:1:12: duration = 10: invalid type: integer `10`, expected a duration"],
        ),
        (
            "bad duration",
            "duration = \"10 days\"\n[host]\nmemory = \"1G\"\n".to_string(),
            vec![],
            vec!["duration = \"10 days\"", "the duration has an unknown unit \"days\""],
        ),
        (
            "duration off the tick",
            "duration = \"1.5s\"\n[host]\nmemory = \"1G\"\n".to_string(),
            vec![],
            vec!["duration = \"1.5s\"", "whole number of seconds"],
        ),
        (
            "duplicate tenant names",
            format!("{HEAD}{}{}", tenant("a", ""), tenant("a", "")),
            vec![],
            vec!["tenants[1].name = \"a\"", "duplicate"],
        ),
        (
            "stop before start",
            format!("{HEAD}{}", tenant("a", "start = \"20s\"\nstop = \"20s\"")),
            vec![],
            vec!["tenants[0].stop = \"20s\"", "after start = \"20s\""],
        ),
        (
            "start after the end",
            format!("{HEAD}{}", tenant("a", "start = \"100s\"")),
            vec![],
            vec!["tenants[0].start = \"100s\"", "before the end of the run (duration = \"100s\")"],
        ),
        (
            "event after the end",
            format!("{HEAD}[[events]]\nat = \"100s\"\nkind = \"set_tax_rate\"\ntax_rate = 0.5\n"),
            vec![],
            vec!["x.toml:5:6: events[0].at = \"100s\"", "before the end of the run"],
        ),
        (
            "event without a time",
            format!("{HEAD}[[events]]\nkind = \"set_tax_rate\"\ntax_rate = 0.5\n"),
            vec![],
            vec!["x.toml:4:1: events[0]: missing field `at`"],
        ),
        (
            "missing duration",
            "[host]\nmemory = \"1G\"\n".to_string(),
            vec![],
            vec!["missing field `duration`"],
        ),
        (
            "zero duration",
            "duration = \"0s\"\n[host]\nmemory = \"1G\"\n".to_string(),
            vec![],
            vec!["duration = \"0s\"", "must be > 0"],
        ),
        (
            "estimator field of another kind",
            format!("{HEAD}{}", tenant("a", "[tenants.estimator]\nkind = \"sampling\"\nfast_step = 0.1")),
            vec![],
            vec!["tenants[0].estimator.fast_step = 0.1", "unknown field `fast_step`"],
        ),
        (
            "bad workload parameter",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"toucher\"\nphases = [{{ at = \"0s\", working_set = \"-5M\" }}]\n"),
            vec![],
            vec!["x.toml:9:", "tenants[0].workload.phases[0].working_set = \"-5M\""],
        ),
        (
            "toucher phases out of order",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"toucher\"\nphases = [{{ at = \"5s\", working_set = \"5M\" }}, {{ at = \"5s\", working_set = \"6M\" }}]\n"),
            vec![],
            vec!["tenants[0].workload.phases[1].at = \"5s\"", "after phases[0].at = \"5s\""],
        ),
        (
            "wrong workload field type",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"idle\"\nresident = \"x\"\n"),
            vec![],
            vec!["x.toml:9:12: tenants[0].workload.resident = \"x\""],
        ),
        (
            "unknown workload field",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"idle\"\nresident_mb = 5\n"),
            vec![],
            vec!["tenants[0].workload.resident_mb = 5", "unknown field `resident_mb`"],
        ),
        (
            "unknown workload kind",
            format!("{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"nope\"\n"),
            vec![],
            vec!["tenants[0].workload.kind = \"nope\"", "unknown workload kind"],
        ),
        (
            "initial memory without a balloon driver",
            format!("{HEAD}{}", tenant("a", "initial = \"100M\"\n[tenants.balloon]\nenabled = false")),
            vec![],
            vec!["tenants[0].initial = \"100M\"", "balloon driver"],
        ),
        (
            "initial memory above max",
            format!("{HEAD}{}", tenant("a", "initial = \"300M\"")),
            vec![],
            vec!["tenants[0].initial = \"300M\"", "[kernel, max] = [\"16M\", \"256M\"]"],
        ),
        (
            "the default kernel above max",
            format!("{HEAD}{}", tenant("a", "").replace("max = \"256M\"", "max = \"8M\"")),
            vec![],
            vec!["tenants[0].kernel = \"16M\"", "the default; set kernel lower"],
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
            vec!["tenants.vm9.max=5M"],
            vec!["--set tenants.vm9.max=5M", "no element of tenants is named vm9"],
        ),
        (
            "bad override value",
            two.clone(),
            vec!["policy.tax_rate=-1"],
            vec!["scenarios/x.toml: policy.tax_rate = -1", "[0, 1)"],
        ),
        (
            "bad override size",
            two.clone(),
            vec!["tenants.a.max=lots"],
            vec!["scenarios/x.toml: tenants[0].max = \"lots\": the size"],
        ),
        (
            "override without a value",
            two.clone(),
            vec!["seed"],
            vec!["--set seed", "KEY=VALUE"],
        ),
        (
            "set_tenant above the configured max",
            format!("{two}[[events]]\nat = \"5s\"\nkind = \"set_tenant\"\ntenant = \"a\"\nmax = \"512M\"\n"),
            vec![],
            vec!["events[0].max = \"512M\"", "configured max = \"256M\""],
        ),
        (
            "set_tenant without a change",
            format!("{two}[[events]]\nat = \"5s\"\nkind = \"set_tenant\"\ntenant = \"a\"\n"),
            vec![],
            vec!["events[0]", "at least one of min, max, shares"],
        ),
        (
            "event field of another kind",
            format!("{two}[[events]]\nat = \"5s\"\nkind = \"set_tax_rate\"\ntax_rate = 0.5\ntenant = \"a\"\n"),
            vec![],
            vec!["events[0].tenant = \"a\"", "unknown field `tenant`"],
        ),
        (
            "duplicate variant",
            format!("{two}[[variants]]\nname = \"v\"\n[[variants]]\nname = \"v\"\n"),
            vec![],
            vec!["variants[1].name = \"v\"", "duplicate"],
        ),
        (
            "variant name with a space",
            format!("{two}[[variants]]\nname = \"a b\"\n"),
            vec![],
            vec!["variants[0].name = \"a b\"", "letters, digits"],
        ),
        (
            "zero shares",
            format!("{HEAD}{}", tenant("a", "shares = 0")),
            vec![],
            vec!["tenants[0].shares = 0", ">= 1"],
        ),
        (
            "huge memory",
            "duration = \"10s\"\n[host]\nmemory = \"2T\"\n".to_string(),
            vec![],
            vec!["host.memory = \"2T\"", "1 TiB"],
        ),
        (
            "negative cost",
            format!("{HEAD}[cost]\ndisk_read_us = -1\n"),
            vec![],
            vec!["cost.disk_read_us = -1", "finite number >= 0"],
        ),
        (
            "syntax error",
            format!("{HEAD}[[tenants]\n"),
            vec![],
            vec!["x.toml:4:", "invalid TOML"],
        ),
        (
            "table expected",
            "duration = \"10s\"\nhost = 5\n".to_string(),
            vec![],
            vec!["host = 5", "expected the [host] table"],
        ),
        (
            "negative seed",
            format!("seed = -1\n{HEAD}"),
            vec![],
            vec!["seed = -1"],
        ),
        (
            "an agent that behaves in no known way",
            format!("{HEAD}{}", cache("[tenants.workload.agent]\nbehaviour = \"sulk\"\n")),
            vec![],
            vec![
                "tenants[0].workload.agent.behaviour = \"sulk\"",
                "expected one of `comply`, `refuse`, `stuck`, `dishonest`",
            ],
        ),
        (
            "a run longer than the longest",
            format!("{HEAD}{}", tenant("a", "")).replace("duration = \"100s\"", "duration = \"2000h\""),
            vec![],
            vec!["x.toml:1:12: duration = \"2000h\": must be at most \"1000h\""],
        ),
        (
            "a size in exponent form that is no whole number of bytes",
            format!("{HEAD}{}", tenant("a", "").replace("max = \"256M\"", "max = \"1e-9M\"")),
            vec![],
            vec!["tenants[0].max = \"1e-9M\": the size is not a whole number of bytes"],
        ),
        (
            "a key of the old format",
            "duration_s = 600\n[host]\nmemory = \"1G\"\n".to_string(),
            vec![],
            vec!["x.toml:1:14: duration_s = 600: unknown field `duration_s`", "; `duration_s` is now `duration`, its unit in the value: `duration = \"600s\"`"],
        ),
        (
            "a size key of the old format",
            format!("{HEAD}{}", tenant("a", "min_mb = 64")),
            vec![],
            vec!["tenants[0].min_mb = 64: unknown field `min_mb`", "`min_mb` is now `min`, its unit in the value: `min = \"64M\"`"],
        ),
        (
            "keys of the old format all over the file",
            "duration_s = 600\n[host]\nmemory_gb = 1\n[[tenants]]\nname = \"a\"\nmax_mb = 256\n[tenants.workload]\nkind = \"idle\"\nresident_mb = 100\n[[events]]\nat_s = 5\nkind = \"set_tax_rate\"\nrate = 0.5\n".to_string(),
            vec![],
            vec![
                "x.toml:1:14: duration_s = 600: unknown field `duration_s`",
                "; 4 more keys of the old format: `host.memory_gb` (3:13) is now `memory = \"1G\"`, `tenants[0].max_mb` (6:10) is now `max = \"256M\"`, `tenants[0].workload.resident_mb` (9:15) is now `resident = \"100M\"`, `events[0].at_s` (11:8) is now `at = \"5s\"`",
            ],
        ),
        (
            "a scan rate beyond the fastest scanner",
            format!("{HEAD}[sharing]\npressed_rate = 1000000000000\n{}", tenant("a", "")),
            vec![],
            vec!["sharing.pressed_rate = 1000000000000: must be at most 10000000 pages a second"],
        ),
        (
            "a disk faster than any",
            format!("{HEAD}[disk]\ntransfer_mb_s = 1e300\n{}", tenant("a", "")),
            vec![],
            vec!["disk.transfer_mb_s = 1e300: must be > 0 and at most 100000"],
        ),
        (
            "a command shorter than an event is worth",
            format!("{HEAD}[disk]\ncommand_us = 1e-300\n{}", tenant("a", "")),
            vec![],
            vec!["disk.command_us = 1e-300: must be at least 10 (µs; every request is an event)"],
        ),
        (
            "a device queue deeper than the scheduler orders",
            format!("{HEAD}[disk]\nqueue_depth = 4294967295\n{}", tenant("a", "")),
            vec![],
            vec!["disk.queue_depth = 4294967295: must be from 1 to 1024"],
        ),
        (
            "no tenant at all",
            HEAD.to_string(),
            vec![],
            vec!["x.toml: tenants: a scenario needs at least one tenant"],
        ),
        (
            "a billion n-tier users",
            format!("{HEAD}[disk]\n{}[tenants.disk]\nkind = \"ntier\"\nusers = 1000000000\nreads_per_request = 1.8\n", tenant("a", "")),
            vec![],
            vec!["tenants[0].disk.users = 1000000000: must be at most 100000"],
        ),
        (
            "n-tier growth past the users bound",
            format!("{HEAD}[disk]\n{}[tenants.disk]\nkind = \"ntier\"\nusers = 10\ngrowth = {{ add = 10, every = \"1s\", until = 200000 }}\nreads_per_request = 1.8\n", tenant("a", "")),
            vec![],
            vec!["tenants[0].disk.growth.until = 200000: must be at most 100000"],
        ),
        (
            "ten thousand fsync threads",
            format!("{HEAD}[disk]\n{}[tenants.disk]\nkind = \"fsync\"\nthreads = 10000\nwrite = \"8K\"\n", tenant("a", "")),
            vec![],
            vec!["tenants[0].disk.threads = 10000: must be from 1 to 64"],
        ),
        (
            "a database with no pool, in the file's words",
            format!(
                "{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"database\"\ndata = \"64M\"\npool = \"0\"\n"
            ),
            vec![],
            vec!["x.toml:10:8: tenants[0].workload.pool = \"0\": is 0 MB; must be > 0"],
        ),
        (
            "a cache whose min pool is above its pool",
            format!("{HEAD}{}", cache("min_pool = \"300M\"\n")),
            vec![],
            vec!["tenants[0].workload.min_pool = \"300M\": is 300 MB; must be <= pool = 100 MB"],
        ),
        (
            "a database's jobs out of order",
            format!(
                "{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"database\"\ndata = \"64M\"\npool = \"32M\"\njobs = [{{ at = \"10s\", ops = 5 }}, {{ at = \"5s\", ops = 5 }}]\n"
            ),
            vec![],
            vec!["tenants[0].workload.jobs[1].at", "is 5 s; must be > jobs[0].at = 10 s"],
        ),
        (
            "a jvm whose live data is more than its old generation",
            format!(
                "{HEAD}[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"jvm\"\nheap = \"128M\"\nold = \"32M\"\nlive = \"64M\"\nsurvivors = \"8M\"\nmin_eden = \"8M\"\nyoung_live = \"4M\"\n"
            ),
            vec![],
            vec!["tenants[0].workload.live = \"64M\": is 64 MB; must be <= old = 32 MB"],
        ),
        (
            "an agent granule under a page",
            format!("{HEAD}{}", cache("[tenants.workload.agent]\ngranule = \"1K\"\n")),
            vec![],
            vec!["tenants[0].workload.agent.granule = \"1K\"", "at least a page"],
        ),
    ]
}

/// A tenant running a cache of 200 MiB of items in a 100 MiB pool, with `extra` lines in its
/// workload table.
fn cache(extra: &str) -> String {
    format!(
        "[[tenants]]\nname = \"a\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"cache\"\nitems = \"200M\"\npool = \"100M\"\n{extra}"
    )
}

#[test]
fn a_cache_with_its_agent_builds_with_the_agents_defaults() {
    let text = format!(
        "{HEAD}{}",
        cache("[tenants.workload.agent]\nsilent_from = \"30s\"\n")
    );
    let s = parse_str(&text, Path::new("x.toml"), &[]).unwrap();
    let agent = s.tenants[0].vm.workload.agent().cloned().unwrap();
    assert_eq!(agent.behaviour, memtide_sim::app::Behaviour::Comply);
    assert_eq!(agent.silent_from, Some(Duration::from_secs(30)));
    assert_eq!(agent.granule, Pages::from_mib(1));
    // Disabled, the cache runs without it.
    let off = parse_str(
        &text,
        Path::new("x.toml"),
        &["tenants.a.workload.agent.enabled=false".to_string()],
    )
    .unwrap();
    assert!(off.tenants[0].vm.workload.agent().is_none());
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
        "duration = 1e400",
        "duration = nan\n[host]\nmemory = \"1M\"",
        "duration = \"10s\"\n[host]\nmemory = inf",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[tenants]]\n",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\ntenants = 5",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\ntenants = [1, 2]",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[events]]\nat = \"1e308s\"\nkind = \"x\"",
        "duration = \"9223372036854775807s\"\n[host]\nmemory = \"1M\"",
        "duration = \"10s\"\nseed = 9223372036854775807\n[host]\nmemory = \"1M\"",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[tenants]]\nname = \"\"\nmax = \"1M\"\n[tenants.workload]\nkind = \"idle\"",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[tenants]]\nname = \"a\"\nmax = \"1M\"\nestimator = { kind = \"tws\", epoch = \"99999999999h\" }\n[tenants.workload]\nkind = \"idle\"",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[tenants]]\nname = \"a\"\nmax = \"1M\"\n[tenants.workload]\nkind = \"toucher\"\nphases = [{ at = \"99999999999h\", working_set = \"99999999999T\" }]",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[tenants]]\nname = \"a\"\nmax = \"16T\"\nmin = \"17T\"\n[tenants.workload]\nkind = \"idle\"",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[variants]]\nname = \"v\"\nset = [\"variants.0.set=[]\", \"x.y.z=1\"]",
        "duration = \"10s\"\n[host]\nmemory = \"1M\"\n[[variants]]\nname = \"v\"\nset = [\"duration=-1\"]",
    ];
    for text in texts {
        for overrides in [
            vec![],
            vec!["tenants.*.max=99999999T".to_string(), "x=".to_string()],
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
duration = "20m"
seed = 7
baseline = true
convergence = { low = 0.8, high = 1.5 }

[host]
memory = "512M"
host_swap = "1G"

[policy]
tax_rate = 0.5
budget = "360M"
host_swap_per_s = "16M"
balloon_stall_ticks = 5
thresholds = { high = 0.08, soft = 0.05, hard = 0.03, low = 0.01 }

[cost]
disk_read_us = 4000

[[tenants]]
name = "vm1"
max = "256M"
[tenants.workload]
kind = "idle"
resident = "100M"

[[tenants]]
name = "vm2"
min = "64M"
max = "2G"
shares = 2000
overhead = "40M"
kernel = "32M"
guest_swap = "512M"
initial = "269620K"
start = "1m"
stop = "10m"
cap_at_estimate = false
[tenants.estimator]
kind = "tws"
cool_down = "4s"
[tenants.balloon]
rate_per_s = "64M"
limit = "1900M"
[tenants.workload]
kind = "toucher"
phases = [{ at = "0s", working_set = "300M" }]

[[events]]
at = "15m"
kind = "set_tenant"
tenant = "vm2"
min = "128M"
[[events]]
at = "10m"
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
            starts_after: Duration::ZERO,
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
            starts_after: Duration::ZERO,
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

#[test]
fn a_run_shortened_by_set_keeps_late_tenants_idle_and_drops_late_events_with_a_note() {
    let text = format!(
        "{HEAD}{}{}[[events]]\nat = \"80s\"\nkind = \"set_tax_rate\"\ntax_rate = 0.5\n",
        tenant("a", ""),
        tenant("b", "start = \"60s\"")
    );
    let s = parse_str(&text, Path::new("x.toml"), &["duration=50s".to_string()]).unwrap();
    assert_eq!(s.duration, Duration::from_secs(50));
    assert_eq!(s.tenants.len(), 2, "tenant ids stay those of the file");
    assert!(s.events.is_empty());
    assert_eq!(
        s.notes,
        vec![
            "duration = \"50s\" (set): 1 tenant(s) start after the end and do not run: b",
            "duration = \"50s\" (set): 1 event(s) after the end are dropped",
        ]
    );
    // Written in the file, the same start is a mistake.
    let e = parse_str(
        &text.replace("\"100s\"", "\"50s\""),
        Path::new("x.toml"),
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("tenants[1].start = \"60s\": must be before the end of the run"),
        "{e}"
    );
}
