//! The JVM adapter against real JVMs (OpenJDK 17's Shenandoah, ZGC and G1 running tests/java/Heap.java in a memory cgroup of their own, the adapter beside them) and memtide's real balloon server and hub: it registers, shrinks a heap grown to over 1 GiB around a 300 MiB live set to 600 MiB — done, and the cgroup's usage falls by at least half of what the heap gave up — and grows it back; a JVM killed mid-shrink is a `failed` answer with a reason; a stopped adapter gives the JVM back the soft max heap it found; a collector other than the declared one is refused, naming both.

mod common;

use common::{Memtide, Proc, TestCgroup, MIB};
use memtide_agents::hub::AgentEvent;
use memtide_balloon::protocol::ProgressStatus;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One JVM at a time: the machine may have two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Java and javac are here, or the test is skipped (failed under `MEMTIDE_REQUIRE_LINUX`).
fn have_java() -> bool {
    let ok = |p: &str, arg: &str| {
        Command::new(p)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok("java", "-version") && ok("javac", "-version") && ok("jcmd", "-h") {
        return true;
    }
    let why = "java, javac or jcmd is missing (apt-get install openjdk-17-jdk-headless)";
    memtide_testkit::skip_or_fail(module_path!(), why);
    false
}

/// Heap.java compiled into `dir`.
fn compile(dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java/Heap.java");
    let status = Command::new("javac")
        .arg("-d")
        .arg(dir)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "javac {}", src.display());
}

