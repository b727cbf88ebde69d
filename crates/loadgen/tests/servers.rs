//! memtide-loadgen against real servers: a Redis and a memcached on loopback ports are filled and loaded, the windows count the requests the schedule sends, a server killed mid-run shows as errors and is reconnected to once it is back, and bad input exits 2 with one line.

use memtide_demand::{Demand, Schedule};
use memtide_testkit::{free_port, skip_or_fail};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A server process, killed and reaped on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn installed(program: &str, test: &str) -> bool {
    let found = Command::new(program)
        .arg(if program == "memcached" {
            "-V"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        skip_or_fail(
            test,
            &format!("needs {program} (apt-get install redis-server memcached)"),
        );
    }
    found
}

fn redis(port: u16) -> Server {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    answers(port);
    Server(child)
}

fn memcached(port: u16) -> Server {
    let child = Command::new("memcached")
        .args([
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-m",
            "64",
            "-u",
            "root",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start memcached");
    answers(port);
    Server(child)
}

/// Waits (5 s at most) until the port takes a connection.
fn answers(port: u16) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "port {port} never answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memtide-loadgen"))
        .args(args)
        .output()
        .expect("run memtide-loadgen")
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn of<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["kind"] == kind).collect()
}

/// Fills `url`'s server with 1,000 keys of 1 KiB and loads it at 200 GETs a second for 3 s:
/// every key is there, three one-second report windows hold the 600 requests, none failed.
fn fills_and_loads(url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let o = loadgen(&[
        "--server",
        url,
        "--keys",
        "1000",
        "--value-bytes",
        "1K",
        "--fill",
        "--demand",
        "busy:rate=200",
        "--duration",
        "3s",
        "--window",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l = lines(&out);
    let fill = of(&l, "fill");
    assert_eq!(fill.len(), 1, "{l:?}");
    assert_eq!(fill[0]["keys"], 1000);
    assert_eq!(fill[0]["bytes"], 1000 * 1024);
    let windows = of(&l, "window");
    assert_eq!(windows.len(), 3, "{windows:?}");
    for w in &windows {
        assert_eq!(w["requests"], 200, "{w}");
        assert_eq!(w["errors"], 0, "{w}");
        assert_eq!(w["misses"], 0, "every key was filled: {w}");
        assert!(w["p99_us"].as_u64().is_some_and(|p| p > 0), "{w}");
    }
    let done = of(&l, "done");
    assert_eq!(done[0]["requests"], 600);
}

#[test]
fn a_redis_is_filled_and_loaded_at_the_patterns_rate() {
    let test = "a_redis_is_filled_and_loaded_at_the_patterns_rate";
    if !installed("redis-server", test) {
        return;
    }
    let port = free_port();
    let _server = redis(port);
    fills_and_loads(&format!("redis://127.0.0.1:{port}"));
}

#[test]
fn a_memcached_is_filled_and_loaded_at_the_patterns_rate() {
    let test = "a_memcached_is_filled_and_loaded_at_the_patterns_rate";
    if !installed("memcached", test) {
        return;
    }
    let port = free_port();
    let _server = memcached(port);
    fills_and_loads(&format!("memcached://127.0.0.1:{port}"));
}

/// `--fill-only` fills and stops: its output is the one `fill` line, and a run after it
/// finds every key.
#[test]
fn a_fill_only_run_fills_and_stops() {
    let test = "a_fill_only_run_fills_and_stops";
    if !installed("redis-server", test) {
        return;
    }
    let port = free_port();
    let _server = redis(port);
    let url = format!("redis://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fill.jsonl");
    let o = loadgen(&[
        "--server",
        &url,
        "--keys",
        "300",
        "--fill-only",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l = lines(&out);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0]["kind"], "fill");
    let run = dir.path().join("run.jsonl");
    let o = loadgen(&[
        "--server",
        &url,
        "--keys",
        "300",
        "--demand",
        "busy:rate=300",
        "--duration",
        "2s",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(of(&lines(&run), "done")[0]["misses"], 0);
}

/// A bursty pattern sends what the schedule of its seed says: the `start` line lists the
/// bursts `Schedule::new` lays out for the same seed, and each window holds the requests the
/// schedule makes due in it. Keys not filled are misses, written back.
#[test]
fn a_bursty_run_follows_the_schedule_of_its_seed() {
    let test = "a_bursty_run_follows_the_schedule_of_its_seed";
    if !installed("redis-server", test) {
        return;
    }
    let port = free_port();
    let _server = redis(port);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let pattern = "bursty:every=2s,burst=1s,rate=300";
    let epoch = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    };
    let before = epoch();
    let o = loadgen(&[
        "--server",
        &format!("redis://127.0.0.1:{port}"),
        "--keys",
        "50",
        "--demand",
        pattern,
        "--seed",
        "9",
        "--duration",
        "8s",
        "--window",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = epoch();
    let l = lines(&out);
    let epoch_s = of(&l, "start")[0]["epoch_s"].as_f64().unwrap();
    assert!(
        before <= epoch_s && epoch_s + 8.0 <= after,
        "second 0 at {epoch_s}, the run from {before} to {after}"
    );
    let schedule = Schedule::new(&Demand::parse(pattern).unwrap(), 9, 8.0).unwrap();
    let bursts: Vec<(f64, f64)> =
        serde_json::from_value(of(&l, "start")[0]["bursts"].clone()).unwrap();
    assert_eq!(bursts, schedule.bursts());
    assert!(!bursts.is_empty(), "seed 9 has a burst in 8 s");
    let windows = of(&l, "window");
    assert_eq!(windows.len(), 4);
    for w in &windows {
        let start = w["start"].as_f64().unwrap();
        let due = schedule.requests_between(start, start + 2.0);
        let sent = w["requests"].as_f64().unwrap();
        assert!(
            (sent - due).abs() <= 2.0,
            "{w}: the schedule makes {due:.1} due"
        );
        assert_eq!(w["errors"], 0, "{w}");
    }
    let done = &of(&l, "done")[0];
    assert!(
        done["misses"].as_u64().unwrap() >= 1,
        "nothing filled: the first GETs miss"
    );
    assert!(
        done["misses"].as_u64().unwrap() <= 50,
        "a miss writes the key back: {done}"
    );
}

/// A server killed mid-run: the requests due while it is gone fail (within the timeout), and
/// once it is back the generator reconnects and the errors stop.
#[test]
fn a_server_gone_mid_run_shows_as_errors_then_the_generator_reconnects() {
    let test = "a_server_gone_mid_run_shows_as_errors_then_the_generator_reconnects";
    if !installed("redis-server", test) {
        return;
    }
    let port = free_port();
    let server = redis(port);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let mut run = Command::new(env!("CARGO_BIN_EXE_memtide-loadgen"))
        .args([
            "--server",
            &format!("redis://127.0.0.1:{port}"),
            "--keys",
            "100",
            "--fill",
            "--demand",
            "busy:rate=100",
            "--duration",
            "9s",
            "--window",
            "1s",
            "--timeout",
            "200ms",
            "--out",
            out.to_str().unwrap(),
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    drop(server);
    std::thread::sleep(Duration::from_secs(2));
    let _back = redis(port);
    assert!(run.wait().unwrap().success());
    let l = lines(&out);
    let windows = of(&l, "window");
    assert_eq!(windows.len(), 9);
    let errors: Vec<u64> = windows
        .iter()
        .map(|w| w["errors"].as_u64().unwrap())
        .collect();
    assert_eq!(errors[..2], [0, 0], "{errors:?}");
    assert!(
        errors[3] >= 50,
        "the second the server was gone: {errors:?}"
    );
    assert_eq!(errors[7..], [0, 0], "reconnected: {errors:?}");
}

#[test]
fn bad_input_exits_2_with_one_line_naming_it() {
    for (args, says) in [
        (
            vec![
                "--server",
                "http://x",
                "--keys",
                "1",
                "--demand",
                "busy:rate=1",
                "--duration",
                "1s",
            ],
            "--server http://x",
        ),
        (
            vec![
                "--server",
                "redis://127.0.0.1:1",
                "--keys",
                "0",
                "--demand",
                "busy:rate=1",
                "--duration",
                "1s",
            ],
            "--keys 0: must be from 1",
        ),
        (
            vec![
                "--server",
                "redis://127.0.0.1:1",
                "--keys",
                "1",
                "--demand",
                "busy",
                "--duration",
                "1s",
            ],
            "--demand: demand pattern `busy`",
        ),
        (
            vec![
                "--server",
                "redis://127.0.0.1:1",
                "--keys",
                "1",
                "--demand",
                "busy:rate=1",
                "--duration",
                "2d",
            ],
            "--duration 2d",
        ),
        (
            vec![
                "--server",
                "redis://127.0.0.1:1",
                "--keys",
                "1",
                "--demand",
                "busy:rate=1",
                "--duration",
                "1s",
                "--window",
                "0s",
            ],
            "--window 0s: must be from 1 s",
        ),
        (
            vec![
                "--server",
                "redis://127.0.0.1:1",
                "--keys",
                "100000000",
                "--value-bytes",
                "1M",
                "--demand",
                "busy:rate=1",
                "--duration",
                "1s",
            ],
            "more than 68719476736 bytes",
        ),
        (
            vec![
                "--server",
                "redis://127.0.0.1:1",
                "--keys",
                "1",
                "--demand",
                "busy:rate=1",
                "--duration",
                "1s",
                "--start-at",
                "1e12",
            ],
            "at most an hour ahead",
        ),
        (vec!["--keys", "1"], "--server"),
    ] {
        let o = loadgen(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}
