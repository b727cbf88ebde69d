//! The open-loop driver: fill the dataset if asked, wait for the common start, then send each GET when the demand schedule says it is due, timing it from then, and write the windows.
//!
//! One connection, one request at a time: while an answer is late the next requests wait,
//! and their latency, counted from when they were due, shows it. A request that fails or
//! passes the timeout counts as an error and the connection is made again (at most every
//! 100 ms; the requests due meanwhile fail at once). A GET that misses (a cache that shrank
//! evicted the key) writes the key back, as a cache-aside client does, inside its latency.

use crate::client::{Client, Server};
use crate::windows::{Outcome, Recorder, Sink};
use crate::LoadError;
use memtide_demand::{Demand, Schedule, Window};
use memtide_rng::SimRng;
use serde::Serialize;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the first connection may take to succeed (the server may still be starting).
const CONNECT_WITHIN: Duration = Duration::from_secs(30);
/// The least time between two reconnection attempts during the run.
const RECONNECT_EVERY: Duration = Duration::from_millis(100);
/// Keys written per pipeline while filling.
const FILL_BATCH: u64 = 256;

/// What to run (from the command line).
#[derive(Clone, Debug)]
pub struct Config {
    pub server: Server,
    pub keys: u64,
    pub value_bytes: usize,
    pub fill: bool,
    /// Stop once filled.
    pub fill_only: bool,
    pub demand: Demand,
    pub seed: u64,
    pub duration: f64,
    pub window: f64,
    pub timeout: Duration,
    /// The run's start, as seconds since the epoch; `None`: once filled.
    pub start_at: Option<f64>,
}

/// One line of output.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Record<'a> {
    Fill {
        keys: u64,
        bytes: u64,
        seconds: f64,
    },
    Start {
        demand: String,
        seed: u64,
        bursts: &'a [(f64, f64)],
        /// When the run's second 0 began, in seconds since the epoch: where its windows fall
        /// in a manager's log.
        epoch_s: f64,
    },
    Second(Window),
    Window(Window),
    Done {
        requests: u64,
        errors: u64,
        misses: u64,
        /// How far behind its schedule the generator fell at worst, in seconds (a tenant
        /// this far behind was slow, or the generator starved of CPU).
        behind_max_s: f64,
    },
}

/// Writes records as JSON lines, flushing after each report window.
struct Lines<W: Write> {
    out: W,
    failed: Option<std::io::Error>,
}

impl<W: Write> Lines<W> {
    /// The first write that failed, if one did.
    fn finish(self) -> Result<(), LoadError> {
        match self.failed {
            Some(e) => Err(LoadError::Output(e.to_string())),
            None => Ok(()),
        }
    }

    fn put(&mut self, r: &Record<'_>, flush: bool) {
        if self.failed.is_some() {
            return;
        }
        let mut line = serde_json::to_vec(r).expect("records serialize");
        line.push(b'\n');
        let res = self
            .out
            .write_all(&line)
            .and_then(|()| if flush { self.out.flush() } else { Ok(()) });
        if let Err(e) = res {
            self.failed = Some(e);
        }
    }
}

impl<W: Write> Sink for Lines<W> {
    fn second(&mut self, w: Window) {
        self.put(&Record::Second(w), false);
    }
    fn window(&mut self, w: Window) {
        self.put(&Record::Window(w), true);
    }
}

fn connect_within(server: &Server, timeout: Duration) -> Result<Client, LoadError> {
    let started = Instant::now();
    loop {
        match Client::connect(server, timeout) {
            Ok(c) => return Ok(c),
            Err(e) if started.elapsed() >= CONNECT_WITHIN => {
                return Err(LoadError::Connect {
                    server: format!("{server:?}"),
                    within: CONNECT_WITHIN,
                    why: e,
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Now, in seconds since the epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs `config`, writing JSON lines to `out`.
pub fn run(config: &Config, out: impl Write) -> Result<(), LoadError> {
    let schedule = Schedule::new(&config.demand, config.seed, config.duration)
        .map_err(|e| LoadError::Usage(e.to_string()))?;
    let mut lines = Lines { out, failed: None };
    let mut client = Some(connect_within(&config.server, config.timeout)?);
    if config.fill {
        let started = Instant::now();
        let c = client.as_mut().expect("connected above");
        let mut first = 0;
        while first < config.keys {
            let n = FILL_BATCH.min(config.keys - first);
            c.set_many(config.seed, first, n, config.value_bytes)
                .map_err(|why| LoadError::Fill { key: first, why })?;
            first += n;
        }
        lines.put(
            &Record::Fill {
                keys: config.keys,
                bytes: config.keys * config.value_bytes as u64,
                seconds: started.elapsed().as_secs_f64(),
            },
            true,
        );
        if config.fill_only {
            return lines.finish();
        }
    }
    let (start, epoch_s) = match config.start_at {
        Some(at) => {
            let now = unix_now();
            if at < now - 1.0 {
                return Err(LoadError::Usage(format!(
                    "--start-at {at}: {:.1} s in the past (filling took longer?)",
                    now - at
                )));
            }
            let wait = Duration::from_secs_f64((at - now).max(0.0));
            std::thread::sleep(wait);
            (Instant::now(), unix_now())
        }
        None => (Instant::now(), unix_now()),
    };
    lines.put(
        &Record::Start {
            demand: config.demand.to_string(),
            seed: config.seed,
            bursts: schedule.bursts(),
            epoch_s,
        },
        true,
    );
    let mut keys = SimRng::new(config.seed).fork(u64::MAX);
    let mut recorder = Recorder::new(config.window);
    let (mut requests, mut errors, mut misses) = (0u64, 0u64, 0u64);
    let mut behind_max: f64 = 0.0;
    let mut last_attempt = Instant::now();
    let mut due = schedule.first_send();
    while let Some(t) = due {
        let now = start.elapsed().as_secs_f64();
        if t > now {
            std::thread::sleep(Duration::from_secs_f64(t - now));
        } else {
            behind_max = behind_max.max(now - t);
        }
        if client.is_none() && last_attempt.elapsed() >= RECONNECT_EVERY {
            last_attempt = Instant::now();
            client = Client::connect(&config.server, config.timeout).ok();
        }
        let k = keys.below(config.keys);
        let answer = match client.as_mut() {
            Some(c) => c.get(k).and_then(|held| {
                if !held {
                    c.set_many(config.seed, k, 1, config.value_bytes)?;
                }
                Ok(held)
            }),
            None => Err("not connected".to_string()),
        };
        let late = start.elapsed().as_secs_f64() - t;
        let outcome = match answer {
            Ok(held) if late <= config.timeout.as_secs_f64() => Outcome::Answered {
                us: (late * 1e6) as u64,
                miss: !held,
            },
            Ok(_) => Outcome::Failed,
            Err(_) => {
                client = None;
                Outcome::Failed
            }
        };
        requests += 1;
        errors += u64::from(outcome == Outcome::Failed);
        misses += u64::from(matches!(outcome, Outcome::Answered { miss: true, .. }));
        recorder.record(t, outcome, &mut lines);
        due = schedule.next_send(t);
    }
    let end = config.duration;
    let now = start.elapsed().as_secs_f64();
    if end > now {
        std::thread::sleep(Duration::from_secs_f64(end - now));
    }
    recorder.finish(end, &mut lines);
    lines.put(
        &Record::Done {
            requests,
            errors,
            misses,
            behind_max_s: behind_max,
        },
        true,
    );
    lines.finish()
}
