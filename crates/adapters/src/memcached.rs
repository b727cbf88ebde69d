//! memcached as a balloon pool: its memory limit (`maxbytes`) is the pool, moved with `cache_memlimit`; a shrink then moves slab pages to memcached's global page pool (`slabs reassign -1 0`), which frees them while memcached holds more than its limit, and is done only once `total_malloced` is at or under the limit.
//!
//! - **Sets.** `cache_memlimit N`, in MiB (memcached's unit): a target is rounded down to
//!   the MiB, so the granule is 1 MiB (or a multiple); memcached refuses under 8 MiB.
//! - **Shrinking.** The limit alone gives nothing back: the slab pages memcached already
//!   allocated stay. So the adapter asks memcached's page mover for `slabs reassign -1 0`
//!   (a page from any class to the global page pool; the items on it are evicted, or moved
//!   into free chunks of their class) until `total_malloced` (`stats slabs`) is at or under
//!   `limit_maxbytes` (`stats`). memcached 1.6 (`memory_release` in slabs.c) `free()`s a
//!   page that reaches the global pool while it holds more than its limit. `BUSY` (a page
//!   is moving) and `NOSPARE`/`UNSAFE` (nothing to take right now) are retried; any other
//!   answer is a refusal at once. Measured (1.6.18, 4 KB values): about 0.5 s for 512 MiB.
//! - **Confirms.** `done` once `total_malloced ≤ limit_maxbytes`, within [`MemcachedPool::wait`]
//!   (20 s, under memtide's shortest deadline); missed, the answer is `failed` naming both
//!   figures, the global pool's pages and the mover's last answer. The runner
//!   (`server::run`) then checks the tenant's cgroup usage really fell.
//! - **Launch flags.** `slab_reassign` must be on (the default since 1.5; `-o no_modern`
//!   turns it off: shrinks are then refused, naming it); no `-L` (a preallocated arena cannot
//!   change its limit: `cache_memlimit` answers `MEMLIMIT_ADJUST_FAILED`). And glibc must
//!   `munmap` a freed page rather than keep it in its heap: start memcached with
//!   `MALLOC_MMAP_THRESHOLD_=131072` in its environment. Without it, once memcached's hash
//!   table has grown (its old table freed), glibc raises its mmap threshold above 1 MiB and
//!   the pages allocated after that come from the heap, where `free()` keeps them resident:
//!   measured, 411 MiB of pages freed, resident memory 720 → 490 MiB; with it, 722 → 309.
//!   At connection the adapter reads memcached's environment (`/proc/<pid>/environ`, the
//!   pid from `stats`) when it may and warns if the setting is missing.
//! - **Reports.** `used_bytes` = `total_malloced`: the slab pages memcached holds, which is
//!   memory, rather than `bytes` (the items' own size, 89–94 % of it); hits and misses =
//!   `get_hits`/`get_misses`, evictions = `evictions`. A missing counter is a refusal naming
//!   it, never 0.
//! - **Time-outs and failures.** 5 s to connect, read and write. A memcached that dies or
//!   hangs fails the command within 5 s: the resize is `failed` with the reason, the
//!   connection is made again at the next operation (`server::run`), and the adapter keeps
//!   running.
//!
//! A hand-written text-protocol client: the `memcache` crate's `stats()` sends only plain
//! `stats` and has no way to send `cache_memlimit`, `slabs reassign` or `stats slabs`, and
//! `mtop-client` (async, tokio) reads `stats slabs` but cannot set the limit or move pages.
//! Replies are read line by line, each line bounded, so a bad reply is an error, not a panic.

use crate::server::Pool;
use memtide_balloon::agent::{PoolStats, Refusal};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// memcached refuses a smaller `cache_memlimit`.
pub const MIN_LIMIT_MIB: u64 = 8;
/// Connect, read and write time-out.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The longest reply line accepted.
const MAX_LINE: u64 = 64 * 1024;
/// The most lines a `stats` reply may have.
const MAX_LINES: usize = 10_000;

