//! `memtide cache mrc TRACE`: a trace's LRU miss-ratio curves in one pass — exact (Mattson's stack distances), SHARDS-sampled beside it with its error, or sampled alone (`--no-exact`, the fast path) — by blocks, or by bytes (`--by bytes`: miss ratio and byte miss ratio against the cache's size in bytes), written as `mrc.csv` and a self-contained `mrc.html`.

use super::{write, CacheError};
use crate::progress::Progress;
use memtide_cache::{
    at_size, ByteCurve, ByteDistances, ByteShards, MissRatioCurve, Reuse, Shards, StackDistances,
    TraceReader,
};
use memtide_chart::{self as chart, escape, LineChart, Series};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

/// What a cache's size is counted in.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Blocks (objects), whatever their sizes.
    Blocks,
    /// Bytes: each request's size counts.
    Bytes,
}

/// What `memtide cache mrc` was asked.
#[derive(Clone, Debug)]
pub struct MrcOptions {
    pub trace: PathBuf,
    pub out: PathBuf,
    /// Only this tenant's requests (all when `None`).
    pub tenant: Option<u32>,
    /// A SHARDS curve at this rate.
    pub shards_rate: Option<f64>,
    /// A fixed-size SHARDS curve keeping this many blocks.
    pub shards_size: Option<usize>,
    /// The exact curve too (false: the SHARDS curve alone, `--no-exact`).
    pub exact: bool,
    pub by: Unit,
    /// Cache sizes written to the CSV (and drawn), evenly spaced from 0 to the largest
    /// size that gains a hit.
    pub points: usize,
}

/// One curve at the run's sizes.
#[derive(Clone, Debug)]
pub struct Column {
    /// Its CSV column.
    pub name: &'static str,
    /// Its legend.
    pub label: String,
    /// Its miss ratio at each of the run's sizes.
    pub ratios: Vec<f64>,
    /// Sampled (drawn dashed).
    pub sampled: bool,
}

/// The SHARDS curve: what it is, and beside an exact curve its mean absolute error against
/// it.
#[derive(Clone, Debug)]
pub struct Sampled {
    pub label: String,
    /// Of the miss ratio.
    pub error: Option<f64>,
    /// Of the byte miss ratio (by bytes).
    pub byte_error: Option<f64>,
}

/// What one `mrc` run found.
#[derive(Clone, Debug)]
pub struct MrcRun {
    pub requests: u64,
    /// Distinct blocks (known from the exact curve only) and, by bytes, their latest sizes.
    pub distinct: Option<(u64, Option<u64>)>,
    /// First requests (misses at every size; from the exact curve).
    pub cold: Option<f64>,
    pub by: Unit,
    /// The cache sizes (blocks or bytes) the columns are at.
    pub sizes: Vec<u64>,
    pub columns: Vec<Column>,
    pub shards: Option<Sampled>,
    pub seconds: f64,
}

impl MrcRun {
    /// What the command prints: counts and speed, then the sample's error.
    pub fn summary(&self) -> String {
        let mut out = format!("{} requests", self.requests);
        match self.distinct {
            Some((n, None)) => {
                let _ = write!(out, ", {n} distinct blocks");
            }
            Some((n, Some(bytes))) => {
                let _ = write!(out, ", {n} distinct objects of {} in all", size_text(bytes));
            }
            None => {}
        }
        let _ = writeln!(
            out,
            "; {:.1} M requests/s",
            self.requests as f64 / self.seconds.max(1e-9) / 1e6
        );
        if let Some(s) = &self.shards {
            let _ = writeln!(out, "{}", s.text());
        }
        out
    }
}

impl Sampled {
    /// `SHARDS at rate 0.01: mean absolute error 0.00123 against the exact curve`.
    fn text(&self) -> String {
        match (self.error, self.byte_error) {
            (Some(e), None) => format!(
                "{}: mean absolute error {e:.5} against the exact curve",
                self.label
            ),
            (Some(e), Some(b)) => format!(
                "{}: mean absolute error {e:.5} (miss ratio), {b:.5} (byte miss ratio) against the exact curves",
                self.label
            ),
            _ => format!("{}, without the exact curve", self.label),
        }
    }
}

