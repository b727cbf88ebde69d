//! Headless Chromium for the tests that look at a page as a person would: finding Debian's `chromium`, running it with a time limit, and measuring the ink on its screenshot.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's chromium, or one on the PATH.
pub fn chromium() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    ["chromium", "chromium-browser"]
        .iter()
        .flat_map(|name| on_path.iter().map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

/// Headless Chromium that dumps the DOM it built (stdout), logs console messages (stderr)
/// and photographs the page into `shot`, in a window `width` x `height`, with its profile in
/// `profile`; the caller adds the address.
pub fn dump_and_shoot(
    chromium: &Path,
    profile: &Path,
    (width, height): (u32, u32),
    shot: &Path,
) -> Command {
    let mut command = Command::new(chromium);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            "--hide-scrollbars",
        ])
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()));
    command
}

/// Runs `command` to its end, or kills it after `limit`.
pub fn run_with_limit(mut command: Command, limit: Duration) -> std::process::Output {
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
pub fn ink(png_path: &Path) -> (u32, u32, f64, usize) {
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
