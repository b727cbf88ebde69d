//! A sample application pool that memtide resizes: it really allocates its memory in granules (touching every page so it is resident), gives it back to the OS on shrink, serves lookups so its statistics mean something, and obeys targets through the agent; `--bench` times a 2 GiB shrink to 0 and grow back.
//!
//! ```text
//! cargo run --release -p memtide-balloon --example pool -- --pool 1G --max 2G --granule 2M
//! cargo run --release -p memtide-balloon --example pool -- --bench
//! ```
//!
//! The pool reserves `--max` bytes of address space once (an anonymous private mapping, no
//! swap reserved) and holds the first `size` bytes of it resident. Growing writes one byte in
//! every page of the new granules, so the kernel gives each page a frame; shrinking calls
//! `madvise(MADV_DONTNEED)` on the dropped granules, which frees their frames at once: the
//! process's resident set (VmRSS in /proc/self/status) falls by what was dropped before the
//! callback returns, so `done` is honest. The mapping asks for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`), so granules that are multiples of 2 MiB move in 2 MiB pages: a
//! grow then costs little more than the kernel zeroing the memory, and a shrink frees 512
//! times fewer pages. `--small-pages` keeps 4 KiB pages.
//!
//! `--curve SECONDS` makes it report its miss-ratio curve, so that memtide can size it by an SLO
//! (`[cache]`, docs/cache.md): every lookup's page goes through SHARDS
//! (`memtide_cache::WindowedShards`: at most 8192 sampled pages whatever the pool), and each
//! `stats` carries the
//! curve of the last full window of that many seconds, at 16 sizes up to `--max`, from the
//! second window on (the first only fills the sample's stack: its pages' first lookups would be
//! misses at every size). The lookups are uniform over `--max`, so the curve is close to
//! `1 - size / max`.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use memtide_balloon::agent::{Agent, PoolStats, Refusal};
use memtide_balloon::line::{Line, LineReader};
use memtide_balloon::protocol::{
    check_curve, AgentMessage, CurvePoint, MemtideMessage, PoolInfo, PoolKind, ProgressStatus,
    Target, Welcome,
};
use memtide_cache::WindowedShards;

const MIB: u64 = 1 << 20;

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("pool: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = if options.bench {
        bench(&options)
    } else {
        serve(&options)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pool: {message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: pool [--pool SIZE] [--min SIZE] [--max SIZE] [--granule SIZE] \
[--app NAME] [--socket PATH] [--lookups PER_SECOND] [--curve SECONDS] [--small-pages]
[--bench [--runs N]]
  sizes in bytes or with K, M, G (binary); defaults: --pool 1G --min 0 --max 2G --granule 2M
  --bench: shrink a 2 GiB pool (or --max) to 0 and grow it back, in-process and through a socket";

/// The command line.
#[derive(Debug, PartialEq)]
struct Options {
    pool: u64,
    min: u64,
    max: u64,
    granule: u64,
    app: String,
    socket: Option<PathBuf>,
    lookups_per_second: u64,
    /// Report the miss-ratio curve of each window this long.
    curve_window: Option<Duration>,
    huge_pages: bool,
    bench: bool,
    runs: usize,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut options = Options {
            pool: 1 << 30,
            min: 0,
            max: 2 << 30,
            granule: 2 * MIB,
            app: "sample-pool".into(),
            socket: None,
            lookups_per_second: 10_000,
            curve_window: None,
            huge_pages: true,
            bench: false,
            runs: 3,
        };
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--pool" => options.pool = parse_size(&flag, &value()?)?,
                "--min" => options.min = parse_size(&flag, &value()?)?,
                "--max" => options.max = parse_size(&flag, &value()?)?,
                "--granule" => options.granule = parse_size(&flag, &value()?)?,
                "--app" => options.app = value()?,
                "--socket" => options.socket = Some(PathBuf::from(value()?)),
                "--lookups" => options.lookups_per_second = parse_count(&flag, &value()?)?,
                "--runs" => options.runs = parse_count(&flag, &value()?)?.max(1) as usize,
                "--curve" => {
                    let seconds = parse_count(&flag, &value()?)?;
                    if seconds == 0 {
                        return Err(format!("{flag} needs at least 1 second"));
                    }
                    options.curve_window = Some(Duration::from_secs(seconds));
                }
                "--small-pages" => options.huge_pages = false,
                "--bench" => options.bench = true,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        let page = page_size();
        if options.granule == 0 || !options.granule.is_multiple_of(page) {
            return Err(format!(
                "--granule {} is not a positive multiple of the page size {page}",
                options.granule
            ));
        }
        for (flag, value) in [
            ("--pool", options.pool),
            ("--min", options.min),
            ("--max", options.max),
        ] {
            if !value.is_multiple_of(options.granule) {
                return Err(format!(
                    "{flag} {value} is not a multiple of --granule {}",
                    options.granule
                ));
            }
        }
        Ok(options)
    }

    fn pool_info(&self) -> PoolInfo {
        PoolInfo {
            app: self.app.clone(),
            kind: PoolKind::Cache,
            pool_bytes: self.pool,
            min_bytes: self.min,
            max_bytes: self.max,
            granule_bytes: self.granule,
        }
    }
}

/// `512M`, `2G`, `4096`: bytes, with an optional binary unit K, M, G or T.
fn parse_size(flag: &str, text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => {
            let shift = match unit.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("{flag} {text:?}: unknown unit {unit:?}")),
            };
            (&text[..at], shift)
        }
        _ => (text, 0),
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{flag} {text:?} is not a size such as 512M"))?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{flag} {text:?} is too large"))
}

