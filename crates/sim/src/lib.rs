//! memtide's simulated host: a deterministic world of machine pages, guests, balloon drivers, host swap and workloads.
//!
//! A seed in, the same bytes out: all randomness comes from [`rng::SimRng`] seeded by the scenario.
//!
//! - the host: `machine` (frames and host swap), `pmap` (per VM), `paging` (host-side work
//!   across VMs: backing pages, random victims, making room when the machine is full),
//!   `victims` (the index of which VM pages out when the machine is full), `sampler` (ESX
//!   page sampling), `cost` (the cost model, docs/cost-model.md);
//! - a VM: `guest` (the guest OS: free list, anon and page cache, its own swap, two-level
//!   CLOCK reclaim with refault-driven balance), `entries` (the guest's per-page numbers,
//!   16 bits wide for a small guest), `balloon` (the driver), `vm` (one VM's tick:
//!   balloon moves interleaved with accesses), `stats` (per-tick figures);
//! - `sharing/` (content-based page sharing, ESX §4): `content.rs` (pages' contents as 64-bit
//!   keys written out as real bytes and hashed with XXH3; a tenant's declared `ContentMix` of
//!   zero, common, duplicate and unique pages), `table.rs` (ESX's global hash table of 16-byte
//!   shared and hint frames, 16-bit counts with an overflow table), `mod.rs` (`Sharing`: the
//!   random scan at the policy's rate, full compares, stale hints, copy-on-write breaks, share
//!   before swap, ESX's shared, reclaimed and zero accounting), held when the scenario has
//!   `[sharing]`;
//! - `disk/` (one disk the tenants share, Lai et al.): a discrete-event simulation in µs
//!   within each tick — `device` (positioning, transfer, a write cache whose flush every fsync
//!   pays, idle destaging), `sched` (start-time fair queueing by weight, token buckets for IOPS
//!   caps), `load` (RUBBoS-like n-tier applications over InnoDB's commit path, fsync writers);
//!   held when the scenario has `[disk]`;
//! - `remap` (hot I/O page remapping, ESX §7): each tenant's I/O buffer pages placed across
//!   the low/high line, bounce copies counted per page, a hot page remapped into free low
//!   memory; held with `[io_remap]`, reported as `IoRemapping`;
//! - `workload/`: toucher, idle, file server, CPU job, OLTP, web, a key-value server
//!   following a memtide-demand pattern (`kv`), and applications with a pool
//!   of their own (`cache`, `database` with its LRU buffer pool and planner, `jvm` with a
//!   generational heap; `pool.rs`), with jobs; `pick` draws pages, `validate` checks
//!   parameters;
//! - `app/`: the application balloon — an application's agent and memtide's session over two
//!   in-memory line queues; memtide's side is `memtide_agents::session::Session`, the daemon's
//!   own, and every message goes through `memtide_balloon::protocol`'s encoder and decoder, so
//!   each simulated exchange is also a protocol test; `curve.rs` is a database agent's SHARDS
//!   sample of its page reads;
//! - `slo`: a key-value server's (`workload::kv`, the density benchmark's) per-request
//!   latencies in a FIFO queue, its report windows as the real load generator writes them
//!   (`memtide_demand::Window`) and what each second tells a wake-up (`memtide_demand::Second`);
//! - `footprint`: a tenant's memory predicted from its configuration (bytes per simulated
//!   page of each structure), which `memtide sim` checks against `--max-memory` before a run;
//! - `rng`, `zipf` (our own, for byte-stable output), `config`, and `world`: [`SimWorld`], the
//!   world the runner drives.
//!
//! A tenant is a VM (`TenantKind::Vm`: balloon and host swap levers) or a container under a
//! limit (`TenantKind::Container`: a limit lever, the kernel's reclaim within it modelled by
//! the guest model's own reclaim), so the limit rails run in deterministic scenarios
//! (`scenarios/containers.toml`). See docs/sim-model.md and docs/cost-model.md.

pub mod app;
pub mod balloon;
pub mod config;
pub mod cost;
pub mod disk;
pub mod entries;
pub mod footprint;
pub mod guest;
pub mod machine;
pub mod paging;
pub mod pmap;
pub mod remap;
pub use memtide_rng as rng;
pub mod sampler;
pub mod sharing;
pub mod slo;
pub mod stats;
pub mod victims;
pub mod vm;
pub mod workload;
pub mod world;
pub mod zipf;

pub use stats::TickStats;
pub use world::{SimError, SimWorld};
