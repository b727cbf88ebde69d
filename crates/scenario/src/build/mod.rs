//! Turns the file as read (`schema.rs`) into a runnable [`Scenario`]: reads the tables that depend on their `kind`, fills in defaults, checks each value and the relations between fields (min <= max, names in events, the budget against the mins, times inside the run), every error pointing at the field it names; sizes become pages, rounded to the nearest page.

use crate::scenario::{Figure, Headline, Scenario, ScenarioTenant, Variant};
use crate::schema::{ConvergenceDoc, HeadlineDoc, ScenarioDoc, VariantDoc};
use memtide_config::{ConfigError, Document, FieldPath, Override, Size};
use memtide_sim::config::HostConfig;
use memtide_sim::sharing::SharingConfig;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

mod density;
mod disk;
mod estimator;
mod events;
mod policy;
mod tenant;
mod workload;

type Result<T> = std::result::Result<T, ConfigError>;

/// The sim's tick: scenario times are whole ticks.
pub(crate) const TICK: Duration = Duration::from_secs(1);
/// Longest time a scenario may give.
const MAX_TIME: Duration = Duration::from_secs(MAX_HOURS * 3600);
/// [`MAX_TIME`] as the docs and errors write it: `"1000h"`.
const MAX_HOURS: u64 = 1000;

const DEFAULT_SEED: u64 = 1;
/// A headline's longest text, in characters, and its most windows.
const MAX_HEADLINE: usize = 300;
const MAX_HEADLINE_WINDOWS: usize = 4;
const DEFAULT_CONVERGENCE: (f64, f64) = (0.9, 1.3);

/// A size as messages write it: `"256M"`.
fn shown(size: Size) -> String {
    format!("\"{size}\"")
}

/// A time as messages write it: `"10m"`.
fn shown_time(d: Duration) -> String {
    format!("\"{}\"", memtide_config::Duration(d))
}

/// Builds the scenario in `doc`, read from `source`.
pub(crate) fn build(doc: &Document, source: &Path) -> Result<Scenario> {
    Build { doc }.scenario(source)
}

/// What the checks across tenants need of one.
struct Facts {
    name: String,
    min: Size,
    max: Size,
    /// Its pool is held to an SLO (Gemini's cache quotas).
    slo: bool,
}

struct Build<'a> {
    doc: &'a Document,
}

