//! The scenario file as written: every table and field read from the TOML document, each value checked on its own and defaults filled in.
//!
//! Relations between fields (min <= max, tenant names in events, the budget against the
//! mins) are checked when the scenario is built (`build.rs`). The field reference is
//! `docs/scenarios.md`.

use crate::error::{render_number, render_string, render_value, FieldError, FieldPath};
use crate::overrides::Override;
use crate::reader::{
    Fields, Result, Rule, MAX_S, POSITIVE_SIZE, POSITIVE_TIME, SIZE, TICK_TIME, TIME,
};
use crate::serde_field;
use memtide_model::{EstimatorConfig, SamplingConfig, TaxRate, WorkingSetConfig};
use memtide_policy::ReclamationThresholds;
use memtide_sim::cost::CostModel;
use memtide_sim::workload::WorkloadConfig;
use std::time::Duration;

/// The whole file.
#[derive(Debug)]
pub(crate) struct Doc {
    pub(crate) name: Option<String>,
    pub(crate) description: String,
    pub(crate) duration_s: f64,
    pub(crate) seed: u64,
    pub(crate) baseline: bool,
    pub(crate) convergence: (f64, f64),
    pub(crate) host: HostDoc,
    pub(crate) policy: PolicyDoc,
    pub(crate) cost: CostModel,
    pub(crate) tenants: Vec<TenantDoc>,
    pub(crate) events: Vec<EventDoc>,
    pub(crate) variants: Vec<VariantDoc>,
}

#[derive(Debug)]
pub(crate) struct HostDoc {
    pub(crate) memory_mb: f64,
    pub(crate) host_swap_mb: f64,
}

#[derive(Debug)]
pub(crate) struct PolicyDoc {
    pub(crate) tax_rate: TaxRate,
    pub(crate) budget_mb: Option<f64>,
    pub(crate) host_swap_mb_per_s: f64,
    pub(crate) balloon_stall_ticks: u32,
    pub(crate) thresholds: ReclamationThresholds,
}

#[derive(Debug)]
pub(crate) struct TenantDoc {
    /// `tenants[i]`.
    pub(crate) path: FieldPath,
    pub(crate) name: String,
    pub(crate) min_mb: f64,
    pub(crate) max_mb: f64,
    pub(crate) shares: u64,
    pub(crate) overhead_mb: f64,
    /// `None`: the default (16 MiB).
    pub(crate) kernel_mb: Option<f64>,
    /// `None`: max_mb.
    pub(crate) guest_swap_mb: Option<f64>,
    pub(crate) initial_mb: Option<f64>,
    pub(crate) start_s: f64,
    pub(crate) stop_s: Option<f64>,
    /// `None`: false for sampling, true for tws and committed.
    pub(crate) cap_at_estimate: Option<bool>,
    pub(crate) estimator: EstimatorConfig,
    pub(crate) balloon: BalloonDoc,
    pub(crate) workload: WorkloadConfig,
}

#[derive(Debug)]
pub(crate) struct BalloonDoc {
    pub(crate) enabled: bool,
    pub(crate) rate_mb_per_s: f64,
    /// `None`: max_mb - kernel_mb.
    pub(crate) limit_mb: Option<f64>,
}

#[derive(Debug)]
pub(crate) struct EventDoc {
    /// `events[i]`.
    pub(crate) path: FieldPath,
    pub(crate) at_s: f64,
    pub(crate) action: EventAction,
}

#[derive(Debug)]
pub(crate) enum EventAction {
    SetTaxRate(TaxRate),
    SetWorkload {
        tenant: String,
        workload: WorkloadConfig,
    },
    StopTenant {
        tenant: String,
    },
    SetTenant {
        tenant: String,
        min_mb: Option<f64>,
        max_mb: Option<f64>,
        shares: Option<u64>,
    },
}

#[derive(Debug)]
pub(crate) struct VariantDoc {
    /// `variants[i]`.
    pub(crate) path: FieldPath,
    pub(crate) name: String,
    pub(crate) set: Vec<String>,
}

/// Defaults that are not someone else's `Default`.
pub(crate) const DEFAULT_SEED: u64 = 1;
pub(crate) const DEFAULT_CONVERGENCE: (f64, f64) = (0.9, 1.3);
pub(crate) const DEFAULT_SHARES: u64 = 1000;
pub(crate) const DEFAULT_OVERHEAD_MB: f64 = 32.0;
pub(crate) const DEFAULT_KERNEL_MB: f64 = 16.0;
pub(crate) const DEFAULT_BALLOON_RATE_MB_PER_S: f64 = 128.0;
pub(crate) const DEFAULT_HOST_SWAP_MB_PER_S: f64 = 32.0;
pub(crate) const DEFAULT_BALLOON_STALL_TICKS: u32 = 3;

