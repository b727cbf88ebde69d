//! A JVM's heap as a balloon pool, moved through `jcmd`: under ZGC and Shenandoah the pool is `SoftMaxHeapSize` (set, then `GC.run` to make the collector give the memory back), under G1 it caps the committed heap, steered by `MinHeapFreeRatio`/`MaxHeapFreeRatio` and a full `GC.run`; a shrink is done only once `GC.heap_info` shows the committed heap at or under the target (plus [`slack`]).
//!
//! - **Which JVM.** `--pid`, else the one `java` process in the adapter's own memory cgroup (the
//!   adapter runs in the tenant's): none or several is an error naming the cgroup, and as a
//!   failed `connect` it is tried again later. `VM.flags` must name the collector the tenant
//!   declared (`--collector`); another one is refused, naming both. `--max` above the JVM's
//!   `MaxHeapSize` (`-Xmx`), or `--min` below its `MinHeapSize` (`-Xms`: no collector uncommits
//!   below it), is refused too, naming both figures.
//! - **jcmd.** Each operation is one `jcmd` child (several commands in one attach through
//!   `-f /dev/stdin`), run with its own small JVM (`-J-Xmx16m`, serial GC, C1 only: about
//!   0.2–0.4 s and 40 MB, which the tenant's cgroup pays while it runs). One that has not
//!   answered within the time-out (15 s by default) is killed, and the operation is a refusal
//!   naming the command. jcmd exits 0 even when a command fails: every command that prints
//!   nothing on success must answer `Command executed successfully`, and any other line is the
//!   refusal's reason.
//! - **ZGC and Shenandoah.** The pool is `SoftMaxHeapSize` (a manageable flag; read at connect,
//!   then as set). A grow sets it and is done: the heap grows on demand. A shrink sets it, runs
//!   `GC.run` and reads `GC.heap_info` in one jcmd, then reads `GC.heap_info` again (50 ms
//!   after each answer; `GC.run` again every 5 s) until the committed heap is at most the
//!   target plus [`slack`], for up to the deadline (30 s); past it the answer is `failed` at
//!   the target.
//!   Shenandoah (JDK 17) uncommits every empty region at once after an explicit GC, so a
//!   shrink takes one GC cycle; `ExplicitGCInvokesConcurrent` (on by default under
//!   Shenandoah) makes that cycle concurrent rather than a full stop-the-world GC, and
//!   `DisableExplicitGC` must stay off. ZGC uncommits only pages unused for `ZUncommitDelay`
//!   seconds (300 by default): it must be launched with `-XX:ZUncommitDelay=1`, and a ZGC
//!   whose delay is not shorter than the deadline, or with `-XX:-ZUncommit`, has every shrink
//!   refused with that reason (likewise Shenandoah's `-XX:-ShenandoahUncommit`).
//! - **G1.** There is no size to set: the pool is a cap on the committed heap, `MaxHeapSize`
//!   while G1's free ratios are its own (the heap grows on demand up to it), the target once
//!   a shrink has aimed them (an adapter that connects again reads it back as the committed
//!   heap, when both ratios are equal, as only a shrink leaves them). A shrink runs a full
//!   `GC.run` to learn the live heap `L`, sets both ratios to `floor(100 (1 - L / target))`, so
//!   that G1's resize after the next full GC aims at `L / (1 - ratio)`, at most the target, and
//!   runs `GC.run` again. G1 sizes on more than the live bytes (whole regions, what the
//!   workload allocated meanwhile), so a heap that lands above the target is aimed again on
//!   what G1 counted (`committed × (1 - ratio)`), at most twice, a full GC each; then it waits
//!   as above. This is a ratio, not a cap: G1 lands a few percent around the target, and grows
//!   again past it when its GC time ratio asks for more heap (the next shrink brings it back). A target leaving less than 10% of the
//!   heap free after a full GC is refused (G1 would collect without end). A grow puts back
//!   JDK 17's defaults (`MinHeapFreeRatio` 40, `MaxHeapFreeRatio` 70) and is done.
//! - **Statistics**: one `GC.heap_info` per reading. `used_bytes` is the heap's used bytes (live
//!   data and garbage not yet collected). A heap has no hit rate: `hits` and `misses` are 0,
//!   so memtide's idle tax sees no activity in this pool (the balloon protocol's statistics
//!   have no "unknown"); `evictions` and `dirty_bytes` are 0 as a heap has neither.
//! - **Granularity**: the collector's (regions of 1–32 MiB, ZGC's 2 MiB granules); figures in
//!   `GC.heap_info` are printed in K or M, so readings are exact to 1 MiB at worst.
//! - **When the JVM dies or hangs**: a jcmd against a dead pid fails at once and the answer is
//!   `failed`, naming the JVM as gone; a hung JVM's jcmd is killed at the time-out. The
//!   adapter then finds the cgroup's JVM again at the next operation (a restarted JVM).
//! - **Launch flags** (docs/apps.md): `-Xms` at most the smallest pool (`--min`); ZGC:
//!   `-XX:+UseZGC -XX:ZUncommitDelay=1`; Shenandoah: `-XX:+UseShenandoahGC` (nothing more on
//!   JDK 17: `ShenandoahUncommitDelay` and `ShenandoahGuaranteedGCInterval` only matter for
//!   the collector's own periodic uncommit); G1: `-XX:+UseG1GC` (the default).

