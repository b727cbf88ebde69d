//! Redis for the real-server tests: a redis-server started inside a test cgroup (killed on drop), loaded over its own protocol with redis-benchmark's keyspace, a continuous redis-benchmark GET load in back-to-back windows whose CSV gives each window's p99, and PING.

use super::{free_port, TestCgroup};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// `name` on PATH, or in /usr/bin or /usr/local/bin.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The key redis-benchmark's `-r` makes of random number `i`: `key:__rand_int__` with the
/// placeholder replaced by 12 zero-padded digits.
/// redis-server and redis-benchmark, or `None` after `skip_or_fail` says `test` needs them.
pub fn redis_programs(test: &str) -> Option<(PathBuf, PathBuf)> {
    match (
        find_program("redis-server"),
        find_program("redis-benchmark"),
    ) {
        (Some(server), Some(bench)) => Some((server, bench)),
        _ => {
            memtide_testkit::skip_or_fail(
                test,
                "needs redis-server and redis-benchmark (apt-get install redis-server redis-tools)",
            );
            None
        }
    }
}

pub fn key(i: u64) -> String {
    format!("key:{i:012}")
}

/// A redis-server process in a test cgroup; killed and reaped on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    /// The server's stdout and stderr.
    pub log: PathBuf,
}

impl RedisServer {
    /// Starts `server` with no persistence on a free loopback port, inside `cg` (a shell joins
    /// the cgroup and then becomes the server, so all of its memory is charged there), and
    /// waits until it answers PING. `dir` holds its log and is its working directory; `cpu`
    /// pins the server (all its threads) to one CPU.
    pub fn start(
        server: &Path,
        cg: &TestCgroup,
        dir: &Path,
        name: &str,
        cpu: Option<usize>,
    ) -> RedisServer {
        let procs = cg.dir().join("cgroup.procs");
        let log = dir.join(format!("{name}-redis.log"));
        // A free port can be taken between our probe and the server's bind: try a few.
        for attempt in 1..=3 {
            let port = free_port();
            let out = std::fs::File::create(&log).expect("create the redis log");
            let err = out.try_clone().expect("clone the redis log");
            let mut command = Command::new("sh");
            pin(&mut command, cpu);
            let child = command
                .arg("-c")
                .arg("echo $$ > \"$0\" && exec \"$@\"")
                .arg(&procs)
                .arg(server)
                .args(["--save", "", "--appendonly", "no"])
                .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--daemonize", "no", "--dir"])
                .arg(dir)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .expect("start redis-server");
            let mut s = RedisServer {
                child,
                port,
                log: log.clone(),
            };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(15) && s.is_running() {
                if s.ping().is_ok() {
                    let pids = cg.cgroup.pids().unwrap_or_default();
                    assert!(
                        pids.contains(&s.pid()),
                        "redis-server {} is not in {} (procs {pids:?})",
                        s.pid(),
                        cg.path
                    );
                    return s;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            drop(s);
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if attempt < 3 && text.contains("Address already in use") {
                continue;
            }
            panic!("redis-server {name} did not answer PING within 15 s; its log:\n{text}");
        }
        unreachable!("the last attempt returns or panics")
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// PING, answered with PONG within 5 s.
    pub fn ping(&self) -> Result<(), String> {
        let mut c = Conn::open(self.addr(), Duration::from_secs(5))?;
        c.send(&command(&[b"PING"]))?;
        match c.reply()? {
            Reply::Status(s) if s == "PONG" => Ok(()),
            r => Err(format!("PING answered {r:?}")),
        }
    }

    /// Number of keys (DBSIZE).
    pub fn dbsize(&self) -> Result<u64, String> {
        let mut c = Conn::open(self.addr(), Duration::from_secs(5))?;
        c.send(&command(&[b"DBSIZE"]))?;
        match c.reply()? {
            Reply::Integer(n) if n >= 0 => Ok(n as u64),
            r => Err(format!("DBSIZE answered {r:?}")),
        }
    }

    /// `used_memory` from INFO memory: what the server's allocator holds for it.
    pub fn used_memory(&self) -> Result<u64, String> {
        let mut c = Conn::open(self.addr(), Duration::from_secs(5))?;
        c.send(&command(&[b"INFO", b"memory"]))?;
        let text = match c.reply()? {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            r => return Err(format!("INFO answered {r:?}")),
        };
        text.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("no used_memory in INFO memory:\n{text}"))
    }

    /// SETs keys `key(0)` .. `key(keys - 1)` (redis-benchmark's `-r keys` keyspace), each to
    /// `value_bytes` of pseudo-random letters and digits (as compressible as text, unlike
    /// redis-benchmark's all-`x` values that zram would squash to nothing), pipelined in
    /// batches; then checks DBSIZE.
    pub fn load(&self, keys: u64, value_bytes: usize) -> Result<(), String> {
        const BATCH: u64 = 256;
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut c = Conn::open(self.addr(), Duration::from_secs(60))?;
        let mut rng: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(self.port);
        let mut value = vec![0u8; value_bytes];
        let mut buf = Vec::with_capacity(BATCH as usize * (value_bytes + 64));
        let mut first = 0;
        while first < keys {
            let last = (first + BATCH).min(keys);
            buf.clear();
            for i in first..last {
                for b in value.iter_mut() {
                    // xorshift64
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    *b = ALPHABET[(rng % ALPHABET.len() as u64) as usize];
                }
                buf.extend_from_slice(&command(&[b"SET", key(i).as_bytes(), &value]));
            }
            c.send(&buf)?;
            for i in first..last {
                match c.reply()? {
                    Reply::Status(s) if s == "OK" => {}
                    r => return Err(format!("SET {} answered {r:?}", key(i))),
                }
            }
            first = last;
        }
        let n = self.dbsize()?;
        if n != keys {
            return Err(format!("loaded {keys} keys but DBSIZE is {n}"));
        }
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One RESP command.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[derive(Debug)]
enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Nil,
}

/// A client connection with read and write timeouts.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(addr: SocketAddr, timeout: Duration) -> Result<Conn, String> {
        let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
        s.set_read_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        s.set_write_timeout(Some(timeout))
            .map_err(|e| e.to_string())?;
        let writer = s.try_clone().map_err(|e| e.to_string())?;
        Ok(Conn {
            reader: BufReader::new(s),
            writer,
        })
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.writer
            .write_all(bytes)
            .map_err(|e| format!("send: {e}"))
    }

    /// One reply (no arrays: the commands here return none).
    fn reply(&mut self) -> Result<Reply, String> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(line.len().min(1));
        let bad = || format!("unexpected reply line {line:?}");
        match kind {
            "+" => Ok(Reply::Status(rest.to_string())),
            "-" => Ok(Reply::Error(rest.to_string())),
            ":" => rest.parse().map(Reply::Integer).map_err(|_| bad()),
            "$" => {
                let len: i64 = rest.parse().map_err(|_| bad())?;
                if len < 0 {
                    return Ok(Reply::Nil);
                }
                let mut body = vec![0u8; len as usize + 2];
                self.reader
                    .read_exact(&mut body)
                    .map_err(|e| format!("read: {e}"))?;
                body.truncate(len as usize);
                Ok(Reply::Bulk(body))
            }
            _ => Err(bad()),
        }
    }
}

