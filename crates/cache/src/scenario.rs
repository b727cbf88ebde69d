//! Cache-partitioning scenario files (`memtide cache partition SCENARIO`, `scenarios/cache/`): the two levels' sizes and policy, the quota grid, latencies, utilities, the search's restarts, and the applications — each a named synthetic pattern, an explicit mixture, or a trace file — read on memtide-config, so every mistake is one line naming the file, line, field and value.
//!
//! ```toml
//! policy = "demote"            # or "lru-lru"
//! buffer = "1GiB"              # the database buffer pool
//! storage = "1GiB"             # the storage server's cache
//! block = "16KiB"              # default: InnoDB's page, as in the paper
//! grid = 33                    # quota settings per level: 32 steps of 32 MiB
//!
//! [[app]]
//! name = "tpcw"
//! slo = "strict"               # target_us (default 500), slack (default 0)
//! pattern = "tpcw"             # tpcw | rubis, or [[app.mix]] components, or trace = "x.csv"
//! requests = 2000000
//! ```
//!
//! See docs/cache.md for every field and its default.

use crate::experiment::{App, Experiment};
use crate::gen::{Generator, Pattern};
use crate::partition::{Slo, UtilityScale};
use crate::trace::{TraceError, TraceReader};
use crate::twolevel::{Latencies, Policy};
pub use memtide_config::ConfigError;
use memtide_config::{Document, FieldPath, Size};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The paper's minimum for best-effort applications under CONSERVATIVE.
const CONSERVATIVE_MINIMUM: u64 = 32 << 20;
/// IDEAL tries every configuration: a scenario whose grid and applications would make it try
/// more than this many is refused.
const MAX_CONFIGURATIONS: f64 = 2e8;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    #[serde(default)]
    description: String,
    policy: PolicyDoc,
    buffer: Size,
    storage: Size,
    block: Option<Size>,
    grid: Option<usize>,
    seed: Option<u64>,
    restarts: Option<usize>,
    conservative_minimum: Option<Size>,
    latency: Option<LatencyDoc>,
    utility: Option<UtilityDoc>,
    app: Vec<toml::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum PolicyDoc {
    LruLru,
    Demote,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LatencyDoc {
    buffer_us: Option<f64>,
    storage_us: Option<f64>,
    disk_us: Option<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct UtilityDoc {
    worst_us: Option<f64>,
    u_min: Option<f64>,
    u_max: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AppDoc {
    name: String,
    slo: SloDoc,
    target_us: Option<f64>,
    slack: Option<f64>,
    pattern: Option<NamedPattern>,
    mix: Option<Vec<toml::Value>>,
    trace: Option<PathBuf>,
    tenant: Option<u32>,
    requests: Option<u64>,
    seed: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum SloDoc {
    Strict,
    BestEffort,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum NamedPattern {
    Tpcw,
    Rubis,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ZipfDoc {
    weight: f64,
    blocks: u64,
    theta: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoopDoc {
    weight: f64,
    blocks: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanDoc {
    weight: f64,
}

/// Where an application's requests come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// `requests` requests generated from `seed`.
    Generated {
        pattern: Pattern,
        requests: u64,
        seed: u64,
    },
    /// The requests of `tenant` (every request when `None`) in a trace file, the first
    /// `limit` of them when given.
    Trace {
        path: PathBuf,
        tenant: Option<u32>,
        limit: Option<u64>,
    },
}

/// One application as the scenario describes it.
#[derive(Clone, Debug)]
pub struct AppSpec {
    pub name: String,
    pub slo: Slo,
    pub source: Source,
}

/// A cache-partitioning scenario, checked.
#[derive(Clone, Debug)]
pub struct CacheScenario {
    pub file: PathBuf,
    pub description: String,
    pub block_bytes: u64,
    pub apps: Vec<AppSpec>,
    /// The experiment without its applications' requests ([`CacheScenario::experiment`]
    /// reads them).
    pub settings: Experiment,
}

fn err(doc: &Document, at: &FieldPath, message: impl Into<String>) -> ConfigError {
    doc.error(at, message)
}

impl CacheScenario {
    /// Reads and checks the scenario at `path`.
    pub fn load(path: &Path) -> Result<CacheScenario, ConfigError> {
        let text = memtide_config::read_file(path)?;
        CacheScenario::parse(path, &text)
    }

    /// Checks the scenario `text`; `file` names it in errors and places relative trace paths.
    pub fn parse(file: &Path, text: &str) -> Result<CacheScenario, ConfigError> {
        // Through `build`, so a file of the old format hears of every renamed key at once.
        Document::parse(file, text)?.build(|doc| CacheScenario::read(doc, file))
    }

    /// The scenario as `doc` holds it.
    fn read(doc: &Document, file: &Path) -> Result<CacheScenario, ConfigError> {
        let root = FieldPath::root();
        let d: Doc = doc.read(&root)?;
        let levels = Levels::check(doc, &root, &d)?;
        let latencies = latencies(doc, &root.key("latency"), d.latency.unwrap_or_default())?;
        let scale = utility_scale(doc, &root.key("utility"), d.utility.unwrap_or_default())?;
        let apps = apps(doc, &root, file, &d.app)?;
        check_configurations(doc, &root, apps.len(), levels.grid)?;
        let minimum = d
            .conservative_minimum
            .map_or(CONSERVATIVE_MINIMUM, Size::bytes);
        Ok(CacheScenario {
            file: file.to_path_buf(),
            description: d.description,
            block_bytes: levels.block,
            apps,
            settings: Experiment {
                policy: match d.policy {
                    PolicyDoc::LruLru => Policy::LruLru,
                    PolicyDoc::Demote => Policy::Demote,
                },
                buffer_blocks: levels.buffer_blocks,
                storage_blocks: levels.storage_blocks,
                grid: levels.grid,
                latencies,
                scale,
                restarts: d.restarts.unwrap_or(10).max(1),
                seed: d.seed.unwrap_or(1),
                conservative_steps: minimum.div_ceil(levels.step_bytes()) as usize,
                apps: Vec::new(),
            },
        })
    }

    /// The experiment with every application's requests read or generated. `progress` hears
    /// each application's name as its requests are read.
    pub fn experiment(&self, progress: &dyn Fn(&str)) -> Result<Experiment, TraceError> {
        let mut e = self.settings.clone();
        for a in &self.apps {
            progress(&a.name);
            let blocks = match &a.source {
                Source::Generated {
                    pattern,
                    requests,
                    seed,
                } => Generator::new(pattern, *seed)
                    .take(*requests as usize)
                    .collect(),
                Source::Trace {
                    path,
                    tenant,
                    limit,
                } => {
                    let mut blocks = Vec::new();
                    for r in TraceReader::open(path)? {
                        let r = r?;
                        if tenant.is_none_or(|t| t == r.tenant) {
                            blocks.push(r.block);
                            if limit.is_some_and(|l| blocks.len() as u64 >= l) {
                                break;
                            }
                        }
                    }
                    blocks
                }
            };
            e.apps.push(App {
                name: a.name.clone(),
                slo: a.slo,
                blocks,
            });
        }
        Ok(e)
    }
}

/// The two cache levels cut into blocks, and the quota grid laid over them.
struct Levels {
    /// Bytes in a block.
    block: u64,
    /// Quota settings per level.
    grid: usize,
    buffer_blocks: u64,
    storage_blocks: u64,
}

impl Levels {
    /// Checks the block size, the grid, and that each level holds at least a block per step.
    fn check(doc: &Document, root: &FieldPath, d: &Doc) -> Result<Levels, ConfigError> {
        let block = d.block.map_or(16 << 10, Size::bytes);
        if block == 0 {
            return Err(err(doc, &root.key("block"), "must be more than 0"));
        }
        let grid = d.grid.unwrap_or(33);
        if !(2..=257).contains(&grid) {
            return Err(err(
                doc,
                &root.key("grid"),
                "must be between 2 and 257 quota settings per level",
            ));
        }
        let blocks_of = |name: &str, size: Size| -> Result<u64, ConfigError> {
            let n = size.bytes() / block;
            if n < grid as u64 - 1 {
                return Err(err(
                    doc,
                    &root.key(name),
                    format!(
                        "holds {n} blocks of {block} bytes, fewer than the grid's {} steps",
                        grid - 1
                    ),
                ));
            }
            Ok(n)
        };
        Ok(Levels {
            block,
            grid,
            buffer_blocks: blocks_of("buffer", d.buffer)?,
            storage_blocks: blocks_of("storage", d.storage)?,
        })
    }

    /// Bytes in one step of the buffer pool's quota grid (at least a block).
    fn step_bytes(&self) -> u64 {
        (self.buffer_blocks / (self.grid as u64 - 1)).max(1) * self.block
    }
}

/// `[latency]`: each level's latency, defaults filled in, every one a finite number >= 0.
fn latencies(doc: &Document, at: &FieldPath, l: LatencyDoc) -> Result<Latencies, ConfigError> {
    let def = Latencies::default();
    let out = Latencies {
        buffer_us: l.buffer_us.unwrap_or(def.buffer_us),
        storage_us: l.storage_us.unwrap_or(def.storage_us),
        disk_us: l.disk_us.unwrap_or(def.disk_us),
    };
    for (name, v) in [
        ("buffer_us", out.buffer_us),
        ("storage_us", out.storage_us),
        ("disk_us", out.disk_us),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(err(
                doc,
                &at.key(name),
                "must be a number of microseconds >= 0",
            ));
        }
    }
    Ok(out)
}

/// `[utility]`: the utility scale, defaults filled in and each bound on its side of 0.
fn utility_scale(
    doc: &Document,
    at: &FieldPath,
    u: UtilityDoc,
) -> Result<UtilityScale, ConfigError> {
    let def = UtilityScale::default();
    let out = UtilityScale {
        worst_us: u.worst_us.unwrap_or(def.worst_us),
        u_min: u.u_min.unwrap_or(def.u_min),
        u_max: u.u_max.unwrap_or(def.u_max),
    };
    if !(out.worst_us.is_finite() && out.worst_us > 0.0) {
        return Err(err(doc, &at.key("worst_us"), "must be more than 0"));
    }
    if !(out.u_min.is_finite() && out.u_min <= 0.0) {
        return Err(err(doc, &at.key("u_min"), "must be a number <= 0"));
    }
    if !(out.u_max.is_finite() && out.u_max >= 0.0) {
        return Err(err(doc, &at.key("u_max"), "must be a number >= 0"));
    }
    Ok(out)
}

/// Every `[[app]]`, in order: at least one, each name once.
fn apps(
    doc: &Document,
    root: &FieldPath,
    file: &Path,
    values: &[toml::Value],
) -> Result<Vec<AppSpec>, ConfigError> {
    if values.is_empty() {
        return Err(err(doc, root, "has no [[app]]: give at least one"));
    }
    let mut apps: Vec<AppSpec> = Vec::with_capacity(values.len());
    for (i, value) in values.iter().enumerate() {
        let at = root.key("app").index(i);
        let a: AppDoc = doc.read_value(&at, value.clone())?;
        if apps.iter().any(|b| b.name == a.name) {
            return Err(err(doc, &at.key("name"), "is the name of an earlier app"));
        }
        let slo = app_slo(doc, &at, &a)?;
        let source = app_source(doc, &at, file, i, &a)?;
        apps.push(AppSpec {
            name: a.name,
            slo,
            source,
        });
    }
    Ok(apps)
}

/// An app's SLO: strict with its target and slack (defaults 500 µs and 0), or best-effort
/// with neither given.
fn app_slo(doc: &Document, at: &FieldPath, a: &AppDoc) -> Result<Slo, ConfigError> {
    match a.slo {
        SloDoc::BestEffort => {
            for (name, given) in [("target_us", a.target_us), ("slack", a.slack)] {
                if given.is_some() {
                    return Err(err(
                        doc,
                        &at.key(name),
                        "applies to a strict SLO only (this app is best-effort)",
                    ));
                }
            }
            Ok(Slo::BestEffort)
        }
        SloDoc::Strict => Slo::strict(a.target_us.unwrap_or(500.0), a.slack.unwrap_or(0.0))
            .map_err(|e| err(doc, &at.key(e.field()), e.to_string())),
    }
}

/// Where the app at `index` takes its requests from: exactly one of pattern, mix or trace,
/// with `requests` in range.
fn app_source(
    doc: &Document,
    at: &FieldPath,
    file: &Path,
    index: usize,
    a: &AppDoc,
) -> Result<Source, ConfigError> {
    let given = [a.pattern.is_some(), a.mix.is_some(), a.trace.is_some()];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(err(
            doc,
            at,
            "needs exactly one of pattern, mix or trace for its requests",
        ));
    }
    if let Some(r) = a.requests.filter(|&r| !(1..=200_000_000).contains(&r)) {
        return Err(err(
            doc,
            &at.key("requests"),
            format!("{r}: must be between 1 and 200000000"),
        ));
    }
    match &a.trace {
        Some(path) => trace_source(doc, at, file, path, a),
        None => generated_source(doc, at, index, a),
    }
}

/// A trace file's requests: `path` placed beside the scenario when relative, no seed.
fn trace_source(
    doc: &Document,
    at: &FieldPath,
    file: &Path,
    path: &Path,
    a: &AppDoc,
) -> Result<Source, ConfigError> {
    if a.seed.is_some() {
        return Err(err(
            doc,
            &at.key("seed"),
            "applies to generated requests only",
        ));
    }
    let path = if path.is_relative() {
        file.parent().unwrap_or(Path::new("")).join(path)
    } else {
        path.to_path_buf()
    };
    Ok(Source::Trace {
        path,
        tenant: a.tenant,
        limit: a.requests,
    })
}

/// Generated requests: a named pattern or a mixture, how many, and the seed (default: the
/// app's place, from 1).
fn generated_source(
    doc: &Document,
    at: &FieldPath,
    index: usize,
    a: &AppDoc,
) -> Result<Source, ConfigError> {
    if a.tenant.is_some() {
        return Err(err(doc, &at.key("tenant"), "applies to a trace only"));
    }
    let Some(requests) = a.requests else {
        return Err(err(
            doc,
            &at.key("requests"),
            "missing: how many to generate",
        ));
    };
    let pattern = match (&a.pattern, &a.mix) {
        (Some(NamedPattern::Tpcw), _) => Pattern::tpcw(),
        (Some(NamedPattern::Rubis), _) => Pattern::rubis(),
        (None, Some(parts)) => mixture(doc, &at.key("mix"), parts)?,
        (None, None) => unreachable!("one source, checked above"),
    };
    Ok(Source::Generated {
        pattern,
        requests,
        seed: a.seed.unwrap_or(index as u64 + 1),
    })
}

/// Refuses a grid that would make IDEAL try more than [`MAX_CONFIGURATIONS`] for `apps`
/// applications.
fn check_configurations(
    doc: &Document,
    root: &FieldPath,
    apps: usize,
    grid: usize,
) -> Result<(), ConfigError> {
    let configurations = compositions(apps, grid - 1).powi(2);
    if configurations > MAX_CONFIGURATIONS {
        return Err(err(
            doc,
            &root.key("grid"),
            format!(
                "with {apps} apps IDEAL would try {configurations:.1e} configurations, more \
                 than {MAX_CONFIGURATIONS:.0e}: use fewer settings"
            ),
        ));
    }
    Ok(())
}

/// `[[app.mix]]` components, each `kind = "zipf" | "loop" | "scan"` with its `weight`.
fn mixture(doc: &Document, at: &FieldPath, parts: &[toml::Value]) -> Result<Pattern, ConfigError> {
    if parts.is_empty() {
        return Err(err(doc, at, "has no components"));
    }
    let mut out = Vec::with_capacity(parts.len());
    for (i, value) in parts.iter().enumerate() {
        let at = at.index(i);
        let (kind, rest) = doc.kind(&at, value, None)?;
        let (weight, pattern) = match kind.as_str() {
            "zipf" => {
                let z: ZipfDoc = doc.read_value(&at, rest)?;
                if !(z.theta.is_finite() && z.theta >= 0.0) {
                    return Err(err(doc, &at.key("theta"), "must be a number >= 0"));
                }
                (
                    z.weight,
                    Pattern::Zipf {
                        n: blocks(doc, &at, z.blocks)?,
                        theta: z.theta,
                    },
                )
            }
            "loop" => {
                let l: LoopDoc = doc.read_value(&at, rest)?;
                (
                    l.weight,
                    Pattern::Loop {
                        n: blocks(doc, &at, l.blocks)?,
                    },
                )
            }
            "scan" => {
                let s: ScanDoc = doc.read_value(&at, rest)?;
                (s.weight, Pattern::Scan)
            }
            _ => {
                return Err(err(
                    doc,
                    &at.key("kind"),
                    "unknown component (expected zipf, loop or scan)",
                ))
            }
        };
        if !(weight.is_finite() && weight > 0.0) {
            return Err(err(doc, &at.key("weight"), "must be more than 0"));
        }
        out.push((weight, pattern));
    }
    Ok(Pattern::Mix(out))
}

fn blocks(doc: &Document, at: &FieldPath, n: u64) -> Result<u64, ConfigError> {
    if !(1..=1 << 32).contains(&n) {
        return Err(err(
            doc,
            &at.key("blocks"),
            "must be between 1 and 4294967296",
        ));
    }
    Ok(n)
}

/// C(total + n − 1, n − 1): the ways to split `total` steps among `n`, as a float.
fn compositions(n: usize, total: usize) -> f64 {
    (1..n).fold(1.0, |c, k| c * (total + k) as f64 / k as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
policy = "demote"
buffer = "64KiB"
storage = "64KiB"
block = "4KiB"
grid = 5

[[app]]
name = "a"
slo = "strict"
target_us = 400
pattern = "tpcw"
requests = 100

[[app]]
name = "b"
slo = "best-effort"
requests = 50
[[app.mix]]
kind = "zipf"
weight = 0.5
blocks = 10
theta = 1.0
[[app.mix]]
kind = "scan"
weight = 0.5
"#;

    fn parse(text: &str) -> Result<CacheScenario, ConfigError> {
        CacheScenario::parse(Path::new("s.toml"), text)
    }

    #[test]
    fn a_scenario_reads_with_its_defaults_and_generates_its_requests() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.settings.buffer_blocks, 16);
        assert_eq!(s.settings.grid, 5);
        assert_eq!(
            s.apps[0].slo,
            Slo::Strict {
                target_us: 400.0,
                slack: 0.0
            }
        );
        // 32 MiB of 4-block steps of 4 KiB: everything.
        assert_eq!(s.settings.conservative_steps, 2048);
        let e = s.experiment(&|_| {}).unwrap();
        assert_eq!(e.apps[0].blocks.len(), 100);
        assert_eq!(e.apps[1].blocks.len(), 50);
    }

    #[test]
    fn a_file_of_the_old_format_hears_of_every_renamed_key() {
        let old = GOOD
            .replace("buffer = \"64KiB\"", "buffer_bytes = 65536")
            .replace("block = \"4KiB\"", "block_kb = 4");
        let e = parse(&old).unwrap_err().to_string();
        assert!(
            e.starts_with("s.toml:5:12: block_kb = 4: unknown field `block_kb`")
                && e.contains("`block = \"4K\"`")
                && e.ends_with(
                    "1 more key of the old format: `buffer_bytes` (3:16) is now `buffer = 65536`"
                ),
            "{e}"
        );
    }

    #[test]
    fn mistakes_are_one_line_naming_the_line_the_field_and_the_value() {
        for (from, to, expect) in [
            (
                "grid = 5",
                "grid = 1",
                "s.toml:6:8: grid = 1: must be between 2",
            ),
            (
                "target_us = 400",
                "target_us = -4",
                "app[0].target_us = -4: must be more than 0",
            ),
            ("theta = 1.0", "theta = -1.0", "app[1].mix[0].theta = -1.0"),
            (
                "kind = \"scan\"",
                "kind = \"walk\"",
                "app[1].mix[1].kind = \"walk\": unknown",
            ),
            (
                "name = \"b\"",
                "name = \"a\"",
                "app[1].name = \"a\": is the name of an earlier app",
            ),
            (
                "pattern = \"tpcw\"",
                "pattern = \"tpcw\"\ntrace = \"x.csv\"",
                "app[0]: needs exactly one",
            ),
            (
                "storage = \"64KiB\"",
                "storage = \"8KiB\"",
                "storage = \"8KiB\": holds 2 blocks",
            ),
            (
                "policy = \"demote\"",
                "policy = \"lru\"",
                "policy = \"lru\": unknown variant",
            ),
        ] {
            let e = parse(&GOOD.replacen(from, to, 1)).unwrap_err().to_string();
            assert!(e.contains(expect), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn too_many_configurations_for_ideal_is_refused() {
        let mut text = GOOD
            .replace("grid = 5", "grid = 257")
            .replace("\"64KiB\"", "\"64MiB\"");
        for i in 0..4 {
            text.push_str(&format!(
                "\n[[app]]\nname = \"x{i}\"\nslo = \"best-effort\"\npattern = \"rubis\"\nrequests = 10\n"
            ));
        }
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("IDEAL would try"), "{e}");
    }
}
