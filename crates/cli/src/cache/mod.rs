//! `memtide cache`: the cache simulator's commands. `partition SCENARIO` (in `partition.rs`) runs a Gemini experiment: every scheme's quotas, latencies and utilities, and each application's surface as a heat map. `mrc TRACE` (in `mrc.rs`) streams a block trace into its LRU miss-ratio curves in one pass, by blocks or by bytes: exact, SHARDS-sampled beside it with its error, or sampled alone; `surface TRACE` computes one tenant's exact latency surface r(q_c, q_s) over a grid of buffer-pool and storage-cache quotas, under LRU/LRU or LRU/DEMOTE, as `surface.csv`; `gen` writes a synthetic trace (Zipf, loop, scan, or the TPC-W-like and RUBiS-like mixtures).

mod mrc;
mod partition;

pub use mrc::{mrc, Column, MrcOptions, MrcRun, Sampled, Unit};
pub use partition::{partition, table, PartitionOptions, PartitionRun};

use memtide_cache::{
    Generator, Latencies, MissRatioCurve, Op, Pattern, Policy, Request, Shards, Surface,
    TraceError, TraceReader, TraceWriter,
};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Bad options or a bad trace: the user's to fix (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Scenario(#[from] memtide_cache::scenario::ConfigError),
    #[error("--shards-rate {}: must be more than 0 and at most 1", number(*.0))]
    Rate(f64),
    #[error(
        "--shards-rate {}: below the smallest rate SHARDS samples at, 2^-24 = {:.3e} (one of its 2^24 hash values)",
        number(*.0),
        Shards::MIN_RATE
    )]
    RateTooSmall(f64),
    #[error("--shards-size 0: a sample must keep at least 1 block")]
    SampleSize,
    #[error("--shards-size with --by bytes: SHARDS by bytes samples at a fixed rate only; give --shards-rate")]
    BytesFixedSize,
    #[error("--no-exact without --shards-rate or --shards-size: no curve left to compute")]
    NoCurve,
    #[error("--points {0}: must be between 2 and 1000000")]
    Points(usize),
    #[error(
        "--blocks {blocks} --theta {theta}: blocks must be at least 1 and theta a number >= 0"
    )]
    Pattern { blocks: u64, theta: f64 },
    #[error("--grid {0}: must be between 2 and 1024 quota settings per level")]
    Grid(usize),
    #[error("--tenant {tenant}: no request of that tenant in {}", path.display())]
    NoRequests { tenant: u32, path: PathBuf },
    #[error("{}: no requests; an empty trace has no miss-ratio curve", path.display())]
    Empty { path: PathBuf },
    /// The OS error is in the message and not a `source()`, so that a chain printed whole
    /// (`{:#}`) says it once.
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl CacheError {
    /// True for the user's own mistakes: bad options, a trace that is missing, unreadable or
    /// not one. Writing the outputs failing is not.
    pub fn is_usage(&self) -> bool {
        !matches!(
            self,
            CacheError::Write { .. } | CacheError::Trace(TraceError::Write { .. })
        )
    }
}

/// A number as the user would write it: `0.01`, not `1e-2`, but `1e-300` rather than 300
/// zeros.
fn number(v: f64) -> String {
    let plain = v.to_string();
    if plain.len() > 12 {
        format!("{v:e}")
    } else {
        plain
    }
}

/// What `memtide cache surface` was asked.
#[derive(Clone, Debug)]
pub struct SurfaceOptions {
    pub trace: PathBuf,
    pub out: PathBuf,
    pub tenant: Option<u32>,
    pub policy: Policy,
    /// The largest buffer-pool and storage-cache quotas, in blocks.
    pub buffer: u64,
    pub storage: u64,
    /// Quota settings per level, evenly spaced from 0 to the largest (the paper: 32).
    pub grid: usize,
    pub latencies: Latencies,
}

