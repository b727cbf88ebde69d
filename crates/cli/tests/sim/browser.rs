//! report.html in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run` installs) opens the report of a shipped scenario without a console message, lays out every chart the run calls for, and paints a page that is not blank. Without chromium the test says why and skips; under `MEMTIDE_REQUIRE_LINUX=1` or `CI` (where it is installed) it fails instead.

use memtide_testkit::browser::{chromium, dump_and_shoot, ink, run_with_limit};
use memtide_testkit::skip_or_fail;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn scenario(file: &str) -> String {
    format!("{}/../../scenarios/{file}", env!("CARGO_MANIFEST_DIR"))
}

/// The charts the report of a run must have, counted from its summary.json: the host's
/// three (state band, free memory, memory of all tenants), one with the tenants compared when
/// two to four of them ran, and for each of the first 32 tenants its memory chart and, when it
/// ran, its throughput chart.
fn expected_charts(summary: &serde_json::Value) -> usize {
    let tenants = summary["tenants"]
        .as_array()
        .expect("tenants in summary.json");
    let charted = &tenants[..tenants.len().min(32)];
    let ran = charted.iter().filter(|t| t["ran"] == true).count();
    3 + usize::from((2..=4).contains(&ran)) + charted.len() + ran
}

#[test]
fn a_report_opens_in_headless_chromium_with_every_chart_and_no_console_message() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let test = "a_report_opens_in_headless_chromium_with_every_chart_and_no_console_message";
    let Some(chromium) = chromium() else {
        skip_or_fail(test, "no chromium on the PATH (apt-get install chromium)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let sim = Command::new(env!("CARGO_BIN_EXE_memtide"))
        .args(["sim", &scenario("esx-idle-tax.toml"), "--out"])
        .arg(&out)
        .output()
        .expect("memtide runs");
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let expected = expected_charts(&summary);
    assert_eq!(expected, 3 + 1 + 2 * 2, "the idle-tax run: both VMs ran");

    let shot = tmp.path().join("report.png");
    let mut command = dump_and_shoot(&chromium, &tmp.path().join("profile"), (1200, 1600), &shot);
    command.arg(format!("file://{}", out.join("report.html").display()));
    let browser = run_with_limit(command, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&browser.stderr);
    assert!(browser.status.success(), "chromium failed: {stderr}");

    // The page has no scripts: any console message (a script error, a resource refused) is
    // a fault of the report.
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");

    // The DOM as the browser built it: every chart laid out, the page whole.
    let dom = String::from_utf8_lossy(&browser.stdout);
    assert!(dom.trim_end().ends_with("</html>"), "DOM cut short");
    assert_eq!(
        dom.matches("<svg class=\"chart\"").count(),
        expected,
        "charts in the DOM"
    );
    for heading in ["Memory of all tenants", "Compared", "idle-vm", "dbench-vm"] {
        assert!(dom.contains(heading), "{heading} missing from the DOM");
    }

    // The screenshot: the window's size, and ink on it (text, axes, coloured lines).
    let (width, height, inked, colours) = ink(&shot);
    assert_eq!((width, height), (1200, 1600));
    assert!(
        inked > 0.02,
        "only {:.2}% of the screenshot is not white",
        inked * 100.0
    );
    assert!(
        colours >= 8,
        "{colours} colours: a blank or one-colour page"
    );
}

/// The screenshots docs/ shows, as `scripts/screenshots.sh` names them: one per shipped
/// scenario (per variant, and the variants' index, for one with variants; the benchmarks
/// bench-16vm-1h and density-* excepted), one per cache scenario, and the daemon's dashboard.
#[test]
fn every_shipped_scenario_has_its_screenshot() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shots = root.join("docs/screenshots");
    let mut wanted = vec!["dashboard.png".to_string()];
    for entry in std::fs::read_dir(root.join("scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.extension().is_none_or(|e| e != "toml")
            || name == "bench-16vm-1h"
            || name.starts_with("density-")
        {
            continue;
        }
        let scenario = memtide_scenario::load(&path, &[]).unwrap();
        if scenario.variants.is_empty() {
            wanted.push(format!("{name}.png"));
        } else {
            wanted.extend(
                scenario
                    .variants
                    .iter()
                    .map(|v| format!("{name}-{}.png", v.name)),
            );
            wanted.push(format!("{name}-index.png"));
        }
    }
    for entry in std::fs::read_dir(root.join("scenarios/cache")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            wanted.push(format!(
                "{}.png",
                path.file_stem().unwrap().to_string_lossy()
            ));
        }
    }
    let missing: Vec<&String> = wanted.iter().filter(|f| !shots.join(f).is_file()).collect();
    assert!(
        missing.is_empty(),
        "docs/screenshots/ lacks {missing:?}: run scripts/screenshots.sh (as root for the dashboard)"
    );
}