/// Reads the document; `overridden` are the paths `--set` overrides wrote (see [`estimator`]).
pub(crate) fn read(doc: &toml::Table, overridden: &[FieldPath]) -> Result<Doc> {
    let mut f = Fields::root(doc);
    let name = f.string("name")?;
    let description = f.string("description")?.unwrap_or_default();
    let duration_s = f
        .number_with(
            "duration_s",
            &[Rule::Positive, Rule::AtMost(MAX_S), Rule::WholeSeconds],
        )?
        .ok_or_else(|| f.missing("duration_s", "the run's length in seconds"))?;
    let seed = f
        .integer("seed", 0, i64::MAX)?
        .map_or(DEFAULT_SEED, |s| s as u64);
    let baseline = f.boolean("baseline")?.unwrap_or(false);
    let convergence = match f.table("convergence")? {
        Some(t) => convergence(t)?,
        None => DEFAULT_CONVERGENCE,
    };
    let host = match f.table("host")? {
        Some(t) => host(t)?,
        None => return Err(f.missing("host", "a [host] table with memory_mb")),
    };
    let policy = match f.table("policy")? {
        Some(t) => policy(t)?,
        None => PolicyDoc {
            tax_rate: TaxRate::DEFAULT,
            budget_mb: None,
            host_swap_mb_per_s: DEFAULT_HOST_SWAP_MB_PER_S,
            balloon_stall_ticks: DEFAULT_BALLOON_STALL_TICKS,
            thresholds: ReclamationThresholds::default(),
        },
    };
    let cost = match f.raw("cost") {
        Some((v, path)) => cost(v, &path)?,
        None => CostModel::default(),
    };
    let tenants = f
        .tables("tenants")?
        .into_iter()
        .map(|t| tenant(t, overridden))
        .collect::<Result<Vec<_>>>()?;
    let events = f
        .tables("events")?
        .into_iter()
        .map(event)
        .collect::<Result<Vec<_>>>()?;
    let variants = f
        .tables("variants")?
        .into_iter()
        .map(variant)
        .collect::<Result<Vec<_>>>()?;
    f.finish()?;
    Ok(Doc {
        name,
        description,
        duration_s,
        seed,
        baseline,
        convergence,
        host,
        policy,
        cost,
        tenants,
        events,
        variants,
    })
}

fn convergence(mut f: Fields) -> Result<(f64, f64)> {
    let low = f
        .number_with("low", &[Rule::NonNegative])?
        .unwrap_or(DEFAULT_CONVERGENCE.0);
    let high = f
        .number_with("high", &[Rule::Positive])?
        .unwrap_or(DEFAULT_CONVERGENCE.1);
    if low >= high {
        return Err(FieldError::new(
            f.field("low"),
            format!("must be below high = {}", render_number(high)),
        )
        .value(render_number(low)));
    }
    f.finish()?;
    Ok((low, high))
}

fn host(mut f: Fields) -> Result<HostDoc> {
    let memory_mb = f
        .number_with("memory_mb", POSITIVE_SIZE)?
        .ok_or_else(|| f.missing("memory_mb", "machine memory in MiB"))?;
    let host_swap_mb = f.number_with("host_swap_mb", SIZE)?.unwrap_or(0.0);
    f.finish()?;
    Ok(HostDoc {
        memory_mb,
        host_swap_mb,
    })
}

fn policy(mut f: Fields) -> Result<PolicyDoc> {
    let tax_rate = match f.number_with("tax_rate", &[Rule::HalfOpenUnit])? {
        Some(t) => TaxRate::new(t).map_err(|e| {
            FieldError::new(f.field("tax_rate"), e.to_string()).value(render_number(t))
        })?,
        None => TaxRate::DEFAULT,
    };
    let budget_mb = f.number_with("budget_mb", POSITIVE_SIZE)?;
    let host_swap_mb_per_s = f
        .number_with("host_swap_mb_per_s", SIZE)?
        .unwrap_or(DEFAULT_HOST_SWAP_MB_PER_S);
    let balloon_stall_ticks = f
        .integer("balloon_stall_ticks", 1, i64::from(u32::MAX))?
        .map_or(DEFAULT_BALLOON_STALL_TICKS, |n| n as u32);
    let thresholds = match f.table("thresholds")? {
        Some(t) => thresholds(t)?,
        None => ReclamationThresholds::default(),
    };
    f.finish()?;
    Ok(PolicyDoc {
        tax_rate,
        budget_mb,
        host_swap_mb_per_s,
        balloon_stall_ticks,
        thresholds,
    })
}

