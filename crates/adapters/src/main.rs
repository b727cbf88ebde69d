//! `memtide-adapter`: a balloon protocol agent (docs/balloon-protocol.md) for a server that has none, resizing it through its own online knob; it runs in the server's tenant (its cgroup), so memtide's identity check places it there, and memtide asks it as it would an application that links an SDK.
//!
//! `memtide-adapter redis --url redis://127.0.0.1:6379 --min 64M --max 1G`,
//! `memtide-adapter jvm --collector shenandoah --min 256M --max 2G` (see docs/apps.md).
//! Each server is a module implementing [`server::Pool`]; [`server::run`] does the rest.

mod jvm;
mod redis_pool;
mod server;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use memtide_balloon::protocol::PoolKind;
use server::{Connect, Pool, Registration};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
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
    /// A JVM's heap through jcmd: `SoftMaxHeapSize` (ZGC, Shenandoah) or G1's free ratios,
    /// then `GC.run`, until the committed heap is at the target.
    Jvm {
        /// The collector the JVM runs (checked against its VM.flags): shenandoah, zgc or g1.
        #[arg(long)]
        collector: jvm::Collector,
        /// The JVM's pid (default: the one `java` process in this adapter's memory cgroup).
        #[arg(long)]
        pid: Option<u32>,
        /// The jcmd to run (default: the one beside the JVM's `java`, else `jcmd` on the PATH).
        #[arg(long)]
        jcmd: Option<PathBuf>,
        /// How long one jcmd may take before it is killed.
        #[arg(long, value_parser = duration, default_value = "15s")]
        jcmd_timeout: Duration,
        /// How long a shrink waits for the committed heap to fall to the target.
        #[arg(long, value_parser = duration, default_value = "30s")]
        deadline: Duration,
        #[command(flatten)]
        common: Common,
    },
}

fn size(text: &str) -> Result<u64, String> {
    memtide_model::written::parse_size(text)
}

fn duration(text: &str) -> Result<Duration, String> {
    memtide_model::written::parse_duration(text)
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
        Server::Jvm {
            collector,
            pid,
            jcmd,
            jcmd_timeout,
            deadline,
            common,
        } => {
            let config = jvm::Config {
                collector,
                pid,
                jcmd,
                min: common.min,
                max: common.max,
                timeout: jcmd_timeout,
                deadline,
            };
            let connect: Connect =
                Arc::new(move || jvm::connect(&config).map(|p| Box::new(p) as Box<dyn Pool>));
            (connect, PoolKind::Heap, "jvm", common)
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
        // A JVM's statistics cost a jcmd (a JVM of its own, ~0.25 s of CPU): read them less
        // often. The agent sends the last ones read at memtide's interval either way.
        stats_every: if kind == PoolKind::Heap {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(1)
        },
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