/// A stream memcached speaks on: TCP or a Unix socket.
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// `stats` fields, as text.
type Stats = BTreeMap<String, String>;

/// One line of a reply to `stats`.
#[derive(Debug, PartialEq, Eq)]
enum StatLine<'a> {
    Stat(&'a str, &'a str),
    End,
    /// `ERROR`, `CLIENT_ERROR ...`, `SERVER_ERROR ...` or anything else unexpected.
    Other(&'a str),
}

fn stat_line(line: &str) -> StatLine<'_> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line == "END" {
        return StatLine::End;
    }
    match line.strip_prefix("STAT ").and_then(|r| r.split_once(' ')) {
        Some((k, v)) if !k.is_empty() => StatLine::Stat(k, v),
        _ => StatLine::Other(line),
    }
}

/// A whole `stats` reply as text (for captured replies; the client reads line by line).
#[cfg(test)]
fn parse_stats(text: &str) -> Result<Stats, String> {
    let mut out = Stats::new();
    for line in text.lines() {
        match stat_line(line) {
            StatLine::Stat(k, v) => {
                out.insert(k.to_string(), v.to_string());
            }
            StatLine::End => return Ok(out),
            StatLine::Other(l) => return Err(format!("unexpected reply line {l:?}")),
        }
    }
    Err("the reply has no END".to_string())
}

/// A counter memcached reports; one it does not is a refusal naming it, never 0.
fn number(stats: &Stats, what: &str, key: &str) -> Result<u64, Refusal> {
    stats
        .get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| Refusal::new(format!("memcached: `{what}` has no number for {key}")))
}

/// Where memcached listens, from `memcache://HOST:PORT` or `unix:///path.sock`.
#[derive(Debug, PartialEq, Eq)]
enum Address {
    Tcp(String),
    Unix(String),
}

fn address(url: &str) -> Result<Address, String> {
    if let Some(path) = url.strip_prefix("unix://") {
        if path.is_empty() {
            return Err(format!("{url}: no socket path"));
        }
        return Ok(Address::Unix(path.to_string()));
    }
    match url.strip_prefix("memcache://") {
        Some(hp)
            if hp
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) =>
        {
            Ok(Address::Tcp(hp.trim_end_matches('/').to_string()))
        }
        Some(_) => Err(format!("{url}: want memcache://HOST:PORT")),
        None => Err(format!(
            "{url}: want memcache://HOST:PORT or unix:///path/memcached.sock"
        )),
    }
}

/// What `slabs reassign` answered, as the shrink loop reads it.
#[derive(Debug, PartialEq, Eq)]
enum Reassign {
    /// A page is scheduled to move.
    Moving,
    /// Nothing to take right now: try again shortly.
    Later,
    /// An answer retrying will not change.
    Refused,
}

fn reassign(answer: &str) -> Reassign {
    match answer.split(' ').next().unwrap_or_default() {
        "OK" => Reassign::Moving,
        "BUSY" | "NOSPARE" | "UNSAFE" => Reassign::Later,
        _ => Reassign::Refused,
    }
}

/// Whether a process environment (`/proc/<pid>/environ`, NUL-separated) makes glibc return
/// every freed 1 MiB slab page to the kernel.
fn pages_unmapped_on_free(environ: &[u8]) -> bool {
    environ.split(|b| *b == 0).any(|var| {
        let var = String::from_utf8_lossy(var);
        var.starts_with("MALLOC_MMAP_THRESHOLD_=")
            || (var.starts_with("GLIBC_TUNABLES=") && var.contains("glibc.malloc.mmap_threshold="))
    })
}

/// A connected memcached and what a shrink may wait for.
pub struct MemcachedPool {
    conn: BufReader<Box<dyn Stream>>,
    /// How long a shrink waits for `total_malloced` to fall under the limit.
    pub wait: Duration,
}

