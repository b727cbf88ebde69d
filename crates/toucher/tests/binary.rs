//! Runs the built memtide-toucher: a two-phase run reports JSON lines, reaches the second phase
//! with the memory resident and exits 0; bad arguments exit 2 with one line; SIGTERM exits 0.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

fn toucher() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memtide-toucher"))
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "memtide-toucher-test-{}-{name}",
        std::process::id()
    ))
}

#[test]
fn two_phases_report_json_reach_the_second_phase_and_exit_zero() {
    let file = temp_path("cache");
    let status = temp_path("status.json");
    let _ = std::fs::remove_file(&file);
    let output = toucher()
        .args(["--active", "8M", "--idle", "4M", "--file"])
        .arg(&file)
        .args(["--file-size", "2M", "--report-every-ms", "100"])
        .args(["--phase", "300ms:active=8M,idle=4M"])
        .args(["--phase", "300ms:active=2M,idle=10M"])
        .arg("--exit-after-phases")
        .arg("--status-file")
        .arg(&status)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "status {:?}, stderr: {stderr}",
        output.status
    );
    assert!(stderr.is_empty(), "stderr: {stderr}");

    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() >= 4, "too few lines:\n{stdout}");
    for line in &lines {
        for field in [
            "t_s",
            "phase",
            "passes",
            "pass_ms_last",
            "pass_ms_mean",
            "active_bytes",
            "idle_bytes",
            "file_bytes",
            "rss_bytes",
        ] {
            assert!(line.get(field).is_some(), "{field} missing: {line}");
        }
    }
    let last = lines.last().unwrap();
    assert_eq!(last["phase"], 1, "{stdout}");
    assert_eq!(last["active_bytes"], 2 * MIB);
    assert_eq!(last["idle_bytes"], 10 * MIB);
    assert_eq!(last["file_bytes"], 2 * MIB);
    assert!(last["passes"].as_u64().unwrap() >= 2, "{stdout}");
    assert!(last["pass_ms_mean"].as_f64().is_some(), "{stdout}");
    let rss_max = lines
        .iter()
        .filter_map(|l| l["rss_bytes"].as_u64())
        .max()
        .unwrap();
    assert!(rss_max >= 12 * MIB, "rss {rss_max} below 12 MiB:\n{stdout}");

    assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 * MIB);
    let latest: Value = serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!(&latest, last, "the status file holds the last line");
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&status);
}

#[test]
fn a_bad_argument_exits_2_with_one_line_naming_it() {
    for (args, words) in [
        (vec!["--active", "12X"], vec!["--active", "'12X'"]),
        (vec!["--phase", "30s:hot=1M"], vec!["'30s:hot=1M'", "'hot'"]),
        (vec!["--bogus"], vec!["'--bogus'"]),
    ] {
        let output = toucher().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("memtide-toucher: "), "{stderr}");
        for w in words {
            assert!(stderr.contains(w), "{args:?}: {stderr} lacks {w}");
        }
    }
}

#[test]
fn sigterm_ends_an_endless_run_with_status_zero() {
    let mut child = toucher()
        .args([
            "--active",
            "4M",
            "--pause-ms",
            "5000",
            "--report-every-ms",
            "50",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Wait until a pass is done, so the signal lands in the long pause.
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "toucher ended early"
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["passes"].as_u64().unwrap() >= 1 {
            break;
        }
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child, which has not been waited for yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "took {:?}",
        sent.elapsed()
    );
}

#[test]
fn help_prints_usage_and_exits_zero() {
    let output = toucher().arg("--help").output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8(output.stdout)
        .unwrap()
        .starts_with("usage: memtide-toucher"));
}
