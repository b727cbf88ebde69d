//! What every adapter shares: a [`Pool`] is one server's online knob (Redis's `maxmemory`, InnoDB's buffer pool, memcached's memory limit, a JVM's heap); [`run`] puts it behind the Rust SDK's agent, with a connection for resizes and another for statistics, and confirms every shrink on the tenant's own cgroup before it says done.
//!
//! - **Connections.** A pool is made by a `connect` function. The resizing connection and the
//!   statistics connection are separate, so that statistics keep flowing (memtide's dead-agent
//!   clock) while a resize waits on the server. A connection that fails an operation is dropped
//!   and made again at the next one, so an adapter outlives a server's restart.
//! - **Statistics** are read on their own thread (at least once a second; a JVM's every 5 s),
//!   so a hung server never blocks the agent's thread for long. Where a reading is cheap (not
//!   a JVM's), each message the agent sends asks that thread for a reading of its own and
//!   waits up to [`FRESH_WAIT`] for it ([`Readings`]): a reading sent twice shows counters that
//!   did not move, which memtide reads as a pool nobody uses.
//! - **Confirming a shrink.** `done` promises the memory is back with the OS. After the server
//!   says it is at the target, the adapter watches its own memory cgroup (it runs in the
//!   tenant's, which is how memtide places it) until the usage has fallen by at least half of
//!   the data the pool gave up (memtide's own honesty rule), for up to [`CONFIRM`]. If it has not,
//!   the answer is `failed`, naming both figures, and memtide's OS mechanism takes that part:
//!   better than a `done` memtide would judge dishonest.
//! - **Giving the pool back.** On a stop the agent says bye, then the pool is set back to the
//!   size the adapter found at start, before it brought it within `[min, max]` (or the size
//!   an earlier run recorded: `record.rs`), through the resizing connection once any resize
//!   under way has returned. A refusal is the adapter's error, naming the size.

use crate::record::Record;
use memtide_balloon::agent::{Agent, PoolStats, Refusal};
use memtide_balloon::protocol::{PoolInfo, PoolKind};
use memtide_linux::cgroup::MemoryCgroup;
use memtide_linux::fs::hierarchy;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long a shrink waits for the tenant's cgroup usage to show it.
pub const CONFIRM: Duration = Duration::from_secs(10);

/// How long a statistics message waits for a reading of its own before it sends the last.
pub const FRESH_WAIT: Duration = Duration::from_millis(250);

/// The statistics thread's readings, shared with the agent's thread. The agent sends on
/// memtide's clock and the thread reads on its own: a message that carried a reading an
/// earlier one had already carried showed hits and misses that did not move, memtide read an
/// idle pool, and in a real two-database run the idle tax took a busy pool from 312 to
/// 184 MiB for 16 s. So a message may ask for a fresh reading and wait for it, bounded.
struct Readings {
    state: Mutex<Reading>,
    changed: Condvar,
}

struct Reading {
    last: PoolStats,
    /// Readings made so far.
    count: u64,
    /// A message waits for the next one.
    wanted: bool,
}