fn parse_count(flag: &str, text: &str) -> Result<u64, String> {
    text.parse()
        .map_err(|_| format!("{flag} {text:?} is not a whole number"))
}

fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

/// Address space for `max` bytes, of which the first `size` are resident.
struct Pool {
    base: NonNull<u8>,
    max: u64,
    granule: u64,
    page: u64,
    /// The resident size; changed only under `resize`, read by lookups and statistics.
    size: AtomicU64,
    resize: Mutex<()>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

// SAFETY: the mapping lives as long as the pool and is only reached through atomic bytes
// (`byte`), so threads may share it.
unsafe impl Send for Pool {}
// SAFETY: as above.
unsafe impl Sync for Pool {}

impl Pool {
    /// Reserves `max` bytes and makes the first `size` resident.
    fn new(size: u64, max: u64, granule: u64, huge_pages: bool) -> Result<Pool, String> {
        let len = usize::try_from(max.max(1)).map_err(|_| format!("--max {max} is too large"))?;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; nothing else
        // refers to it.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(format!(
                "cannot reserve {} MiB: {}",
                max / MIB,
                std::io::Error::last_os_error()
            ));
        }
        let base = NonNull::new(address.cast::<u8>()).ok_or("mmap answered a null address")?;
        if huge_pages {
            // SAFETY: advice on the mapping just made. Without transparent huge pages the call
            // fails and the pool uses small pages, which is only slower.
            unsafe { libc::madvise(address, len, libc::MADV_HUGEPAGE) };
        }
        let pool = Pool {
            base,
            max,
            granule,
            page: page_size(),
            size: AtomicU64::new(0),
            resize: Mutex::new(()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        };
        pool.grow(size).map_err(|refusal| refusal.reason)?;
        Ok(pool)
    }

    fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    /// The byte at `offset` of the mapping, as an atomic so that lookups and resizes may
    /// touch the same page.
    fn byte(&self, offset: u64) -> &AtomicU8 {
        debug_assert!(offset < self.max);
        // SAFETY: offset < max, inside the mapping, which lives as long as `self`; every access
        // to the mapping goes through an AtomicU8, which has the layout of u8.
        unsafe { &*self.base.as_ptr().add(offset as usize).cast::<AtomicU8>() }
    }

    /// Makes the pool `to` bytes resident by writing to every page of the new granules.
    fn grow(&self, to: u64) -> Result<(), Refusal> {
        let _resizing = self.resize.lock().unwrap_or_else(PoisonError::into_inner);
        let from = self.size();
        if to > self.max {
            return Err(Refusal::new(format!(
                "{to} bytes is over the pool's {}",
                self.max
            )));
        }
        let mut offset = from;
        while offset < to {
            self.byte(offset).store(1, Ordering::Relaxed);
            offset += self.page;
            if offset.is_multiple_of(self.granule) {
                self.size.store(offset, Ordering::Release);
            }
        }
        self.size.store(to.max(from), Ordering::Release);
        Ok(())
    }

    /// Gives the granules past `to` back to the OS.
    fn shrink(&self, to: u64) -> Result<(), Refusal> {
        let _resizing = self.resize.lock().unwrap_or_else(PoisonError::into_inner);
        let from = self.size();
        if to >= from {
            return Ok(());
        }
        // Lookups stop at the new size before the memory goes.
        self.size.store(to, Ordering::Release);
        // SAFETY: [to, from) is inside the mapping; MADV_DONTNEED on a private anonymous
        // mapping drops its frames, and the range reads as zeros afterwards.
        let status = unsafe {
            libc::madvise(
                self.base.as_ptr().add(to as usize).cast(),
                (from - to) as usize,
                libc::MADV_DONTNEED,
            )
        };
        if status != 0 {
            let error = std::io::Error::last_os_error();
            self.size.store(from, Ordering::Release);
            return Err(Refusal::new(format!(
                "madvise(MADV_DONTNEED) failed: {error}"
            )));
        }
        self.evictions
            .fetch_add((from - to) / self.granule, Ordering::Relaxed);
        Ok(())
    }

    /// One lookup of a key spread over `max`: a hit if its granule is resident. Answers the
    /// offset looked up.
    fn lookup(&self, key: u64) -> u64 {
        let offset = key % self.max.max(1);
        if offset < self.size() {
            self.byte(offset - offset % self.page)
                .load(Ordering::Relaxed);
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        offset
    }

    fn stats(&self, curve: Option<&Curve>) -> PoolStats {
        PoolStats {
            used_bytes: self.size(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            dirty_bytes: 0,
            curve: curve.and_then(Curve::last),
            durability: None,
        }
    }
}

/// The pool's sampled miss-ratio curve (see the module docs): the lookups' pages through
/// SHARDS, one curve per window.
struct Curve {
    window: Duration,
    max: u64,
    page: u64,
    state: Mutex<CurveState>,
}

struct CurveState {
    shards: WindowedShards,
    since: Instant,
    last: Option<Vec<CurvePoint>>,
}

impl Curve {
    fn new(window: Duration, max: u64, page: u64) -> Curve {
        Curve {
            window,
            max,
            page,
            state: Mutex::new(CurveState {
                shards: WindowedShards::new(),
                since: Instant::now(),
                last: None,
            }),
        }
    }

    /// Samples the lookups at `offsets` (a burst under one lock), and ends the window when
    /// it is due.
    fn sample(&self, offsets: &[u64]) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for &offset in offsets {
            s.shards.access(offset / self.page);
        }
        if s.since.elapsed() >= self.window {
            s.since = Instant::now();
            let Some(points) = s.shards.end_window(self.max / self.page, 16) else {
                return;
            };
            let points: Vec<CurvePoint> = points
                .into_iter()
                .map(|(p, m)| CurvePoint::new(p * self.page, m))
                .collect();
            s.last = check_curve(&points).is_ok().then_some(points);
        }
    }

    /// The last full window's curve.
    fn last(&self) -> Option<Vec<CurvePoint>> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last
            .clone()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no reference to it outlives the
        // pool.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.max.max(1) as usize) };
    }
}

