//! `memtide cache`: the cache simulator's commands. `partition SCENARIO` (in `partition.rs`) runs a Gemini experiment: every scheme's quotas, latencies and utilities, and each application's surface as a heat map. `mrc TRACE` streams a block trace into its exact LRU miss-ratio curve in one pass (and, if asked, a SHARDS curve beside it with its error against the exact one), written as `mrc.csv` and a self-contained `mrc.html`; `surface TRACE` computes one tenant's exact latency surface r(q_c, q_s) over a grid of buffer-pool and storage-cache quotas, under LRU/LRU or LRU/DEMOTE, as `surface.csv`; `gen` writes a synthetic trace (Zipf, loop, scan, or the TPC-W-like and RUBiS-like mixtures).

mod partition;

pub use partition::{partition, table, PartitionOptions, PartitionRun};

use crate::progress::Progress;
use memtide_cache::{
    at_size, Generator, Latencies, MissRatioCurve, Op, Pattern, Policy, Request, Shards,
    StackDistances, Surface, TraceError, TraceReader, TraceWriter,
};
use memtide_chart::{self as chart, escape, LineChart, Series};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `memtide cache mrc` was asked.
#[derive(Clone, Debug)]
pub struct MrcOptions {
    pub trace: PathBuf,
    pub out: PathBuf,
    /// Only this tenant's requests (all when `None`).
    pub tenant: Option<u32>,
    /// A SHARDS curve at this rate beside the exact one.
    pub shards_rate: Option<f64>,
    /// A fixed-size SHARDS curve keeping this many blocks.
    pub shards_size: Option<usize>,
    /// Cache sizes written to the CSV (and drawn), evenly spaced from 0 to the largest
    /// size that gains a hit.
    pub points: usize,
}

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

/// What one `mrc` run found.
#[derive(Clone, Debug)]
pub struct MrcRun {
    pub requests: u64,
    pub distinct: u64,
    pub exact: MissRatioCurve,
    /// The SHARDS curve and its mean absolute error against the exact one.
    pub shards: Option<(MissRatioCurve, f64, String)>,
    pub seconds: f64,
}

/// Reads the trace once and writes `mrc.csv` and `mrc.html` into `out`.
pub fn mrc(o: &MrcOptions) -> Result<MrcRun, CacheError> {
    if let Some(r) = o.shards_rate {
        if !(r > 0.0 && r <= 1.0) {
            return Err(CacheError::Rate(r));
        }
        if r < Shards::MIN_RATE {
            return Err(CacheError::RateTooSmall(r));
        }
    }
    if o.shards_size == Some(0) {
        return Err(CacheError::SampleSize);
    }
    if !(2..=1_000_000).contains(&o.points) {
        return Err(CacheError::Points(o.points));
    }
    let reader = TraceReader::open(&o.trace)?;
    let size = std::fs::metadata(&o.trace).map(|m| m.len()).unwrap_or(0);
    let name = o
        .trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let progress = Progress::bytes(size, &name);
    let mut shards = match (o.shards_rate, o.shards_size) {
        (Some(r), _) => Some((Shards::fixed_rate(r), format!("SHARDS at rate {r}"))),
        (None, Some(n)) => Some((Shards::fixed_size(n), format!("SHARDS keeping {n} blocks"))),
        (None, None) => None,
    };
    let started = Instant::now();
    let mut distances = StackDistances::new();
    let mut exact = MissRatioCurve::new();
    let mut requests = 0u64;
    let mut reader = reader;
    while let Some(r) = reader.next() {
        let r = r?;
        if o.tenant.is_some_and(|t| t != r.tenant) {
            continue;
        }
        requests += 1;
        exact.add(distances.access(r.block), 1.0);
        if let Some((s, _)) = &mut shards {
            s.access(r.block);
        }
        if requests.is_multiple_of(1 << 20) {
            progress.set(reader.bytes_read());
        }
    }
    progress.finish();
    if requests == 0 {
        return Err(match o.tenant {
            Some(tenant) => CacheError::NoRequests {
                tenant,
                path: o.trace.clone(),
            },
            None => CacheError::Empty {
                path: o.trace.clone(),
            },
        });
    }
    let seconds = started.elapsed().as_secs_f64();
    let shards = shards.map(|(s, label)| {
        let curve = s.curve();
        let error = exact.mean_absolute_error(&curve, exact.max_size());
        (curve, error, label)
    });
    let run = MrcRun {
        requests,
        distinct: distances.distinct() as u64,
        exact,
        shards,
        seconds,
    };
    std::fs::create_dir_all(&o.out).map_err(|error| CacheError::Write {
        path: o.out.clone(),
        error,
    })?;
    let sizes = sizes(run.exact.max_size(), o.points);
    write(&o.out.join("mrc.csv"), &csv(&run, &sizes))?;
    write(&o.out.join("mrc.html"), &html(&run, &sizes, &name))?;
    Ok(run)
}

/// `points` sizes from 0 to `max`, evenly spaced (every size when there are fewer).
fn sizes(max: u64, points: usize) -> Vec<u64> {
    if max < points as u64 {
        return (0..=max).collect();
    }
    let n = points as u64 - 1;
    let mut out: Vec<u64> = (0..=n).map(|i| i * max / n).collect();
    out.dedup();
    out
}

