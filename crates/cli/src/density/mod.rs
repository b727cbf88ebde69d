//! `memtide bench density`: how many tenants this host carries at their SLO under each policy — static sizing, the kernel alone, and memtide's configurations — on real servers driven by seeded load (issue 31; docs/benchmarks.md, "Density").
//!
//! First each kind of tenant of the mix is measured once, filled and unconstrained (its
//! *peak*: what static sizing reserves, with 10%). Then, for each policy in turn, trials of N
//! tenants ([`trial::run`]) from `start` up by `step` while they meet the SLO (down from
//! `start` while they do not), at most `max`: the policy carries the largest N that passed.
//! Static sizing does not overcommit, so its N is computed, not searched for: the largest N
//! whose limits fit the budget is tried first, then N + 1 (which does not fit and does not
//! run), and down by one from N only if N misses the SLO. Each trial's raw lines and figures are kept under the output
//! directory; the table and the chart (SLO attainment against N, one line per policy) are
//! written at the end, and after each trial, so a long run can be read as it goes.
//!
//! Needs root (cgroups), a memory controller, swap, `redis-server` and `memcached`, and
//! `memtide-loadgen` (and `memtide-adapter` for the `app` policy) beside this binary; the
//! `senpai` policy needs cgroup v2, `python3` and Senpai's `senpai.py` (`senpai =` in the
//! set-up).

mod config;
mod report;
pub mod sim;
mod trial;

pub use config::{DensityConfig, Policy};
use memtide_linux::fs::hierarchy::{CgroupVersion, MemoryHierarchy};
use std::path::{Path, PathBuf};
use trial::{Env, Programs, TrialResult};

/// What can stop the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum DensityError {
    #[error("{path}: {why}")]
    Config { path: PathBuf, why: String },
    #[error("{0}")]
    Host(String),
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    #[error("trial: {0}")]
    Trial(String),
    /// SIGINT or SIGTERM: the trial running stopped what it started and removed its cgroups.
    #[error("stopped by a signal: the servers, generators and daemon of the trial running were stopped and their cgroups removed; results so far are in the output directory")]
    Stopped,
    /// A scenario file that does not load (the message names the file and the key).
    #[error("{0}")]
    Scenario(String),
}

impl DensityError {
    pub(crate) fn io(what: &str, error: std::io::Error) -> DensityError {
        DensityError::Io {
            what: what.to_string(),
            error,
        }
    }

    /// Whether the user's input is at fault (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            DensityError::Config { .. } | DensityError::Host(_) | DensityError::Scenario(_)
        )
    }
}

/// `name` beside this binary, else on PATH.
fn program(name: &str) -> Option<PathBuf> {
    let beside = std::env::current_exe().ok()?.parent()?.join(name);
    if beside.is_file() {
        return Some(beside);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What the host must have; one line naming what is missing.
fn check_host(config: &DensityConfig) -> Result<(Programs, MemoryHierarchy), DensityError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(DensityError::Host(
            "memtide bench density needs root (it makes cgroups)".into(),
        ));
    }
    let hierarchy =
        MemoryHierarchy::detect(Path::new("/")).map_err(|e| DensityError::Host(e.to_string()))?;
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    if swaps.lines().count() < 2 {
        return Err(DensityError::Host(
            "no swap: every policy runs with the host's swap (scripts/zram-swap.sh up 8G makes some)"
                .into(),
        ));
    }
    let need = |name: &str| {
        program(name)
            .ok_or_else(|| DensityError::Host(format!("{name} is not beside memtide nor on PATH")))
    };
    let mut programs = Programs {
        memtide: std::env::current_exe().map_err(|e| DensityError::io("find memtide", e))?,
        loadgen: need("memtide-loadgen")?,
        redis: program("redis-server"),
        memcached: program("memcached"),
        senpai: None,
    };
    if config.policies.contains(&Policy::Senpai) {
        if hierarchy.version != CgroupVersion::V2 {
            return Err(DensityError::Host(format!(
                "the senpai policy needs cgroup v2 (a cgroup's own memory.pressure and \
                 memory.high); this host's memory controller is {} (scripts/density-guest.sh \
                 runs the benchmark in a cgroup v2 guest)",
                hierarchy.version.name()
            )));
        }
        let script = config
            .senpai
            .clone()
            .expect("parse requires senpai with the policy");
        if !script.is_file() {
            return Err(DensityError::Host(format!(
                "senpai = {}: no such file (Senpai's senpai.py, github.com/facebookincubator/senpai)",
                script.display()
            )));
        }
        programs.senpai = Some((need("python3")?, script));
    }
    use config::ServerKind;
    for k in &config.mix {
        match k.server {
            ServerKind::Redis if programs.redis.is_none() => {
                return Err(DensityError::Host(
                    "redis-server is not installed (apt-get install redis-server)".into(),
                ))
            }
            ServerKind::Memcached if programs.memcached.is_none() => {
                return Err(DensityError::Host(
                    "memcached is not installed (apt-get install memcached)".into(),
                ))
            }
            _ => {}
        }
    }
    if config.policies.contains(&Policy::App) {
        need("memtide-adapter")?;
    }
    Ok((programs, hierarchy))
}