use crate::server::Pool;
use memtide_balloon::agent::{PoolStats, Refusal};
use memtide_linux::fs::hierarchy::{self, CgroupVersion};
use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// What jcmd prints for a command that has nothing else to say.
const OK: &str = "Command executed successfully";

/// jcmd's own JVM, kept small: it runs in the tenant's cgroup.
const JCMD_VM: [&str; 4] = [
    "-J-Xmx16m",
    "-J-XX:+UseSerialGC",
    "-J-XX:TieredStopAtLevel=1",
    "-J-XX:CICompilerCount=1",
];

/// How often a shrink reads the committed heap while it waits.
const POLL: Duration = Duration::from_millis(50);

/// How often a shrink that waits runs `GC.run` again.
const GC_AGAIN: Duration = Duration::from_secs(5);

/// G1's default ratios, put back by a grow.
const G1_MIN_FREE: u64 = 40;
const G1_MAX_FREE: u64 = 70;

/// The least free share (percent) a G1 shrink may leave after a full GC.
const G1_LEAST_FREE: u64 = 10;

/// How far above the target the committed heap may stay and a shrink still be done: 16 MiB
/// plus 1/32 of the target (a region's rounding, G1's whole-percent ratio, and what the
/// workload allocates while the collector works).
pub fn slack(target: u64) -> u64 {
    16 * MIB + target / 32
}

/// The collector the tenant declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collector {
    Shenandoah,
    Zgc,
    G1,
}

impl Collector {
    /// Its name as `VM.flags`'s collectors are named in messages.
    fn name(self) -> &'static str {
        match self {
            Collector::Shenandoah => "Shenandoah",
            Collector::Zgc => "ZGC",
            Collector::G1 => "G1",
        }
    }
}

impl fmt::Display for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Collector {
    type Err = String;
    fn from_str(s: &str) -> Result<Collector, String> {
        match s.to_ascii_lowercase().as_str() {
            "shenandoah" => Ok(Collector::Shenandoah),
            "zgc" => Ok(Collector::Zgc),
            "g1" => Ok(Collector::G1),
            _ => Err(format!("{s}: not a collector (shenandoah, zgc or g1)")),
        }
    }
}

/// Every collector of JDK 17, by the flag `VM.flags` shows.
const COLLECTORS: [(&str, &str); 6] = [
    ("UseShenandoahGC", "Shenandoah"),
    ("UseZGC", "ZGC"),
    ("UseG1GC", "G1"),
    ("UseParallelGC", "Parallel"),
    ("UseSerialGC", "Serial"),
    ("UseEpsilonGC", "Epsilon"),
];

/// What the adapter was told about the JVM.
#[derive(Clone, Debug)]
pub struct Config {
    pub collector: Collector,
    /// The JVM's pid; `None`: the one `java` in the adapter's own memory cgroup.
    pub pid: Option<u32>,
    /// The jcmd to run; `None`: the one beside the JVM's `java`, else `jcmd` on the PATH.
    pub jcmd: Option<PathBuf>,
    /// The pool's bounds, checked against the JVM's `-Xms` and `-Xmx`.
    pub min: u64,
    pub max: u64,
    /// How long one jcmd may take before it is killed.
    pub timeout: Duration,
    /// How long a shrink waits for the committed heap to fall.
    pub deadline: Duration,
}

/// A JVM reached through jcmd.
#[derive(Debug)]
pub struct JvmPool {
    collector: Collector,
    pid: u32,
    jcmd: PathBuf,
    timeout: Duration,
    deadline: Duration,
    /// `MaxHeapSize` and `MinHeapSize`.
    max_heap: u64,
    min_heap: u64,
    /// Why this JVM cannot give memory back, when its flags say so.
    blocker: Option<String>,
    /// The pool: `SoftMaxHeapSize` (ZGC, Shenandoah), or G1's cap (`MaxHeapSize` while its
    /// ratios are its own, the committed heap after a shrink), read at connect and as set
    /// since.
    size: u64,
}

/// The committed and used heap, as `GC.heap_info` prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heap {
    pub committed: u64,
    pub used: u64,
}

/// Finds the JVM and checks it against `config`.
pub fn connect(config: &Config) -> Result<JvmPool, String> {
    let pid = match config.pid {
        Some(pid) => pid,
        None => own_jvm()?,
    };
    let jcmd = config.jcmd.clone().unwrap_or_else(|| beside_java(pid));
    let mut pool = JvmPool {
        collector: config.collector,
        pid,
        jcmd,
        timeout: config.timeout,
        deadline: config.deadline,
        max_heap: 0,
        min_heap: 0,
        blocker: None,
        size: 0,
    };
    let text = pool.jcmd(&["VM.flags"]).map_err(|r| r.reason)?;
    let flags = parse_flags(&text);
    check_collector(&flags, config.collector, pid)?;
    let figure = |name: &str| {
        flags
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("the JVM (pid {pid}): VM.flags shows no {name}"))
    };
    pool.max_heap = figure("MaxHeapSize")?;
    pool.min_heap = figure("MinHeapSize")?;
    if config.max > pool.max_heap {
        return Err(format!(
            "--max {} is above the JVM's MaxHeapSize (-Xmx) {} (pid {pid})",
            config.max, pool.max_heap
        ));
    }
    if config.min < pool.min_heap {
        return Err(format!(
            "--min {} is below the JVM's MinHeapSize (-Xms) {} (pid {pid}): no collector \
             uncommits below it",
            config.min, pool.min_heap
        ));
    }
    pool.blocker = blocker(&flags, config.collector, config.deadline);
    pool.size = match config.collector {
        // Ratios made equal by an earlier shrink: the heap was aimed at what it holds.
        Collector::G1
            if flags.contains_key("MinHeapFreeRatio")
                && flags.get("MinHeapFreeRatio") == flags.get("MaxHeapFreeRatio") =>
        {
            pool.heap().map_err(|r| r.reason)?.committed
        }
        Collector::G1 => pool.max_heap,
        _ => figure("SoftMaxHeapSize")?,
    };
    Ok(pool)
}

