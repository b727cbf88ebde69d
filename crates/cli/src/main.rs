//! The `memtide` command: `sim` runs a scenario on the simulated host, `bench` measures memtide's own speed.

use anyhow::Context;
use clap::{Parser, Subcommand};
use memtide_cli::{bench, output, progress::Progress, run};
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
        #[arg(long)]
        seed: Option<u64>,
        /// Override a scenario field: --set policy.tax_rate=0.5 --set tenants.vm1.max_mb=512
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Run only this variant of a scenario that defines variants.
        #[arg(long)]
        variant: Option<String>,
    },
    /// Measure memtide's speed (policy step, simulated accesses, a 16-VM hour).
    Bench {
        /// Shorter runs, for a quick look.
        #[arg(long)]
        quick: bool,
        /// Also write the results as markdown to this file (e.g. docs/benchmarks.md).
        #[arg(long)]
        write: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim {
            scenario,
            out,
            seed,
            set,
            variant,
        } => sim(scenario.as_deref(), out, seed, set, variant.as_deref()),
        Command::Bench { quick, write } => bench::run(quick, write.as_deref()).map(|_| ()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(user) = e.downcast_ref::<memtide_scenario::ScenarioError>() {
                eprintln!("memtide: {user}");
                ExitCode::from(2)
            } else {
                eprintln!("memtide: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

fn sim(
    path: Option<&Path>,
    out: Option<PathBuf>,
    seed: Option<u64>,
    mut set: Vec<String>,
    only: Option<&str>,
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
    let out = out.unwrap_or_else(|| Path::new("out").join(&base.name));
    let variants: Vec<String> = match only {
        Some(v) => vec![v.to_string()],
        None => base.variants.iter().map(|v| v.name.clone()).collect(),
    };
    if variants.is_empty() {
        let progress = Progress::new(run::total_ticks(&base), &base.name);
        let record = run::run(&base, &progress)?;
        progress.finish();
        let summary = output::write_all(&out, &record)
            .with_context(|| format!("writing outputs to {}", out.display()))?;
        print!("{}", output::text::render(&summary));
        println!("outputs: {}", out.display());
        return Ok(());
    }
    for name in &variants {
        let scenario = load(&set, Some(name))?;
        let progress = Progress::new(
            run::total_ticks(&scenario),
            &format!("{} [{name}]", scenario.name),
        );
        let mut record = run::run(&scenario, &progress)?;
        progress.finish();
        record.variant = Some(name.clone());
        let dir = out.join(name);
        let summary = output::write_all(&dir, &record)
            .with_context(|| format!("writing outputs to {}", dir.display()))?;
        println!("== variant {name}");
        print!("{}", output::text::render(&summary));
        println!("outputs: {}", dir.display());
    }
    Ok(())
}