/// The process's resident set, from VmRSS in /proc/self/status.
fn rss_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| "no VmRSS in /proc/self/status".to_string())
}

struct Mib(u64);

impl fmt::Display for Mib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} MiB", self.0 / MIB)
    }
}

/// Registers the pool with memtide and serves lookups until killed.
fn serve(options: &Options) -> Result<(), String> {
    let pool = Arc::new(Pool::new(
        options.pool,
        options.max,
        options.granule,
        options.huge_pages,
    )?);
    println!(
        "pool: {} resident of {} (granule {}), RSS {}",
        Mib(pool.size()),
        Mib(options.max),
        Mib(options.granule),
        Mib(rss_bytes()?)
    );
    let resized = |verb: &'static str, pool: Arc<Pool>| {
        move |to: u64| {
            let started = Instant::now();
            let outcome = if verb == "shrink" {
                pool.shrink(to)
            } else {
                pool.grow(to)
            };
            let rss = rss_bytes().map_or_else(|e| e, |rss| Mib(rss).to_string());
            println!(
                "pool: {verb} to {} in {:.3} s: {}, RSS {rss}",
                Mib(to),
                started.elapsed().as_secs_f64(),
                match &outcome {
                    Ok(()) => "done".to_string(),
                    Err(refusal) => format!("failed: {}", refusal.reason),
                }
            );
            outcome
        }
    };
    let curve = options
        .curve_window
        .map(|w| Arc::new(Curve::new(w, options.max, page_size())));
    let mut builder = Agent::builder(options.pool_info())
        .on_shrink(resized("shrink", pool.clone()))
        .on_grow(resized("grow", pool.clone()))
        .stats({
            let (pool, curve) = (pool.clone(), curve.clone());
            move || pool.stats(curve.as_deref())
        });
    if let Some(socket) = &options.socket {
        builder = builder.socket(socket);
    }
    let agent = builder.start().map_err(|e| e.to_string())?;
    println!("pool: agent connecting to {}", agent.socket().display());
    let mut last_state = None;
    let mut key: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        // Lookups at the asked rate, in bursts every 100 ms.
        let mut burst = Vec::with_capacity((options.lookups_per_second / 10) as usize);
        for _ in 0..options.lookups_per_second / 10 {
            key ^= key << 13;
            key ^= key >> 7;
            key ^= key << 17;
            burst.push(pool.lookup(key));
        }
        if let Some(curve) = &curve {
            curve.sample(&burst);
        }
        thread::sleep(Duration::from_millis(100));
        let state = agent.state();
        if last_state.as_ref() != Some(&state) {
            match agent.last_error() {
                Some(error) => println!("pool: agent {state} (last error: {error})"),
                None => println!("pool: agent {state}"),
            }
            last_state = Some(state);
        }
    }
}

