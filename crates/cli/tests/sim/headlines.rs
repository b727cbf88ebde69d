//! Every shipped scenario states its headline (`[headline]`), and `memtide sim` prints it first: the idle tax's table shows the idle VM giving memory up, and a scenario with variants compares them in index.html.

use crate::common::scenario_path;
use std::path::Path;
use std::process::Command;

/// `memtide sim FILE --out DIR`, which must succeed; its stdout.
fn sim(file: &str, out: &Path) -> String {
    let run = Command::new(env!("CARGO_BIN_EXE_memtide"))
        .arg("sim")
        .arg(scenario_path(file))
        .arg("--out")
        .arg(out)
        .output()
        .expect("memtide runs");
    assert!(
        run.status.success(),
        "{file}: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    String::from_utf8(run.stdout).expect("stdout is UTF-8")
}

#[test]
fn every_shipped_scenario_states_its_headline() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = scenario_path("");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let scenario = memtide_scenario::load(&path, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            scenario.headline.is_some(),
            "{name} states no [headline]: the result it exists to show"
        );
        seen += 1;
    }
    assert!(
        seen >= 20,
        "only {seen} scenarios found in {}",
        dir.display()
    );
}

#[test]
fn the_idle_tax_headline_comes_first_and_shows_the_idle_vm_giving_memory_up() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let out = tempfile::tempdir().unwrap();
    let stdout = sim("esx-idle-tax.toml", out.path());
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.get(1).is_some_and(|l| l.starts_with("headline: ")),
        "{stdout}"
    );
    // The table follows: a heading with the windows, then a row per tenant.
    let row = lines
        .iter()
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .find(|l| l.split_whitespace().next() == Some("idle-vm"))
        .unwrap_or_else(|| panic!("no idle-vm row in the headline's table:\n{stdout}"));
    let means: Vec<f64> = row
        .split_whitespace()
        .skip(1)
        .map(|m| {
            m.parse()
                .unwrap_or_else(|_| panic!("{m:?} is not a mean: {row}"))
        })
        .collect();
    let [before, after] = means[..] else {
        panic!("two windows, before and after the tax: {row}");
    };
    assert!(
        after < before,
        "idle-vm holds {before} MB before the tax and {after} MB after it"
    );
}

#[test]
fn a_scenario_with_variants_compares_them_in_its_index() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let out = tempfile::tempdir().unwrap();
    let stdout = sim("alb-fig1.toml", out.path());
    assert!(stdout.contains("the variants compared"), "{stdout}");
    let index = std::fs::read_to_string(out.path().join("index.html"))
        .expect("memtide sim writes index.html for a scenario with variants");
    for variant in ["configured", "os", "app"] {
        assert!(
            index.contains(variant),
            "index.html does not name {variant}"
        );
    }
    assert!(
        index.contains("configured/report.html"),
        "index.html does not link the configured variant's report"
    );
}