/// The `-XX` flags `VM.flags` prints, by name: `+X` is `true`, `-X` `false`, `X=v` is `v`.
pub fn parse_flags(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|t| t.strip_prefix("-XX:"))
        .filter_map(|t| {
            if let Some(name) = t.strip_prefix('+') {
                Some((name.to_string(), "true".to_string()))
            } else if let Some(name) = t.strip_prefix('-') {
                Some((name.to_string(), "false".to_string()))
            } else {
                t.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            }
        })
        .collect()
}

/// The JVM's collector is the one declared, or an error naming both.
fn check_collector(
    flags: &BTreeMap<String, String>,
    declared: Collector,
    pid: u32,
) -> Result<(), String> {
    let runs = COLLECTORS
        .iter()
        .find(|(flag, _)| flags.get(*flag).is_some_and(|v| v == "true"))
        .map(|(_, name)| *name);
    match runs {
        Some(name) if name == declared.name() => Ok(()),
        Some(name) => Err(format!(
            "the JVM (pid {pid}) runs the {name} collector, not {declared} as --collector says"
        )),
        None => Err(format!(
            "the JVM (pid {pid}): VM.flags names no collector, and --collector says {declared}"
        )),
    }
}

/// Why the JVM's flags keep it from giving memory back within `deadline`, if they do.
fn blocker(
    flags: &BTreeMap<String, String>,
    collector: Collector,
    deadline: Duration,
) -> Option<String> {
    let off = |name: &str| flags.get(name).is_some_and(|v| v == "false");
    if flags.get("DisableExplicitGC").is_some_and(|v| v == "true") {
        return Some("the JVM runs with -XX:+DisableExplicitGC, so GC.run does nothing".into());
    }
    match collector {
        Collector::Zgc => {
            if off("ZUncommit") {
                return Some("the JVM runs with -XX:-ZUncommit: ZGC never uncommits".into());
            }
            // 300 s when the flag is not shown (JDK 17's default).
            let delay = flags
                .get("ZUncommitDelay")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(300);
            (Duration::from_secs(delay) >= deadline).then(|| {
                format!(
                    "ZGC uncommits only memory unused for ZUncommitDelay = {delay} s, not less \
                     than the {deadline:?} a shrink waits: launch with -XX:ZUncommitDelay=1"
                )
            })
        }
        Collector::Shenandoah => off("ShenandoahUncommit").then(|| {
            "the JVM runs with -XX:-ShenandoahUncommit: Shenandoah never uncommits".into()
        }),
        Collector::G1 => None,
    }
}

/// The one `java` process in this process's memory cgroup.
fn own_jvm() -> Result<u32, String> {
    let h = hierarchy::detect(Path::new("/"))
        .map_err(|e| format!("finding the JVM: this process's memory cgroup: {e}"))?;
    let pids = jvms_in(
        Path::new("/proc"),
        h.version,
        &h.own_cgroup,
        std::process::id(),
    );
    match pids.as_slice() {
        [pid] => Ok(*pid),
        [] => Err(format!(
            "no java process in this memory cgroup ({}): start the JVM there, or give --pid",
            h.own_cgroup
        )),
        many => Err(format!(
            "{} java processes in this memory cgroup ({}): pids {many:?}; say which with --pid",
            many.len(),
            h.own_cgroup
        )),
    }
}

/// The `java` processes under `proc` (`/proc`) whose memory cgroup is `own`, but `me`.
fn jvms_in(proc: &Path, version: CgroupVersion, own: &str, me: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            let dir = proc.join(pid.to_string());
            // A process that exited meanwhile reads as nothing.
            let cgroup = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
            hierarchy::own_cgroup(&dir, &cgroup, version).is_ok_and(|c| c == own) && is_java(&dir)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether the process in `dir` (`/proc/PID`) is a JVM: its command is `java`.
fn is_java(dir: &Path) -> bool {
    let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    comm.trim() == "java"
        || std::fs::read_link(dir.join("exe"))
            .is_ok_and(|exe| exe.file_name().is_some_and(|n| n == "java"))
}

/// The jcmd of the JVM's own JDK, else `jcmd` on the PATH.
fn beside_java(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("jcmd")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("jcmd"))
}