/// Times shrinking the pool to 0 and growing it back: in-process through the same callbacks
/// the agent calls, then end to end through a socket with a minimal memtide in this process.
fn bench(options: &Options) -> Result<(), String> {
    let max = options.max;
    println!(
        "bench: {} pool, granule {}, {} runs, {} pages",
        Mib(max),
        Mib(options.granule),
        options.runs,
        if options.huge_pages { "huge" } else { "small" }
    );
    let baseline = rss_bytes()?;
    let pool = Arc::new(Pool::new(max, max, options.granule, options.huge_pages)?);
    println!(
        "bench: RSS {} before the pool, {} with it",
        Mib(baseline),
        Mib(rss_bytes()?)
    );

    let (mut shrinks, mut grows) = (Vec::new(), Vec::new());
    for run in 1..=options.runs {
        let started = Instant::now();
        pool.shrink(0).map_err(|r| r.reason)?;
        shrinks.push(started.elapsed());
        let after_shrink = rss_bytes()?;
        let started = Instant::now();
        pool.grow(max).map_err(|r| r.reason)?;
        grows.push(started.elapsed());
        println!(
            "bench: in-process run {run}: shrink {:.3} s (RSS {}), grow {:.3} s (RSS {})",
            shrinks[run - 1].as_secs_f64(),
            Mib(after_shrink),
            grows[run - 1].as_secs_f64(),
            Mib(rss_bytes()?)
        );
    }
    println!(
        "bench: in-process median: shrink {:.3} s, grow {:.3} s",
        median(&mut shrinks),
        median(&mut grows)
    );

    let (shrinks, grows) = bench_through_socket(options, pool)?;
    println!(
        "bench: through the socket median: shrink {:.3} s, grow {:.3} s",
        median(&mut shrinks.clone()),
        median(&mut grows.clone())
    );
    Ok(())
}