fn thresholds(mut f: Fields) -> Result<ReclamationThresholds> {
    let d = ReclamationThresholds::default();
    let t = ReclamationThresholds {
        high: f.number("high")?.unwrap_or(d.high),
        soft: f.number("soft")?.unwrap_or(d.soft),
        hard: f.number("hard")?.unwrap_or(d.hard),
        low: f.number("low")?.unwrap_or(d.low),
        hysteresis: f.number("hysteresis")?.unwrap_or(d.hysteresis),
    };
    let path = f.path().clone();
    f.finish()?;
    if t.validate().is_err() {
        let shown = format!(
            "{{ high = {}, soft = {}, hard = {}, low = {}, hysteresis = {} }}",
            render_number(t.high),
            render_number(t.soft),
            render_number(t.hard),
            render_number(t.low),
            render_number(t.hysteresis)
        );
        return Err(FieldError::new(
            path,
            "must satisfy 0 < low < hard < soft < high < 1 and 0 <= hysteresis < 1 - high (fractions of machine memory)",
        )
        .value(shown));
    }
    Ok(t)
}

fn cost(value: &toml::Value, path: &FieldPath) -> Result<CostModel> {
    if let toml::Value::Table(t) = value {
        for (k, v) in t {
            let bad = match v {
                toml::Value::Float(x) => !x.is_finite() || *x < 0.0,
                toml::Value::Integer(i) => *i < 0,
                _ => false,
            };
            if bad {
                return Err(FieldError::new(path.key(k), "must be a finite number >= 0")
                    .value(render_value(v)));
            }
        }
    }
    serde_field::read(value, path)
}

fn tenant(mut f: Fields, overridden: &[FieldPath]) -> Result<TenantDoc> {
    let name = f
        .string("name")?
        .ok_or_else(|| f.missing("name", "a unique name"))?;
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        return Err(FieldError::new(
            f.field("name"),
            "must be non-empty and free of control characters",
        )
        .value(render_string(&name)));
    }
    let min_mb = f.number_with("min_mb", SIZE)?.unwrap_or(0.0);
    let max_mb = f
        .number_with("max_mb", POSITIVE_SIZE)?
        .ok_or_else(|| f.missing("max_mb", "the tenant's configured memory in MiB"))?;
    let shares = f
        .integer("shares", 1, i64::MAX)?
        .map_or(DEFAULT_SHARES, |s| s as u64);
    let overhead_mb = f
        .number_with("overhead_mb", SIZE)?
        .unwrap_or(DEFAULT_OVERHEAD_MB);
    let kernel_mb = f.number_with("kernel_mb", SIZE)?;
    let guest_swap_mb = f.number_with("guest_swap_mb", SIZE)?;
    let initial_mb = f.number_with("initial_mb", SIZE)?;
    let start_s = f.number_with("start_s", TICK_TIME)?.unwrap_or(0.0);
    let stop_s = f.number_with("stop_s", TICK_TIME)?;
    let cap_at_estimate = f.boolean("cap_at_estimate")?;
    let estimator = estimator(f.table("estimator")?, &f.field("estimator"), overridden)?;
    let balloon = match f.table("balloon")? {
        Some(b) => balloon(b)?,
        None => BalloonDoc {
            enabled: true,
            rate_mb_per_s: DEFAULT_BALLOON_RATE_MB_PER_S,
            limit_mb: None,
        },
    };
    let workload = match f.raw("workload") {
        Some((v, path)) => serde_field::read(v, &path)?,
        None => return Err(f.missing("workload", "a [tenants.workload] table with a kind")),
    };
    let path = f.path().clone();
    f.finish()?;
    Ok(TenantDoc {
        path,
        name,
        min_mb,
        max_mb,
        shares,
        overhead_mb,
        kernel_mb,
        guest_swap_mb,
        initial_mb,
        start_s,
        stop_s,
        cap_at_estimate,
        estimator,
        balloon,
        workload,
    })
}

