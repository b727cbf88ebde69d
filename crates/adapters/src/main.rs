//! `memtide-adapter`: a balloon protocol agent (docs/balloon-protocol.md) for a server that has none, resizing it through its own online knob; it runs in the server's tenant (its cgroup), so memtide's identity check places it there, and memtide asks it as it would an application that links an SDK.
//!
//! `memtide-adapter redis --url redis://127.0.0.1:6379 --min 64M --max 1G`,
//! `memtide-adapter mariadb --url unix:///run/mysqld/mysqld.sock --user memtide
//! --password-file /etc/memtide/mariadb.pass --min 256M --max 8G` (see docs/apps.md).
//! Each server is a module implementing [`server::Pool`]; [`server::run`] does the rest.

mod mariadb;
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
            let password = password(password_file.as_deref())?;
            let connect: Connect = Arc::new(move || {
                redis_pool::RedisPool::connect(&url, password.clone())
                    .map(|p| Box::new(p) as Box<dyn Pool>)
                    .map_err(|e| format!("redis at {url}: {e}"))
            });
            (connect, PoolKind::Cache, "redis", common)
        }
        Server::Mariadb {
            url,
            user,
            password_file,
            mut common,
        } => {
            let login = mariadb::Login {
                endpoint: mariadb::Endpoint::parse(&url)
                    .map_err(|e| anyhow::anyhow!("mariadb: --url {e}"))?,
                url,
                user,
                password: password(password_file.as_deref())?,
            };
            // The server's unit and largest pool, read once before registering.
            let geometry = login.connect().map_err(anyhow::Error::msg)?.geometry();
            fit_to_server(&mut common, &geometry)?;
            let connect: Connect =
                Arc::new(move || login.connect().map(|p| Box::new(p) as Box<dyn Pool>));
            (connect, PoolKind::BufferPool, "mariadb", common)
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