/// Heap.java running in a cgroup, its stdout's lines on a channel.
struct Jvm {
    proc: Proc,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Jvm {
    fn start(cg: &TestCgroup, classes: &Path, flags: &[&str], live_mib: u64) -> Jvm {
        let mut child = cg
            .command("java")
            .args(flags)
            .arg("-cp")
            .arg(classes)
            .args(["Heap", &live_mib.to_string(), "100"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut jvm = Jvm {
            proc: Proc(child),
            stdin,
            lines,
        };
        jvm.expect("ready");
        jvm
    }

    fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    fn expect(&mut self, want: &str) {
        match self.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line == want => {}
            other => panic!("the JVM said {other:?}, not {want:?}"),
        }
    }

    /// Makes the live set `mib` MiB.
    fn live(&mut self, mib: u64) {
        writeln!(self.stdin, "live {mib}").unwrap();
        self.stdin.flush().unwrap();
        self.expect(&format!("ok live {mib}"));
    }
}

fn jcmd(pid: u32, command: &str) -> String {
    let out = Command::new("jcmd")
        .arg(pid.to_string())
        .args(command.split_whitespace())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The committed heap, from `GC.heap_info`.
fn committed(pid: u32, collector: &str) -> u64 {
    let text = jcmd(pid, "GC.heap_info");
    let (marker, label) = match collector {
        "shenandoah" => (" committed,", "committed"),
        "zgc" => ("ZHeap", "capacity"),
        _ => ("garbage-first heap", "total"),
    };
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("GC.heap_info: {text}"));
    let before_addresses = line.split('[').next().unwrap();
    for item in before_addresses.split(',') {
        let words: Vec<&str> = item.split_whitespace().collect();
        if words.last() == Some(&label) || (words.contains(&label) && !words.contains(&"max")) {
            let size = words
                .iter()
                .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
                .unwrap();
            let (n, unit) = size.split_at(size.len() - 1);
            let scale = match unit {
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                _ => panic!("{size}"),
            };
            return n.parse::<u64>().unwrap() * scale;
        }
    }
    panic!("no {label} in {line}");
}

/// The answer at `pool`: its status and reason.
fn answered(memtide: &Memtide, pool: u64) -> (ProgressStatus, Option<String>) {
    let e = memtide.wait_for(
        &format!("an answer at {pool}"),
        |e| matches!(e, AgentEvent::Answered { pool_bytes, .. } if *pool_bytes == pool),
    );
    match e {
        AgentEvent::Answered { status, reason, .. } => (status, reason),
        _ => unreachable!(),
    }
}

/// Asks for a pool of `bytes`.
fn target(memtide: &Memtide, bytes: u64) {
    memtide.target(bytes, Duration::from_secs(60));
}

/// The adapter started in `cg` with `args`, registered.
fn adapter(memtide: &Memtide, cg: &TestCgroup, args: &[&str]) -> Proc {
    let mut command = cg.command(env!("CARGO_BIN_EXE_memtide-adapter"));
    command.arg("jvm").args(args);
    let adapter = memtide.spawn(command);
    memtide.registered();
    adapter
}

/// A heap grown to over 1 GiB, its live set then cut to 300 MiB, shrunk to 600 MiB through
/// the adapter and grown back to 1536 MiB.
fn shrinks_by_more_than_half_and_grows_back(collector: &str, flags: &[&str]) {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    if !have_java() {
        return;
    }
    let Some(cg) = TestCgroup::new(collector) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path());
    let mut jvm = Jvm::start(&cg, dir.path(), flags, 1100);
    let memtide = Memtide::start(dir.path());
    let _adapter = adapter(
        &memtide,
        &cg,
        &["--collector", collector, "--min", "256M", "--max", "1536M"],
    );

    jvm.live(300);
    let (small, full) = (600 * MIB, 1536 * MIB);
    let grown = committed(jvm.pid(), collector);
    let before = cg.usage();
    target(&memtide, small);
    let (status, reason) = answered(&memtide, small);
    assert_eq!(status, ProgressStatus::Done, "{collector}: {reason:?}");
    let after = cg.usage();
    let now = committed(jvm.pid(), collector);
    eprintln!(
        "{collector}: committed heap {grown} -> {now} bytes, cgroup usage {before} -> {after}"
    );
    let released = grown.saturating_sub(small);
    assert!(
        before.saturating_sub(after) * 2 >= released,
        "{collector}: the heap gave up {released} bytes, the cgroup fell by {}",
        before.saturating_sub(after)
    );
    assert!(
        now <= small + 16 * MIB + small / 32,
        "{collector}: committed {now}"
    );

    target(&memtide, full);
    let (status, reason) = answered(&memtide, full);
    assert_eq!(status, ProgressStatus::Done, "{collector}: {reason:?}");
    let flags = jcmd(jvm.pid(), "VM.flags");
    let want = if collector == "g1" {
        "-XX:MaxHeapFreeRatio=70".to_string()
    } else {
        format!("-XX:SoftMaxHeapSize={full}")
    };
    assert!(flags.contains(&want), "{collector}: no {want} in {flags}");
    memtide.server.stop();
}

#[test]
fn shenandoah_shrinks_by_more_than_half_and_grows_back() {
    shrinks_by_more_than_half_and_grows_back(
        "shenandoah",
        &["-Xmx1536m", "-Xms64m", "-XX:+UseShenandoahGC"],
    );
}

#[test]
fn zgc_shrinks_by_more_than_half_and_grows_back() {
    shrinks_by_more_than_half_and_grows_back(
        "zgc",
        &[
            "-Xmx1536m",
            "-Xms64m",
            "-XX:+UseZGC",
            "-XX:ZUncommitDelay=1",
        ],
    );
}

/// G1 commits regions it has not touched yet, so the heap it gives back can be more than the
/// cgroup held: `AlwaysPreTouch` makes every committed region resident, and what the heap
/// gives up then shows in the cgroup.
#[test]
fn g1_shrinks_by_more_than_half_and_grows_back() {
    shrinks_by_more_than_half_and_grows_back(
        "g1",
        &[
            "-Xmx1536m",
            "-Xms64m",
            "-XX:+UseG1GC",
            "-XX:+AlwaysPreTouch",
        ],
    );
}

/// ZGC with a 20 s uncommit delay: the shrink is still waiting for the heap when the JVM is
/// killed.
#[test]
fn a_jvm_killed_mid_shrink_is_a_failed_answer_with_a_reason() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    if !have_java() {
        return;
    }
    let Some(cg) = TestCgroup::new("killed") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path());
    let flags = ["-Xmx1g", "-Xms64m", "-XX:+UseZGC", "-XX:ZUncommitDelay=20"];
    let mut jvm = Jvm::start(&cg, dir.path(), &flags, 700);
    let memtide = Memtide::start(dir.path());
    let mut adapter = adapter(
        &memtide,
        &cg,
        &["--collector", "zgc", "--min", "128M", "--max", "1G"],
    );
    jvm.live(200);
    target(&memtide, 400 * MIB);
    // The shrink sets the flag, collects, and then waits 20 s for ZGC to uncommit.
    std::thread::sleep(Duration::from_secs(3));
    drop(jvm);
    let (status, reason) = answered(&memtide, 400 * MIB);
    eprintln!("killed mid-shrink: {status:?}: {reason:?}");
    assert_eq!(status, ProgressStatus::Failed);
    assert!(reason.is_some_and(|r| !r.is_empty()));
    assert!(
        adapter.0.try_wait().unwrap().is_none(),
        "the adapter outlives its JVM"
    );
    memtide.server.stop();
}

