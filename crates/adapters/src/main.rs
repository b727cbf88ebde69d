//! `memtide-adapter`: a balloon protocol agent (docs/balloon-protocol.md) for a server that has none, resizing it through its own online knob; it runs in the server's tenant (its cgroup), so memtide's identity check places it there, and memtide asks it as it would an application that links an SDK.
//!
//! `memtide-adapter redis --url redis://127.0.0.1:6379 --min 64M --max 1G`,
//! `memtide-adapter memcached --url memcache://127.0.0.1:11211 --min 64M --max 1G`,
//! `memtide-adapter jvm --collector shenandoah --min 256M --max 2G`,
//! `memtide-adapter mariadb --url unix:///run/mysqld/mysqld.sock --user memtide
//! --password-file /etc/memtide/mariadb.pass --min 256M --max 8G` (see docs/apps.md).
//! Each server is a module implementing [`server::Pool`]; [`server::run`] does the rest.
//!
//! - `server`: the `Pool` trait (size, resize, statistics, `resident`) and `run`, the Rust
//!   SDK's agent over a resizing connection and a statistics connection read on its own thread,
//!   each made again after a failure; every shrink is confirmed on the adapter's own memory
//!   cgroup before `done`, expecting the fall of what the pool had resident;
//! - `redis_pool` (`RedisPool`): `maxmemory` as the pool, `CONFIG SET maxmemory`, eviction
//!   waited for, then `MEMORY PURGE`; statistics from `INFO`; a shrink needing eviction under
//!   `noeviction` refused;
//! - `memcached` (`MemcachedPool`): a small text-protocol client, `maxbytes` as the pool,
//!   `cache_memlimit` then `slabs reassign -1 0` until `total_malloced` is under the limit;
//!   statistics from `stats`;
//! - `mariadb` (`MariadbPool`): the InnoDB buffer pool on the `mysql` crate without TLS,
//!   `SET GLOBAL innodb_buffer_pool_size` rounded down to the server's unit, the resize polled
//!   to completion within 60 s and read back, `innodb_buffer_pool_size_max` honoured, the
//!   registered granule a multiple of the unit; statistics from `SHOW GLOBAL STATUS`;
//! - `jvm` (`JvmPool`): `jcmd` children with a time-out — `SoftMaxHeapSize` then `GC.run` under
//!   ZGC and Shenandoah, G1's free ratios aimed at the target then `GC.run`; a shrink done once
//!   `GC.heap_info` shows the committed heap at the target; the JVM found in the adapter's own
//!   memory cgroup, its collector checked;
//! - `record` (`Record`): the pool's size as first found, given back at a stop, kept in the
//!   `--restore-file` across a killed adapter or daemon.
//!
//! The daemon's `[tenant.app]` starts it (`memtide_linux`'s `host/adapter.rs`). Tests run
//! against real servers in a test memory cgroup (`tests/common/mariadb.rs`,
//! `tests/java/Heap.java`), and under the daemon in `crates/cli/tests/linux/adapters.rs`;
//! resize times in docs/benchmarks.md.

