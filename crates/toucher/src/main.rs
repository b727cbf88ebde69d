//! `memtide-toucher`: allocates and touches memory in phases, so tests and demos have real
//! tenants for a memory manager that moves cgroup limits. See `--help` and `args.rs`.
//!
//! The phases are an active set, an idle-but-allocated set and page-cache reads of a file;
//! the content asked for is `--content unique`, `zero` or `seeded:SEED` (pages identical
//! across touchers given the seed, read rather than written each pass so they stay merged).
//! It reports JSON lines, and depends on memtide-model only, for its size and duration parser.

mod args;
mod file;
mod region;
mod report;
mod run;
mod signal;

use std::process::ExitCode;

fn main() -> ExitCode {
    let config = match args::parse_args(std::env::args().skip(1)) {
        Ok(args::Command::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(args::Command::Run(config)) => config,
        Err(message) => {
            eprintln!("memtide-toucher: {message}");
            return ExitCode::from(2);
        }
    };
    match run::run(&config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(run::RunError::BadInput(message)) => {
            eprintln!("memtide-toucher: {message}");
            ExitCode::from(2)
        }
        Err(run::RunError::Failed(message)) => {
            eprintln!("memtide-toucher: {message}");
            ExitCode::from(1)
        }
    }
}