/// The profilers one run feeds, each request once.
struct Profile {
    blocks: Option<(StackDistances, MissRatioCurve)>,
    block_sample: Option<Shards>,
    bytes: Option<(ByteDistances, ByteCurve)>,
    byte_sample: Option<ByteShards>,
}

impl Profile {
    #[inline]
    fn access(&mut self, block: u64, size: u32) {
        if let Some((d, c)) = &mut self.blocks {
            c.add(d.access(block), 1.0);
        }
        if let Some(s) = &mut self.block_sample {
            s.access(block);
        }
        if let Some((d, c)) = &mut self.bytes {
            c.add(
                d.access(block, size).map(Reuse::hit_size),
                1.0,
                f64::from(size),
            );
        }
        if let Some(s) = &mut self.byte_sample {
            s.access(block, size);
        }
    }
}

/// Checks the options; the sample's description.
fn check(o: &MrcOptions) -> Result<Option<String>, CacheError> {
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
    if o.by == Unit::Bytes && o.shards_size.is_some() {
        return Err(CacheError::BytesFixedSize);
    }
    if !(2..=1_000_000).contains(&o.points) {
        return Err(CacheError::Points(o.points));
    }
    let label = match (o.shards_rate, o.shards_size) {
        (Some(r), _) => Some(format!("SHARDS at rate {r}")),
        (None, Some(n)) => Some(format!("SHARDS keeping {n} blocks")),
        (None, None) => None,
    };
    if !o.exact && label.is_none() {
        return Err(CacheError::NoCurve);
    }
    Ok(label)
}