impl MemcachedPool {
    /// Connects to `url` (`memcache://127.0.0.1:11211`, `unix:///run/memcached.sock`).
    pub fn connect(url: &str) -> Result<MemcachedPool, String> {
        let stream: Box<dyn Stream> = match address(url)? {
            Address::Tcp(hp) => {
                let addrs = hp.to_socket_addrs().map_err(|e| format!("{hp}: {e}"))?;
                let mut last = format!("{hp}: no address");
                let mut conn = None;
                for a in addrs {
                    match TcpStream::connect_timeout(&a, TIMEOUT) {
                        Ok(s) => {
                            conn = Some(s);
                            break;
                        }
                        Err(e) => last = format!("{a}: {e}"),
                    }
                }
                let s = conn.ok_or(last)?;
                s.set_read_timeout(Some(TIMEOUT))
                    .map_err(|e| e.to_string())?;
                s.set_write_timeout(Some(TIMEOUT))
                    .map_err(|e| e.to_string())?;
                let _ = s.set_nodelay(true);
                Box::new(s)
            }
            Address::Unix(path) => {
                let s = UnixStream::connect(&path).map_err(|e| format!("{path}: {e}"))?;
                s.set_read_timeout(Some(TIMEOUT))
                    .map_err(|e| e.to_string())?;
                s.set_write_timeout(Some(TIMEOUT))
                    .map_err(|e| e.to_string())?;
                Box::new(s)
            }
        };
        Ok(MemcachedPool {
            conn: BufReader::new(stream),
            wait: Duration::from_secs(20),
        })
    }

    fn send(&mut self, command: &str) -> Result<(), String> {
        let stream = self.conn.get_mut();
        stream
            .write_all(format!("{command}\r\n").as_bytes())
            .and_then(|()| stream.flush())
            .map_err(|e| format!("`{command}`: {e}"))
    }

    fn line(&mut self, command: &str) -> Result<String, String> {
        let mut line = String::new();
        let n = (&mut self.conn)
            .take(MAX_LINE)
            .read_line(&mut line)
            .map_err(|e| format!("`{command}`: {e}"))?;
        if n == 0 {
            return Err(format!("`{command}`: memcached closed the connection"));
        }
        if !line.ends_with('\n') {
            return Err(format!(
                "`{command}`: a reply line longer than {MAX_LINE} bytes"
            ));
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }

    /// A one-line command's answer.
    fn simple(&mut self, command: &str) -> Result<String, Refusal> {
        let fail = |e: String| Refusal::new(format!("memcached: {e}"));
        self.send(command).map_err(fail)?;
        self.line(command).map_err(fail)
    }

    /// `stats`, `stats slabs` or `stats settings`.
    fn stats_of(&mut self, command: &str) -> Result<Stats, Refusal> {
        let fail = |e: String| Refusal::new(format!("memcached: {e}"));
        self.send(command).map_err(fail)?;
        let mut out = Stats::new();
        for _ in 0..MAX_LINES {
            let line = self.line(command).map_err(fail)?;
            match stat_line(&line) {
                StatLine::Stat(k, v) => {
                    out.insert(k.to_string(), v.to_string());
                }
                StatLine::End => return Ok(out),
                StatLine::Other(l) => {
                    return Err(fail(format!("`{command}` answered {l:?}")));
                }
            }
        }
        Err(fail(format!("`{command}`: more than {MAX_LINES} lines")))
    }

    /// What memcached holds and may hold: `total_malloced`, `limit_maxbytes`, and the global
    /// page pool's pages (for a refusal's reason only, as text: `?` when not reported).
    fn held(&mut self) -> Result<(u64, u64, String), Refusal> {
        let slabs = self.stats_of("stats slabs")?;
        let stats = self.stats_of("stats")?;
        Ok((
            number(&slabs, "stats slabs", "total_malloced")?,
            number(&stats, "stats", "limit_maxbytes")?,
            stats
                .get("slab_global_page_pool")
                .cloned()
                .unwrap_or_else(|| "?".to_string()),
        ))
    }

    /// Why memcached may not give freed pages back to the kernel, when its environment can
    /// be read here and says so; `None` when it is fine or cannot be told.
    pub fn launch_warning(&mut self) -> Option<String> {
        let pid = number(&self.stats_of("stats").ok()?, "stats", "pid").ok()?;
        let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        (!pages_unmapped_on_free(&environ)).then(|| {
            format!(
                "memcached (pid {pid}) runs without MALLOC_MMAP_THRESHOLD_ in its environment: \
                 slab pages it frees may stay resident, and shrinks then fail the cgroup check \
                 (start it with MALLOC_MMAP_THRESHOLD_=131072; see docs/apps.md)"
            )
        })
    }
}

impl Pool for MemcachedPool {
    /// The memory limit in force: `maxbytes` from `stats settings`.
    fn size(&mut self) -> Result<u64, Refusal> {
        let settings = self.stats_of("stats settings")?;
        number(&settings, "stats settings", "maxbytes")
    }

