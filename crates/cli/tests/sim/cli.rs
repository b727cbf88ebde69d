//! The `memtide` binary end to end: outputs of `sim`, and bad input answered with one line and exit status 2.

use std::path::PathBuf;
use std::process::Command;

fn memtide(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memtide"))
        .args(args)
        .output()
        .expect("memtide runs")
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn sim_writes_summary_timeline_and_report() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tmp("cli-outputs");
    let out = memtide(&[
        "sim",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/shares.toml"),
        "--out",
        dir.to_str().unwrap(),
        "--set",
        "duration=20s",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary.get("tenants").is_some(), "summary.json: {summary}");
    let timeline = std::fs::read_to_string(dir.join("timeline.csv")).unwrap();
    let mut lines = timeline.lines();
    assert!(lines.next().unwrap().starts_with(
        "time_s,tenant,allocated_mb,target_mb,active_estimate_mb,working_set_mb,balloon_mb,host_swapped_mb,throughput,latency_ms,state"
    ));
    assert_eq!(lines.count(), 20 * 3, "one row per tick per tenant");
    let report = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(report.contains("<svg"));
    assert!(
        !report.contains("http://") && !report.contains("https://"),
        "report must be self-contained"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("shares"));
}

/// Each case: scenario text, and words the one-line error must contain.
const BAD: &[(&str, &str, &[&str])] = &[
    ("unknown-field", "duration = \"10s\"\nbogus = 1\n[host]\nmemory = \"512M\"\n", &["unknown-field.toml:2:9: bogus = 1: unknown field `bogus`"]),
    ("wrong-type", "duration = \"10s\"\n[host]\nmemory = true\n", &["wrong-type.toml:3:10: host.memory = true", "expected a size"]),
    ("bad-size", "duration = \"10s\"\n[host]\nmemory = \"lots\"\n", &["bad-size.toml:3:10: host.memory = \"lots\"", "the size"]),
    ("bad-duration", "duration = \"10\"\n[host]\nmemory = \"512M\"\n", &["bad-duration.toml:1:12: duration = \"10\"", "no unit"]),
    (
        "negative-size",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmax = -5\n[tenants.workload]\nkind = \"idle\"\n",
        &["negative-size.toml:6:7: tenants[0].max = -5", "negative"],
    ),
    (
        "min-above-max",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmin = \"300M\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"idle\"\n",
        &["min-above-max.toml:6:7: tenants[0].min = \"300M\": must not exceed max = \"256M\""],
    ),
    ("bad-tax", "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[policy]\ntax_rate = 1.0\n", &["bad-tax.toml", "tax_rate", "1"]),
    (
        "unknown-tenant-event",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[events]]\nat = \"1s\"\nkind = \"stop_tenant\"\ntenant = \"ghost\"\n",
        &["unknown-tenant-event.toml:7:10: events[0].tenant = \"ghost\"", "no such tenant"],
    ),
    (
        "budget-below-mins",
        "duration = \"10s\"\n[host]\nmemory = \"2G\"\n[policy]\nbudget = \"100M\"\n[[tenants]]\nname = \"a\"\nmin = \"200M\"\nmax = \"256M\"\n[tenants.workload]\nkind = \"idle\"\n",
        &["budget-below-mins.toml:5:10: policy.budget = \"100M\"", "below the sum"],
    ),
    (
        "sampling-period-below-tick",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmax = \"64M\"\n[tenants.estimator]\nkind = \"sampling\"\nperiod = \"500ms\"\n[tenants.workload]\nkind = \"idle\"\n",
        &["sampling-period-below-tick.toml:9:10: tenants[0].estimator.period = \"500ms\"", "at least 1 s"],
    ),
    (
        "tws-epoch-below-tick",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmax = \"64M\"\n[tenants.estimator]\nkind = \"tws\"\nepoch = \"1ms\"\n[tenants.workload]\nkind = \"idle\"\n",
        &["tws-epoch-below-tick.toml:9:9: tenants[0].estimator.epoch = \"1ms\"", "at least 1 s"],
    ),
    (
        "no-work-per-access",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmax = \"64M\"\n[tenants.workload]\nkind = \"idle\"\ncpu_us_per_access = 0\n",
        &["no-work-per-access.toml", "cpu_us_per_access = 0", ">= 0.05"],
    ),
    (
        "every-tenant-refused",
        "duration = \"10s\"\n[host]\nmemory = \"512M\"\n[[tenants]]\nname = \"a\"\nmax = \"2G\"\n[tenants.workload]\nkind = \"idle\"\n",
        &["every tenant was refused", "a at 0 s"],
    ),
];