impl Build<'_> {
    fn err(&self, path: &FieldPath, message: impl Into<String>) -> ConfigError {
        self.doc.error(path, message)
    }

    fn read<T: DeserializeOwned>(&self, path: &FieldPath, value: toml::Value) -> Result<T> {
        self.doc.read_value(path, value)
    }

    /// A size of at most 1 TiB.
    fn size(&self, path: &FieldPath, s: Size) -> Result<Size> {
        if s > Size::TIB {
            return Err(self.err(path, "must be at most \"1T\" (1 TiB)"));
        }
        Ok(s)
    }

    /// A size above zero and at most 1 TiB.
    fn positive_size(&self, path: &FieldPath, s: Size) -> Result<Size> {
        if s.bytes() == 0 {
            return Err(self.err(path, "must be > 0"));
        }
        self.size(path, s)
    }

    /// A workload size in MiB, as the sim takes it.
    fn mib(&self, path: &FieldPath, s: Option<Size>) -> Result<Option<f64>> {
        s.map(|s| self.size(path, s).map(Size::as_mib_f64))
            .transpose()
    }

    /// The run's `duration` was set on the command line (or by a variant): starts and events
    /// past its end are dropped with a note rather than refused.
    fn shortened(&self) -> bool {
        self.doc.is_overridden(&FieldPath::root().key("duration"))
    }

    /// A time of at most [`MAX_TIME`].
    fn time(&self, path: &FieldPath, d: memtide_config::Duration) -> Result<Duration> {
        if d.get() > MAX_TIME {
            return Err(self.err(path, format!("must be at most \"{MAX_HOURS}h\"")));
        }
        Ok(d.get())
    }

    /// A period something is done once in: at least the tick, since the simulator observes
    /// once a tick (a shorter period could not be measured, and would cost time as its
    /// inverse).
    fn period(&self, path: &FieldPath, d: memtide_config::Duration) -> Result<Duration> {
        if d.get() < TICK {
            return Err(self.err(
                path,
                "must be at least 1 s (the tick: the simulator observes once a tick)",
            ));
        }
        self.time(path, d)
    }

    /// A time that falls on a tick.
    fn tick_time(&self, path: &FieldPath, d: memtide_config::Duration) -> Result<Duration> {
        let d = self.time(path, d)?;
        if d.subsec_nanos() != 0 {
            return Err(self.err(path, "must be a whole number of seconds (the tick is 1 s)"));
        }
        Ok(d)
    }

    /// A finite number for which `ok` holds; `rule` says which.
    fn number(
        &self,
        path: &FieldPath,
        v: f64,
        ok: impl Fn(f64) -> bool,
        rule: &str,
    ) -> Result<f64> {
        if v.is_finite() && ok(v) {
            Ok(v)
        } else {
            Err(self.err(path, rule))
        }
    }

    fn scenario(&self, source: &Path) -> Result<Scenario> {
        let root = FieldPath::root();
        let file: ScenarioDoc = self.doc.read(&root)?;
        let name = match file.name {
            Some(name) => {
                check_name(&name).map_err(|m| self.err(&root.key("name"), m))?;
                name
            }
            None => default_name(source),
        };
        let mut duration = self.tick_time(&root.key("duration"), file.duration)?;
        if duration.is_zero() {
            return Err(self.err(&root.key("duration"), "must be > 0"));
        }
        let seed = file.seed.unwrap_or(DEFAULT_SEED);
        let convergence_goal = file.convergence.is_some();
        let convergence = self.convergence(file.convergence)?;
        let host_at = root.key("host");
        let machine = self.positive_size(&host_at.key("memory"), file.host.memory)?;
        let host_swap = self.size(
            &host_at.key("host_swap"),
            file.host.host_swap.unwrap_or_default(),
        )?;
        let cost = file.cost.unwrap_or_default();
        if let Err(e) = cost.validate() {
            return Err(self.err(
                &root.key("cost").key(e.field),
                "must be a finite number >= 0",
            ));
        }

        let mut tenants = Vec::with_capacity(file.tenants.len());
        let mut facts: Vec<Facts> = Vec::with_capacity(file.tenants.len());
        let mut density = None;
        if let Some(d) = file.density {
            if !file.tenants.is_empty() {
                return Err(self.err(
                    &root.key("tenants").index(0),
                    "a scenario with [density] builds its tenants from [[density.mix]]",
                ));
            }
            let budget = file.policy.as_ref().and_then(|p| p.budget);
            let (set_up, built, built_facts) = self.density(d, duration, budget, seed, &cost)?;
            duration += set_up.warmup;
            tenants = built;
            facts = built_facts;
            density = Some(set_up);
        }
        let mut first_of: BTreeMap<String, usize> = BTreeMap::new();
        for (i, t) in file.tenants.into_iter().enumerate() {
            let at = root.key("tenants").index(i);
            if let Some(first) = first_of.insert(t.name.clone(), i) {
                return Err(self.err(
                    &at.key("name"),
                    format!("duplicate tenant name (tenants[{first}] has it too)"),
                ));
            }
            let (tenant, fact) = self.tenant(&at, i, t, duration, &cost)?;
            tenants.push(tenant);
            facts.push(fact);
        }
        let sharing = file
            .sharing
            .map(|d| self.sharing(&root.key("sharing"), d))
            .transpose()?;
        let io_remap = file
            .io_remap
            .map(|d| self.io_remap(&root.key("io_remap"), d, machine))
            .transpose()?;
        let disk = file
            .disk
            .map(|d| self.disk(&root.key("disk"), d))
            .transpose()?;
        if disk.is_none() {
            if let Some(i) = tenants.iter().position(|t| t.vm.disk.is_some()) {
                return Err(self.err(
                    &root.key("tenants").index(i).key("disk"),
                    "needs the host's [disk] table",
                ));
            }
        }
        let mut controller = self.controller(file.policy.unwrap_or_default(), &facts)?;
        controller.sharing = sharing.map(|(settings, _)| settings);
        let (events, dropped) = self.events(&file.events, &facts, duration, &cost)?;

        let variants = self.variants(file.variants)?;
        let headline = file
            .headline
            .map(|h| self.headline(h, &tenants))
            .transpose()?;
        let mut notes = Vec::new();
        let late: Vec<&str> = tenants
            .iter()
            .filter(|t| t.start >= duration)
            .map(|t| t.spec.name.as_str())
            .collect();
        if !late.is_empty() {
            notes.push(format!(
                "duration = {} (set): {} tenant(s) start after the end and do not run: {}",
                shown_time(duration),
                late.len(),
                late.join(", ")
            ));
        }
        if dropped > 0 {
            notes.push(format!(
                "duration = {} (set): {dropped} event(s) after the end are dropped",
                shown_time(duration)
            ));
        }
        if tenants.is_empty() {
            return Err(self.err(
                &root.key("tenants"),
                "a scenario needs at least one tenant ([[tenants]], or [density])",
            ));
        }

        Ok(Scenario {
            name,
            description: file.description,
            source: source.to_path_buf(),
            variant: None,
            duration,
            seed,
            baseline: file.baseline,
            convergence,
            convergence_goal,
            headline,
            notes,
            host: HostConfig {
                machine: machine.to_pages(),
                host_swap: host_swap.to_pages(),
                tick: TICK,
                sharing: sharing.map(|(_, per_vm_rate)| SharingConfig { per_vm_rate }),
                io_remap,
                disk,
            },
            cost,
            controller,
            tenants,
            events,
            variants,
            density,
        })
    }

    /// `[headline]`: a text, a figure by name, windows in the run and tenants by name.
    fn headline(&self, h: HeadlineDoc, tenants: &[ScenarioTenant]) -> Result<Headline> {
        let at = FieldPath::root().key("headline");
        let text = h.text.trim().to_string();
        if text.is_empty() || text.chars().count() > MAX_HEADLINE {
            return Err(self.err(
                &at.key("text"),
                format!("must be 1 to {MAX_HEADLINE} characters"),
            ));
        }
        let figure = Figure::ALL
            .into_iter()
            .find(|f| f.name() == h.figure)
            .ok_or_else(|| {
                let names: Vec<&str> = Figure::ALL.iter().map(|f| f.name()).collect();
                self.err(
                    &at.key("figure"),
                    format!(
                        "{:?} is not a figure; expected one of {}",
                        h.figure,
                        names.join(", ")
                    ),
                )
            })?;
        if h.windows.len() > MAX_HEADLINE_WINDOWS {
            return Err(self.err(
                &at.key("windows"),
                format!(
                    "{} windows; at most {MAX_HEADLINE_WINDOWS}",
                    h.windows.len()
                ),
            ));
        }
        let mut windows = Vec::with_capacity(h.windows.len());
        for (i, [start, end]) in h.windows.iter().enumerate() {
            let (start, end) = (start.get(), end.get());
            if start >= end {
                return Err(self.err(
                    &at.key("windows").index(i),
                    format!("starts at {start:?}, not before its end {end:?}"),
                ));
            }
            windows.push((start, end));
        }
        for (i, name) in h.tenants.iter().enumerate() {
            if !tenants.iter().any(|t| t.spec.name == *name) {
                return Err(self.err(
                    &at.key("tenants").index(i),
                    format!("{name:?} is not a tenant of the scenario"),
                ));
            }
        }
        Ok(Headline {
            text,
            figure,
            windows,
            tenants: h.tenants,
        })
    }

    /// The `[convergence]` band, with its defaults.
    fn convergence(&self, convergence: Option<ConvergenceDoc>) -> Result<(f64, f64)> {
        let root = FieldPath::root();
        Ok(match convergence {
            None => DEFAULT_CONVERGENCE,
            Some(c) => {
                let at = root.key("convergence");
                let low = c.low.unwrap_or(DEFAULT_CONVERGENCE.0);
                let high = c.high.unwrap_or(DEFAULT_CONVERGENCE.1);
                self.number(&at.key("low"), low, |v| v >= 0.0, "must be >= 0")?;
                self.number(&at.key("high"), high, |v| v > 0.0, "must be > 0")?;
                if low >= high {
                    return Err(self.err(&at.key("low"), format!("must be below high = {high}")));
                }
                (low, high)
            }
        })
    }

    /// The `[[variants]]`: names fit for a directory, each once, and overrides that parse.
    fn variants(&self, docs: Vec<VariantDoc>) -> Result<Vec<Variant>> {
        let root = FieldPath::root();
        let mut variants: Vec<Variant> = Vec::new();
        for (i, v) in docs.into_iter().enumerate() {
            let at = root.key("variants").index(i);
            let valid = !v.name.is_empty()
                && v.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid {
                return Err(self.err(
                    &at.key("name"),
                    "must be letters, digits, - and _ only (it names an output directory)",
                ));
            }
            if let Some(first) = variants.iter().position(|x| x.name == v.name) {
                return Err(self.err(
                    &at.key("name"),
                    format!("duplicate variant name (variants[{first}] has it too)"),
                ));
            }
            for (j, s) in v.set.iter().enumerate() {
                Override::parse(s).map_err(|m| self.err(&at.key("set").index(j), m))?;
            }
            variants.push(Variant {
                name: v.name,
                overrides: v.set,
            });
        }
        Ok(variants)
    }
}

/// Scenario names become output directories: letters, digits, `-`, `_` and `.`, not
/// starting with a dot.
fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err("must be letters, digits, -, _ and . only, not starting with a dot (it names the output directory)".to_string())
    }
}

/// The file stem, with characters unfit for a directory name replaced by `-`.
fn default_name(source: &Path) -> String {
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned
        .trim_start_matches('.')
        .trim_matches('-')
        .to_string();
    if cleaned.is_empty() {
        "scenario".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_is_the_cleaned_file_stem() {
        assert_eq!(
            default_name(Path::new("scenarios/esx-idle-tax.toml")),
            "esx-idle-tax"
        );
        assert_eq!(default_name(Path::new("my scenario.toml")), "my-scenario");
        assert_eq!(default_name(Path::new("<demo>")), "demo");
        assert_eq!(default_name(Path::new("")), "scenario");
    }

    #[test]
    fn check_name_refuses_paths() {
        assert!(check_name("esx-idle-tax").is_ok());
        assert!(check_name("../x").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name("").is_err());
    }
}