/// Reads the trace once and writes `mrc.csv` and `mrc.html` into `out`.
pub fn mrc(o: &MrcOptions) -> Result<MrcRun, CacheError> {
    let label = check(o)?;
    let mut reader = TraceReader::open(&o.trace)?;
    let size = std::fs::metadata(&o.trace).map(|m| m.len()).unwrap_or(0);
    let name = o
        .trace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let progress = Progress::bytes(size, &name);
    let bins = (4 * o.points).max(1 << 16);
    let blocks = o.by == Unit::Blocks;
    let mut profile = Profile {
        blocks: (blocks && o.exact).then(|| (StackDistances::new(), MissRatioCurve::new())),
        block_sample: match (blocks, o.shards_rate, o.shards_size) {
            (false, ..) => None,
            (true, Some(r), _) => Some(Shards::fixed_rate(r)),
            (true, None, n) => n.map(Shards::fixed_size),
        },
        bytes: (!blocks && o.exact).then(|| (ByteDistances::new(), ByteCurve::new(bins))),
        byte_sample: o
            .shards_rate
            .filter(|_| !blocks)
            .map(|r| ByteShards::fixed_rate(r, bins)),
    };
    let started = Instant::now();
    let mut requests = 0u64;
    while let Some(r) = reader.next() {
        let r = r?;
        if o.tenant.is_some_and(|t| t != r.tenant) {
            continue;
        }
        requests += 1;
        profile.access(r.block, r.size);
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
    let mut run = match o.by {
        Unit::Blocks => by_blocks(&profile, label, o.points),
        Unit::Bytes => by_bytes(&profile, label, o.points),
    };
    run.requests = requests;
    run.seconds = seconds;
    std::fs::create_dir_all(&o.out).map_err(|error| CacheError::Write {
        path: o.out.clone(),
        error,
    })?;
    write(&o.out.join("mrc.csv"), &csv(&run))?;
    write(&o.out.join("mrc.html"), &html(&run, &name))?;
    Ok(run)
}

/// The block curves at `points` sizes.
fn by_blocks(p: &Profile, label: Option<String>, points: usize) -> MrcRun {
    let exact = p.blocks.as_ref().map(|(d, c)| (d.distinct() as u64, c));
    let sample = p.block_sample.as_ref().map(Shards::curve);
    let max = exact
        .map(|(_, c)| c.max_size())
        .or(sample.as_ref().map(MissRatioCurve::max_size))
        .unwrap_or(0);
    let sizes = sizes(max, points);
    let at = |c: &MissRatioCurve| {
        let ratios = c.miss_ratios();
        sizes.iter().map(|&s| at_size(&ratios, s)).collect()
    };
    let mut columns = Vec::new();
    if let Some((_, c)) = exact {
        columns.push(Column {
            name: "miss_ratio",
            label: "exact LRU".into(),
            ratios: at(c),
            sampled: false,
        });
    }
    if let (Some(c), Some(label)) = (&sample, &label) {
        columns.push(Column {
            name: "shards_miss_ratio",
            label: label.clone(),
            ratios: at(c),
            sampled: true,
        });
    }
    let error = match (exact, &sample) {
        (Some((_, e)), Some(s)) => Some(e.mean_absolute_error(s, e.max_size())),
        _ => None,
    };
    MrcRun {
        requests: 0,
        distinct: exact.map(|(n, _)| (n, None)),
        cold: exact.map(|(_, c)| c.cold()),
        by: Unit::Blocks,
        sizes,
        columns,
        shards: label.map(|label| Sampled {
            label,
            error,
            byte_error: None,
        }),
        seconds: 0.0,
    }
}

/// The byte curves at multiples of their bins' width, at most `points` of them from 0 to
/// past the largest size that gains a hit.
fn by_bytes(p: &Profile, label: Option<String>, points: usize) -> MrcRun {
    let exact = p.bytes.as_ref();
    let sample = p.byte_sample.as_ref().map(ByteShards::curve);
    let curves: Vec<&ByteCurve> = exact.map(|(_, c)| c).into_iter().chain(&sample).collect();
    // Both widths are powers of two: the larger is a multiple of the other.
    let width = curves.iter().map(|c| c.width()).max().unwrap_or(1);
    let max = curves.iter().map(|c| c.max_size()).max().unwrap_or(0);
    let step = width * max.div_ceil((points as u64 - 1) * width).max(1);
    let sizes: Vec<u64> = (0..points as u64)
        .map(|k| k * step)
        .take_while(|&s| s < max + step)
        .collect();
    let mut columns = Vec::new();
    let mut add = |c: &ByteCurve, names: [&'static str; 2], labels: [String; 2], sampled| {
        let ratios = c.miss_ratios_at(&sizes);
        for (i, (name, label)) in names.into_iter().zip(labels).enumerate() {
            columns.push(Column {
                name,
                label,
                ratios: ratios
                    .iter()
                    .map(|r| if i == 0 { r.0 } else { r.1 })
                    .collect(),
                sampled,
            });
        }
    };
    if let Some((_, c)) = exact {
        add(
            c,
            ["miss_ratio", "byte_miss_ratio"],
            [
                "exact LRU: miss ratio".into(),
                "exact LRU: byte miss ratio".into(),
            ],
            false,
        );
    }
    if let (Some(c), Some(label)) = (&sample, &label) {
        add(
            c,
            ["shards_miss_ratio", "shards_byte_miss_ratio"],
            [
                format!("{label}: miss ratio"),
                format!("{label}: byte miss ratio"),
            ],
            true,
        );
    }
    let (error, byte_error) = match (exact, &sample) {
        (Some((_, e)), Some(s)) => {
            let (m, b) = e.mean_absolute_error(s, &sizes);
            (Some(m), Some(b))
        }
        _ => (None, None),
    };
    MrcRun {
        requests: 0,
        distinct: exact.map(|(d, _)| (d.distinct() as u64, Some(d.footprint()))),
        cold: exact.map(|(_, c)| c.cold().0),
        by: Unit::Bytes,
        sizes,
        columns,
        shards: label.map(|label| Sampled {
            label,
            error,
            byte_error,
        }),
        seconds: 0.0,
    }
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

fn csv(run: &MrcRun) -> String {
    let mut out = String::from(match run.by {
        Unit::Blocks => "size_blocks",
        Unit::Bytes => "size_bytes",
    });
    for c in &run.columns {
        out.push(',');
        out.push_str(c.name);
    }
    out.push('\n');
    for (i, s) in run.sizes.iter().enumerate() {
        let _ = write!(out, "{s}");
        for c in &run.columns {
            let _ = write!(out, ",{:.6}", c.ratios[i]);
        }
        out.push('\n');
    }
    out
}

/// Bytes in the largest binary unit that leaves at least 2 of it: `3.5 GiB`.
fn size_text(bytes: u64) -> String {
    let (div, unit) = unit_of(bytes);
    if div == 1 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} {unit}", bytes as f64 / div as f64)
    }
}