/// The output after jcmd's `PID:` line, with the first `n` commands' `Command executed
/// successfully` checked and taken off; a command that said anything else is named with it.
pub fn after_ok<'a>(text: &'a str, commands: &[&str]) -> Result<&'a str, String> {
    let mut rest = text.trim_start();
    if let Some((first, after)) = rest.split_once('\n') {
        if first.trim_end().ends_with(':')
            && first
                .trim_end()
                .trim_end_matches(':')
                .parse::<u32>()
                .is_ok()
        {
            rest = after;
        }
    }
    for command in commands {
        let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
        if line.trim() != OK {
            let said = if line.trim().is_empty() {
                "no answer"
            } else {
                line.trim()
            };
            return Err(format!("{command}: {said}"));
        }
        rest = after;
    }
    Ok(rest)
}

/// A size as `GC.heap_info` prints it: `1369M`, `1320375K`, `2G`, `512B`, bytes without unit.
fn parse_printed(token: &str) -> Option<u64> {
    let (digits, unit) = match token.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => token.split_at(i),
        None => (token, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// A line's comma-separated figures by label: `total 1572864K` and `1369M committed` alike.
fn figures(line: &str) -> BTreeMap<String, u64> {
    let line = line.split('[').next().unwrap_or_default();
    line.split(',')
        .filter_map(|item| {
            let words: Vec<&str> = item.split_whitespace().collect();
            let at = words.iter().position(|w| parse_printed(w).is_some())?;
            let label = words
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != at)
                .map(|(_, w)| *w)
                .collect::<Vec<_>>()
                .join(" ");
            Some((label, parse_printed(words[at])?))
        })
        .collect()
}

/// The committed and used heap from `GC.heap_info`'s text, or what is missing.
pub fn parse_heap_info(collector: Collector, text: &str) -> Result<Heap, String> {
    let (marker, committed, used) = match collector {
        // ` 1536M max, 600M soft max, 388M committed, 368M used`
        Collector::Shenandoah => (" committed,", "committed", "used"),
        // ` ZHeap           used 318M, capacity 1024M, max capacity 1536M`
        Collector::Zgc => ("ZHeap ", "capacity", "used"),
        // ` garbage-first heap   total 1572864K, used 1320375K [0x...)`
        Collector::G1 => ("garbage-first heap ", "total", "used"),
    };
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .ok_or_else(|| format!("GC.heap_info has no {collector} heap line"))?;
    let line = line.replace("garbage-first heap", "").replace("ZHeap", "");
    let figures = figures(&line);
    let get = |label: &str| {
        figures.get(label).copied().ok_or_else(|| {
            format!(
                "GC.heap_info's {collector} line has no {label}: {}",
                line.trim()
            )
        })
    };
    Ok(Heap {
        committed: get(committed)?,
        used: get(used)?,
    })
}

/// G1's free ratio (percent) that aims the heap at `target` after a full GC leaving `live`.
pub fn g1_ratio(live: u64, target: u64) -> Option<u64> {
    let ratio = u128::from(target.checked_sub(live)?) * 100 / u128::from(target.max(1));
    let ratio = u64::try_from(ratio).ok()?;
    (ratio >= G1_LEAST_FREE).then_some(ratio)
}

/// The jcmd commands that set G1's free ratios, in an order every pair of values allows
/// (`MinHeapFreeRatio` may not exceed `MaxHeapFreeRatio`).
fn g1_ratios(min: u64, max: u64) -> [String; 3] {
    [
        "VM.set_flag MinHeapFreeRatio 0".to_string(),
        format!("VM.set_flag MaxHeapFreeRatio {max}"),
        format!("VM.set_flag MinHeapFreeRatio {min}"),
    ]
}

/// The heap G1 sized on, given that free ratio `ratio` left `committed` after a full GC.
pub fn g1_counted(committed: u64, ratio: u64) -> u64 {
    u64::try_from(u128::from(committed) * u128::from(100 - ratio.min(100)) / 100)
        .unwrap_or(u64::MAX)
}

/// Whether process `pid` has exited (gone, or a zombie not yet reaped).
fn exited(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // `pid (comm) S ...`: the state follows the last `)`.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "Z" || state == "X")
}

/// Runs `program` with `args` (and `input` on its standard input), killing it after `timeout`.
/// The answer is its exit status's success and its output, stdout then stderr.
fn run_bounded(
    program: &Path,
    args: &[String],
    input: Option<&str>,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        // A few short lines: they fit in the pipe, so this never waits on the child.
        let _ = stdin.write_all(text.as_bytes());
    }
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut out);
            }
            out
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let until = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = out.join().unwrap_or_default() + &err.join().unwrap_or_default();
    match status {
        Some(status) => Ok((status.success(), text)),
        None => Err(format!("did not answer within {timeout:?}; killed it")),
    }
}

impl JvmPool {
    /// Runs `commands` in one jcmd attach; its output, or a refusal naming the command.
    fn jcmd(&self, commands: &[&str]) -> Result<String, Refusal> {
        let pid = self.pid;
        let what = format!("jcmd {pid} {}", commands.join("; "));
        let mut args: Vec<String> = JCMD_VM.iter().map(|s| s.to_string()).collect();
        args.push(pid.to_string());
        let input = match commands {
            [one] => {
                args.extend(one.split_whitespace().map(str::to_string));
                None
            }
            many => {
                args.extend(["-f".to_string(), "/dev/stdin".to_string()]);
                Some(many.join("\n") + "\n")
            }
        };
        match run_bounded(&self.jcmd, &args, input.as_deref(), self.timeout) {
            Ok((true, text)) => Ok(text),
            Ok((false, text)) => {
                let said = text
                    .lines()
                    .map(str::trim)
                    .rfind(|l| !l.is_empty() && !l.starts_with("at "))
                    .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
                    .unwrap_or("no output")
                    .to_string();
                let why = if exited(pid) {
                    format!("the JVM (pid {pid}) is gone: {what}: {said}")
                } else {
                    format!("{what}: {said}")
                };
                Err(Refusal::new(why))
            }
            Err(e) => Err(Refusal::new(format!("{what}: {e}"))),
        }
    }

