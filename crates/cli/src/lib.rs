//! The memtide command's library: run scenarios on the simulated host, write their outputs, benchmark, print a daemon's status, list what a host could manage, and run the cache simulator.
//!
//! - `run`: a scenario served on the runner's `Service` with a `VirtualClock` and its
//!   timeline as a `Script`; the `Recorder` driver hands each tick to the run's `Ticks`: the
//!   runner's `TickRecord`, with the figures only the simulator knows filled in (working set,
//!   throughput, latency, the guest's own counters);
//! - `record`: `Run` (the run's facts, events, refusals and baseline means, never its ticks),
//!   `Ticks` (where ticks go) and `RunRecord` (every tick in memory, for tests);
//! - `output/`: `Outputs` streams a run — timeline.csv row by row, the summary's `Accumulator`
//!   and the report's `Charts` in bounded memory, all written under `.partial` names and
//!   renamed when complete; report.html drawn with `memtide-chart`; text. MiB appear only
//!   here, in columns named `_mb`;
//! - `density/`: `memtide bench density`, tenants carried at their SLO per policy on real
//!   servers (config, one trial, the report);
//! - `memory`: a run's peak memory predicted from its scenario, the `--max-memory` check
//!   before it starts, and the peak measured after;
//! - `progress` (the progress bar), `bench`, `settings`, `status` (the table `memtide status`
//!   prints, fetched through `memtide_api`, its columns from `memtide_runner::columns`);
//! - `discover`: `memtide discover`, what could be managed here (cgroups under a parent,
//!   systemd's units, the engines' containers, libvirt's domains) as a table or a starting
//!   configuration;
//! - `cache/`: `memtide cache mrc`, `surface` and `gen` (`mod.rs`) and `partition`
//!   (`partition.rs`: the table, `partition.csv`, and report.html with a heat map per app).
//!
//! The integration tests are three binaries: `sim` (simulated hosts, the command, the
//! browser), `linux` (the real host, as root) and `sdks`.

pub mod bench;
pub mod cache;
pub mod density;
pub mod discover;
pub mod memory;
pub mod output;
pub mod progress;
pub mod record;
pub mod run;
pub mod settings;
pub mod status;