/// One redis-benchmark result: its CSV line.
#[derive(Clone, Debug, PartialEq)]
pub struct Bench {
    pub rps: f64,
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Parses redis-benchmark `--csv` output (7.0: a header naming the columns, then one line per
/// test) for the line of `test`.
pub fn parse_csv(text: &str, test: &str) -> Result<Bench, String> {
    let fields = |l: &str| -> Vec<String> {
        l.split(',')
            .map(|f| f.trim().trim_matches('"').to_string())
            .collect()
    };
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = fields(lines.next().ok_or("empty redis-benchmark output")?);
    let row = lines
        .map(fields)
        .find(|f| f.first().is_some_and(|t| t == test))
        .ok_or_else(|| format!("no {test} line in redis-benchmark output:\n{text}"))?;
    let col = |name: &str| -> Result<f64, String> {
        let i = header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("no {name} column in redis-benchmark output:\n{text}"))?;
        row.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("bad {name} in redis-benchmark output:\n{text}"))
    };
    Ok(Bench {
        rps: col("rps")?,
        avg_ms: col("avg_latency_ms")?,
        p50_ms: col("p50_latency_ms")?,
        p95_ms: col("p95_latency_ms")?,
        p99_ms: col("p99_latency_ms")?,
        max_ms: col("max_latency_ms")?,
    })
}