impl Readings {
    fn new(first: PoolStats) -> Readings {
        Readings {
            state: Mutex::new(Reading {
                last: first,
                count: 0,
                wanted: false,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Reading> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The last reading.
    fn last(&self) -> PoolStats {
        self.lock().last.clone()
    }

    /// Stores a reading and wakes whoever waits for it.
    fn put(&self, stats: PoolStats) {
        let mut r = self.lock();
        r.last = stats;
        r.count += 1;
        r.wanted = false;
        self.changed.notify_all();
    }

    /// The statistics thread's wait for its next reading: `every`, or less when a message
    /// wants one or `stop` is set (checked every 100 ms).
    fn wait_turn(&self, every: Duration, stop: &AtomicBool) {
        let next = Instant::now() + every;
        let mut r = self.lock();
        loop {
            let now = Instant::now();
            if r.wanted || now >= next || stop.load(Ordering::SeqCst) {
                return;
            }
            let slice = (next - now).min(Duration::from_millis(100));
            r = self
                .changed
                .wait_timeout(r, slice)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// A reading made after this call, or the last one after `wait`.
    fn fresh(&self, wait: Duration) -> PoolStats {
        let until = Instant::now() + wait;
        let mut r = self.lock();
        let seen = r.count;
        r.wanted = true;
        self.changed.notify_all();
        while r.count == seen {
            let now = Instant::now();
            if now >= until {
                break;
            }
            r = self
                .changed
                .wait_timeout(r, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        r.last.clone()
    }
}

/// One server's pool, through one connection.
pub trait Pool: Send {
    /// The pool's size in force, in bytes.
    fn size(&mut self) -> Result<u64, Refusal>;
    /// Moves the pool to `bytes`: `Ok` once the server says it is there and, shrinking, has
    /// handed the memory back (the adapter then checks the cgroup).
    fn resize(&mut self, bytes: u64) -> Result<(), Refusal>;
    /// The pool's statistics as the server counts them. Without a curve: an adapter sees the
    /// server's counters, not its requests, so it cannot sample a miss-ratio curve.
    fn stats(&mut self) -> Result<PoolStats, Refusal>;
    /// The part of the pool in memory now: what a shrink to below it must give back. By
    /// default the data the statistics count (a buffer pool's free pages may never have been
    /// touched); a heap's whole committed size, free regions included, as it touched them.
    fn resident(&mut self) -> Result<u64, Refusal> {
        self.stats().map(|s| s.used_bytes)
    }
}

/// Makes a connected pool, or says why it could not (the server is down, the password wrong).
pub type Connect = Arc<dyn Fn() -> Result<Box<dyn Pool>, String> + Send + Sync>;

/// What the agent registers besides the pool's size.
pub struct Registration {
    pub app: String,
    pub kind: PoolKind,
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub granule_bytes: u64,
    pub socket: Option<PathBuf>,
    /// How often the statistics thread asks the server, at least.
    pub stats_every: Duration,
    /// Whether each statistics message asks for a reading of its own (a cheap one).
    pub fresh_stats: bool,
}

/// A connection made again after a failure.
struct Held {
    connect: Connect,
    pool: Option<Box<dyn Pool>>,
}

impl Held {
    fn with<T>(
        &mut self,
        op: impl FnOnce(&mut dyn Pool) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        if self.pool.is_none() {
            self.pool = Some((self.connect)().map_err(Refusal::new)?);
        }
        let pool = self.pool.as_mut().expect("connected above");
        let out = op(pool.as_mut());
        if out.is_err() {
            // The connection may be the trouble: the next operation makes a new one.
            self.pool = None;
        }
        out
    }
}

/// The tenant's memory cgroup: the adapter's own.
struct OwnCgroup(Option<MemoryCgroup>);

impl OwnCgroup {
    fn find() -> OwnCgroup {
        OwnCgroup(
            hierarchy::detect(Path::new("/"))
                .ok()
                .map(|h| MemoryCgroup::new(h.version, h.own_dir())),
        )
    }

    fn usage(&self) -> Option<u64> {
        self.0.as_ref()?.sample().ok().map(|s| s.usage.0)
    }
}

/// Shrinks to `bytes` and waits for the cgroup to show the data given up.
fn shrink(held: &mut Held, cgroup: &OwnCgroup, last: &Readings, bytes: u64) -> Result<(), Refusal> {
    let from = held.with(|p| p.size())?;
    // What of the pool is in memory now, read at the shrink: the statistics thread's last
    // reading may be old (a heap's garbage since collected).
    let used = match held.with(|p| p.resident()) {
        Ok(r) => r,
        Err(_) => last.last().used_bytes,
    };
    let before = cgroup.usage();
    held.with(|p| p.resize(bytes))?;
    // What the pool gave up of what it had in memory; the rest was never in the cgroup.
    let released = used.min(from).saturating_sub(bytes);
    let (Some(before), true) = (before, released > 0) else {
        return Ok(());
    };
    let until = Instant::now() + CONFIRM;
    loop {
        let fell = cgroup.usage().map_or(0, |now| before.saturating_sub(now));
        if fell * 2 >= released {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(Refusal::new(format!(
                "the server is at {bytes} bytes, but the tenant's cgroup usage fell by {fell} \
                 bytes in {CONFIRM:?}, less than half of the {released} it released"
            ))
            .at(bytes));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Gives the pool back to `original` (nothing to do when it is there); the failure names
/// the size, for an operator to set by hand.
fn give_back(held: &mut Held, original: u64) -> Result<(), String> {
    let now = held.with(|p| p.size());
    if now.as_ref().is_ok_and(|&n| n == original) {
        return Ok(());
    }
    held.with(|p| p.resize(original)).map_err(|r| {
        format!(
            "giving the pool back to the {original} bytes it had at start: {}",
            r.reason
        )
    })?;
    eprintln!(
        "memtide-adapter: pool given back: {} -> {original} bytes",
        now.map_or_else(|_| "?".to_string(), |n| n.to_string())
    );
    Ok(())
}

/// Runs the agent for the pool `connect` makes until `stop` is set, then says bye and gives
/// the pool back to the size it had at start (`record`'s, when an earlier run recorded it).
///
/// The pool's starting size is the server's, brought within `[min, max]` (a server without a
/// bound yet starts at `max`, as `start_at` decides).
pub fn run(
    connect: Connect,
    reg: Registration,
    start_at: impl FnOnce(u64) -> u64,
    stop: Arc<AtomicBool>,
    record: &Record,
) -> Result<(), String> {
    let mut first = (connect)()?;
    let now = first.size().map_err(|r| r.reason)?;
    let original = record.original(now).map_err(|e| e.to_string())?;
    let start = start_at(now).clamp(reg.min_bytes, reg.max_bytes);
    if start != now {
        first
            .resize(start)
            .map_err(|r| format!("setting the pool to {start} bytes: {}", r.reason))?;
    }
    // The statistics the agent registers with are the server's own: sent before the reader
    // thread's first reading, zeros (no data, no requests) read as an empty idle pool, and a
    // warm busy pool was shrunk to its min at memtide's first decision.
    let stats = first
        .stats()
        .map_err(|r| format!("reading the pool's statistics: {}", r.reason))?;
    let resizer = Arc::new(Mutex::new(Held {
        connect: connect.clone(),
        pool: Some(first),
    }));
    let last = Arc::new(Readings::new(stats));
    let reader = {
        let (last, stop, every) = (last.clone(), stop.clone(), reg.stats_every);
        let mut held = Held {
            connect,
            pool: None,
        };
        std::thread::Builder::new()
            .name("adapter-stats".into())
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(s) = held.with(|p| p.stats()) {
                        last.put(s);
                    }
                    last.wait_turn(every, &stop);
                }
            })
            .map_err(|e| format!("starting the statistics thread: {e}"))?
    };
    let cgroup = Arc::new(OwnCgroup::find());
    let info = PoolInfo {
        app: reg.app,
        kind: reg.kind,
        pool_bytes: start,
        min_bytes: reg.min_bytes,
        max_bytes: reg.max_bytes,
        granule_bytes: reg.granule_bytes,
    };
    let (down, up, seen) = (resizer.clone(), resizer.clone(), last.clone());
    let fresh = reg.fresh_stats;
    let mut builder = Agent::builder(info)
        .on_shrink(move |b| {
            let mut held = down.lock().unwrap_or_else(PoisonError::into_inner);
            shrink(&mut held, &cgroup, &seen, b)
        })
        .on_grow(move |b| {
            up.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .with(|p| p.resize(b))
        })
        .stats(move || {
            if fresh {
                last.fresh(FRESH_WAIT)
            } else {
                last.last()
            }
        });
    if let Some(s) = reg.socket {
        builder = builder.socket(s);
    }
    let agent = builder
        .start()
        .map_err(|e| format!("starting the agent: {e}"))?;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    agent.stop();
    let given_back = give_back(
        &mut resizer.lock().unwrap_or_else(PoisonError::into_inner),
        original,
    );
    // Given back or not: a server that is gone restarts at its own size, and one that refused
    // is named on stderr with the size to set.
    record.remove();
    let _ = reader.join();
    given_back
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A pool that fails every `fail_every`th operation.
    struct Flaky {
        size: u64,
        used: u64,
        calls: Arc<AtomicU32>,
        fail_every: u32,
    }

    impl Pool for Flaky {
        fn size(&mut self) -> Result<u64, Refusal> {
            Ok(self.size)
        }
        fn resize(&mut self, bytes: u64) -> Result<(), Refusal> {
            if self
                .calls
                .fetch_add(1, Ordering::SeqCst)
                .is_multiple_of(self.fail_every)
            {
                return Err(Refusal::new("connection reset"));
            }
            self.size = bytes;
            Ok(())
        }
        fn stats(&mut self) -> Result<PoolStats, Refusal> {
            Ok(PoolStats {
                used_bytes: self.used,
                ..PoolStats::default()
            })
        }
    }

    #[test]
    fn a_connection_that_fails_is_made_again_at_the_next_operation() {
        let (made, calls) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(1)));
        let (m, c) = (made.clone(), calls.clone());
        let mut held = Held {
            connect: Arc::new(move || {
                m.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(Flaky {
                    size: 10,
                    used: 0,
                    calls: c.clone(),
                    fail_every: 2,
                }) as Box<dyn Pool>)
            }),
            pool: None,
        };
        assert!(held.with(|p| p.resize(5)).is_ok());
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(held.with(|p| p.resize(4)).is_err());
        assert!(held.pool.is_none(), "dropped after the failure");
        assert!(held.with(|p| p.resize(3)).is_ok());
        assert_eq!(made.load(Ordering::SeqCst), 2, "made again");
    }

    #[test]
    fn a_server_that_cannot_be_reached_is_a_refusal_naming_why() {
        let mut held = Held {
            connect: Arc::new(|| Err("redis at 127.0.0.1:1: connection refused".to_string())),
            pool: None,
        };
        let r = held.with(|p| p.size()).unwrap_err();
        assert!(r.reason.contains("connection refused"), "{}", r.reason);
    }

    /// A connection to a [`Flaky`] pool of `size` bytes whose every `fail_every`th resize
    /// fails; `made` counts the connections.
    fn flaky(size: u64, fail_every: u32, made: Arc<AtomicU32>) -> Held {
        let calls = Arc::new(AtomicU32::new(1));
        Held {
            connect: Arc::new(move || {
                made.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(Flaky {
                    size,
                    used: 0,
                    calls: calls.clone(),
                    fail_every,
                }) as Box<dyn Pool>)
            }),
            pool: None,
        }
    }

    #[test]
    fn a_stop_gives_the_pool_back_to_its_size_at_start_and_a_refusal_names_that_size() {
        let made = Arc::new(AtomicU32::new(0));
        let mut held = flaky(128, u32::MAX, made.clone());
        give_back(&mut held, 512).unwrap();
        assert_eq!(held.with(|p| p.size()).unwrap(), 512);
        give_back(&mut held, 512).unwrap();
        assert_eq!(
            made.load(Ordering::SeqCst),
            1,
            "no resize to the size in force"
        );
        let mut refusing = flaky(128, 1, made);
        let e = give_back(&mut refusing, 512).unwrap_err();
        assert!(
            e.contains("512 bytes") && e.contains("connection reset"),
            "{e}"
        );
    }

    #[test]
    fn a_shrink_of_a_pool_that_held_no_data_needs_no_confirmation() {
        let mut held = Held {
            connect: Arc::new(|| {
                Ok(Box::new(Flaky {
                    size: 100,
                    used: 10,
                    calls: Arc::new(AtomicU32::new(1)),
                    fail_every: u32::MAX,
                }) as Box<dyn Pool>)
            }),
            pool: None,
        };
        // 10 bytes of data in a pool of 100, shrunk to 50: nothing held data. The server's
        // reading counts, not an old one saying the whole pool held data.
        let last = Readings::new(PoolStats {
            used_bytes: 100,
            ..PoolStats::default()
        });
        // A cgroup whose usage never falls: a shrink taken to release data would wait and fail.
        let tmp = tempfile::tempdir().unwrap();
        for (file, text) in [
            ("memory.usage_in_bytes", "1000000\n"),
            ("memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory.stat", "total_rss 1000000\ntotal_cache 0\n"),
        ] {
            std::fs::write(tmp.path().join(file), text).unwrap();
        }
        let cgroup = OwnCgroup(Some(MemoryCgroup::new(
            memtide_linux::fs::hierarchy::CgroupVersion::V1,
            tmp.path().to_path_buf(),
        )));
        assert!(cgroup.usage().is_some(), "the fake cgroup reads");
        assert!(shrink(&mut held, &cgroup, &last, 50).is_ok());
    }

    #[test]
    fn each_message_sends_a_reading_of_its_own_and_a_hung_server_the_last_one() {
        // A statistics thread on a 1-hour clock: every reading after the first is one a
        // message asked for. Hits count the readings made.
        let readings = Arc::new(Readings::new(PoolStats::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (readings, stop) = (readings.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    readings.put(PoolStats {
                        hits: n,
                        ..PoolStats::default()
                    });
                    readings.wait_turn(Duration::from_secs(3600), &stop);
                }
            })
        };
        let hits: Vec<u64> = (0..3)
            .map(|_| readings.fresh(Duration::from_secs(30)).hits)
            .collect();
        assert!(hits[0] < hits[1] && hits[1] < hits[2], "{hits:?}");
        stop.store(true, Ordering::SeqCst);
        thread.join().unwrap();
        // No thread to read: the wait ends and the last reading goes.
        assert_eq!(readings.fresh(Duration::from_millis(10)).hits, hits[2]);
    }
}
