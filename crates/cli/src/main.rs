//! The `memtide` command: `sim` runs a scenario on the simulated host, `daemon` manages a real Linux host, `status` asks a running daemon, `discover` lists what a host could manage, `bench` measures memtide's own speed, `cache` runs the cache simulator.

use anyhow::Context;
use clap::{Parser, Subcommand};
use memtide_cli::{bench, cache, memory, output, progress::Progress, run};
use memtide_model::Bytes;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The scenario `memtide sim` runs when given none: the ESX idle-tax experiment.
const DEMO_SCENARIO: &str = include_str!("../../../scenarios/esx-idle-tax.toml");

#[derive(Parser)]
#[command(
    name = "memtide",
    version,
    about = "Moves memory between the tenants of a consolidated host"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario on the simulated host (the built-in demo when SCENARIO is omitted).
    Sim {
        /// Scenario file (TOML, see docs/scenarios.md).
        scenario: Option<PathBuf>,
        /// Output directory (default: out/<scenario name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seed for the simulated host's randomness.
        #[arg(long, allow_negative_numbers = true)]
        seed: Option<u64>,
        /// Override a scenario field: --set policy.tax_rate=0.5 --set tenants.vm1.max=512M
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Run only this variant of a scenario that defines variants.
        #[arg(long)]
        variant: Option<String>,
        /// Refuse a run whose predicted peak memory exceeds this size ("4G"; none or 0: no
        /// limit). Default: half of the machine's memory.
        #[arg(long, value_name = "SIZE", value_parser = memory::parse_limit)]
        max_memory: Option<memory::Limit>,
    },
    /// Manage the cgroups of this Linux host (see docs/linux.md).
    Daemon {
        /// Configuration file (TOML, see docs/configuration.md).
        #[arg(long)]
        config: PathBuf,
        /// Observe and decide, log every decision with its reason, write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Show what a running daemon manages and why (a client of its API).
    Status {
        /// The daemon's API address.
        #[arg(long, default_value = memtide_api::client::DEFAULT_ADDRESS)]
        address: std::net::SocketAddr,
        /// The daemon's Unix socket (`[api] socket`), asked first when present; TCP when it
        /// is absent or refuses this user.
        #[arg(long, default_value = memtide_api::client::DEFAULT_SOCKET)]
        socket: PathBuf,
        /// Print the daemon's JSON snapshot instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// List what memtide could manage here, with its memory now (--toml: a starting config).
    ///
    /// The cgroups holding processes under a parent, systemd's running services and scopes,
    /// Docker's and Podman's containers and libvirt's domains; a source that is absent or
    /// fails says why in one line. With --toml, a configuration to start from (see
    /// docs/configuration.md).
    Discover {
        /// The cgroup whose children are listed (a path inside the cgroup hierarchy). Default:
        /// the one `[host] parent = "self"` takes for a daemon started here, the cgroup this
        /// command runs in (or the one above memtide's own leaf).
        #[arg(long)]
        parent: Option<String>,
        /// Root under which /proc, /sys and /run/systemd/system are read (as `[host]
        /// proc_root`; tests point it at a fake tree).
        #[arg(long, default_value = "/")]
        proc_root: PathBuf,
        /// Docker's API socket.
        #[arg(long, default_value_os_t = memtide_engines::EngineKind::Docker.default_socket())]
        docker_socket: PathBuf,
        /// Podman's API socket.
        #[arg(long, default_value_os_t = memtide_engines::EngineKind::Podman.default_socket())]
        podman_socket: PathBuf,
        /// Print a starting configuration (TOML) instead of the table.
        #[arg(long)]
        toml: bool,
    },
    /// Measure memtide's speed (policy step, simulated accesses, a 16-VM hour, page hashing, a 10-VM hour with sharing, the shared disk, the cache simulator).
    Bench {
        #[command(subcommand)]
        what: Option<BenchCommand>,
        /// Shorter runs, for a quick look.
        #[arg(long)]
        quick: bool,
        /// Also write the results as a markdown table to this file (replaced).
        #[arg(long)]
        write: Option<PathBuf>,
    },
    /// The cache simulator (see docs/cache.md).
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// How many tenants this host carries at their SLO under each policy: real Redis and
    /// memcached servers under seeded load, as root, for hours (docs/benchmarks.md, "Density");
    /// with --sim, the same search in the simulator on a density scenario.
    Density {
        /// The set-up (TOML).
        #[arg(long, default_value = "bench/density.toml")]
        config: PathBuf,
        /// Run in the simulator instead: a scenario with [density] (scenarios/density-*.toml),
        /// each of its variants a policy.
        #[arg(long, value_name = "SCENARIO", conflicts_with = "config")]
        sim: Option<PathBuf>,
        /// With --sim: override a scenario field (KEY=VALUE, repeatable), e.g.
        /// --set duration=2m.
        #[arg(long = "set", value_name = "KEY=VALUE", requires = "sim")]
        set: Vec<String>,
        /// Where the table, the chart and the figures go (and each real trial's lines)
        /// [default: out/density, or out/density-sim with --sim].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run nothing: merge the trials of earlier runs of this set-up (each DIR an --out of
        /// one) into one table and chart in --out (repeatable; a policy and N tried twice
        /// keeps the last DIR's trial).
        #[arg(long, value_name = "DIR", conflicts_with = "sim")]
        merge: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum CacheCommand {
    /// The LRU miss-ratio curve of a block trace (*.csv or libCacheSim *.oracleGeneral, .zst if
    /// compressed), exact in one pass and/or sampled, by blocks or by bytes: mrc.csv and
    /// mrc.html.
    Mrc {
        /// The trace.
        trace: PathBuf,
        /// Output directory (default: out/mrc-<trace name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only this tenant's requests.
        #[arg(long)]
        tenant: Option<u32>,
        /// Also a SHARDS curve sampled at this rate (0 < RATE <= 1), with its error.
        #[arg(long, value_name = "RATE")]
        shards_rate: Option<f64>,
        /// Also a fixed-size SHARDS curve keeping this many blocks, with its error.
        #[arg(long, value_name = "BLOCKS", conflicts_with = "shards_rate")]
        shards_size: Option<usize>,
        /// The SHARDS curve alone, without the exact one: a pass as fast as the sampling.
        #[arg(long)]
        no_exact: bool,
        /// Cache sizes in blocks, or in bytes (each request's size counts: miss ratio and
        /// byte miss ratio).
        #[arg(long, value_enum, default_value = "blocks")]
        by: ByArg,
        /// Cache sizes written and drawn.
        #[arg(long, default_value_t = 1000)]
        points: usize,
    },
    /// A synthetic block trace (docs/cache.md): *.csv or *.oracleGeneral, .zst after either to
    /// compress it.
    Gen {
        /// The pattern.
        #[arg(long, value_enum)]
        pattern: PatternArg,
        /// Requests to write.
        #[arg(long)]
        requests: u64,
        /// Blocks of a zipf or loop pattern.
        #[arg(long, default_value_t = 100_000)]
        blocks: u64,
        /// Skew of a zipf pattern (0: uniform).
        #[arg(long, default_value_t = 0.9)]
        theta: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The tenant the requests are from.
        #[arg(long, default_value_t = 0)]
        tenant: u32,
        /// Bytes a block (the size column).
        #[arg(long, default_value_t = 16384)]
        block_bytes: u32,
        /// The trace to write.
        #[arg(long)]
        out: PathBuf,
    },
    /// Gemini's experiment from a scenario file (scenarios/cache/): every scheme's quotas,
    /// latencies and utilities (a table, partition.csv), and report.html with each
    /// application's latency surface as a heat map and the search's path on it.
    Partition {
        /// The scenario (TOML, see docs/cache.md).
        scenario: PathBuf,
        /// Output directory (default: out/partition-<scenario name>).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// One tenant's exact latency surface r(q_c, q_s) over a grid of buffer-pool and
    /// storage-cache quotas (Gemini's, computed instead of fitted): surface.csv.
    Surface {
        /// The trace.
        trace: PathBuf,
        /// Output directory (default: out/surface-<trace name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only this tenant's requests.
        #[arg(long)]
        tenant: Option<u32>,
        /// How the levels cooperate: lru-lru (inclusive) or demote (exclusive).
        #[arg(long, value_enum, default_value = "demote")]
        policy: PolicyArg,
        /// The largest buffer-pool quota, in blocks.
        #[arg(long)]
        buffer: u64,
        /// The largest storage-cache quota, in blocks.
        #[arg(long)]
        storage: u64,
        /// Quota settings per level, from 0 to the largest (the paper's 32).
        #[arg(long, default_value_t = 32)]
        grid: usize,
        /// Latency of a buffer-pool hit, in µs.
        #[arg(long, default_value_t = 2.0)]
        buffer_us: f64,
        /// Latency of a storage-cache hit, in µs.
        #[arg(long, default_value_t = 200.0)]
        storage_us: f64,
        /// Latency of a disk read, in µs.
        #[arg(long, default_value_t = 3500.0)]
        disk_us: f64,
    },
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum ByArg {
    Blocks,
    Bytes,
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum PatternArg {
    /// A TPC-W-like mixture (docs/cache.md).
    Tpcw,
    /// A RUBiS-like mixture.
    Rubis,
    /// Zipf over --blocks blocks with --theta.
    Zipf,
    /// A loop over --blocks blocks.
    Loop,
    /// Ever new blocks.
    Scan,
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum PolicyArg {
    LruLru,
    Demote,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return argument_error(&e),
    };
    let result = match cli.command {
        Command::Sim {
            scenario,
            out,
            seed,
            set,
            variant,
            max_memory,
        } => sim(
            scenario.as_deref(),
            out,
            seed,
            set,
            variant.as_deref(),
            max_memory.map_or_else(|| Some(memory::default_limit(Path::new("/"))), |l| l.0),
        ),
        Command::Bench {
            what:
                Some(BenchCommand::Density {
                    config,
                    sim,
                    set,
                    out,
                    merge,
                }),
            ..
        } => match sim {
            Some(scenario) => {
                let out = out.unwrap_or_else(|| PathBuf::from("out/density-sim"));
                memtide_cli::density::sim::run(&scenario, &set, &out)
            }
            None if !merge.is_empty() => {
                let out = out.unwrap_or_else(|| PathBuf::from("out/density"));
                memtide_cli::density::merge(&config, &merge, &out)
            }
            None => {
                let out = out.unwrap_or_else(|| PathBuf::from("out/density"));
                memtide_cli::density::run(&config, &out)
            }
        }
        .map_err(anyhow::Error::from),
        Command::Bench {
            what: None,
            quick,
            write,
        } => bench::run(quick, write.as_deref()).map(|_| ()),
        Command::Daemon { config, dry_run } => daemon(&config, dry_run),
        Command::Status {
            address,
            socket,
            json,
        } => status(address, &socket, json),
        Command::Discover {
            parent,
            proc_root,
            docker_socket,
            podman_socket,
            toml,
        } => discover(
            memtide_cli::discover::Options {
                docker_socket,
                podman_socket,
                ..memtide_cli::discover::Options::new(parent, proc_root)
            },
            toml,
        ),
        Command::Cache { command } => cache_command(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => match usage_error(&e) {
            Some(user) => {
                eprintln!("memtide: {user}");
                ExitCode::from(2)
            }
            None => {
                eprintln!("memtide: {e:#}");
                ExitCode::from(1)
            }
        },
    }
}

/// The error as the user's own mistake (bad input: exit 2, one line), if it is one.
fn usage_error(e: &anyhow::Error) -> Option<&dyn std::fmt::Display> {
    if let Some(user) = e.downcast_ref::<memtide_scenario::ScenarioError>() {
        return Some(user);
    }
    if let Some(user @ (run::RunError::NothingRan { .. } | run::RunError::Unmanaged { .. })) =
        e.downcast_ref::<run::RunError>()
    {
        return Some(user);
    }
    if let Some(user) = e.downcast_ref::<output::OutDirError>() {
        return Some(user);
    }
    if let Some(user) = e.downcast_ref::<memory::OverLimit>() {
        return Some(user);
    }
    if let Some(user) = e
        .downcast_ref::<cache::CacheError>()
        .filter(|c| c.is_usage())
    {
        return Some(user);
    }
    if let Some(user) = e
        .downcast_ref::<memtide_cli::discover::DiscoverError>()
        .filter(|d| d.is_usage())
    {
        return Some(user);
    }
    if let Some(user) = e
        .downcast_ref::<memtide_cli::density::DensityError>()
        .filter(|d| d.is_usage())
    {
        return Some(user);
    }
    if let Some(user) = e.downcast_ref::<memtide_daemon::config::ConfigError>() {
        return Some(user);
    }
    e.downcast_ref::<memtide_daemon::run::DaemonError>()
        .filter(|d| d.is_usage())
        .map(|d| d as &dyn std::fmt::Display)
}

/// A command line clap cannot take: help and version print as usual; anything else is one
/// line naming what is wrong (clap's own message, without its usage and hint lines), exit 2.
fn argument_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let text = e.render().to_string();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid arguments");
    eprintln!("memtide: {}", line.strip_prefix("error: ").unwrap_or(line));
    ExitCode::from(2)
}

fn daemon(path: &Path, dry_run: bool) -> anyhow::Result<()> {
    use memtide_daemon::run::{ReloadFrom, Signals};
    let mut config = memtide_daemon::run::load_config(path)?;
    config.daemon.dry_run |= dry_run;
    let signals = Signals::default();
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&signals.stop))
            .context("installing the signal handlers")?;
    }
    signal_hook::flag::register(
        signal_hook::consts::SIGHUP,
        std::sync::Arc::clone(&signals.reload),
    )
    .context("installing the signal handlers")?;
    let reload_from = ReloadFrom {
        path: path.to_path_buf(),
        force_dry_run: dry_run,
    };
    memtide_daemon::run::run(config, signals, Some(reload_from))?;
    Ok(())
}

fn status(address: std::net::SocketAddr, socket: &Path, json: bool) -> anyhow::Result<()> {
    let timeout = std::time::Duration::from_secs(5);
    let by_socket = socket
        .exists()
        .then(|| memtide_api::Client::unix(socket, timeout).status().ok())
        .flatten();
    let snapshot = match by_socket {
        Some(snapshot) => snapshot,
        None => memtide_api::fetch(address, timeout)?,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&snapshot)?);
    } else {
        print!("{}", memtide_cli::status::render_table(&snapshot));
    }
    Ok(())
}

fn discover(options: memtide_cli::discover::Options, toml: bool) -> anyhow::Result<()> {
    let found = memtide_cli::discover::discover(&options)?;
    if toml {
        print!("{}", memtide_cli::discover::render_toml(&found));
    } else {
        print!("{}", memtide_cli::discover::render_table(&found));
    }
    Ok(())
}

fn sim(
    path: Option<&Path>,
    out: Option<PathBuf>,
    seed: Option<u64>,
    mut set: Vec<String>,
    only: Option<&str>,
    max_memory: Option<Bytes>,
) -> anyhow::Result<()> {
    if let Some(seed) = seed {
        set.push(format!("seed={seed}"));
    }
    let load = |overrides: &[String], variant: Option<&str>| match (path, variant) {
        (Some(p), None) => memtide_scenario::load(p, overrides),
        (Some(p), Some(v)) => memtide_scenario::load_variant(p, overrides, v),
        (None, None) => memtide_scenario::parse_str(DEMO_SCENARIO, Path::new("<demo>"), overrides),
        (None, Some(v)) => {
            memtide_scenario::parse_str_variant(DEMO_SCENARIO, Path::new("<demo>"), overrides, v)
        }
    };
    let base = load(&set, None)?;
    for note in &base.notes {
        eprintln!("memtide: note: {note}");
    }
    let out = out.unwrap_or_else(|| Path::new("out").join(&base.name));
    output::check_dir(&out)?;
    let variants: Vec<String> = match only {
        Some(v) => vec![v.to_string()],
        None => base.variants.iter().map(|v| v.name.clone()).collect(),
    };
    // Every run is checked before the first starts: a variant too big is refused at once.
    let mut predicted = Vec::with_capacity(variants.len().max(1));
    if variants.is_empty() {
        predicted.push(memory::check(&base, max_memory)?);
    }
    for name in &variants {
        predicted.push(memory::check(&load(&set, Some(name))?, max_memory)?);
    }
    let peak = || {
        let most = predicted.iter().max().copied().unwrap_or_default();
        if let Some(measured) = memory::measured_peak() {
            eprintln!("memtide: peak memory {measured} (predicted at most {most})");
        }
    };
    if variants.is_empty() {
        let progress = Progress::new(run::total_ticks(&base), &base.name);
        let summary = sim_into(&out, &base, None, &progress)?;
        progress.finish();
        print!("{}", output::text::render(&summary));
        println!("outputs: {}", out.display());
        peak();
        return Ok(());
    }
    let mut runs = Vec::with_capacity(variants.len());
    for name in &variants {
        let scenario = load(&set, Some(name))?;
        let progress = Progress::new(
            run::total_ticks(&scenario),
            &format!("{} [{name}]", scenario.name),
        );
        let dir = out.join(name);
        let summary = sim_into(&dir, &scenario, Some(name), &progress)?;
        progress.finish();
        println!("== variant {name}");
        print!("{}", output::text::render(&summary));
        println!("outputs: {}", dir.display());
        runs.push((name.clone(), summary));
    }
    // Every variant ran: the comparison, on stdout and as index.html beside them.
    if runs.len() > 1 {
        print!("{}", output::index::render_text(&base.name, &runs));
        output::index::write(&out, &base.name, &base.description, &runs)
            .with_context(|| format!("writing {}", out.join("index.html").display()))?;
        println!("compared: {}", out.join("index.html").display());
    }
    peak();
    Ok(())
}

/// Runs `scenario` with its outputs streamed into `dir`.
fn sim_into(
    dir: &Path,
    scenario: &memtide_scenario::Scenario,
    variant: Option<&str>,
    progress: &Progress,
) -> anyhow::Result<output::summary::Summary> {
    let writing = || format!("writing outputs to {}", dir.display());
    let mut outputs =
        output::Outputs::create(dir, &run::describe(scenario)).with_context(writing)?;
    let mut done = run::run(scenario, progress, &mut outputs)?;
    done.variant = variant.map(str::to_string);
    outputs.finish(&done).with_context(writing)
}

/// `out/<what>-<the trace's file name>`: where a cache command writes when not told.
fn default_out(what: &str, trace: &Path) -> PathBuf {
    let name = trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Path::new("out").join(format!("{what}-{name}"))
}

/// `memtide cache ...`.
fn cache_command(command: CacheCommand) -> anyhow::Result<()> {
    match command {
        CacheCommand::Mrc {
            trace,
            out,
            tenant,
            shards_rate,
            shards_size,
            no_exact,
            by,
            points,
        } => {
            let out = out.unwrap_or_else(|| default_out("mrc", &trace));
            let run = cache::mrc(&cache::MrcOptions {
                trace,
                out: out.clone(),
                tenant,
                shards_rate,
                shards_size,
                exact: !no_exact,
                by: match by {
                    ByArg::Blocks => cache::Unit::Blocks,
                    ByArg::Bytes => cache::Unit::Bytes,
                },
                points,
            })?;
            print!("{}", run.summary());
            println!("outputs: {}", out.display());
            Ok(())
        }
        CacheCommand::Gen {
            pattern,
            requests,
            blocks,
            theta,
            seed,
            tenant,
            block_bytes,
            out,
        } => {
            if !(theta.is_finite() && theta >= 0.0) || blocks == 0 {
                anyhow::bail!(cache::CacheError::Pattern { blocks, theta });
            }
            let pattern = match pattern {
                PatternArg::Tpcw => memtide_cache::Pattern::tpcw(),
                PatternArg::Rubis => memtide_cache::Pattern::rubis(),
                PatternArg::Zipf => memtide_cache::Pattern::Zipf { n: blocks, theta },
                PatternArg::Loop => memtide_cache::Pattern::Loop { n: blocks },
                PatternArg::Scan => memtide_cache::Pattern::Scan,
            };
            cache::gen(&cache::GenOptions {
                pattern,
                requests,
                seed,
                tenant,
                block_bytes,
                out: out.clone(),
            })?;
            println!("wrote {requests} requests to {}", out.display());
            Ok(())
        }
        CacheCommand::Partition { scenario, out } => {
            let out = out.unwrap_or_else(|| {
                let stem = scenario
                    .file_stem()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Path::new("out").join(format!("partition-{stem}"))
            });
            let run = cache::partition(&cache::PartitionOptions {
                scenario,
                out: out.clone(),
            })?;
            print!("{}", cache::table(&run));
            println!("outputs: {}", out.display());
            Ok(())
        }
        CacheCommand::Surface {
            trace,
            out,
            tenant,
            policy,
            buffer,
            storage,
            grid,
            buffer_us,
            storage_us,
            disk_us,
        } => {
            let out = out.unwrap_or_else(|| default_out("surface", &trace));
            let policy = match policy {
                PolicyArg::LruLru => memtide_cache::Policy::LruLru,
                PolicyArg::Demote => memtide_cache::Policy::Demote,
            };
            cache::surface(&cache::SurfaceOptions {
                trace,
                out: out.clone(),
                tenant,
                policy,
                buffer,
                storage,
                grid,
                latencies: memtide_cache::Latencies {
                    buffer_us,
                    storage_us,
                    disk_us,
                },
            })?;
            println!("outputs: {}", out.display());
            Ok(())
        }
    }
}