fn csv(run: &MrcRun, sizes: &[u64]) -> String {
    let mut out = String::from("size_blocks,miss_ratio");
    if run.shards.is_some() {
        out.push_str(",shards_miss_ratio");
    }
    out.push('\n');
    let exact = run.exact.miss_ratios();
    let shards = run.shards.as_ref().map(|(c, _, _)| c.miss_ratios());
    for &s in sizes {
        let _ = write!(out, "{s},{:.6}", at_size(&exact, s));
        if let Some(c) = &shards {
            let _ = write!(out, ",{:.6}", at_size(c, s));
        }
        out.push('\n');
    }
    out
}

fn html(run: &MrcRun, sizes: &[u64], name: &str) -> String {
    let points = |c: &MissRatioCurve| -> Vec<(f64, f64)> {
        let ratios = c.miss_ratios();
        sizes
            .iter()
            .map(|&s| (s as f64, at_size(&ratios, s)))
            .collect()
    };
    let mut series = vec![Series {
        label: "exact LRU".into(),
        color: "#1f77b4",
        dashed: false,
        points: points(&run.exact),
    }];
    if let Some((c, _, label)) = &run.shards {
        series.push(Series {
            label: label.clone(),
            color: "#d62728",
            dashed: true,
            points: points(c),
        });
    }
    let svg = chart::line_chart(&LineChart {
        y_label: "miss ratio",
        x_label: "LRU cache size (blocks)",
        x_range: (0.0, sizes.last().copied().unwrap_or(1).max(1) as f64),
        y_range: None,
        dots: false,
        height: 320.0,
        series,
        markers: &[],
    });
    let shards = run.shards.as_ref().map_or_else(String::new, |(_, e, label)| {
        format!(
            "<tr><th class=\"l\">{} against the exact curve</th><td>mean absolute error {e:.5}</td></tr>",
            escape(label)
        )
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memtide: miss-ratio curve of {n}</title>\n<style>body{{font-family:system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}}table{{border-collapse:collapse;font-size:13px}}th,td{{border:1px solid #ddd;padding:3px 7px;text-align:right}}th.l{{text-align:left;background:#f4f4f4}}svg.chart{{display:block;font-size:11px}}svg .axis-label{{font-size:12px;fill:#444}}</style>\n</head>\n<body>\n<h1>Miss-ratio curve of {n}</h1>\n<table><tr><th class=\"l\">requests</th><td>{}</td></tr><tr><th class=\"l\">distinct blocks</th><td>{}</td></tr><tr><th class=\"l\">first requests (misses at every size)</th><td>{}</td></tr>{shards}</table>\n<p>An LRU cache of x blocks misses the fraction y of the requests; computed exactly from every request's stack distance in one pass (Mattson et al.).</p>\n{svg}\n</body>\n</html>\n",
        run.requests,
        run.distinct,
        run.exact.cold(),
        n = escape(name),
    )
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

    fn options(dir: &Path, trace: &str) -> MrcOptions {
        let path = dir.join("t.csv");
        std::fs::write(&path, trace).unwrap();
        MrcOptions {
            trace: path,
            out: dir.join("out"),
            tenant: None,
            shards_rate: Some(1.0),
            shards_size: None,
            points: 100,
        }
    }

    #[test]
    fn a_small_trace_gives_its_hand_checked_curve_as_csv_and_html() {
        let dir = tempfile::tempdir().unwrap();
        let trace = "time,tenant,block,size,op\n1,0,1,4096,r\n2,0,2,4096,r\n3,0,3,4096,r\n4,0,1,4096,r\n5,1,2,4096,r\n6,1,2,4096,r\n7,0,4,4096,r\n8,0,1,4096,r\n";
        let run = mrc(&options(dir.path(), trace)).unwrap();
        assert_eq!((run.requests, run.distinct), (8, 4));
        let csv = std::fs::read_to_string(dir.path().join("out/mrc.csv")).unwrap();
        assert_eq!(
            csv,
            "size_blocks,miss_ratio,shards_miss_ratio\n0,1.000000,1.000000\n1,0.875000,0.875000\n2,0.875000,0.875000\n3,0.500000,0.500000\n"
        );
        let html = std::fs::read_to_string(dir.path().join("out/mrc.html")).unwrap();
        assert!(html.contains("<svg") && html.contains("LRU cache size (blocks)"));
        assert!(html.contains("mean absolute error 0.00000"));
    }

    #[test]
    fn one_tenant_s_requests_alone() {
        let dir = tempfile::tempdir().unwrap();
        let trace = "1,0,1,1,r\n2,1,1,1,r\n3,0,1,1,r\n";
        let mut o = options(dir.path(), trace);
        o.tenant = Some(1);
        assert_eq!(mrc(&o).unwrap().requests, 1);
    }

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

    #[test]
    fn bad_options_and_traces_are_usage_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(dir.path(), "1,0,x,1,r\n");
        let e = mrc(&o).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("t.csv:1"), "{e}");
        o.shards_rate = Some(0.0);
        let e = mrc(&o).unwrap_err();
        assert!(
            e.is_usage() && e.to_string().contains("--shards-rate 0"),
            "{e}"
        );
        o.shards_rate = None;
        o.trace = dir.path().join("missing.csv");
        let e = mrc(&o).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("missing.csv"), "{e}");
    }
}
