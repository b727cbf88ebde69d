//! `memtide-loadgen`: the density benchmark's client for one tenant: an open-loop GET load on a Redis or memcached server following a seeded demand pattern, its latency per window written as JSON lines.
//!
//! ```text
//! memtide-loadgen --server redis://127.0.0.1:6379 --keys 20000 --value-bytes 4096 --fill \
//!     --demand bursty:every=120s,burst=30s,rate=500 --seed 7 --duration 10m --out a.jsonl
//! ```
//!
//! Lines: `fill` (once filled; `--fill-only` stops there), `start` (the schedule's bursts), `second` (each one-second
//! window requests were due in), `window` (each report window), `done`. Bad input exits 2
//! with one line; a server not answering within 30 s exits 1.

mod client;
mod run;
mod windows;

use clap::Parser;
use memtide_demand::Demand;
use memtide_model::written::{parse_duration, parse_size};
use std::process::ExitCode;
use std::time::Duration;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot connect to {server} within {within:?}: {why}")]
    Connect {
        server: String,
        within: Duration,
        why: String,
    },
    #[error("filling failed at key {key}: {why}")]
    Fill { key: u64, why: String },
    #[error("writing the output: {0}")]
    Output(String),
}

/// The most keys, the largest value, and the largest dataset a generator fills.
const MAX_KEYS: u64 = 100_000_000;
const MAX_VALUE_BYTES: u64 = 1 << 20;
const MAX_DATASET_BYTES: u64 = 64 << 30;

#[derive(Parser)]
#[command(
    name = "memtide-loadgen",
    version,
    about = "An open-loop GET load following a seeded demand pattern (see the crate docs)"
)]
struct Args {
    /// redis://HOST:PORT, redis+unix:///PATH or memcached://HOST:PORT.
    #[arg(long)]
    server: String,
    /// Keys in the dataset (`key:00000000` ...), read uniformly.
    #[arg(long)]
    keys: u64,
    /// Bytes of each value (e.g. 4096 or 4K).
    #[arg(long, default_value = "4096")]
    value_bytes: String,
    /// Write every key before the run.
    #[arg(long)]
    fill: bool,
    /// Write every key, print the `fill` line and exit (no run).
    #[arg(long, conflicts_with = "fill")]
    fill_only: bool,
    /// The demand pattern: bursty:every=120s,burst=30s,rate=500 | diurnal:period=10m,low=20,high=400[,phase=0.25] | busy:rate=300.
    #[arg(long, required_unless_present = "fill_only")]
    demand: Option<String>,
    /// The tenant's seed: its bursts, keys and values.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The run's length (e.g. 10m).
    #[arg(long, required_unless_present = "fill_only")]
    duration: Option<String>,
    /// The report window (1s to 1h).
    #[arg(long, default_value = "10s")]
    window: String,
    /// A request answered later than this after it was due is an error (1ms to 60s).
    #[arg(long, default_value = "1s")]
    timeout: String,
    /// Start the run at this time (seconds since the epoch), so that several generators
    /// share one clock; at most an hour ahead.
    #[arg(long)]
    start_at: Option<f64>,
    /// Write the lines here instead of standard output.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

fn config(a: &Args) -> Result<run::Config, LoadError> {
    let usage = |flag: &str, v: &str, why: String| LoadError::Usage(format!("--{flag} {v}: {why}"));
    let duration = |flag: &str, v: &str, lo: f64, hi: f64| -> Result<f64, LoadError> {
        let s = parse_duration(v)
            .map_err(|e| usage(flag, v, e))?
            .as_secs_f64();
        if !(lo..=hi).contains(&s) {
            return Err(usage(flag, v, format!("must be from {lo} s to {hi} s")));
        }
        Ok(s)
    };
    if !(1..=MAX_KEYS).contains(&a.keys) {
        return Err(usage(
            "keys",
            &a.keys.to_string(),
            format!("must be from 1 to {MAX_KEYS}"),
        ));
    }
    let value_bytes =
        parse_size(&a.value_bytes).map_err(|e| usage("value-bytes", &a.value_bytes, e))?;
    if !(1..=MAX_VALUE_BYTES).contains(&value_bytes) {
        return Err(usage(
            "value-bytes",
            &a.value_bytes,
            format!("must be from 1 to {MAX_VALUE_BYTES}"),
        ));
    }
    if a.keys.saturating_mul(value_bytes) > MAX_DATASET_BYTES {
        return Err(usage(
            "keys",
            &a.keys.to_string(),
            format!(
                "{} keys of {value_bytes} bytes are more than {MAX_DATASET_BYTES} bytes",
                a.keys
            ),
        ));
    }
    if let Some(at) = a.start_at {
        let now = run::unix_now();
        if !(at.is_finite() && at <= now + 3600.0) {
            return Err(usage(
                "start-at",
                &at.to_string(),
                "must be at most an hour ahead".into(),
            ));
        }
    }
    Ok(run::Config {
        server: client::Server::parse(&a.server)?,
        keys: a.keys,
        value_bytes: value_bytes as usize,
        fill: a.fill || a.fill_only,
        fill_only: a.fill_only,
        // A fill-only run sends nothing: any pattern and length will do.
        demand: Demand::parse(a.demand.as_deref().unwrap_or("busy:rate=1"))
            .map_err(|e| LoadError::Usage(format!("--demand: {e}")))?,
        seed: a.seed,
        duration: duration(
            "duration",
            a.duration.as_deref().unwrap_or("1s"),
            1.0,
            memtide_demand::MAX_LENGTH_S,
        )?,
        window: duration("window", &a.window, 1.0, 3600.0)?,
        timeout: Duration::from_secs_f64(duration("timeout", &a.timeout, 0.001, 60.0)?),
        start_at: a.start_at,
    })
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // clap's message up to its usage line, on one line (a missing argument's name is
            // on the line after its first).
            let text = e.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:"))
                .filter(|l| !l.is_empty())
                .collect();
            let line = message.join(" ");
            eprintln!("memtide-loadgen: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = config(&args).and_then(|c| match &args.out {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| LoadError::Usage(format!("--out {}: {e}", path.display())))?;
            run::run(&c, std::io::BufWriter::new(file))
        }
        None => run::run(&c, std::io::BufWriter::new(std::io::stdout().lock())),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ LoadError::Usage(_)) => {
            eprintln!("memtide-loadgen: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("memtide-loadgen: {e}");
            ExitCode::from(1)
        }
    }
}