/// Reads one tenant's requests (held in memory: LRU/LRU replays them once per buffer quota)
/// and writes its latency at every grid point to `surface.csv`.
pub fn surface(o: &SurfaceOptions) -> Result<Surface, CacheError> {
    if !(2..=1024).contains(&o.grid) {
        return Err(CacheError::Grid(o.grid));
    }
    let mut blocks = Vec::new();
    for r in TraceReader::open(&o.trace)? {
        let r = r?;
        if o.tenant.is_none_or(|t| t == r.tenant) {
            blocks.push(r.block);
        }
    }
    if blocks.is_empty() {
        return Err(CacheError::NoRequests {
            tenant: o.tenant.unwrap_or(0),
            path: o.trace.clone(),
        });
    }
    let grid = |max: u64| -> Vec<u64> {
        let n = o.grid as u64 - 1;
        (0..=n).map(|i| i * max / n).collect()
    };
    let (buffer, storage) = (grid(o.buffer), grid(o.storage));
    let surface = match o.policy {
        Policy::Demote => {
            let curve = MissRatioCurve::exact(blocks.iter().copied());
            Surface::demote(&curve, &buffer, &storage)
        }
        Policy::LruLru => Surface::lru_lru(&blocks, &buffer, &storage),
    };
    let mut csv = String::from(
        "buffer_blocks,storage_blocks,buffer_hits,storage_hits,disk_reads,latency_us\n",
    );
    for (i, &c) in buffer.iter().enumerate() {
        for (j, &s) in storage.iter().enumerate() {
            let k = surface.counts[i * storage.len() + j];
            let _ = writeln!(
                csv,
                "{c},{s},{},{},{},{:.3}",
                k.buffer,
                k.storage,
                k.disk,
                surface.latency_us(i, j, &o.latencies)
            );
        }
    }
    std::fs::create_dir_all(&o.out).map_err(|error| CacheError::Write {
        path: o.out.clone(),
        error,
    })?;
    write(&o.out.join("surface.csv"), &csv)?;
    Ok(surface)
}

/// What `memtide cache gen` was asked: `requests` requests of `pattern` from `seed`, as
/// tenant `tenant`, blocks of `block_bytes`, into `out` (`*.csv` or `*.oracleGeneral`).
#[derive(Clone, Debug)]
pub struct GenOptions {
    pub pattern: Pattern,
    pub requests: u64,
    pub seed: u64,
    pub tenant: u32,
    pub block_bytes: u32,
    pub out: PathBuf,
}

/// Writes the trace; its time is the request's number.
pub fn gen(o: &GenOptions) -> Result<(), CacheError> {
    let mut w = TraceWriter::create(&o.out)?;
    for (time, block) in Generator::new(&o.pattern, o.seed)
        .take(o.requests as usize)
        .enumerate()
    {
        w.write(&Request {
            time: time as u64,
            tenant: o.tenant,
            block,
            size: o.block_bytes,
            op: Op::Read,
        })?;
    }
    Ok(w.finish()?)
}

fn write(path: &Path, text: &str) -> Result<(), CacheError> {
    std::fs::write(path, text).map_err(|error| CacheError::Write {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_surface_under_demote_has_the_hand_checked_counts_and_lru_lru_none_from_storage() {
        let dir = tempfile::tempdir().unwrap();
        // A loop over 4 blocks, 3 times.
        let trace: String = (0..12).map(|i| format!("{i},0,{},1,r\n", i % 4)).collect();
        let path = dir.path().join("loop.csv");
        std::fs::write(&path, trace).unwrap();
        let mut o = SurfaceOptions {
            trace: path,
            out: dir.path().join("out"),
            tenant: None,
            policy: Policy::Demote,
            buffer: 2,
            storage: 2,
            grid: 3,
            latencies: Latencies::default(),
        };
        let s = surface(&o).unwrap();
        // Buffer 2 + storage 2 hold the loop: 4 from disk, 8 from storage.
        let last = s.counts[8];
        assert_eq!((last.buffer, last.storage, last.disk), (0, 8, 4));
        let csv = std::fs::read_to_string(dir.path().join("out/surface.csv")).unwrap();
        assert_eq!(csv.lines().count(), 10);
        assert!(csv.ends_with("2,2,0,8,4,1300.000\n"), "{csv}");
        o.policy = Policy::LruLru;
        let s = surface(&o).unwrap();
        assert_eq!(
            s.counts[8].disk, 12,
            "inclusive levels of 2 and 2 hold 2 blocks of 4"
        );
        o.tenant = Some(7);
        assert!(surface(&o).unwrap_err().to_string().contains("--tenant 7"));
        o.grid = 1;
        assert!(surface(&o).unwrap_err().is_usage());
    }

    #[test]
    fn a_generated_trace_reads_back_with_its_requests() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("loop.oracleGeneral");
        gen(&GenOptions {
            pattern: Pattern::Loop { n: 10 },
            requests: 25,
            seed: 1,
            tenant: 0,
            block_bytes: 16384,
            out: out.clone(),
        })
        .unwrap();
        let blocks: Vec<u64> = TraceReader::open(&out)
            .unwrap()
            .map(|r| r.unwrap().block)
            .collect();
        assert_eq!(blocks.len(), 25);
        assert_eq!(blocks[..12], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
    }
}