    /// Sets `cache_memlimit` to `bytes` rounded down to the MiB; then, while memcached holds
    /// more than that, moves slab pages to the global pool, which frees them.
    fn resize(&mut self, bytes: u64) -> Result<(), Refusal> {
        let mib = bytes / MIB;
        if mib < MIN_LIMIT_MIB {
            return Err(Refusal::new(format!(
                "memcached: cannot set its limit under {MIN_LIMIT_MIB} MiB (asked {bytes} bytes)"
            )));
        }
        let limit = mib * MIB;
        let (malloced, _, _) = self.held()?;
        if malloced > limit {
            let settings = self.stats_of("stats settings")?;
            if settings.get("slab_reassign").map(String::as_str) != Some("yes") {
                return Err(Refusal::new(
                    "memcached: slab_reassign is off, so it cannot free slab pages \
                     (start it without -o no_modern, or with -o slab_reassign)",
                ));
            }
        }
        let command = format!("cache_memlimit {mib}");
        let answer = self.simple(&command)?;
        if answer != "OK" {
            return Err(Refusal::new(format!(
                "memcached: `{command}` answered {answer:?} (a memcached started with -L cannot \
                 change its limit)"
            )));
        }
        let until = Instant::now() + self.wait;
        let mut last = String::from("none asked");
        loop {
            let (malloced, max, global) = self.held()?;
            if malloced <= max {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(Refusal::new(format!(
                    "memcached: total_malloced {malloced} bytes still above limit_maxbytes {max} \
                     after {:?} ({global} pages in the global pool; the page mover last \
                     answered {last:?})",
                    self.wait
                ))
                .at(limit));
            }
            last = self.simple("slabs reassign -1 0")?;
            match reassign(&last) {
                Reassign::Moving => {}
                Reassign::Later => std::thread::sleep(Duration::from_millis(2)),
                Reassign::Refused => {
                    return Err(Refusal::new(format!(
                        "memcached: `slabs reassign -1 0` answered {last:?}, with total_malloced \
                         {malloced} bytes above limit_maxbytes {max}"
                    ))
                    .at(limit));
                }
            }
        }
    }

