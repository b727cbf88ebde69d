//! Turns the file as written into a runnable [`Scenario`]: checks the relations between fields (min <= max, names in events, budget against the mins, times inside the run) and converts MiB and seconds into pages and durations.

use crate::error::{render_number, render_string, FieldError, FieldPath};
use crate::reader::Result;
use crate::scenario::{Event, Scenario, ScenarioTenant, TimedEvent, Variant};
use crate::schema::{Doc, EventAction, EventDoc, TenantDoc, DEFAULT_KERNEL_MB};
use memtide_controller::ControllerConfig;
use memtide_model::{EstimatorConfig, Pages, TenantId, TenantSpec};
use memtide_sim::config::{BalloonConfig, HostConfig, SamplingSetup, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::{Workload, WorkloadConfig};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The sim's tick: scenario times are whole ticks.
pub(crate) const TICK: Duration = Duration::from_secs(1);

fn mb(v: f64) -> Pages {
    Pages::from_mib_f64(v)
}

fn secs(v: f64) -> Duration {
    // Every time was checked to be finite, >= 0 and at most MAX_S when read.
    Duration::from_secs_f64(v)
}

/// A field of `parent` with its value, for messages.
fn err(parent: &FieldPath, key: &str, value: f64, message: impl Into<String>) -> FieldError {
    FieldError::new(parent.key(key), message).value(render_number(value))
}

/// Builds the scenario read from `source`.
pub(crate) fn build(doc: Doc, source: &Path) -> Result<Scenario> {
    let root = FieldPath::root();
    let name = match doc.name {
        Some(name) => {
            check_name(&name)
                .map_err(|m| FieldError::new(root.key("name"), m).value(render_string(&name)))?;
            name
        }
        None => default_name(source),
    };
    let duration = secs(doc.duration_s);

    let tenants = doc
        .tenants
        .iter()
        .enumerate()
        .map(|(i, t)| tenant(i, t, doc.duration_s, &doc.cost))
        .collect::<Result<Vec<_>>>()?;
    let mut first_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, t) in doc.tenants.iter().enumerate() {
        if let Some(first) = first_of.insert(t.name.as_str(), i) {
            return Err(FieldError::new(
                t.path.key("name"),
                format!("duplicate tenant name (tenants[{first}] has it too)"),
            )
            .value(render_string(&t.name)));
        }
    }

    let min_sum: f64 = doc.tenants.iter().map(|t| t.min_mb).sum();
    if let Some(budget) = doc.policy.budget_mb {
        if budget < min_sum {
            return Err(err(
                &root.key("policy"),
                "budget_mb",
                budget,
                format!(
                    "below the sum of tenant min_mb ({})",
                    render_number(min_sum)
                ),
            ));
        }
    }
    let controller = ControllerConfig {
        tax_rate: doc.policy.tax_rate,
        thresholds: doc.policy.thresholds.clone(),
        budget: doc.policy.budget_mb.map(mb),
        // Per tick; the tick is 1 s.
        host_swap_per_tick: mb(doc.policy.host_swap_mb_per_s),
        balloon_stall_ticks: doc.policy.balloon_stall_ticks,
        // Simulated VMs move by balloon and host swap, never by a limit.
        rails: Default::default(),
        dry_run: false,
        reclaim_always: false,
        backing: Default::default(),
    };
    if let Err(e) = controller.validate() {
        return Err(FieldError::new(root.key("policy"), e.to_string()));
    }

    let events = events(&doc.events, &doc.tenants, doc.duration_s, &doc.cost)?;

    let mut variants: Vec<Variant> = Vec::new();
    for v in &doc.variants {
        if let Some(first) = variants.iter().position(|x| x.name == v.name) {
            return Err(FieldError::new(
                v.path.key("name"),
                format!("duplicate variant name (variants[{first}] has it too)"),
            )
            .value(render_string(&v.name)));
        }
        variants.push(Variant {
            name: v.name.clone(),
            overrides: v.set.clone(),
        });
    }

    Ok(Scenario {
        name,
        description: doc.description,
        source: source.to_path_buf(),
        variant: None,
        duration,
        seed: doc.seed,
        baseline: doc.baseline,
        convergence: doc.convergence,
        host: HostConfig {
            machine: mb(doc.host.memory_mb),
            host_swap: mb(doc.host.host_swap_mb),
            tick: TICK,
        },
        cost: doc.cost,
        controller,
        tenants,
        events,
        variants,
    })
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

fn check_workload(w: &WorkloadConfig, path: FieldPath, cost: &CostModel) -> Result<()> {
    Workload::new(w, cost)
        .map(|_| ())
        .map_err(|e| FieldError::new(path, e.to_string()))
}

fn tenant(i: usize, t: &TenantDoc, duration_s: f64, cost: &CostModel) -> Result<ScenarioTenant> {
    let p = &t.path;
    if t.min_mb > t.max_mb {
        return Err(err(
            p,
            "min_mb",
            t.min_mb,
            format!("must not exceed max_mb = {}", render_number(t.max_mb)),
        ));
    }
    let kernel_mb = t.kernel_mb.unwrap_or(DEFAULT_KERNEL_MB);
    if kernel_mb > t.max_mb {
        let default = if t.kernel_mb.is_none() {
            " (the default; set kernel_mb lower)"
        } else {
            ""
        };
        return Err(err(
            p,
            "kernel_mb",
            kernel_mb,
            format!(
                "must not exceed max_mb = {}{default}",
                render_number(t.max_mb)
            ),
        ));
    }
    if t.start_s >= duration_s {
        return Err(err(
            p,
            "start_s",
            t.start_s,
            format!(
                "must be before the end of the run (duration_s = {})",
                render_number(duration_s)
            ),
        ));
    }
    if let Some(stop) = t.stop_s {
        if stop <= t.start_s {
            return Err(err(
                p,
                "stop_s",
                stop,
                format!("must be after start_s = {}", render_number(t.start_s)),
            ));
        }
    }

    let balloon_room = t.max_mb - kernel_mb;
    let balloon = if t.balloon.enabled {
        let limit_mb = t.balloon.limit_mb.unwrap_or(balloon_room);
        if limit_mb > balloon_room {
            return Err(err(
                &p.key("balloon"),
                "limit_mb",
                limit_mb,
                format!(
                    "must not exceed max_mb - kernel_mb = {}",
                    render_number(balloon_room)
                ),
            ));
        }
        Some((t.balloon.rate_mb_per_s, limit_mb))
    } else {
        None
    };

    let initial_balloon = match t.initial_mb {
        None => Pages::ZERO,
        Some(initial) => {
            if initial < kernel_mb || initial > t.max_mb {
                return Err(err(
                    p,
                    "initial_mb",
                    initial,
                    format!(
                        "must be in [kernel_mb, max_mb] = [{}, {}]",
                        render_number(kernel_mb),
                        render_number(t.max_mb)
                    ),
                ));
            }
            let Some((_, limit_mb)) = balloon else {
                return Err(err(
                    p,
                    "initial_mb",
                    initial,
                    "needs a balloon driver to start below max_mb (balloon.enabled = false)",
                ));
            };
            if t.max_mb - initial > limit_mb {
                return Err(err(
                    p,
                    "initial_mb",
                    initial,
                    format!(
                        "needs a {} MiB balloon, above balloon.limit_mb = {}",
                        render_number(t.max_mb - initial),
                        render_number(limit_mb)
                    ),
                ));
            }
            mb(t.max_mb).saturating_sub(mb(initial))
        }
    };

    check_workload(&t.workload, p.key("workload"), cost)?;

    let sampling = match &t.estimator {
        EstimatorConfig::Sampling(s) => Some(SamplingSetup {
            sample_pages: s.sample_pages,
            period: s.period,
        }),
        _ => None,
    };
    let cap_at_estimate = t
        .cap_at_estimate
        .unwrap_or(!matches!(t.estimator, EstimatorConfig::Sampling(_)));
    let overhead = mb(t.overhead_mb);
    let max = mb(t.max_mb);
    Ok(ScenarioTenant {
        spec: TenantSpec {
            id: TenantId(i as u32),
            name: t.name.clone(),
            min: mb(t.min_mb),
            max,
            shares: t.shares,
            overhead,
            estimator: t.estimator.clone(),
            cap_at_estimate,
        },
        vm: VmConfig {
            max,
            overhead,
            kernel: mb(kernel_mb),
            guest_swap: mb(t.guest_swap_mb.unwrap_or(t.max_mb)),
            balloon: balloon.map(|(rate, limit)| BalloonConfig {
                rate_per_s: mb(rate),
                limit: mb(limit),
            }),
            initial_balloon,
            sampling,
            workload: t.workload.clone(),
        },
        start: secs(t.start_s),
        stop: t.stop_s.map(secs),
    })
}

fn events(
    docs: &[EventDoc],
    tenants: &[TenantDoc],
    duration_s: f64,
    cost: &CostModel,
) -> Result<Vec<TimedEvent>> {
    let find = |e: &EventDoc, name: &str| -> Result<usize> {
        tenants.iter().position(|t| t.name == name).ok_or_else(|| {
            let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
            let known = if names.is_empty() {
                "the scenario has no tenants".to_string()
            } else {
                format!("tenants are {}", names.join(", "))
            };
            FieldError::new(e.path.key("tenant"), format!("no such tenant ({known})"))
                .value(render_string(name))
        })
    };
    // Time order, stable: events at the same time keep their file order.
    let mut order: Vec<&EventDoc> = docs.iter().collect();
    order.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    // Each tenant's (min, max) as set_tenant events change them.
    let mut limits: Vec<(f64, f64)> = tenants.iter().map(|t| (t.min_mb, t.max_mb)).collect();
    let mut built = Vec::with_capacity(docs.len());
    for e in order {
        if e.at_s >= duration_s {
            return Err(err(
                &e.path,
                "at_s",
                e.at_s,
                format!(
                    "must be in [0, duration_s) = [0, {})",
                    render_number(duration_s)
                ),
            ));
        }
        let event = match &e.action {
            EventAction::SetTaxRate(t) => Event::SetTaxRate(*t),
            EventAction::StopTenant { tenant } => {
                Event::StopTenant(TenantId(find(e, tenant)? as u32))
            }
            EventAction::SetWorkload { tenant, workload } => {
                let i = find(e, tenant)?;
                check_workload(workload, e.path.key("workload"), cost)?;
                Event::SetWorkload {
                    tenant: TenantId(i as u32),
                    workload: workload.clone(),
                }
            }
            EventAction::SetTenant {
                tenant,
                min_mb,
                max_mb,
                shares,
            } => {
                let i = find(e, tenant)?;
                let configured = tenants[i].max_mb;
                if let Some(max) = *max_mb {
                    if max > configured {
                        return Err(err(
                            &e.path,
                            "max_mb",
                            max,
                            format!(
                                "must not exceed the tenant's configured max_mb = {} (the guest's memory size)",
                                render_number(configured)
                            ),
                        ));
                    }
                }
                let (min, max) = (min_mb.unwrap_or(limits[i].0), max_mb.unwrap_or(limits[i].1));
                if min > max {
                    let (key, value) = if min_mb.is_some() {
                        ("min_mb", min)
                    } else {
                        ("max_mb", max)
                    };
                    return Err(err(
                        &e.path,
                        key,
                        value,
                        format!(
                            "leaves {tenant} with min_mb = {} above max_mb = {}",
                            render_number(min),
                            render_number(max)
                        ),
                    ));
                }
                limits[i] = (min, max);
                Event::SetTenant {
                    tenant: TenantId(i as u32),
                    min: min_mb.map(mb),
                    max: max_mb.map(mb),
                    shares: *shares,
                }
            }
        };
        built.push(TimedEvent {
            at: secs(e.at_s),
            event,
        });
    }
    Ok(built)
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