/// Shenandoah started with its soft max at 512 MiB (the default: its `-Xmx`), shrunk to
/// 128 MiB by memtide, is given its soft max back when the adapter stops.
#[test]
fn a_stopped_adapter_gives_the_jvm_back_the_soft_max_heap_it_found() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    if !have_java() {
        return;
    }
    let Some(cg) = TestCgroup::new("give-back") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path());
    let flags = ["-Xmx512m", "-Xms64m", "-XX:+UseShenandoahGC"];
    let jvm = Jvm::start(&cg, dir.path(), &flags, 64);
    let memtide = Memtide::start(dir.path());
    let mut adapter = adapter(
        &memtide,
        &cg,
        &["--collector", "shenandoah", "--min", "64M", "--max", "512M"],
    );
    target(&memtide, 128 * MIB);
    let (status, reason) = answered(&memtide, 128 * MIB);
    assert_eq!(status, ProgressStatus::Done, "{reason:?}");
    let soft_max = |want: u64| format!("-XX:SoftMaxHeapSize={want} ");
    let flags = jcmd(jvm.pid(), "VM.flags");
    assert!(flags.contains(&soft_max(128 * MIB)), "{flags}");

    let status = adapter.stop();
    assert!(status.success(), "adapter exit {status}");
    let flags = jcmd(jvm.pid(), "VM.flags");
    assert!(
        flags.contains(&soft_max(512 * MIB)),
        "the soft max found at start is given back: {flags}"
    );
    memtide.server.stop();
}