    /// Runs `commands` (each printing nothing on success) and then `GC.heap_info`.
    fn then_heap(&self, commands: &[&str]) -> Result<Heap, Refusal> {
        let mut all = commands.to_vec();
        all.push("GC.heap_info");
        let text = self.jcmd(&all)?;
        let rest = after_ok(&text, commands)
            .map_err(|e| Refusal::new(format!("jcmd {}: {e}", self.pid)))?;
        parse_heap_info(self.collector, rest)
            .map_err(|e| Refusal::new(format!("jcmd {}: {e}", self.pid)))
    }

    /// Runs `commands`, each printing nothing on success.
    fn all_ok(&self, commands: &[&str]) -> Result<(), Refusal> {
        let text = self.jcmd(commands)?;
        after_ok(&text, commands)
            .map(|_| ())
            .map_err(|e| Refusal::new(format!("jcmd {}: {e}", self.pid)))
    }

    fn heap(&self) -> Result<Heap, Refusal> {
        self.then_heap(&[])
    }

    /// Waits until the committed heap is at most `target` plus the slack; `heap` is the last
    /// reading. The pool is at `target` either way.
    fn until_committed(&self, target: u64, mut heap: Heap) -> Result<(), Refusal> {
        let limit = target.saturating_add(slack(target));
        let start = Instant::now();
        let mut last_gc = start;
        while heap.committed > limit {
            if start.elapsed() >= self.deadline {
                return Err(Refusal::new(format!(
                    "{}: the committed heap is {} bytes after {:?}, above the target {target} \
                     (+{} slack); used {}",
                    self.collector,
                    heap.committed,
                    self.deadline,
                    slack(target),
                    heap.used
                ))
                .at(target));
            }
            std::thread::sleep(POLL);
            let again = last_gc.elapsed() >= GC_AGAIN;
            if again {
                last_gc = Instant::now();
            }
            let read = if again {
                self.then_heap(&["GC.run"])
            } else {
                self.heap()
            };
            heap = read.map_err(|r| r.at(target))?;
        }
        Ok(())
    }

    /// Sets `SoftMaxHeapSize`; a shrink then collects and waits for the uncommit.
    fn resize_soft_max(&mut self, bytes: u64) -> Result<(), Refusal> {
        let set = format!("VM.set_flag SoftMaxHeapSize {bytes}");
        if bytes >= self.size {
            self.all_ok(&[&set])?;
            self.size = bytes;
            return Ok(());
        }
        if let Some(why) = &self.blocker {
            return Err(Refusal::new(why.clone()));
        }
        let text = self.jcmd(&[&set, "GC.run", "GC.heap_info"])?;
        let pid = self.pid;
        let rest = match after_ok(&text, &[&set, "GC.run"]) {
            Ok(rest) => rest,
            Err(e) if e.starts_with(&set) => {
                return Err(Refusal::new(format!("jcmd {pid}: {e}")));
            }
            Err(e) => {
                self.size = bytes;
                return Err(Refusal::new(format!("jcmd {pid}: {e}")).at(bytes));
            }
        };
        self.size = bytes;
        let heap = parse_heap_info(self.collector, rest)
            .map_err(|e| Refusal::new(format!("jcmd {pid}: {e}")).at(bytes))?;
        self.until_committed(bytes, heap)
    }

    /// Steers G1's free ratios at `bytes` and collects; a grow puts the defaults back.
    fn resize_g1(&mut self, bytes: u64) -> Result<(), Refusal> {
        if bytes >= self.size {
            let set = g1_ratios(G1_MIN_FREE, G1_MAX_FREE);
            self.all_ok(&set.iter().map(String::as_str).collect::<Vec<_>>())?;
            self.size = bytes;
            return Ok(());
        }
        if let Some(why) = &self.blocker {
            return Err(Refusal::new(why.clone()));
        }
        let live = self.then_heap(&["GC.run"])?.used;
        let ratio = g1_ratio(live, bytes).ok_or_else(|| {
            Refusal::new(format!(
                "G1: the heap holds {live} bytes after a full GC, leaving less than \
                 {G1_LEAST_FREE}% of the target {bytes} free"
            ))
        })?;
        let mut heap = self.g1_ratios_and_gc(ratio)?;
        self.size = bytes;
        // G1 sizes the heap on more than the live bytes (whole regions, and what the workload
        // allocated since): a heap above the target is aimed again, at most twice, on what
        // G1 counted.
        let mut ratio = ratio;
        for _ in 0..2 {
            if heap.committed <= bytes {
                break;
            }
            let counted = g1_counted(heap.committed, ratio);
            match g1_ratio(counted, bytes) {
                Some(lower) if lower < ratio => ratio = lower,
                _ => break,
            }
            heap = self.g1_ratios_and_gc(ratio).map_err(|r| r.at(bytes))?;
        }
        self.until_committed(bytes, heap)
    }