/// Fields of each estimator kind, for "not a field of the sampling estimator".
const ESTIMATOR_FIELDS: &[(&str, &[&str])] = &[
    (
        "sampling",
        &[
            "sample_pages",
            "period_s",
            "slow_gain",
            "fast_gain",
            "headroom",
        ],
    ),
    (
        "tws",
        &[
            "epoch_s",
            "fast_step",
            "slow_step",
            "cool_down_s",
            "committed_change",
        ],
    ),
    ("committed", &[]),
];

fn seconds(s: f64) -> Duration {
    // Callers checked 0 <= s <= MAX_S.
    Duration::from_secs_f64(s)
}

/// The estimator table. Parameters of another kind are an error, unless an override changed
/// `kind`: then they were written for the file's kind and are ignored, so a variant such as
/// `tenants.*.estimator.kind=committed` works on tenants with tuned `tws` parameters.
fn estimator(
    f: Option<Fields>,
    path: &FieldPath,
    overridden: &[FieldPath],
) -> Result<EstimatorConfig> {
    let Some(mut f) = f else {
        return Ok(EstimatorConfig::Sampling(SamplingConfig::default()));
    };
    let kind = f.string("kind")?.unwrap_or_else(|| "sampling".to_string());
    let config = match kind.as_str() {
        "sampling" => {
            let d = SamplingConfig::default();
            EstimatorConfig::Sampling(SamplingConfig {
                sample_pages: f
                    .integer("sample_pages", 1, 1_000_000)?
                    .map_or(d.sample_pages, |n| n as u32),
                period: f
                    .number_with("period_s", POSITIVE_TIME)?
                    .map_or(d.period, seconds),
                slow_gain: f
                    .number_with("slow_gain", &[Rule::OpenClosedUnit])?
                    .unwrap_or(d.slow_gain),
                fast_gain: f
                    .number_with("fast_gain", &[Rule::OpenClosedUnit])?
                    .unwrap_or(d.fast_gain),
                headroom: f
                    .number_with("headroom", &[Rule::NonNegative, Rule::AtMost(100.0)])?
                    .unwrap_or(d.headroom),
            })
        }
        "tws" => {
            let d = WorkingSetConfig::default();
            let cool_down = f
                .number_with("cool_down_s", TIME)?
                .map_or(d.cool_down, seconds);
            EstimatorConfig::WorkingSet(WorkingSetConfig {
                epoch: f
                    .number_with("epoch_s", POSITIVE_TIME)?
                    .map_or(d.epoch, seconds),
                fast_step: f
                    .number_with("fast_step", &[Rule::OpenClosedUnit])?
                    .unwrap_or(d.fast_step),
                slow_step: f
                    .number_with("slow_step", &[Rule::OpenClosedUnit])?
                    .unwrap_or(d.slow_step),
                cool_down,
                // The simulator runs TWS as published: no growing cool-down.
                max_cool_down: cool_down,
                committed_change: f
                    .number_with(
                        "committed_change",
                        &[Rule::NonNegative, Rule::AtMost(100.0)],
                    )?
                    .unwrap_or(d.committed_change),
            })
        }
        "committed" => EstimatorConfig::Committed,
        other => {
            return Err(FieldError::new(
                path.key("kind"),
                "unknown estimator kind (expected \"sampling\", \"tws\" or \"committed\")",
            )
            .value(render_string(other)))
        }
    };
    let foreign: Vec<(String, toml::Value, &str)> = f
        .unknown()
        .filter_map(|(key, value)| {
            ESTIMATOR_FIELDS
                .iter()
                .find(|(_, fields)| fields.contains(&key.as_str()))
                .map(|(owner, _)| (key.clone(), value.clone(), *owner))
        })
        .collect();
    let kind_overridden = crate::overrides::overridden(&path.key("kind"), overridden);
    for (key, _, _) in &foreign {
        if kind_overridden {
            f.ignore(key);
        }
    }
    if let Some((key, value, owner)) = foreign.into_iter().next().filter(|_| !kind_overridden) {
        return Err(FieldError::new(
            path.key(&key),
            format!("not a field of the {kind} estimator (it belongs to kind = \"{owner}\")"),
        )
        .value(render_value(&value)));
    }
    f.finish()?;
    Ok(config)
}

fn balloon(mut f: Fields) -> Result<BalloonDoc> {
    let enabled = f.boolean("enabled")?.unwrap_or(true);
    let rate_mb_per_s = f
        .number_with("rate_mb_per_s", POSITIVE_SIZE)?
        .unwrap_or(DEFAULT_BALLOON_RATE_MB_PER_S);
    let limit_mb = f.number_with("limit_mb", SIZE)?;
    f.finish()?;
    Ok(BalloonDoc {
        enabled,
        rate_mb_per_s,
        limit_mb,
    })
}