/// Each distinct (server, keys, value size) of the mix filled once, unconstrained: what it
/// holds then. The peaks come back by mix index.
fn calibrate(config: &DensityConfig, env: &mut Env) -> Result<(), DensityError> {
    let mut peaks = Vec::new();
    let mut measured: Vec<((config::ServerKind, u64, u64), u64)> = Vec::new();
    for k in &config.mix {
        let key = (k.server, k.keys, k.value_bytes);
        if let Some((_, p)) = measured.iter().find(|(m, _)| *m == key) {
            peaks.push(*p);
            continue;
        }
        let peak = trial::measure_peak(env, k)?;
        measured.push((key, peak));
        peaks.push(peak);
    }
    env.peaks = peaks;
    Ok(())
}

/// Runs the benchmark: `config_path`'s set-up, writing under `out`.
pub fn run(config_path: &Path, out: &Path) -> Result<(), DensityError> {
    let text = std::fs::read_to_string(config_path).map_err(|e| DensityError::Config {
        path: config_path.to_path_buf(),
        why: e.to_string(),
    })?;
    let config = DensityConfig::parse(&text, config_path)?;
    let (programs, hierarchy) = check_host(&config)?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&trial::STOP))
            .map_err(|e| DensityError::io("register SIGINT and SIGTERM", e))?;
    }
    std::fs::create_dir_all(out).map_err(|e| DensityError::io(&out.display().to_string(), e))?;
    let mut env = Env {
        programs,
        hierarchy,
        out: out.to_path_buf(),
        peaks: Vec::new(),
    };
    calibrate(&config, &mut env)?;
    search_policies(&config, &env.peaks, out, |policy, n| {
        trial::run(&config, &env, policy, n)
    })
}

