//! The same scenario and seed give byte-identical outputs; another seed gives different ones.

use std::path::{Path, PathBuf};
use std::process::Command;

fn memtide(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_memtide"))
        .args(args)
        .output()
        .expect("memtide runs")
}

fn scenario(file: &str) -> String {
    format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"))
}

fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn read_all(dir: &Path) -> Vec<(String, Vec<u8>)> {
    ["summary.json", "timeline.csv", "report.html"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(dir.join(f)).expect(f)))
        .collect()
}

fn sim(dir: &Path, seed: &str) {
    let out = memtide(&[
        "sim",
        &scenario("overcommit-states.toml"),
        "--out",
        dir.to_str().unwrap(),
        "--seed",
        seed,
        "--set",
        "duration=2m",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn same_scenario_and_seed_give_identical_bytes() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let (a, b) = (out_dir("det-a"), out_dir("det-b"));
    sim(&a, "7");
    sim(&b, "7");
    for ((name, x), (_, y)) in read_all(&a).into_iter().zip(read_all(&b)) {
        assert!(x == y, "{name} differs between two runs with seed 7");
    }
}

#[test]
fn another_seed_gives_another_timeline() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let (a, b) = (out_dir("seed-a"), out_dir("seed-b"));
    sim(&a, "7");
    sim(&b, "8");
    let t = |d: &Path| std::fs::read(d.join("timeline.csv")).unwrap();
    assert_ne!(t(&a), t(&b));
}