mod jvm;
mod mariadb;
mod memcached;
mod record;
mod redis_pool;
mod server;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use memtide_balloon::protocol::PoolKind;
use server::{Connect, Pool, Registration};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
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
    /// Where the pool's size as first found is kept, so that a stop gives it back even after
    /// this adapter (or memtide) was killed and started again: read when it exists, else
    /// written; removed at the stop. Without it, the size found at start is given back.
    #[arg(long)]
    restore_file: Option<PathBuf>,
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
    /// MariaDB or MySQL: `SET GLOBAL innodb_buffer_pool_size`, the resize waited for.
    Mariadb {
        /// Where the server listens: `unix:///run/mysqld/mysqld.sock` or `mysql://127.0.0.1:3306`.
        #[arg(long, default_value = "unix:///run/mysqld/mysqld.sock")]
        url: String,
        /// The user to log in as; it needs `SUPER` (MariaDB) or `SYSTEM_VARIABLES_ADMIN`
        /// (MySQL) for `SET GLOBAL`.
        #[arg(long, default_value = "root")]
        user: String,
        /// A file holding the user's password (its first line); none without it.
        #[arg(long)]
        password_file: Option<PathBuf>,
        /// A shrink's largest step: MariaDB stalls queries that need a free page while it
        /// withdraws pages, about as long as a step takes (0: in one go).
        #[arg(long, value_parser = size, default_value = "64M")]
        shrink_step: u64,
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

fn duration(text: &str) -> Result<Duration, String> {
    memtide_model::written::parse_duration(text)
}

/// Refuses a server URL carrying a user or password, shown without them: argv is readable by
/// every local user (`ps`), and the URL goes into error lines.
fn no_credentials(url: &str) -> Result<()> {
    match memtide_model::written::url_with_credentials(url) {
        Some(shown) => anyhow::bail!(
            "--url {shown}: must not carry a user or password (every local user can read a \
             command line); use --password-file"
        ),
        None => Ok(()),
    }
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

/// Puts the bounds and granule memtide is told on the server's unit and under its largest
/// pool, saying on stderr what changed.
fn fit_to_server(common: &mut Common, g: &mariadb::Geometry) -> Result<()> {
    let granule = g.granule(common.granule);
    if granule != common.granule {
        eprintln!(
            "mariadb: --granule {} raised to {granule} bytes, a multiple of the server's unit of {} \
             bytes",
            common.granule, g.unit
        );
        common.granule = granule;
    }
    if let Some(m) = g.size_max.filter(|&m| common.max > m) {
        eprintln!(
            "mariadb: --max {} lowered to innodb_buffer_pool_size_max = {m}",
            common.max
        );
        common.max = m;
    }
    let (min, max) = (
        common.min.div_ceil(granule) * granule,
        common.max / granule * granule,
    );
    if min > max {
        anyhow::bail!(
            "mariadb: no pool size on the granule of {granule} bytes lies within --min {} and \
             --max {}",
            common.min,
            common.max
        );
    }
    (common.min, common.max) = (min, max);
    Ok(())
}

/// One line on stderr and a failing exit status when the adapter cannot start or run.
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memtide-adapter: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let (connect, kind, name, common): (Connect, PoolKind, &str, Common) = match Cli::parse().server
    {
        Server::Redis {
            url,
            password_file,
            common,
        } => {
            no_credentials(&url)?;
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
        Server::Mariadb {
            url,
            user,
            password_file,
            shrink_step,
            mut common,
        } => {
            no_credentials(&url)?;
            let login = mariadb::Login {
                endpoint: mariadb::Endpoint::parse(&url)
                    .map_err(|e| anyhow::anyhow!("mariadb: --url {e}"))?,
                url,
                user,
                password: password(password_file.as_deref())?,
                shrink_step,
            };
            // The server's unit and largest pool, read once before registering.
            let geometry = login.connect().map_err(anyhow::Error::msg)?.geometry();
            fit_to_server(&mut common, &geometry)?;
            let connect: Connect =
                Arc::new(move || login.connect().map(|p| Box::new(p) as Box<dyn Pool>));
            (connect, PoolKind::BufferPool, "mariadb", common)
        }
        Server::Memcached { url, common } => {
            no_credentials(&url)?;
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
        // A JVM's statistics cost a jcmd (a JVM of its own, ~0.25 s of CPU): read them less
        // often, and send the last ones read at memtide's interval. Other servers' are a
        // query: each message reads its own.
        stats_every: if kind == PoolKind::Heap {
            Duration::from_secs(5)
        } else {
            Duration::from_secs(1)
        },
        fresh_stats: kind != PoolKind::Heap,
    };
    let record = record::Record::new(common.restore_file);
    // Until SIGTERM or SIGINT: then the agent says bye, memtide's limit has the tenant, and
    // the pool goes back to its size at start. (Started by memtide, the adapter is killed
    // with it, by its parent-death signal: it gives nothing back under memtide's limit.)
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone()).context("signal handler")?;
    }
    // A server without a bound yet starts at the largest pool memtide may give.
    server::run(
        connect,
        reg,
        |now| if now == 0 { max } else { now },
        stop,
        &record,
    )
    .map_err(|why| anyhow::anyhow!("{name}: {why}"))
}
