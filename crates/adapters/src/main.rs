//! `memtide-adapter`: a balloon protocol agent (docs/balloon-protocol.md) for a server that has none, resizing it through its own online knob; it runs in the server's tenant (its cgroup), so memtide's identity check places it there, and memtide asks it as it would an application that links an SDK.
//!
//! `memtide-adapter redis --url redis://127.0.0.1:6379 --min 64M --max 1G` or
//! `memtide-adapter memcached --url memcache://127.0.0.1:11211 --min 64M --max 1G` (see
//! docs/apps.md).
//! Each server is a module implementing [`server::Pool`]; [`server::run`] does the rest.

mod memcached;
mod redis_pool;
mod server;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use memtide_balloon::protocol::PoolKind;
use server::{Connect, Pool, Registration};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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

/// What every adapter is told: the pool's bounds and where memtide listens.
#[derive(Args)]
struct Common {
    /// The smallest pool memtide may ask for.
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
    /// The name memtide sees (default: the server's kind).
    #[arg(long)]
    app: Option<String>,
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
        #[command(flatten)]
        common: Common,
    },
    /// memcached: `cache_memlimit`, then slab pages moved to its global pool, which frees them.
    Memcached {
        /// Where memcached listens: `memcache://127.0.0.1:11211` or
        /// `unix:///run/memcached/memcached.sock`.
        #[arg(long, default_value = "memcache://127.0.0.1:11211")]
        url: String,
        #[command(flatten)]
        common: Common,
    },
}

fn size(text: &str) -> Result<u64, String> {
    memtide_model::written::parse_size(text)
}

/// A password file's first line.
fn password(file: Option<&Path>) -> Result<Option<String>> {
    file.map(|p| {
        std::fs::read_to_string(p)
            .with_context(|| format!("--password-file {}", p.display()))
            .map(|s| s.lines().next().unwrap_or_default().to_string())
    })
    .transpose()
}

fn main() -> Result<()> {
    let (connect, kind, name, common): (Connect, PoolKind, &str, Common) = match Cli::parse().server
    {
        Server::Redis {
            url,
            password_file,
            common,
        } => {
            let password = password(password_file.as_deref())?;
            let connect: Connect = Arc::new(move || {
                redis_pool::RedisPool::connect(&url, password.clone())
                    .map(|p| Box::new(p) as Box<dyn Pool>)
                    .map_err(|e| format!("redis at {url}: {e}"))
            });
            (connect, PoolKind::Cache, "redis", common)
        }
        Server::Memcached { url, common } => {
            // memcached's limit is in MiB and at least 8 of them.
            let mib = 1 << 20;
            anyhow::ensure!(
                common.granule % mib == 0,
                "memcached: --granule must be a multiple of 1M (memcached's limit is in MiB)"
            );
            anyhow::ensure!(
                common.min >= memcached::MIN_LIMIT_MIB * mib,
                "memcached: --min must be at least {}M (memcached's smallest limit)",
                memcached::MIN_LIMIT_MIB
            );
            if let Some(warning) = memcached::MemcachedPool::connect(&url)
                .ok()
                .and_then(|mut p| p.launch_warning())
            {
                eprintln!("memtide-adapter: warning: {warning}");
            }
            let connect: Connect = Arc::new(move || {
                memcached::MemcachedPool::connect(&url)
                    .map(|p| Box::new(p) as Box<dyn Pool>)
                    .map_err(|e| format!("memcached at {url}: {e}"))
            });
            (connect, PoolKind::Cache, "memcached", common)
        }
    };
    let max = common.max;
    let reg = Registration {
        app: common.app.unwrap_or_else(|| name.to_string()),
        kind,
        min_bytes: common.min,
        max_bytes: common.max,
        granule_bytes: common.granule,
        socket: common.socket,
    };
    // Until SIGTERM or SIGINT: then the agent says bye, and memtide's limit has the tenant.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone()).context("signal handler")?;
    }
    // A server without a bound yet starts at the largest pool memtide may give.
    server::run(connect, reg, |now| if now == 0 { max } else { now }, stop)
        .map_err(|why| anyhow::anyhow!("{name}: {why}"))
}
