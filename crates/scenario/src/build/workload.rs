//! A workload table, read by its `kind`, with its jobs, agent and phases; the sim checks the parameters without a unit.

use crate::schema::{
    AgentDoc, CacheDoc, CpuJobDoc, DatabaseDoc, FileServerDoc, IdleDoc, JobDoc, JvmDoc, OltpDoc,
    PhaseDoc, ToucherDoc, WebDoc,
};
use memtide_config::{ConfigError, FieldPath, Size};
use memtide_model::Pages;
use memtide_sim::app::{AgentConfig, DEFAULT_GRANULE};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::config::defaults;
use memtide_sim::workload::{Job, TouchPhase, Workload, WorkloadConfig, WorkloadError};

use super::{shown, shown_time, Build, Result};

const WORKLOAD_KINDS: &str =
    "\"idle\", \"toucher\", \"file_server\", \"cpu_job\", \"oltp\", \"web\", \"cache\", \"database\" or \"jvm\"";

impl Build<'_> {
    /// A workload table, read by its kind; the sim checks the parameters without a unit.
    pub(super) fn workload(
        &self,
        at: &FieldPath,
        value: &toml::Value,
        cost: &CostModel,
    ) -> Result<WorkloadConfig> {
        let (kind, rest) = self.doc.kind(at, value, None)?;
        let config = match kind.as_str() {
            "idle" => self.idle(at, self.read(at, rest)?)?,
            "toucher" => self.toucher(at, self.read(at, rest)?)?,
            "file_server" => self.file_server(at, self.read(at, rest)?)?,
            "cpu_job" => self.cpu_job(at, self.read(at, rest)?)?,
            "oltp" => self.oltp(at, self.read(at, rest)?)?,
            "web" => self.web(at, self.read(at, rest)?)?,
            "cache" => self.cache(at, self.read(at, rest)?)?,
            "database" => self.database(at, self.read(at, rest)?)?,
            "jvm" => self.jvm(at, self.read(at, rest)?)?,
            _ => {
                return Err(self.err(
                    &at.key("kind"),
                    format!("unknown workload kind (expected {WORKLOAD_KINDS})"),
                ))
            }
        };
        Workload::new(&config, cost).map_err(|e| self.workload_error(at, at, e))?;
        Ok(config)
    }

    /// The error for a workload the simulator refused, naming and pointing at the key as
    /// written: the sim names its fields by unit (`pool_mb`, `at_s`), the file by key (`pool`,
    /// `at`). The pace's keys (`cpu_us_per_access`, ...) are under `pace_at`, the others
    /// under `at`.
    pub(super) fn workload_error(
        &self,
        at: &FieldPath,
        pace_at: &FieldPath,
        e: WorkloadError,
    ) -> ConfigError {
        match e {
            WorkloadError::Invalid {
                field, value, rule, ..
            } => {
                let under = if PACE_KEYS.contains(&field.as_str()) {
                    pace_at
                } else {
                    at
                };
                let (path, unit) = file_key(under, &field);
                let rule = file_words(&rule);
                // A value in a unit the file does not write (`0 MB` for `"0"`) is said again.
                let message = if unit.is_empty() {
                    format!("must be {rule}")
                } else {
                    format!("is {value}{unit}; must be {rule}")
                };
                self.err(&path, message)
            }
            WorkloadError::Empty { field, .. } => {
                self.err(&file_key(at, field).0, "must not be empty")
            }
            e => self.err(at, e.to_string()),
        }
    }

    /// `kind = "idle"`.
    fn idle(&self, at: &FieldPath, w: IdleDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::Idle {
            resident_mb: self.mib(&at.key("resident"), w.resident)?.unwrap_or(0.0),
            background_mb: self
                .mib(&at.key("background"), w.background)?
                .unwrap_or(defaults::IDLE_BACKGROUND_MB),
            pace: w.pace(),
        })
    }

    /// `kind = "toucher"`.
    fn toucher(&self, at: &FieldPath, w: ToucherDoc) -> Result<WorkloadConfig> {
        if w.phases.is_empty() {
            return Err(self.err(&at.key("phases"), "must have at least one phase"));
        }
        Ok(WorkloadConfig::Toucher {
            phases: self.phases(at, &w.phases, w.allocated)?,
            allocated_mb: self.mib(&at.key("allocated"), w.allocated)?,
            skew: w.skew.unwrap_or_default(),
            pace: w.pace(),
        })
    }

    /// `kind = "file_server"`.
    fn file_server(&self, at: &FieldPath, w: FileServerDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::FileServer {
            file_set_mb: self.size(&at.key("file_set"), w.file_set)?.as_mib_f64(),
            anon_mb: self
                .mib(&at.key("anon"), w.anon)?
                .unwrap_or(defaults::FILE_SERVER_ANON_MB),
            skew: w.skew.unwrap_or_default(),
            pace: w.pace(),
        })
    }

    /// `kind = "cpu_job"`.
    fn cpu_job(&self, at: &FieldPath, w: CpuJobDoc) -> Result<WorkloadConfig> {
        let allocated = self.size(&at.key("allocated"), w.allocated)?;
        let working_set = self.size(&at.key("working_set"), w.working_set)?;
        if working_set > allocated {
            return Err(self.err(
                &at.key("working_set"),
                format!("must not exceed allocated = {}", shown(allocated)),
            ));
        }
        Ok(WorkloadConfig::CpuJob {
            allocated_mb: allocated.as_mib_f64(),
            working_set_mb: working_set.as_mib_f64(),
            skew: w.skew.unwrap_or_default(),
            input_mb: self.mib(&at.key("input"), w.input)?.unwrap_or(0.0),
            input_fraction: w.input_fraction.unwrap_or(defaults::CPU_JOB_INPUT_FRACTION),
            phases: self.phases(at, &w.phases, Some(w.allocated))?,
            pace: w.pace(),
        })
    }

    /// `kind = "oltp"`.
    fn oltp(&self, at: &FieldPath, w: OltpDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::Oltp {
            data_mb: self.size(&at.key("data"), w.data)?.as_mib_f64(),
            buffer_pool_mb: self
                .mib(&at.key("buffer_pool"), w.buffer_pool)?
                .unwrap_or(0.0),
            anon_mb: self
                .mib(&at.key("anon"), w.anon)?
                .unwrap_or(defaults::OLTP_ANON_MB),
            file_fraction: w.file_fraction.unwrap_or(defaults::OLTP_FILE_FRACTION),
            skew: w.skew.unwrap_or(defaults::OLTP_SKEW),
            pace: w.pace(),
        })
    }

    /// `kind = "web"`.
    fn web(&self, at: &FieldPath, w: WebDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::Web {
            anon_mb: self
                .mib(&at.key("anon"), w.anon)?
                .unwrap_or(defaults::WEB_ANON_MB),
            file_mb: self
                .mib(&at.key("file"), w.file)?
                .unwrap_or(defaults::WEB_FILE_MB),
            pace: w.pace(),
        })
    }

    /// `kind = "cache"`.
    fn cache(&self, at: &FieldPath, w: CacheDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::Cache {
            items_mb: self.size(&at.key("items"), w.items)?.as_mib_f64(),
            pool_mb: self.size(&at.key("pool"), w.pool)?.as_mib_f64(),
            min_pool_mb: self.mib(&at.key("min_pool"), w.min_pool)?.unwrap_or(0.0),
            shrink_s_per_gib: w
                .shrink_s_per_gib
                .unwrap_or(defaults::INNODB_SHRINK_S_PER_GIB),
            grow_s_per_gib: w.grow_s_per_gib.unwrap_or(defaults::INNODB_GROW_S_PER_GIB),
            pace: w.pace(),
            agent: self.agent(&at.key("agent"), w.agent, false)?,
            jobs: self.jobs(&at.key("jobs"), w.jobs)?,
        })
    }

    /// `kind = "database"`.
    fn database(&self, at: &FieldPath, w: DatabaseDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::Database {
            data_mb: self.size(&at.key("data"), w.data)?.as_mib_f64(),
            pool_mb: self.size(&at.key("pool"), w.pool)?.as_mib_f64(),
            min_pool_mb: self.mib(&at.key("min_pool"), w.min_pool)?.unwrap_or(0.0),
            heap_mb: self
                .mib(&at.key("heap"), w.heap)?
                .unwrap_or(defaults::DATABASE_HEAP_MB),
            work_ratio: w.work_ratio.unwrap_or(defaults::DATABASE_WORK_RATIO),
            work_share: w.work_share.unwrap_or(defaults::DATABASE_WORK_SHARE),
            scan_share: w.scan_share.unwrap_or(defaults::DATABASE_SCAN_SHARE),
            scan_mb: self
                .mib(&at.key("scan"), w.scan)?
                .unwrap_or(defaults::DATABASE_SCAN_MB),
            skew: w.skew.unwrap_or(defaults::DATABASE_SKEW),
            shrink_s_per_gib: w
                .shrink_s_per_gib
                .unwrap_or(defaults::INNODB_SHRINK_S_PER_GIB),
            grow_s_per_gib: w.grow_s_per_gib.unwrap_or(defaults::INNODB_GROW_S_PER_GIB),
            pace: w.pace(),
            agent: self.agent(&at.key("agent"), w.agent, true)?,
            jobs: self.jobs(&at.key("jobs"), w.jobs)?,
        })
    }

    /// `kind = "jvm"`.
    fn jvm(&self, at: &FieldPath, w: JvmDoc) -> Result<WorkloadConfig> {
        Ok(WorkloadConfig::Jvm {
            heap_mb: self.size(&at.key("heap"), w.heap)?.as_mib_f64(),
            old_mb: self.size(&at.key("old"), w.old)?.as_mib_f64(),
            live_mb: self.size(&at.key("live"), w.live)?.as_mib_f64(),
            survivors_mb: self.size(&at.key("survivors"), w.survivors)?.as_mib_f64(),
            min_eden_mb: self.size(&at.key("min_eden"), w.min_eden)?.as_mib_f64(),
            young_live_mb: self.size(&at.key("young_live"), w.young_live)?.as_mib_f64(),
            alloc_share: w.alloc_share.unwrap_or(defaults::JVM_ALLOC_SHARE),
            promote: w.promote.unwrap_or(defaults::JVM_PROMOTE),
            shrink_s_per_gib: w.shrink_s_per_gib.unwrap_or(defaults::JVM_SHRINK_S_PER_GIB),
            grow_s_per_gib: w.grow_s_per_gib.unwrap_or(defaults::JVM_GROW_S_PER_GIB),
            pace: w.pace(),
            agent: self.agent(&at.key("agent"), w.agent, false)?,
            jobs: self.jobs(&at.key("jobs"), w.jobs)?,
        })
    }

    /// An application's jobs, each at a time within the run's reach.
    fn jobs(&self, at: &FieldPath, jobs: Option<Vec<JobDoc>>) -> Result<Option<Vec<Job>>> {
        let Some(jobs) = jobs else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.into_iter().enumerate() {
            let start = self.time(&at.index(i).key("at"), j.at)?;
            out.push(Job {
                at_s: start.as_secs_f64(),
                ops: j.ops,
            });
        }
        Ok(Some(out))
    }

    /// The balloon agent of an application with a pool (`None`: absent or disabled).
    /// `curve`: the pool's requests are pages the agent can sample (a database's).
    fn agent(
        &self,
        at: &FieldPath,
        a: Option<AgentDoc>,
        curve: bool,
    ) -> Result<Option<AgentConfig>> {
        let Some(a) = a.filter(|a| a.enabled.unwrap_or(true)) else {
            return Ok(None);
        };
        if a.curve_window.is_some() && !curve {
            return Err(self.err(
                &at.key("curve_window"),
                "only a database's agent samples its pool's requests for a curve",
            ));
        }
        let granule = match a.granule {
            Some(g) => self.positive_size(&at.key("granule"), g)?.to_pages(),
            None => DEFAULT_GRANULE,
        };
        if granule == Pages::ZERO {
            return Err(self.err(&at.key("granule"), "must be at least a page (4 KiB)"));
        }
        Ok(Some(AgentConfig {
            behaviour: a.behaviour.unwrap_or_default(),
            silent_from: a
                .silent_from
                .map(|d| self.time(&at.key("silent_from"), d))
                .transpose()?,
            granule,
            curve_window: a
                .curve_window
                .map(|d| self.period(&at.key("curve_window"), d))
                .transpose()?,
        }))
    }

    /// A toucher's phases: at least one, in time order, none larger than `allocated`.
    /// A workload's phases, each after the one before and within `allocated` when given.
    fn phases(
        &self,
        at: &FieldPath,
        given: &[PhaseDoc],
        allocated: Option<Size>,
    ) -> Result<Vec<TouchPhase>> {
        let mut phases = Vec::with_capacity(given.len());
        for (i, p) in given.iter().enumerate() {
            let here = at.key("phases").index(i);
            let start = self.time(&here.key("at"), p.at)?;
            if i > 0 && p.at <= given[i - 1].at {
                return Err(self.err(
                    &here.key("at"),
                    format!(
                        "must be after phases[{}].at = {}",
                        i - 1,
                        shown_time(given[i - 1].at.get())
                    ),
                ));
            }
            let working_set = self.size(&here.key("working_set"), p.working_set)?;
            if allocated.is_some_and(|a| working_set > a) {
                return Err(self.err(
                    &at.key("allocated"),
                    format!(
                        "must be at least phases[{i}].working_set = {}",
                        shown(working_set)
                    ),
                ));
            }
            phases.push(TouchPhase {
                at_s: start.as_secs_f64(),
                working_set_mb: working_set.as_mib_f64(),
            });
        }
        Ok(phases)
    }
}