    /// Sets both of G1's free ratios to `ratio`, then runs a full GC.
    fn g1_ratios_and_gc(&self, ratio: u64) -> Result<Heap, Refusal> {
        let set = g1_ratios(ratio, ratio);
        let mut commands: Vec<&str> = set.iter().map(String::as_str).collect();
        commands.push("GC.run");
        self.then_heap(&commands)
    }
}

impl Pool for JvmPool {
    /// `SoftMaxHeapSize` (ZGC, Shenandoah) or G1's cap, as read at connect and set since.
    fn size(&mut self) -> Result<u64, Refusal> {
        Ok(self.size)
    }

    fn resize(&mut self, bytes: u64) -> Result<(), Refusal> {
        if bytes > self.max_heap {
            return Err(Refusal::new(format!(
                "{bytes} bytes is above the JVM's MaxHeapSize (-Xmx) {}",
                self.max_heap
            )));
        }
        if bytes < self.min_heap {
            return Err(Refusal::new(format!(
                "{bytes} bytes is below the JVM's MinHeapSize (-Xms) {}: no collector \
                 uncommits below it",
                self.min_heap
            )));
        }
        match self.collector {
            Collector::G1 => self.resize_g1(bytes),
            Collector::Shenandoah | Collector::Zgc => self.resize_soft_max(bytes),
        }
    }

    /// One `GC.heap_info`: the heap's used bytes; a heap has no hits, misses, evictions or
    /// dirty bytes.
    fn stats(&mut self) -> Result<PoolStats, Refusal> {
        Ok(PoolStats {
            used_bytes: self.heap()?.used,
            hits: 0,
            misses: 0,
            evictions: 0,
            dirty_bytes: 0,
            curve: None,
            durability: None,
        })
    }