/// What a GET load over a keyspace looks like to redis-benchmark.
#[derive(Clone, Debug)]
pub struct GetSpec {
    pub benchmark: PathBuf,
    pub port: u16,
    /// Random keys in `key(0)` .. `key(keys - 1)`.
    pub keys: u64,
    pub clients: u32,
    /// The CPU redis-benchmark is pinned to.
    pub cpu: Option<usize>,
}

/// Pins what `command` starts to `cpu`. On a small shared machine a client and a server that
/// the scheduler moves onto one CPU run at about half the rate, with twice the p99, so an
/// unpinned load's windows are bimodal (50k or 70k GETs/s on the same server a minute apart);
/// the server on one CPU and its client on another keep them comparable.
pub fn pin(command: &mut Command, cpu: Option<usize>) {
    use std::os::unix::process::CommandExt;
    let Some(cpu) = cpu else { return };
    // SAFETY: sched_setaffinity on the calling (child) process is async-signal-safe, and the
    // set is built on this side of the fork.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    unsafe {
        command.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl GetSpec {
    fn command(&self, requests: u64) -> Command {
        let mut c = Command::new(&self.benchmark);
        pin(&mut c, self.cpu);
        c.args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-t", "get", "-r", &self.keys.to_string()])
            .args(["-c", &self.clients.to_string()])
            .args(["-n", &requests.to_string(), "--csv"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

/// Runs one redis-benchmark GET window of `requests`, killing it after `timeout` or as soon as
/// `stop` is set.
fn run_window(spec: &GetSpec, requests: u64, timeout: Duration, stop: &AtomicBool) -> Outcome {
    let mut child = match spec.command(requests).spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("start redis-benchmark: {e}")),
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Outcome::Failed(format!("wait for redis-benchmark: {e}")),
        }
        if stop.load(Ordering::Relaxed) || start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return if stop.load(Ordering::Relaxed) {
                Outcome::Stopped
            } else {
                Outcome::TimedOut
            };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The CSV is two short lines: it fits the pipe, so reading after the exit is safe.
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    if !status.success() {
        return Outcome::Failed(format!("redis-benchmark exited {status}: {}{}", out, err));
    }
    match parse_csv(&out, "GET") {
        Ok(b) => Outcome::Done(b),
        Err(e) => Outcome::Failed(format!("{e}{err}")),
    }
}

/// One redis-benchmark run of `requests` GETs, waited for at most `timeout`.
pub fn bench_get(spec: &GetSpec, requests: u64, timeout: Duration) -> Result<Bench, String> {
    match run_window(spec, requests, timeout, &AtomicBool::new(false)) {
        Outcome::Done(b) => Ok(b),
        Outcome::TimedOut => Err(format!("{requests} GETs took more than {timeout:?}")),
        Outcome::Stopped => Err("stopped".into()),
        Outcome::Failed(e) => Err(e),
    }
}

#[derive(Clone, Debug)]
pub enum Outcome {
    Done(Bench),
    /// Killed after the window's time limit: fewer than requests / limit GETs per second.
    TimedOut,
    /// Killed because the load was stopped (not recorded).
    Stopped,
    Failed(String),
}

/// One window of the continuous load.
#[derive(Clone, Debug)]
pub struct Window {
    pub started: Instant,
    pub ended: Instant,
    pub outcome: Outcome,
    /// How the host's CPUs spent the window (`None` when /proc/stat could not be read).
    pub cpu: Option<CpuSplit>,
}

/// Shares of all CPUs' time over an interval, from the first line of /proc/stat: what else ran
/// on a shared machine while a window was measured.
#[derive(Clone, Copy, Debug)]
pub struct CpuSplit {
    pub user: f64,
    pub system: f64,
    pub softirq: f64,
    pub steal: f64,
    pub idle: f64,
}

/// The cumulative `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal.
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes([u64; 8]);

impl CpuTimes {
    pub fn read() -> Option<CpuTimes> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let line = text.lines().next()?.strip_prefix("cpu ")?;
        let mut v = [0u64; 8];
        for (slot, field) in v.iter_mut().zip(line.split_whitespace()) {
            *slot = field.parse().ok()?;
        }
        Some(CpuTimes(v))
    }

    /// The split of the time between `self` (earlier) and `later`.
    pub fn split_until(&self, later: &CpuTimes) -> Option<CpuSplit> {
        let d: Vec<f64> = (0..8)
            .map(|i| later.0[i].saturating_sub(self.0[i]) as f64)
            .collect();
        let total: f64 = d.iter().sum();
        (total > 0.0).then(|| CpuSplit {
            user: (d[0] + d[1]) / total,
            system: (d[2] + d[5]) / total,
            softirq: d[6] / total,
            steal: d[7] / total,
            idle: (d[3] + d[4]) / total,
        })
    }
}

impl std::fmt::Display for CpuSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cpu user {:.0}% sys {:.0}% softirq {:.0}% steal {:.0}% idle {:.0}%",
            self.user * 100.0,
            self.system * 100.0,
            self.softirq * 100.0,
            self.steal * 100.0,
            self.idle * 100.0
        )
    }
}