const EVENT_KINDS: &str = "\"set_tax_rate\", \"set_workload\", \"stop_tenant\" or \"set_tenant\"";

fn event(mut f: Fields) -> Result<EventDoc> {
    let at_s = f
        .number_with("at_s", TIME)?
        .ok_or_else(|| f.missing("at_s", "the event's time in seconds"))?;
    let kind = f
        .string("kind")?
        .ok_or_else(|| f.missing("kind", EVENT_KINDS))?;
    let tenant = |f: &mut Fields| -> Result<String> {
        f.string("tenant")?
            .ok_or_else(|| f.missing("tenant", "the name of a tenant"))
    };
    let action = match kind.as_str() {
        "set_tax_rate" => {
            let t = f
                .number_with("tax_rate", &[Rule::HalfOpenUnit])?
                .ok_or_else(|| f.missing("tax_rate", "the new idle memory tax rate"))?;
            EventAction::SetTaxRate(TaxRate::new(t).map_err(|e| {
                FieldError::new(f.field("tax_rate"), e.to_string()).value(render_number(t))
            })?)
        }
        "set_workload" => {
            let tenant = tenant(&mut f)?;
            let workload = match f.raw("workload") {
                Some((v, path)) => serde_field::read(v, &path)?,
                None => return Err(f.missing("workload", "the new workload table with a kind")),
            };
            EventAction::SetWorkload { tenant, workload }
        }
        "stop_tenant" => EventAction::StopTenant {
            tenant: tenant(&mut f)?,
        },
        "set_tenant" => {
            let tenant = tenant(&mut f)?;
            let min_mb = f.number_with("min_mb", SIZE)?;
            let max_mb = f.number_with("max_mb", POSITIVE_SIZE)?;
            let shares = f.integer("shares", 1, i64::MAX)?.map(|s| s as u64);
            if min_mb.is_none() && max_mb.is_none() && shares.is_none() {
                return Err(FieldError::new(
                    f.path().clone(),
                    "a set_tenant event needs at least one of min_mb, max_mb, shares",
                ));
            }
            EventAction::SetTenant {
                tenant,
                min_mb,
                max_mb,
                shares,
            }
        }
        other => {
            return Err(FieldError::new(
                f.field("kind"),
                format!("unknown event kind (expected {EVENT_KINDS})"),
            )
            .value(render_string(other)))
        }
    };
    let path = f.path().clone();
    f.finish()?;
    Ok(EventDoc { path, at_s, action })
}

