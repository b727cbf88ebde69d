//! `memtide-adapter`: a balloon protocol agent (docs/balloon-protocol.md) for a server that has none, resizing it through its own online knob; it runs in the server's tenant (its cgroup), so memtide's identity check places it there, and memtide asks it as it would an application that links an SDK.
//!
//! `memtide-adapter redis --url redis://127.0.0.1:6379 --min 64M --max 1G` (see docs/apps.md).

mod redis_pool;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use memtide_balloon::agent::Agent;
use memtide_balloon::protocol::{PoolInfo, PoolKind};
use redis_pool::RedisPool;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "memtide-adapter",
    version,
    about = "Balloon protocol agents for unmodified servers"
)]
struct Cli {
    #[command(subcommand)]
    server: Server,
}

#[derive(Subcommand)]
enum Server {
    /// Redis: `CONFIG SET maxmemory`, then `MEMORY PURGE`.
    Redis {
        /// Where Redis listens: `redis://127.0.0.1:6379` or `unix:///run/redis/redis.sock`.
        #[arg(long, default_value = "redis://127.0.0.1:6379")]
        url: String,
        /// A file holding the password (`AUTH`), if Redis wants one.
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// The smallest maxmemory memtide may ask for.
        #[arg(long, value_parser = size)]
        min: u64,
        /// The largest.
        #[arg(long, value_parser = size)]
        max: u64,
        /// The unit targets move in.
        #[arg(long, value_parser = size, default_value = "1M")]
        granule: u64,
        /// memtide's balloon socket (default: $MEMTIDE_BALLOON_SOCKET, else
        /// /run/memtide/balloon.sock).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// The name memtide sees.
        #[arg(long, default_value = "redis")]
        app: String,
    },
}

fn size(text: &str) -> Result<u64, String> {
    memtide_model::written::parse_size(text)
}

fn main() -> Result<()> {
    let Server::Redis {
        url,
        password_file,
        min,
        max,
        granule,
        socket,
        app,
    } = Cli::parse().server;
    let password = match password_file {
        Some(p) => Some(
            std::fs::read_to_string(&p)
                .with_context(|| format!("--password-file {}", p.display()))?
                .trim_end()
                .to_string(),
        ),
        None => None,
    };
    let mut pool = RedisPool::connect(&url, password).with_context(|| format!("redis at {url}"))?;
    let now = pool.maxmemory().context("CONFIG GET maxmemory")?;
    // No maxmemory yet: the pool starts at the largest memtide may give.
    let start = if now == 0 { max } else { now.clamp(min, max) };
    if start != now {
        pool.resize(start)
            .map_err(|r| anyhow::anyhow!("setting maxmemory to {start}: {}", r.reason))?;
    }
    let pool = Arc::new(Mutex::new(pool));
    let (shrink, grow, stats) = (pool.clone(), pool.clone(), pool);
    let info = PoolInfo {
        app,
        kind: PoolKind::Cache,
        pool_bytes: start,
        min_bytes: min,
        max_bytes: max,
        granule_bytes: granule,
    };
    let mut builder = Agent::builder(info)
        .on_shrink(move |b| {
            shrink
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .resize(b)
        })
        .on_grow(move |b| {
            grow.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .resize(b)
        })
        .stats(move || stats.lock().unwrap_or_else(PoisonError::into_inner).stats());
    if let Some(s) = socket {
        builder = builder.socket(s);
    }
    let agent = builder.start().context("starting the agent")?;
    // Until SIGTERM or SIGINT: then the agent says bye, and memtide's limit has the tenant.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone()).context("signal handler")?;
    }
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    agent.stop();
    Ok(())
}