    /// `total_malloced`, `get_hits`, `get_misses`, `evictions`.
    fn stats(&mut self) -> Result<PoolStats, Refusal> {
        let slabs = self.stats_of("stats slabs")?;
        let stats = self.stats_of("stats")?;
        Ok(PoolStats {
            used_bytes: number(&slabs, "stats slabs", "total_malloced")?,
            hits: number(&stats, "stats", "get_hits")?,
            misses: number(&stats, "stats", "get_misses")?,
            evictions: number(&stats, "stats", "evictions")?,
            dirty_bytes: 0,
            curve: None,
            durability: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines captured from memcached 1.6.18's `stats` (abridged).
    const STATS: &str = "STAT pid 20417\r\nSTAT uptime 12\r\nSTAT version 1.6.18\r\n\
        STAT get_hits 42\r\nSTAT get_misses 7\r\nSTAT limit_maxbytes 1073741824\r\n\
        STAT evictions 0\r\nSTAT slab_global_page_pool 0\r\nEND\r\n";

    #[test]
    fn a_stats_reply_gives_its_counters_by_name() {
        let s = parse_stats(STATS).unwrap();
        assert_eq!(number(&s, "stats", "get_hits").unwrap(), 42);
        assert_eq!(number(&s, "stats", "get_misses").unwrap(), 7);
        assert_eq!(number(&s, "stats", "limit_maxbytes").unwrap(), 1 << 30);
        assert_eq!(s["version"], "1.6.18");
    }

    #[test]
    fn stats_slabs_and_settings_replies_parse_alike() {
        let slabs = "STAT 30:chunk_size 66232\r\nSTAT 30:total_pages 640\r\n\
            STAT active_slabs 1\r\nSTAT total_malloced 671088640\r\nEND\r\n";
        let s = parse_stats(slabs).unwrap();
        assert_eq!(
            number(&s, "stats slabs", "total_malloced").unwrap(),
            640 * MIB
        );
        assert_eq!(s["30:total_pages"], "640");
        let settings = "STAT maxbytes 314572800\r\nSTAT slab_reassign yes\r\n\
            STAT slab_automove 1\r\nSTAT hash_algorithm murmur3\r\nEND\r\n";
        let s = parse_stats(settings).unwrap();
        assert_eq!(number(&s, "stats settings", "maxbytes").unwrap(), 300 * MIB);
        assert_eq!(s["slab_reassign"], "yes");
    }

    #[test]
    fn a_missing_counter_is_a_refusal_naming_it_never_zero() {
        let s = parse_stats("STAT get_hits 1\r\nEND\r\n").unwrap();
        let r = number(&s, "stats", "evictions").unwrap_err();
        assert!(r.reason.contains("evictions"), "{}", r.reason);
        let s = parse_stats("STAT evictions lots\r\nEND\r\n").unwrap();
        assert!(number(&s, "stats", "evictions").is_err(), "not a number");
    }

    #[test]
    fn an_error_or_a_cut_reply_is_an_error_not_a_panic() {
        assert!(parse_stats("ERROR\r\n").is_err());
        assert!(parse_stats("CLIENT_ERROR bad command line format\r\n").is_err());
        assert!(parse_stats("STAT get_hits 1\r\n").is_err(), "no END");
        assert!(parse_stats("STAT \r\nEND\r\n").is_err());
        assert!(parse_stats("").is_err());
        assert_eq!(stat_line("STAT x"), StatLine::Other("STAT x"));
    }

    #[test]
    fn urls_name_a_tcp_port_or_a_unix_socket() {
        assert_eq!(
            address("memcache://127.0.0.1:11211"),
            Ok(Address::Tcp("127.0.0.1:11211".into()))
        );
        assert_eq!(
            address("unix:///run/memcached/memcached.sock"),
            Ok(Address::Unix("/run/memcached/memcached.sock".into()))
        );
        for bad in [
            "memcache://127.0.0.1",
            "memcache://:11211",
            "memcache://h:99999",
            "redis://127.0.0.1:6379",
            "unix://",
            "",
        ] {
            assert!(address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_page_mover_is_retried_when_busy_and_refused_otherwise() {
        assert_eq!(reassign("OK"), Reassign::Moving);
        assert_eq!(
            reassign("BUSY currently processing reassign request"),
            Reassign::Later
        );
        assert_eq!(
            reassign("NOSPARE source class has no spare pages"),
            Reassign::Later
        );
        assert_eq!(reassign("UNSAFE"), Reassign::Later);
        assert_eq!(
            reassign("BADCLASS invalid src or dst class id"),
            Reassign::Refused
        );
        assert_eq!(
            reassign("CLIENT_ERROR slab reassignment disabled"),
            Reassign::Refused
        );
        assert_eq!(reassign(""), Reassign::Refused);
    }

    #[test]
    fn the_launch_environment_says_whether_freed_pages_are_unmapped() {
        assert!(pages_unmapped_on_free(
            b"PATH=/usr/bin\0MALLOC_MMAP_THRESHOLD_=131072\0"
        ));
        assert!(pages_unmapped_on_free(
            b"GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072\0"
        ));
        assert!(!pages_unmapped_on_free(b"PATH=/usr/bin\0HOME=/\0"));
        assert!(!pages_unmapped_on_free(b""));
    }
}
