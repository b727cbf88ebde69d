//! report.html in a real browser: headless Chromium (Debian's `chromium`, which `.ci/run` installs) opens the report of a shipped scenario without a console message, lays out every chart the run calls for, and paints a page that is not blank. Without chromium the test says why and skips; under `MEMTIDE_REQUIRE_LINUX=1` or `CI` (where it is installed) it fails instead.

use memtide_testkit::skip_or_fail;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's chromium, or one on the PATH.
fn chromium() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|name| on_path.iter().map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

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

/// Runs `command` to its end, or kills it after `limit`.
fn run_with_limit(mut command: Command, limit: Duration) -> std::process::Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium starts");
    // Read both pipes on threads so a full pipe cannot stall the browser.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).map(|_| v)
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).map(|_| v)
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("chromium still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap().unwrap(),
        stderr: err.join().unwrap().unwrap(),
    }
}

/// Fraction of the pixels that are not white, and how many colours there are (up to 64).
fn ink(png_path: &Path) -> (u32, u32, f64, usize) {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).expect("screenshot written"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("PNG size")];
    let frame = reader.next_frame(&mut buf).expect("PNG frame");
    let channels = frame.color_type.samples();
    assert_eq!(frame.bit_depth, png::BitDepth::Eight, "8-bit PNG");
    let pixels = buf[..frame.buffer_size()].chunks(channels);
    let (mut total, mut inked) = (0u64, 0u64);
    let mut colours: Vec<&[u8]> = Vec::new();
    for p in pixels {
        total += 1;
        if p[..3.min(channels)].iter().any(|&c| c < 240) {
            inked += 1;
        }
        if colours.len() < 64 && !colours.contains(&p) {
            colours.push(p);
        }
    }
    (
        frame.width,
        frame.height,
        inked as f64 / total.max(1) as f64,
        colours.len(),
    )
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
    let mut command = Command::new(&chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            "--window-size=1200,1600",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            tmp.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", out.join("report.html").display()));
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