/// The unit a chart of sizes up to `max` bytes reads in.
fn unit_of(max: u64) -> (u64, &'static str) {
    [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|&(d, _)| max >= 2 * d)
        .unwrap_or((1, "bytes"))
}

fn html(run: &MrcRun, name: &str) -> String {
    let last = run.sizes.last().copied().unwrap_or(1).max(1);
    let (div, x_label) = match run.by {
        Unit::Blocks => (1.0, "LRU cache size (blocks)".to_string()),
        Unit::Bytes => {
            let (d, unit) = unit_of(last);
            (d as f64, format!("LRU cache size ({unit})"))
        }
    };
    const SOLID: [&str; 2] = ["#1f77b4", "#2ca02c"];
    const DASHED: [&str; 2] = ["#d62728", "#ff7f0e"];
    let (mut solid, mut dashed) = (0, 0);
    let series = run
        .columns
        .iter()
        .map(|c| {
            let color = if c.sampled {
                dashed += 1;
                DASHED[(dashed - 1) % 2]
            } else {
                solid += 1;
                SOLID[(solid - 1) % 2]
            };
            Series {
                label: c.label.clone(),
                color,
                dashed: c.sampled,
                points: run
                    .sizes
                    .iter()
                    .zip(&c.ratios)
                    .map(|(&s, &r)| (s as f64 / div, r))
                    .collect(),
            }
        })
        .collect();
    let svg = chart::line_chart(&LineChart {
        y_label: "miss ratio",
        x_label: &x_label,
        x_range: (0.0, last as f64 / div),
        y_range: Some((0.0, 1.0)),
        dots: false,
        height: 320.0,
        series,
        markers: &[],
    });
    let mut rows = format!(
        "<tr><th class=\"l\">requests</th><td>{}</td></tr>",
        run.requests
    );
    match run.distinct {
        Some((n, None)) => {
            let _ = write!(
                rows,
                "<tr><th class=\"l\">distinct blocks</th><td>{n}</td></tr>"
            );
        }
        Some((n, Some(bytes))) => {
            let _ = write!(
                rows,
                "<tr><th class=\"l\">distinct objects</th><td>{n}</td></tr><tr><th class=\"l\">their bytes (latest sizes)</th><td>{}</td></tr>",
                size_text(bytes)
            );
        }
        None => {}
    }
    if let Some(cold) = run.cold {
        let _ = write!(
            rows,
            "<tr><th class=\"l\">first requests (misses at every size)</th><td>{cold}</td></tr>"
        );
    }
    if let Some(s) = &run.shards {
        let (against, text) = match (s.error, s.byte_error) {
            (Some(e), None) => (
                " against the exact curve",
                format!("mean absolute error {e:.5}"),
            ),
            (Some(e), Some(b)) => (
                " against the exact curves",
                format!("mean absolute error {e:.5} (miss ratio), {b:.5} (byte miss ratio)"),
            ),
            _ => ("", "sampled alone (--no-exact)".to_string()),
        };
        let _ = write!(
            rows,
            "<tr><th class=\"l\">{}{against}</th><td>{text}</td></tr>",
            escape(&s.label)
        );
    }
    let what = match run.by {
        Unit::Blocks => "An LRU cache of x blocks misses the fraction y of the requests",
        Unit::Bytes => "An LRU cache of x bytes misses the fraction y of the requests (miss ratio) and of the bytes they ask for (byte miss ratio); a request hits when its object's size and the sizes of the distinct objects asked for since its previous request fit",
    };
    let how = if run.columns.iter().any(|c| !c.sampled) {
        "; computed exactly from every request's stack distance in one pass (Mattson et al.)"
    } else {
        "; sampled with SHARDS (Waldspurger et al.)"
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>memtide: miss-ratio curve of {n}</title>\n<style>body{{font-family:system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 16px}}table{{border-collapse:collapse;font-size:13px}}th,td{{border:1px solid #ddd;padding:3px 7px;text-align:right}}th.l{{text-align:left;background:#f4f4f4}}svg.chart{{display:block;font-size:11px}}svg .axis-label{{font-size:12px;fill:#444}}</style>\n</head>\n<body>\n<h1>Miss-ratio curve of {n}</h1>\n<table>{rows}</table>\n<p>{what}{how}.</p>\n{svg}\n</body>\n</html>\n",
        n = escape(name),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn options(dir: &Path, trace: &str) -> MrcOptions {
        let path = dir.join("t.csv");
        std::fs::write(&path, trace).unwrap();
        MrcOptions {
            trace: path,
            out: dir.join("out"),
            tenant: None,
            shards_rate: Some(1.0),
            shards_size: None,
            exact: true,
            by: Unit::Blocks,
            points: 100,
        }
    }

    const SMALL: &str = "time,tenant,block,size,op\n1,0,1,4096,r\n2,0,2,4096,r\n3,0,3,4096,r\n4,0,1,4096,r\n5,1,2,4096,r\n6,1,2,4096,r\n7,0,4,4096,r\n8,0,1,4096,r\n";

    #[test]
    fn a_small_trace_gives_its_hand_checked_curve_as_csv_and_html() {
        let dir = tempfile::tempdir().unwrap();
        let run = mrc(&options(dir.path(), SMALL)).unwrap();
        assert_eq!((run.requests, run.distinct), (8, Some((4, None))));
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
    fn without_the_exact_curve_the_sample_alone_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(dir.path(), SMALL);
        o.exact = false;
        let run = mrc(&o).unwrap();
        assert_eq!((run.requests, run.distinct, run.cold), (8, None, None));
        let csv = std::fs::read_to_string(dir.path().join("out/mrc.csv")).unwrap();
        // At rate 1 the sample is the exact curve.
        assert_eq!(
            csv,
            "size_blocks,shards_miss_ratio\n0,1.000000\n1,0.875000\n2,0.875000\n3,0.500000\n"
        );
        assert!(run.summary().contains("without the exact curve"));
        let html = std::fs::read_to_string(dir.path().join("out/mrc.html")).unwrap();
        assert!(
            html.contains("SHARDS at rate 1</th><td>sampled alone (--no-exact)"),
            "{html}"
        );
        o.shards_rate = None;
        let e = mrc(&o).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("--no-exact"), "{e}");
    }

    #[test]
    fn by_bytes_the_curves_count_sizes_hand_checked() {
        // a(100) b(1) a b: at 101 bytes the second pass hits; a's 100 bytes are most of the
        // bytes. Sizes are evenly spaced multiples of the bins' width (1 byte here).
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(
            dir.path(),
            "1,0,1,100,r\n2,0,2,1,r\n3,0,1,100,r\n4,0,2,1,r\n",
        );
        o.by = Unit::Bytes;
        o.points = 3;
        let run = mrc(&o).unwrap();
        assert_eq!(run.distinct, Some((2, Some(101))));
        let csv = std::fs::read_to_string(dir.path().join("out/mrc.csv")).unwrap();
        assert_eq!(
            csv,
            "size_bytes,miss_ratio,byte_miss_ratio,shards_miss_ratio,shards_byte_miss_ratio\n0,1.000000,1.000000,1.000000,1.000000\n51,1.000000,1.000000,1.000000,1.000000\n102,0.500000,0.500000,0.500000,0.500000\n"
        );
        let html = std::fs::read_to_string(dir.path().join("out/mrc.html")).unwrap();
        assert!(html.contains("LRU cache size (bytes)") && html.contains("byte miss ratio"));
        assert!(run.summary().contains("2 distinct objects of 101 bytes"));
        o.shards_rate = None;
        o.shards_size = Some(100);
        let e = mrc(&o).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("--by bytes"), "{e}");
    }

    #[test]
    fn one_tenant_s_requests_alone() {
        let dir = tempfile::tempdir().unwrap();
        let trace = "1,0,1,1,r\n2,1,1,1,r\n3,0,1,1,r\n";
        let mut o = options(dir.path(), trace);
        o.tenant = Some(1);
        assert_eq!(mrc(&o).unwrap().requests, 1);
        o.tenant = Some(7);
        let e = mrc(&o).unwrap_err();
        assert!(e.is_usage() && e.to_string().contains("--tenant 7"), "{e}");
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
