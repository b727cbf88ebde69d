//! `scripts/zram-swap.sh` as two runs use it: each `up` records a device of its own, `down` alone refuses while two are recorded and names them, a named `down` takes only its own device, and `--help` says where the records are and how to move them.

use memtide_testkit::{file_gate, linux, repo, skip_or_fail};
use std::path::Path;
use std::process::{Command, Output};

/// The script with its records in `dir`.
fn script(dir: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(repo().join("scripts/zram-swap.sh"))
        .args(args)
        .env("MEMTIDE_ZRAM_DIR", dir)
        .env_remove("MEMTIDE_ZRAM_STATE")
        .output()
        .expect("bash runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether `dev` (/dev/zramN) is an active swap device.
fn swapping(dev: &str) -> bool {
    std::fs::read_to_string("/proc/swaps")
        .unwrap()
        .lines()
        .skip(1)
        .any(|l| l.split_whitespace().next() == Some(dev))
}

/// Takes down every device still recorded in its directory, however the test ends.
struct Recorded<'a>(&'a Path);

impl Drop for Recorded<'_> {
    fn drop(&mut self) {
        for entry in std::fs::read_dir(self.0).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let _ = script(self.0, &["down", &name]);
        }
    }
}

#[test]
fn two_runs_get_a_device_each_and_down_takes_only_the_one_named() {
    let test = "two_runs_get_a_device_each_and_down_takes_only_the_one_named";
    let _gate = file_gate(module_path!());
    let Some(_linux) = linux(test) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path();
    let _cleanup = Recorded(records);
    let up = || {
        let out = script(records, &["up", "16M"]);
        if !out.status.success() {
            skip_or_fail(
                test,
                &format!("scripts/zram-swap.sh up failed: {}", stderr(&out).trim()),
            );
            return None;
        }
        Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
    };
    let (Some(a), Some(b)) = (up(), up()) else {
        return;
    };
    assert_ne!(a, b, "a second run gets a device of its own");
    assert!(swapping(&a) && swapping(&b), "{a} and {b} both swap");

    let out = script(records, &["down"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let (name_a, name_b) = (&a["/dev/".len()..], &b["/dev/".len()..]);
    assert!(
        stderr(&out).contains(name_a) && stderr(&out).contains(name_b),
        "the refusal names both: {}",
        stderr(&out)
    );
    assert!(swapping(&a) && swapping(&b), "a refused down takes nothing");

    let out = script(records, &["down", &a]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!swapping(&a), "{a} is down");
    assert!(swapping(&b), "the other run's {b} still swaps");
    let out = script(records, &["down", name_a]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a device no longer recorded is refused: {}",
        stderr(&out)
    );

    let out = script(records, &["down"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!swapping(&b), "{b} is down");
    assert_eq!(
        std::fs::read_dir(records).unwrap().count(),
        0,
        "no record left"
    );
}

#[test]
fn help_names_the_records_and_how_to_move_them() {
    let _gate = file_gate(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let out = script(dir.path(), &["--help"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let help = String::from_utf8(out.stdout).unwrap();
    for says in [
        "--state FILE",
        "MEMTIDE_ZRAM_STATE",
        "MEMTIDE_ZRAM_DIR",
        dir.path().to_str().unwrap(),
    ] {
        assert!(help.contains(says), "--help says {says}: {help}");
    }
    let out = script(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("zram-swap.sh: usage: zram-swap.sh [--state FILE] up"),
        "{}",
        stderr(&out)
    );
}