/// Runs an agent for `pool` against a minimal memtide on a socket in a temporary directory,
/// and times each target from sending it to reading its `done`.
fn bench_through_socket(
    options: &Options,
    pool: Arc<Pool>,
) -> Result<(Vec<Duration>, Vec<Duration>), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let path = dir.path().join("balloon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    let mut info = options.pool_info();
    info.pool_bytes = pool.size();
    info.min_bytes = 0;
    let shrinking = pool.clone();
    let growing = pool.clone();
    let agent = Agent::builder(info)
        .socket(&path)
        .on_shrink(move |to| shrinking.shrink(to))
        .on_grow(move |to| growing.grow(to))
        .stats(move || pool.stats(None))
        .start()
        .map_err(|e| e.to_string())?;
    let (stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let mut memtide = Memtide {
        lines: LineReader::new(stream),
    };
    match memtide.read()? {
        AgentMessage::Hello(_) => {}
        other => return Err(format!("expected a hello, got {}", other.encode())),
    }
    memtide.send(&MemtideMessage::Welcome(Welcome {
        tenant: "bench".into(),
        stats_interval_ms: 60_000,
        dead_after_ms: 180_000,
    }))?;
    let (mut shrinks, mut grows) = (Vec::new(), Vec::new());
    let mut seq = 0;
    for run in 1..=options.runs {
        for (to, times) in [(0, &mut shrinks), (options.max, &mut grows)] {
            seq += 1;
            let started = Instant::now();
            memtide.send(&MemtideMessage::Target(Target {
                seq,
                pool_bytes: to,
                deadline_ms: 60_000,
            }))?;
            memtide.done(seq)?;
            times.push(started.elapsed());
        }
        println!(
            "bench: through the socket run {run}: shrink {:.3} s, grow {:.3} s (RSS {})",
            shrinks[run - 1].as_secs_f64(),
            grows[run - 1].as_secs_f64(),
            Mib(rss_bytes()?)
        );
    }
    agent.stop();
    Ok((shrinks, grows))
}

/// The memtide side of the socket benchmark.
struct Memtide {
    lines: LineReader<std::os::unix::net::UnixStream>,
}

impl Memtide {
    fn send(&mut self, message: &MemtideMessage) -> Result<(), String> {
        use std::io::Write;
        let line = message.encode() + "\n";
        self.lines
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(|e| format!("cannot write to the agent: {e}"))
    }

    fn read(&mut self) -> Result<AgentMessage, String> {
        match self.lines.read_line() {
            Ok(Some(Line::Complete(line))) => {
                AgentMessage::decode(&line).map_err(|e| format!("the agent sent {e}"))
            }
            Ok(Some(Line::TooLong)) => Err("the agent sent a line over 65,536 bytes".into()),
            Ok(None) => Err("the agent closed the connection".into()),
            Err(e) => Err(format!("no line from the agent: {e}")),
        }
    }

    /// Reads until target `seq` is answered; `done` is the only good answer.
    fn done(&mut self, seq: u64) -> Result<(), String> {
        loop {
            match self.read()? {
                AgentMessage::Progress(progress) if progress.seq == seq => match progress.status {
                    ProgressStatus::Working => {}
                    ProgressStatus::Done => return Ok(()),
                    ProgressStatus::Failed => {
                        return Err(format!("target {seq} failed: {:?}", progress.reason))
                    }
                },
                AgentMessage::Error(error) => {
                    return Err(format!("the agent sent error {}", error.message))
                }
                _ => {}
            }
        }
    }
}

fn median(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units() {
        assert_eq!(parse_size("--pool", "4096"), Ok(4096));
        assert_eq!(parse_size("--pool", "512M"), Ok(512 * MIB));
        assert_eq!(parse_size("--pool", "2g"), Ok(2 << 30));
        assert_eq!(
            parse_size("--pool", "2X"),
            Err("--pool \"2X\": unknown unit 'X'".into())
        );
        assert!(parse_size("--pool", "M").is_err());
    }

    #[test]
    fn sizes_must_be_whole_granules() {
        let args = ["--pool", "3M", "--granule", "2M"].map(String::from);
        assert_eq!(
            Options::parse(args.into_iter()),
            Err("--pool 3145728 is not a multiple of --granule 2097152".into())
        );
    }

    /// The one test that reads RSS, so no other test of this binary moves it meanwhile.
    #[test]
    fn a_grow_makes_memory_resident_and_a_shrink_gives_it_back_to_the_os() {
        let size = 64 * MIB;
        for huge_pages in [false, true] {
            let pool = Pool::new(0, size, 2 * MIB, huge_pages).unwrap();
            let empty = rss_bytes().unwrap();
            pool.grow(size).unwrap();
            let full = rss_bytes().unwrap();
            assert!(
                full >= empty + size - 4 * MIB,
                "RSS {} after growing {} from {} (huge pages: {huge_pages})",
                Mib(full),
                Mib(size),
                Mib(empty)
            );
            pool.shrink(16 * MIB).unwrap();
            let shrunk = rss_bytes().unwrap();
            assert!(
                shrunk <= full - 48 * MIB + 4 * MIB,
                "RSS {} after shrinking 48 MiB from {} (huge pages: {huge_pages})",
                Mib(shrunk),
                Mib(full)
            );
            assert_eq!(pool.size(), 16 * MIB);
            assert_eq!(pool.stats(None).evictions, 24);
        }
    }

    #[test]
    fn lookups_hit_resident_granules_and_miss_the_others() {
        let pool = Pool::new(2 * MIB, 4 * MIB, 2 * MIB, false).unwrap();
        pool.lookup(MIB);
        pool.lookup(3 * MIB);
        pool.lookup(4 * MIB + 5);
        let stats = pool.stats(None);
        assert_eq!((stats.hits, stats.misses), (2, 1));
    }

    #[test]
    fn uniform_lookups_give_a_curve_falling_as_the_pool_grows() {
        let pool = Pool::new(2 * MIB, 64 * MIB, 2 * MIB, false).unwrap();
        let curve = Curve::new(Duration::ZERO, 64 * MIB, 4096);
        assert!(pool.stats(Some(&curve)).curve.is_none(), "no window yet");
        curve.sample(&[]);
        assert!(
            pool.stats(Some(&curve)).curve.is_none(),
            "the first window only warms the stack"
        );
        let mut key: u64 = 1;
        // Twenty passes' worth of uniform lookups over the 16,384 pages, in bursts (each its
        // own window: the window is zero).
        for _ in 0..40 {
            let burst: Vec<u64> = (0..8192)
                .map(|_| {
                    key ^= key << 13;
                    key ^= key >> 7;
                    key ^= key << 17;
                    pool.lookup(key)
                })
                .collect();
            curve.sample(&burst);
        }
        let points = pool.stats(Some(&curve)).curve.expect("a window ended");
        assert_eq!(points.len(), 16);
        assert_eq!(points[15].pool_bytes, 64 * MIB);
        // Uniform over the pool's largest size: 1 - size / max, within sampling error.
        for (k, p) in points.iter().enumerate() {
            let expected = 1.0 - (k + 1) as f64 / 16.0;
            assert!(
                (p.miss_ratio() - expected).abs() < 0.05,
                "at {} MiB: {} against {expected}",
                p.pool_bytes / MIB,
                p.miss_ratio()
            );
        }
    }
}