/// The keys of a workload's pace, which a `[density]` table writes beside its mix.
const PACE_KEYS: [&str; 3] = ["cpu_us_per_access", "accesses_per_op", "max_accesses_per_s"];

/// A sim field name as the file writes it, and the unit its value is in: `pool_mb` is
/// `pool` in MB, `jobs[1].at_s` is `jobs[1].at` in seconds.
fn file_name(field: &str) -> (String, &'static str) {
    let mut unit = "";
    let parts: Vec<String> = field
        .split('.')
        .map(|part| {
            let (name, index) = part.split_at(part.find('[').unwrap_or(part.len()));
            let name = if let Some(n) = name.strip_suffix("_mb") {
                unit = " MB";
                n
            } else if let Some(n) = name.strip_suffix("_s").filter(|n| !n.ends_with("_per")) {
                unit = " s";
                n
            } else {
                name
            };
            format!("{name}{index}")
        })
        .collect();
    (parts.join("."), unit)
}

/// The path under `at` of sim field `field`, and its value's unit.
fn file_key(at: &FieldPath, field: &str) -> (FieldPath, &'static str) {
    let (name, unit) = file_name(field);
    let mut path = at.clone();
    for part in name.split('.') {
        let (key, index) = part.split_at(part.find('[').unwrap_or(part.len()));
        path = path.key(key);
        if let Some(i) = index
            .strip_prefix('[')
            .and_then(|i| i.strip_suffix(']'))
            .and_then(|i| i.parse().ok())
        {
            path = path.index(i);
        }
    }
    (path, unit)
}