#[test]
fn bad_scenarios_exit_2_with_one_line_naming_file_field_and_value() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tmp("cli-bad");
    for (name, text, words) in BAD {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let out_dir = dir.join(format!("{name}-out"));
        let out = memtide(&[
            "sim",
            path.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{name}: not one line: {stderr}"
        );
        for w in *words {
            assert!(stderr.contains(w), "{name}: {stderr:?} lacks {w:?}");
        }
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
        assert!(!out_dir.exists(), "{name}: wrote outputs despite the error");
    }
}

#[test]
fn bad_arguments_overrides_and_missing_files_exit_2_with_one_line() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let shares = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/shares.toml");
    let under_file = format!("{shares}/out");
    for args in [
        vec!["sim", shares, "--set", "tenants.nobody.max=5M"],
        vec!["sim", shares, "--set", "duration=60"],
        vec!["sim", shares, "--set", "policy.tax_rate=-1"],
        vec!["sim", "/nonexistent/scenario.toml"],
        vec!["sim", shares, "--variant", "nope"],
        vec!["sim", shares, "--seed", "abc"],
        vec!["sim", shares, "--seed", "-1"],
        vec!["sim", shares, "--out", ""],
        // An output path that is a file, or lies under one: found before the run.
        vec!["sim", shares, "--out", shares],
        vec!["sim", shares, "--out", &under_file],
        vec!["bench", "--bogus"],
        // The density benchmark's set-up: a file that is not there, or not one.
        vec!["bench", "density", "--config", "/nonexistent/density.toml"],
        vec!["bench", "density", "--config", shares],
    ] {
        let out = memtide(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("memtide: "), "{args:?}: {stderr}");
    }
}

/// The peak memory `memtide sim` measured (VmHWM) and the one it predicted, in MiB, from the
/// line it ends its stderr with.
fn peaks(stderr: &str) -> (f64, f64) {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("memtide: peak memory "))
        .unwrap_or_else(|| panic!("no peak line in: {stderr}"));
    let mib = |s: &str| s.trim().trim_end_matches(" MiB").parse::<f64>().unwrap();
    let (measured, predicted) = line
        .strip_suffix(')')
        .and_then(|l| l.split_once(" (predicted at most "))
        .unwrap_or_else(|| panic!("peak line: {line}"));
    (mib(measured), mib(predicted))
}

#[test]
fn sim_predicts_its_peak_memory_within_two_and_a_half_times_the_measured() {
    let _gate = memtide_testkit::file_gate(module_path!());
    // Few small tenants (the process's own memory), 16 of 1 GB, 1,000 of 32 MB.
    for (file, duration) in [
        ("overcommit-states.toml", "2m"),
        ("bench-16vm-1h.toml", "2m"),
        ("churn-1000.toml", "90s"),
    ] {
        let dir = tmp(&format!("cli-peak-{file}"));
        let path = format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
        let set = format!("duration={duration}");
        let out = memtide(&["sim", &path, "--out", dir.to_str().unwrap(), "--set", &set]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{file}: {stderr}");
        let (measured, predicted) = peaks(&stderr);
        // A bound, not a guess: never below the peak, at most 2.5 times it.
        let ratio = predicted / measured;
        assert!(
            (1.0..=2.5).contains(&ratio),
            "{file}: predicted {predicted} MiB, measured {measured} MiB"
        );
    }
}

#[test]
fn sim_refuses_a_run_predicted_over_max_memory_before_it_starts() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tmp("cli-over-limit");
    let out_dir = dir.join("out");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/density-2000.toml"
    );
    // 2,500 servers of about 110 MB: a run of every variant would take many minutes and
    // about a GiB; it is refused before the first starts, and nothing is written.
    let out = memtide(&[
        "sim",
        path,
        "--set",
        "density.tenants=2500",
        "--max-memory",
        "512M",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for words in [
        "scenario density-2000: predicted peak memory ",
        "exceeds --max-memory 512.0 MiB (2500 tenants",
        "--max-memory none",
    ] {
        assert!(stderr.contains(words), "{words:?} not in {stderr}");
    }
    assert!(!out_dir.exists(), "outputs written for a refused run");
    // A limit that is not a size is refused in one line too.
    let bad = memtide(&["sim", path, "--max-memory", "lots"]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("'--max-memory <SIZE>'"), "{stderr}");
}