    /// The committed heap: free regions were touched too, and a shrink must give them back.
    fn resident(&mut self) -> Result<u64, Refusal> {
        Ok(self.heap()?.committed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from OpenJDK 17.0.15 (jcmd PID GC.heap_info, jcmd PID VM.flags).
    const SHENANDOAH_HEAP: &str = "10080:
Shenandoah Heap
 1536M max, 600M soft max, 388M committed, 368M used
 3072 x 512K regions
Status: not cancelled
Reserved region:
 - [0x00000000a0000000, 0x0000000100000000) 
Collection set:
 - map (vanilla): 0x0000000000011400
 - map (biased):  0x0000000000010000

 Metaspace       used 325K, committed 512K, reserved 1114112K
  class space    used 13K, committed 128K, reserved 1048576K
";
    const ZGC_HEAP: &str = "11885:
 ZHeap           used 442M, capacity 508M, max capacity 1536M
 Metaspace       used 321K, committed 512K, reserved 1114112K
  class space    used 15K, committed 128K, reserved 1048576K
";
    const G1_HEAP: &str = "13713:
 garbage-first heap   total 1154048K, used 447540K [0x00000000a0000000, 0x0000000100000000)
  region size 1024K, 97 young (99328K), 8 survivors (8192K)
 Metaspace       used 283K, committed 448K, reserved 1114112K
  class space    used 10K, committed 128K, reserved 1048576K
";
    const SHENANDOAH_FLAGS: &str = "10080:
-XX:CICompilerCount=2 -XX:InitialHeapSize=67108864 -XX:MaxHeapSize=1610612736 -XX:MinHeapDeltaBytes=524288 -XX:MinHeapSize=67108864 -XX:ShenandoahUncommitDelay=1000 -XX:SoftMaxHeapSize=1610612736 -XX:-THPStackMitigation -XX:+UnlockExperimentalVMOptions -XX:+UseCompressedClassPointers -XX:+UseCompressedOops -XX:+UseShenandoahGC 
";
    const G1_FLAGS: &str = "13713:
-XX:CICompilerCount=2 -XX:ConcGCThreads=1 -XX:G1HeapRegionSize=1048576 -XX:InitialHeapSize=67108864 -XX:MaxHeapSize=1610612736 -XX:MinHeapSize=67108864 -XX:SoftMaxHeapSize=1610612736 -XX:+UseCompressedOops -XX:+UseG1GC 
";

    #[test]
    fn shenandoah_heap_info_gives_committed_and_used() {
        let heap = parse_heap_info(Collector::Shenandoah, SHENANDOAH_HEAP).unwrap();
        assert_eq!(
            heap,
            Heap {
                committed: 388 * MIB,
                used: 368 * MIB
            }
        );
    }

    #[test]
    fn zgc_heap_info_gives_capacity_as_committed_not_max_capacity() {
        let heap = parse_heap_info(Collector::Zgc, ZGC_HEAP).unwrap();
        assert_eq!(
            heap,
            Heap {
                committed: 508 * MIB,
                used: 442 * MIB
            }
        );
    }

    #[test]
    fn g1_heap_info_gives_total_as_committed_in_kib() {
        let heap = parse_heap_info(Collector::G1, G1_HEAP).unwrap();
        assert_eq!(
            heap,
            Heap {
                committed: 1_154_048 << 10,
                used: 447_540 << 10
            }
        );
    }

    #[test]
    fn heap_info_of_another_collector_or_cut_short_is_an_error_not_zero() {
        let e = parse_heap_info(Collector::G1, ZGC_HEAP).unwrap_err();
        assert!(e.contains("no G1 heap line"), "{e}");
        let e = parse_heap_info(Collector::Zgc, " ZHeap           used 442M\n").unwrap_err();
        assert!(e.contains("no capacity"), "{e}");
        assert!(parse_heap_info(Collector::Shenandoah, "").is_err());
        assert!(parse_heap_info(Collector::Shenandoah, " xM committed, yM used").is_err());
    }

    #[test]
    fn printed_sizes_read_in_their_units_and_garbage_is_none() {
        assert_eq!(parse_printed("1369M"), Some(1369 * MIB));
        assert_eq!(parse_printed("1320375K"), Some(1_320_375 << 10));
        assert_eq!(parse_printed("2G"), Some(2 << 30));
        assert_eq!(parse_printed("512B"), Some(512));
        assert_eq!(parse_printed("42"), Some(42));
        assert_eq!(parse_printed("12Q"), None);
        assert_eq!(parse_printed("M"), None);
        assert_eq!(parse_printed("99999999999999999999G"), None);
    }

    #[test]
    fn vm_flags_read_values_and_booleans() {
        let flags = parse_flags(SHENANDOAH_FLAGS);
        assert_eq!(flags["MaxHeapSize"], "1610612736");
        assert_eq!(flags["SoftMaxHeapSize"], "1610612736");
        assert_eq!(flags["UseShenandoahGC"], "true");
        assert_eq!(flags["THPStackMitigation"], "false");
        assert!(!flags.contains_key("10080:"));
    }

    #[test]
    fn the_declared_collector_passes_and_another_is_refused_naming_both() {
        let g1 = parse_flags(G1_FLAGS);
        assert!(check_collector(&g1, Collector::G1, 7).is_ok());
        let e = check_collector(&g1, Collector::Shenandoah, 7).unwrap_err();
        assert!(e.contains("G1") && e.contains("Shenandoah"), "{e}");
        let e = check_collector(&parse_flags("-XX:+UseSerialGC"), Collector::Zgc, 7).unwrap_err();
        assert!(e.contains("Serial") && e.contains("ZGC"), "{e}");
        let e = check_collector(&BTreeMap::new(), Collector::Zgc, 7).unwrap_err();
        assert!(e.contains("names no collector"), "{e}");
    }

    #[test]
    fn zgc_with_the_default_uncommit_delay_cannot_shrink_and_says_what_to_launch_with() {
        let deadline = Duration::from_secs(30);
        let flags = parse_flags("-XX:+UseZGC");
        let why = blocker(&flags, Collector::Zgc, deadline).unwrap();
        assert!(why.contains("-XX:ZUncommitDelay=1"), "{why}");
        let flags = parse_flags("-XX:+UseZGC -XX:ZUncommitDelay=1");
        assert_eq!(blocker(&flags, Collector::Zgc, deadline), None);
        let flags = parse_flags("-XX:+UseZGC -XX:ZUncommitDelay=1 -XX:-ZUncommit");
        assert!(blocker(&flags, Collector::Zgc, deadline).is_some());
        let flags = parse_flags("-XX:+UseShenandoahGC -XX:+DisableExplicitGC");
        let why = blocker(&flags, Collector::Shenandoah, deadline).unwrap();
        assert!(why.contains("DisableExplicitGC"), "{why}");
        assert_eq!(
            blocker(
                &parse_flags(SHENANDOAH_FLAGS),
                Collector::Shenandoah,
                deadline
            ),
            None
        );
    }

    #[test]
    fn commands_that_succeed_are_taken_off_and_one_that_fails_is_named_with_its_line() {
        let text = "10080:\nCommand executed successfully\nCommand executed successfully\n heap\n";
        assert_eq!(after_ok(text, &["a", "b"]).unwrap(), " heap\n");
        let text = "10080:\nSoftMaxHeapSize error: value violates its flag's constraint.\n heap\n";
        let e = after_ok(text, &["VM.set_flag SoftMaxHeapSize 9", "GC.run"]).unwrap_err();
        assert_eq!(
            e,
            "VM.set_flag SoftMaxHeapSize 9: SoftMaxHeapSize error: value violates its flag's \
             constraint."
        );
        assert_eq!(
            after_ok("10080:\n", &["GC.run"]).unwrap_err(),
            "GC.run: no answer"
        );
    }

    #[test]
    fn g1_ratio_aims_the_heap_at_or_under_the_target() {
        // 314 MiB live, 600 MiB wanted: 47% free, so 314 / 0.53 = 592 MiB.
        assert_eq!(g1_ratio(314 * MIB, 600 * MIB), Some(47));
        assert_eq!(g1_ratio(600 * MIB, 600 * MIB), None);
        assert_eq!(g1_ratio(700 * MIB, 600 * MIB), None);
        assert_eq!(g1_ratio(95 * MIB, 100 * MIB), None, "5% free is too little");
        assert_eq!(g1_ratio(0, 0), None);
        assert_eq!(g1_ratio(0, u64::MAX), Some(100));
    }

    #[test]
    fn a_g1_heap_that_landed_above_the_target_is_aimed_lower_on_what_g1_counted() {
        // Aimed at 600 MiB with 47% free, G1 kept 632 MiB: it sized on 335 MiB, so 44%.
        let counted = g1_counted(632 * MIB, 47);
        assert_eq!(counted / MIB, 334);
        assert_eq!(g1_ratio(counted, 600 * MIB), Some(44));
        assert_eq!(g1_counted(u64::MAX, 0), u64::MAX);
        assert_eq!(g1_counted(100, 250), 0);
    }

    #[test]
    fn a_process_that_is_gone_has_exited_and_this_one_has_not() {
        assert!(!exited(std::process::id()));
        assert!(exited(u32::MAX));
    }

    #[test]
    fn collectors_are_named_as_the_tenant_declares_them() {
        assert_eq!("shenandoah".parse(), Ok(Collector::Shenandoah));
        assert_eq!("ZGC".parse(), Ok(Collector::Zgc));
        assert_eq!("g1".parse(), Ok(Collector::G1));
        assert!("cms".parse::<Collector>().unwrap_err().contains("cms"));
    }

    fn fake_proc(pids: &[(u32, &str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (pid, comm, cgroup) in pids {
            let p = dir.path().join(pid.to_string());
            std::fs::create_dir(&p).unwrap();
            std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
            std::fs::write(
                p.join("cgroup"),
                format!("5:devices:/\n4:memory:{cgroup}\n0::/\n"),
            )
            .unwrap();
        }
        std::fs::create_dir(dir.path().join("self")).unwrap();
        dir
    }

    #[test]
    fn the_jvm_is_the_java_process_in_the_same_memory_cgroup() {
        let proc = fake_proc(&[
            (10, "memtide-adapter", "/t/app"),
            (11, "java", "/t/app"),
            (12, "java", "/t/other"),
            (13, "jcmd", "/t/app"),
            (14, "java", "/t/app/child"),
        ]);
        assert_eq!(
            jvms_in(proc.path(), CgroupVersion::V1, "/t/app", 10),
            vec![11]
        );
        assert_eq!(
            jvms_in(proc.path(), CgroupVersion::V1, "/t/none", 10),
            Vec::<u32>::new()
        );
        let two = fake_proc(&[(20, "java", "/t/app"), (21, "java", "/t/app")]);
        assert_eq!(
            jvms_in(two.path(), CgroupVersion::V1, "/t/app", 1),
            vec![20, 21]
        );
        assert!(jvms_in(Path::new("/nonexistent"), CgroupVersion::V1, "/", 1).is_empty());
    }

    /// A fake jcmd running `script`, written by a child process: a file this process had open
    /// for writing could be inherited by another test's fork, and executing it would then
    /// fail with "Text file busy".
    fn fake_jcmd(dir: &Path, script: &str) -> PathBuf {
        let path = dir.join("jcmd");
        let mut sh = Command::new("sh")
            .arg("-c")
            .arg(r#"cat > "$0" && chmod 755 "$0""#)
            .arg(&path)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        sh.stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(sh.wait().unwrap().success());
        path
    }

    #[test]
    fn a_jcmd_that_hangs_is_killed_at_the_time_out_and_the_refusal_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let fake = fake_jcmd(dir.path(), "#!/bin/sh\nexec sleep 30\n");
        let pool = JvmPool {
            collector: Collector::Shenandoah,
            pid: std::process::id(),
            jcmd: fake,
            timeout: Duration::from_millis(300),
            deadline: Duration::from_secs(1),
            max_heap: 1 << 30,
            min_heap: 0,
            blocker: None,
            size: 1 << 30,
        };
        let r = pool.jcmd(&["GC.run"]).unwrap_err();
        assert!(r.reason.contains("GC.run"), "{}", r.reason);
        assert!(r.reason.contains("killed"), "{}", r.reason);
    }

    #[test]
    fn a_jcmd_that_fails_is_a_refusal_with_its_message_and_a_missing_one_too() {
        let dir = tempfile::tempdir().unwrap();
        let fake = fake_jcmd(
            dir.path(),
            "#!/bin/sh\necho \"$5:\"\necho java.io.IOException: No such process\n\
             echo '\tat jdk.attach/sun.tools.attach.VirtualMachineImpl.sendQuitTo(Native Method)'\n\
             exit 1\n",
        );
        let mut pool = JvmPool {
            collector: Collector::G1,
            pid: std::process::id(),
            jcmd: fake,
            timeout: Duration::from_secs(5),
            deadline: Duration::from_secs(1),
            max_heap: 1 << 30,
            min_heap: 0,
            blocker: None,
            size: 1 << 30,
        };
        let r = pool.stats().unwrap_err();
        assert!(r.reason.contains("No such process"), "{}", r.reason);
        pool.jcmd = PathBuf::from("/nonexistent/jcmd");
        let r = pool.resize(1 << 29).unwrap_err();
        assert!(r.reason.contains("/nonexistent/jcmd"), "{}", r.reason);
    }

    #[test]
    fn targets_outside_xms_and_xmx_are_refused_naming_the_flag() {
        let mut pool = JvmPool {
            collector: Collector::Zgc,
            pid: 1,
            jcmd: PathBuf::from("/nonexistent/jcmd"),
            timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(1),
            max_heap: 1 << 30,
            min_heap: 256 * MIB,
            blocker: None,
            size: 1 << 30,
        };
        assert!(pool.resize(2 << 30).unwrap_err().reason.contains("-Xmx"));
        assert!(pool.resize(128 * MIB).unwrap_err().reason.contains("-Xms"));
    }
}