/// A continuous GET load: redis-benchmark runs of `requests` each, back to back (a gap of one
/// process start between them), until dropped. Each run is a measurement window.
pub struct GetLoad {
    pub spec: GetSpec,
    pub requests: u64,
    pub window_limit: Duration,
    stop: Arc<AtomicBool>,
    windows: Arc<Mutex<Vec<Window>>>,
    thread: Option<JoinHandle<()>>,
}

impl GetLoad {
    /// Starts the load; a window still running after `window_limit` is killed and recorded as
    /// timed out.
    pub fn start(spec: GetSpec, requests: u64, window_limit: Duration) -> GetLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let windows = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (spec, stop, windows) = (spec.clone(), stop.clone(), windows.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let cpu0 = CpuTimes::read();
                    let outcome = run_window(&spec, requests, window_limit, &stop);
                    let cpu = cpu0
                        .zip(CpuTimes::read())
                        .and_then(|(a, b)| a.split_until(&b));
                    if matches!(outcome, Outcome::Stopped) {
                        break;
                    }
                    let failed = matches!(outcome, Outcome::Failed(_));
                    let w = Window {
                        started,
                        ended: Instant::now(),
                        outcome,
                        cpu,
                    };
                    windows.lock().unwrap_or_else(|e| e.into_inner()).push(w);
                    if failed {
                        // Do not spin on a server that is gone.
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            })
        };
        GetLoad {
            spec,
            requests,
            window_limit,
            stop,
            windows,
            thread: Some(thread),
        }
    }

    /// The windows finished so far, oldest first.
    pub fn windows(&self) -> Vec<Window> {
        self.windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Windows that started at or after `from`.
    pub fn windows_since(&self, from: Instant) -> Vec<Window> {
        self.windows()
            .into_iter()
            .filter(|w| w.started >= from)
            .collect()
    }

    /// Stops the load: kills the running window and waits for the thread.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for GetLoad {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}