/// A sim rule in the file's words: `<= old_mb = 32` reads `<= old = 32 MB`.
fn file_words(rule: &str) -> String {
    let words: Vec<&str> = rule.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut pending = "";
    for (i, w) in words.iter().enumerate() {
        let (name, unit) = file_name(w);
        if name != *w && words.get(i + 1) == Some(&"=") {
            out.push(name);
            pending = unit;
            continue;
        }
        if *w != "=" && !pending.is_empty() {
            out.push(format!("{w}{pending}"));
            pending = "";
            continue;
        }
        out.push((*w).to_string());
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_field_names_read_as_the_file_s_keys() {
        assert_eq!(file_name("pool_mb"), ("pool".to_string(), " MB"));
        assert_eq!(file_name("jobs[1].at_s"), ("jobs[1].at".to_string(), " s"));
        assert_eq!(
            file_name("phases[0].working_set_mb").0,
            "phases[0].working_set"
        );
        assert_eq!(file_name("shrink_s_per_gib").0, "shrink_s_per_gib");
        assert_eq!(file_name("rate_per_s").0, "rate_per_s");
        assert_eq!(file_words("<= old_mb = 32"), "<= old = 32 MB");
        assert_eq!(file_words("> jobs[0].at_s = 10"), "> jobs[0].at = 10 s");
        assert_eq!(file_words("> 0"), "> 0");
    }
}