/// `memtide bench density --merge DIR...`: the trials of earlier runs of the set-up at
/// `config_path` (each DIR one's output directory, its `results.json`) as one table, chart
/// and `results.json` in `out`, running nothing: a search run in pieces, read as one. A
/// policy and N tried in more than one DIR keeps the last DIR's trial.
pub fn merge(config_path: &Path, dirs: &[PathBuf], out: &Path) -> Result<(), DensityError> {
    let text = std::fs::read_to_string(config_path).map_err(|e| DensityError::Config {
        path: config_path.to_path_buf(),
        why: e.to_string(),
    })?;
    let config = DensityConfig::parse(&text, config_path)?;
    let mut results: Vec<TrialResult> = Vec::new();
    for dir in dirs {
        let path = dir.join("results.json");
        let bad = |why: String| DensityError::Config {
            path: path.clone(),
            why,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
        let trials: Vec<TrialResult> = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a density run's results: {e}")))?;
        for t in trials {
            results.retain(|r| (r.policy, r.n) != (t.policy, t.n));
            results.push(t);
        }
    }
    results.sort_by_key(|r| (r.policy, r.n));
    std::fs::create_dir_all(out).map_err(|e| DensityError::io(&out.display().to_string(), e))?;
    report::write(&config, &[], &results, out)?;
    print!("{}", report::table(&config, &[], &results));
    Ok(())
}

/// The most tenants (at most `config.max`) whose static limits fit the budget, tenant `i`
/// holding `peaks[i % len]` filled, in index order as the trials start them.
pub fn static_fit(config: &DensityConfig, peaks: &[u64]) -> usize {
    memtide_demand::static_fit(
        |i| memtide_demand::static_limit(peaks[i % peaks.len()]),
        config.budget,
        config.max,
    )
}

/// Searches N for every policy of `config` in turn, each trial run by `trial` (the real host's
/// or the simulator's), rewriting the report under `out` after each and printing the table at
/// the end. Static sizing's N is computed ([`static_fit`]): its fit, then the one beyond
/// (which does not fit, and does not run), and down by one only if the fit misses.
pub fn search_policies(
    config: &DensityConfig,
    peaks: &[u64],
    out: &Path,
    mut trial: impl FnMut(Policy, usize) -> Result<TrialResult, DensityError>,
) -> Result<(), DensityError> {
    let mut results: Vec<TrialResult> = Vec::new();
    for &policy in &config.policies {
        let (start, step, max) = match policy {
            Policy::Static => {
                let fit = static_fit(config, peaks).max(1);
                (fit, 1, fit + 1)
            }
            _ => (config.start, config.step, config.max),
        };
        search(start, step, max, |n| {
            let r = trial(policy, n)?;
            let passed = r.passed();
            results.push(r);
            report::write(config, peaks, &results, out)?;
            Ok(passed)
        })?;
    }
    print!("{}", report::table(config, peaks, &results));
    Ok(())
}

/// The search for the largest N that passes: `start`, then up by `step` while trials pass
/// (at most `max`), or down by `step` from `start` while they do not (at least 1). Stops at
/// the first trial that settles it, so a policy's N is found in as few trials as the step
/// allows: N is the last passing trial, within `step` of the first failing one.
fn search(
    start: usize,
    step: usize,
    max: usize,
    mut trial: impl FnMut(usize) -> Result<bool, DensityError>,
) -> Result<(), DensityError> {
    let step = step.max(1);
    let mut n = start.max(1);
    if trial(n)? {
        while n + step <= max {
            n += step;
            if !trial(n)? {
                break;
            }
        }
    } else {
        while n > step {
            n -= step;
            if trial(n)? {
                break;
            }
        }
    }
    Ok(())
}

/// The largest N `policy` passed with, among `results`.
pub fn carried(results: &[TrialResult], policy: Policy) -> Option<usize> {
    results
        .iter()
        .filter(|r| r.policy == policy && r.passed())
        .map(|r| r.n)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Ns `search` tries when every N up to `limit` passes.
    fn tried(start: usize, step: usize, max: usize, limit: usize) -> Vec<usize> {
        let mut ns = Vec::new();
        search(start, step, max, |n| {
            ns.push(n);
            Ok(n <= limit)
        })
        .unwrap();
        ns
    }

    /// A trial of `policy` at `n` that met the SLO in `met` of 100 active windows.
    fn trial(policy: Policy, n: usize, met: u64) -> TrialResult {
        let mut t = TrialResult::not_fitting(policy, n, 1 << 30);
        t.fits = true;
        t.attainment = memtide_demand::Attainment { active: 100, met };
        t.attainment_all = t.attainment;
        t
    }

    #[test]
    fn merged_runs_make_one_table_and_a_policy_and_n_tried_twice_keep_the_last() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("density.toml");
        std::fs::write(&config, include_str!("../../../../bench/density.toml")).unwrap();
        let runs = [
            vec![
                trial(Policy::Kernel, 28, 100),
                trial(Policy::Sampling, 28, 90),
            ],
            vec![
                trial(Policy::Sampling, 24, 100),
                trial(Policy::Sampling, 28, 99),
            ],
        ];
        let mut dirs = Vec::new();
        for (i, run) in runs.iter().enumerate() {
            let dir = tmp.path().join(format!("run{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("results.json"),
                serde_json::to_string(run).unwrap(),
            )
            .unwrap();
            dirs.push(dir);
        }
        let out = tmp.path().join("merged");
        merge(&config, &dirs, &out).unwrap();
        let merged: Vec<TrialResult> =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap())
                .unwrap();
        let got: Vec<(Policy, usize, u64)> = merged
            .iter()
            .map(|r| (r.policy, r.n, r.attainment.met))
            .collect();
        assert_eq!(
            got,
            vec![
                (Policy::Kernel, 28, 100),
                (Policy::Sampling, 24, 100),
                (Policy::Sampling, 28, 99)
            ]
        );
        assert_eq!(carried(&merged, Policy::Sampling), Some(28));
        let table = std::fs::read_to_string(out.join("density.md")).unwrap();
        assert!(
            table.contains("| kernel | 28 |") && !table.contains("| tws |"),
            "{table}"
        );
        assert!(out.join("density.svg").exists());

        std::fs::write(dirs[0].join("results.json"), "[{\"policy\": 3}]").unwrap();
        let err = merge(&config, &dirs, &out).unwrap_err().to_string();
        assert!(
            err.contains("run0/results.json: not a density run's results"),
            "{err}"
        );
    }

    #[test]
    fn the_search_goes_up_by_step_until_a_trial_fails() {
        assert_eq!(tried(12, 4, 48, 26), vec![12, 16, 20, 24, 28]);
    }

    #[test]
    fn the_search_stops_at_max_when_every_trial_passes() {
        assert_eq!(tried(12, 4, 22, 100), vec![12, 16, 20]);
    }

    #[test]
    fn the_search_goes_down_from_a_failing_start_until_one_passes() {
        assert_eq!(tried(12, 4, 48, 5), vec![12, 8, 4]);
        assert_eq!(tried(12, 4, 48, 0), vec![12, 8, 4], "never below one step");
    }

    #[test]
    fn static_tries_its_fit_and_the_one_beyond() {
        assert_eq!(tried(18, 1, 19, 18), vec![18, 19]);
        assert_eq!(tried(18, 1, 19, 16), vec![18, 17, 16]);
    }

    #[test]
    fn a_failing_trial_error_stops_the_search() {
        let mut ns = Vec::new();
        let r = search(4, 4, 48, |n| {
            ns.push(n);
            if n == 8 {
                Err(DensityError::Trial("server died".into()))
            } else {
                Ok(true)
            }
        });
        assert!(r.is_err());
        assert_eq!(ns, vec![4, 8]);
    }
}