#[test]
fn a_collector_other_than_the_declared_one_is_refused_naming_both() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    if !have_java() {
        return;
    }
    let Some(cg) = TestCgroup::new("mismatch") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path());
    let jvm = Jvm::start(
        &cg,
        dir.path(),
        &["-Xmx256m", "-Xms16m", "-XX:+UseG1GC"],
        32,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_memtide-adapter"))
        .args(["jvm", "--collector", "shenandoah", "--pid"])
        .arg(jvm.pid().to_string())
        .args(["--min", "64M", "--max", "256M", "--socket"])
        .arg(dir.path().join("none.sock"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    eprintln!("mismatch: {said}");
    assert!(!out.status.success());
    assert!(said.contains("G1") && said.contains("Shenandoah"), "{said}");
}

/// One resize's times, from the target sent.
struct Timed {
    done: Duration,
    /// Until the cgroup's usage fell by half, and by 90%, of what the heap gave up.
    half: Option<Duration>,
    most: Option<Duration>,
}

/// Sends `pool` and times the answer and, shrinking by `gives` bytes, the cgroup's fall.
fn timed(memtide: &Memtide, cg: &TestCgroup, pool: u64, gives: u64) -> Timed {
    let before = cg.usage();
    let start = Instant::now();
    target(memtide, pool);
    let (mut done, mut half, mut most) = (None, None, None);
    let mut status = None;
    while done.is_none()
        || (gives > 0
            && most.is_none()
            && start.elapsed() < done.unwrap() + Duration::from_secs(10))
    {
        let fell = before.saturating_sub(cg.usage());
        if gives > 0 && half.is_none() && fell * 2 >= gives {
            half = Some(start.elapsed());
        }
        if gives > 0 && most.is_none() && fell * 10 >= gives * 9 {
            most = Some(start.elapsed());
        }
        for e in memtide.hub.drain_events() {
            if let AgentEvent::Answered {
                status: s,
                pool_bytes,
                reason,
                ..
            } = e
            {
                if pool_bytes == pool {
                    assert_eq!(s, ProgressStatus::Done, "{pool}: {reason:?}");
                    status = Some(s);
                    done = Some(start.elapsed());
                }
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no answer at {pool}: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    Timed {
        done: done.unwrap(),
        half,
        most,
    }
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("-".to_string(), |d| format!("{:.2}", d.as_secs_f64()))
}

/// The resize times of scripts/jvm-resize-times.sh: for each collector, a heap grown by 0.5,
/// 1 and 2 GiB around a 128 MiB live set, shrunk by that much through the adapter and grown
/// back. Prints a table; asserts only that every resize is done.
#[test]
#[ignore = "measurement: scripts/jvm-resize-times.sh"]
fn resize_times() {
    let _one = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    if !have_java() {
        return;
    }
    // JVM_TIMES_COLLECTORS (default: all three) and JVM_TIMES_SIZES (GiB, default 0.5,1,2)
    // narrow it; JVM_TIMES_REPEAT runs each size that many times.
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or(default.to_string());
    let wanted = env("JVM_TIMES_COLLECTORS", "shenandoah,zgc,g1");
    let sizes: Vec<f64> = env("JVM_TIMES_SIZES", "0.5,1,2")
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("JVM_TIMES_SIZES: GiB, comma-separated")
        })
        .collect();
    let repeat: usize = env("JVM_TIMES_REPEAT", "1")
        .parse()
        .expect("JVM_TIMES_REPEAT");
    let mut rows = Vec::new();
    for (collector, flags) in [
        ("shenandoah", vec!["-XX:+UseShenandoahGC"]),
        ("zgc", vec!["-XX:+UseZGC", "-XX:ZUncommitDelay=1"]),
        ("g1", vec!["-XX:+UseG1GC"]),
    ] {
        if !wanted.split(',').any(|w| w.trim() == collector) {
            continue;
        }
        let Some(cg) = TestCgroup::new(&format!("times-{collector}")) else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        compile(dir.path());
        let mut all = vec!["-Xmx3g", "-Xms64m"];
        all.extend(flags);
        let mut jvm = Jvm::start(&cg, dir.path(), &all, 128);
        let memtide = Memtide::start(dir.path());
        let _adapter = adapter(
            &memtide,
            &cg,
            &["--collector", collector, "--min", "256M", "--max", "3G"],
        );
        for gib in sizes.iter().flat_map(|&g| std::iter::repeat_n(g, repeat)) {
            assert!((0.25..=2.5).contains(&gib), "JVM_TIMES_SIZES: {gib} GiB");
            let gives = (gib * 1024.0) as u64 * MIB;
            jvm.live(gives / MIB + 384);
            jvm.live(128);
            let grown = committed(jvm.pid(), collector);
            let small = (grown.saturating_sub(gives) / MIB * MIB).max(256 * MIB);
            let down = timed(&memtide, &cg, small, grown - small);
            let shrunk = committed(jvm.pid(), collector);
            let back = (small + gives).min(3 << 30);
            let up = timed(&memtide, &cg, back, 0);
            rows.push(format!(
                "{collector:<10} {gib:>4} GiB  {:>6} -> {:>6} MiB  shrink done {:>5} s  cgroup -50% {:>5} s  -90% {:>5} s  grow done {:>5} s",
                grown / MIB,
                shrunk / MIB,
                secs(Some(down.done)),
                secs(down.half),
                secs(down.most),
                secs(Some(up.done)),
            ));
            eprintln!("{}", rows.last().unwrap());
            // Back at the largest pool for the next size (a target already sent is not
            // sent again).
            if back != 3 << 30 {
                let _ = timed(&memtide, &cg, 3 << 30, 0);
            }
        }
        memtide.server.stop();
    }
    println!("\ncollector   size   committed heap           shrink              cgroup fallen            grow");
    for row in rows {
        println!("{row}");
    }
}