fn variant(mut f: Fields) -> Result<VariantDoc> {
    let name = f
        .string("name")?
        .ok_or_else(|| f.missing("name", "a unique name of letters, digits, - and _"))?;
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        return Err(FieldError::new(
            f.field("name"),
            "must be letters, digits, - and _ only (it names an output directory)",
        )
        .value(render_string(&name)));
    }
    let set = f.strings("set")?.unwrap_or_default();
    for (i, s) in set.iter().enumerate() {
        if let Err(e) = Override::parse(s) {
            return Err(FieldError::new(f.field("set").index(i), e.message).value(render_string(s)));
        }
    }
    let path = f.path().clone();
    f.finish()?;
    Ok(VariantDoc { path, name, set })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "duration_s = 60\n[host]\nmemory_mb = 512\n";

    fn read_text(text: &str) -> Result<Doc> {
        read(&text.parse().unwrap(), &[])
    }

    fn tenant_text(extra: &str) -> String {
        format!("{MINIMAL}[[tenants]]\nname = \"a\"\nmax_mb = 256\n{extra}[tenants.workload]\nkind = \"idle\"\n")
    }

    #[test]
    fn minimal_file_gets_every_default() {
        let d = read_text(MINIMAL).unwrap();
        assert_eq!(d.seed, DEFAULT_SEED);
        assert!(!d.baseline);
        assert_eq!(d.convergence, DEFAULT_CONVERGENCE);
        assert_eq!(d.host.host_swap_mb, 0.0);
        assert_eq!(d.policy.tax_rate, TaxRate::DEFAULT);
        assert_eq!(d.policy.host_swap_mb_per_s, 32.0);
        assert_eq!(d.policy.balloon_stall_ticks, 3);
        assert_eq!(d.cost, CostModel::default());
        assert!(d.tenants.is_empty() && d.events.is_empty() && d.variants.is_empty());
    }

    #[test]
    fn missing_duration_names_the_field() {
        let e = read_text("[host]\nmemory_mb = 1\n").unwrap_err();
        assert_eq!(e.path.to_string(), "duration_s");
        assert!(e.message.contains("required"));
    }

    #[test]
    fn fractional_duration_is_rejected() {
        let e = read_text("duration_s = 1.5\n[host]\nmemory_mb = 1\n").unwrap_err();
        assert!(
            e.message.contains("whole number of seconds"),
            "{}",
            e.message
        );
    }

    #[test]
    fn tenant_defaults_are_filled_in() {
        let d = read_text(&tenant_text("")).unwrap();
        let t = &d.tenants[0];
        assert_eq!(t.shares, 1000);
        assert_eq!(t.overhead_mb, 32.0);
        assert_eq!(t.kernel_mb, None);
        assert!(t.balloon.enabled);
        assert_eq!(t.balloon.rate_mb_per_s, 128.0);
        assert_eq!(
            t.estimator,
            EstimatorConfig::Sampling(SamplingConfig::default())
        );
    }

    #[test]
    fn estimator_fields_of_another_kind_are_named() {
        let e = read_text(&tenant_text(
            "[tenants.estimator]\nkind = \"sampling\"\nfast_step = 0.1\n",
        ))
        .unwrap_err();
        assert_eq!(e.path.to_string(), "tenants[0].estimator.fast_step");
        assert!(
            e.message.contains("not a field of the sampling estimator"),
            "{}",
            e.message
        );
    }

    #[test]
    fn estimator_fields_of_another_kind_are_ignored_when_an_override_set_the_kind() {
        let text = tenant_text("[tenants.estimator]\nkind = \"committed\"\nfast_step = 0.1\n");
        let kind = FieldPath::root()
            .key("tenants")
            .index(0)
            .key("estimator")
            .key("kind");
        let d = read(&text.parse().unwrap(), &[kind]).unwrap();
        assert_eq!(d.tenants[0].estimator, EstimatorConfig::Committed);
    }

    #[test]
    fn tws_estimator_reads_its_fields_over_defaults() {
        let d = read_text(&tenant_text(
            "[tenants.estimator]\nkind = \"tws\"\ncool_down_s = 4\n",
        ))
        .unwrap();
        let EstimatorConfig::WorkingSet(w) = &d.tenants[0].estimator else {
            panic!("not tws");
        };
        assert_eq!(w.cool_down, Duration::from_secs(4));
        assert_eq!(w.fast_step, WorkingSetConfig::default().fast_step);
    }

    #[test]
    fn unknown_estimator_kind_is_rejected() {
        let e = read_text(&tenant_text("[tenants.estimator]\nkind = \"magic\"\n")).unwrap_err();
        assert_eq!(e.path.to_string(), "tenants[0].estimator.kind");
    }

    #[test]
    fn set_tenant_event_needs_a_change() {
        let text =
            format!("{MINIMAL}[[events]]\nat_s = 1\nkind = \"set_tenant\"\ntenant = \"a\"\n");
        let e = read_text(&text).unwrap_err();
        assert_eq!(e.path.to_string(), "events[0]");
    }

    #[test]
    fn event_fields_of_another_kind_are_unknown() {
        let text = format!(
            "{MINIMAL}[[events]]\nat_s = 1\nkind = \"set_tax_rate\"\ntax_rate = 0.5\ntenant = \"a\"\n"
        );
        let e = read_text(&text).unwrap_err();
        assert!(
            e.message.contains("unknown field `tenant`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn variant_names_must_be_simple() {
        let text = format!("{MINIMAL}[[variants]]\nname = \"a b\"\n");
        let e = read_text(&text).unwrap_err();
        assert_eq!(e.path.to_string(), "variants[0].name");
    }

    #[test]
    fn misordered_thresholds_are_rejected_with_all_four_values() {
        let text = format!("{MINIMAL}[policy]\nthresholds = {{ high = 0.01, low = 0.02 }}\n");
        let e = read_text(&text).unwrap_err();
        assert_eq!(e.path.to_string(), "policy.thresholds");
        assert!(e.value.unwrap().contains("high = 0.01"));
    }

    #[test]
    fn negative_cost_is_rejected() {
        let text = format!("{MINIMAL}[cost]\ndisk_read_us = -1\n");
        let e = read_text(&text).unwrap_err();
        assert_eq!(e.path.to_string(), "cost.disk_read_us");
    }
}
