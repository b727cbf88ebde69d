//! One `[[tenants]]` table: its limits, times, balloon, content and I/O, and what the checks across tenants need of it.

use crate::scenario::ScenarioTenant;
use crate::schema::{BalloonDoc, ContentDoc, IoDoc, KindDoc, TenantDoc};
use memtide_config::quotas::SloDoc;
use memtide_config::{FieldPath, Size};
use memtide_model::{EstimatorConfig, Pages, Slo, TenantId, TenantSpec};
use memtide_sim::app::AgentConfig;
use memtide_sim::config::{BalloonConfig, SamplingSetup, TenantKind, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::remap::VmIoConfig;
use memtide_sim::sharing::ContentMix;
use memtide_sim::workload::WorkloadConfig;
use std::time::Duration;

use super::{shown, shown_time, Build, Facts, Result};

const DEFAULT_SHARES: u64 = 1000;
const DEFAULT_OVERHEAD: Size = Size(32 << 20);
const DEFAULT_KERNEL: Size = Size(16 << 20);
const DEFAULT_BALLOON_RATE_PER_S: Size = Size(128 << 20);

impl Build<'_> {
    /// A tenant's `slo` (`memtide_config::quotas`). It needs a
    /// database whose agent reports its pool's curve: the quota search sizes nothing else.
    fn slo(&self, at: &FieldPath, s: SloDoc, workload: &WorkloadConfig) -> Result<Slo> {
        let curve = matches!(
            workload,
            WorkloadConfig::Database {
                agent: Some(AgentConfig {
                    curve_window: Some(_),
                    ..
                }),
                ..
            }
        );
        if !curve {
            return Err(self.err(
                at,
                "needs a database workload whose agent reports its curve (agent.curve_window)",
            ));
        }
        s.build(self.doc, at)
    }

    pub(super) fn tenant(
        &self,
        at: &FieldPath,
        i: usize,
        t: TenantDoc,
        duration: Duration,
        cost: &CostModel,
    ) -> Result<(ScenarioTenant, Facts)> {
        if t.name.trim().is_empty() || t.name.chars().any(char::is_control) {
            return Err(self.err(
                &at.key("name"),
                "must be non-empty and free of control characters",
            ));
        }
        let max = self.positive_size(&at.key("max"), t.max)?;
        let min = self.size(&at.key("min"), t.min.unwrap_or_default())?;
        if min > max {
            return Err(self.err(
                &at.key("min"),
                format!("must not exceed max = {}", shown(max)),
            ));
        }
        let shares = t.shares.unwrap_or(DEFAULT_SHARES);
        if shares == 0 {
            return Err(self.err(&at.key("shares"), "must be >= 1"));
        }
        let kind = match t.kind.unwrap_or(KindDoc::Vm) {
            KindDoc::Vm => TenantKind::Vm,
            KindDoc::Container => TenantKind::Container,
        };
        // A container costs the host little beside its memory.
        let default_overhead = match kind {
            TenantKind::Vm => DEFAULT_OVERHEAD,
            TenantKind::Container => Size(0),
        };
        let overhead = self.size(&at.key("overhead"), t.overhead.unwrap_or(default_overhead))?;
        let kernel = self.kernel(at, t.kernel, max)?;
        let guest_swap = self.size(&at.key("guest_swap"), t.guest_swap.unwrap_or(max))?;
        let (start, stop) = self.run_time(at, t.start, t.stop, duration)?;

        let balloon = self.tenant_balloon(at, kind, t.balloon, t.initial.is_some(), max, kernel)?;
        let initial_balloon = self.initial_balloon(at, t.initial, max, kernel, balloon)?;

        let estimator = self.estimator(&at.key("estimator"), t.estimator.as_ref())?;
        let workload = self.workload(&at.key("workload"), &t.workload, cost)?;
        let sampling = match &estimator {
            EstimatorConfig::Sampling(s) => Some(SamplingSetup {
                sample_pages: s.sample_pages,
                period: s.period,
            }),
            _ => None,
        };
        let cap_at_estimate = t
            .cap_at_estimate
            .unwrap_or(!matches!(estimator, EstimatorConfig::Sampling(_)));
        let slo = t
            .slo
            .map(|s| self.slo(&at.key("slo"), s, &workload))
            .transpose()?;
        let disk = t
            .disk
            .as_ref()
            .map(|d| self.tenant_disk(&at.key("disk"), d))
            .transpose()?;
        let tenant = ScenarioTenant {
            spec: TenantSpec {
                disk: disk.as_ref().map(|(_, spec)| *spec),
                shares,
                overhead: overhead.to_pages(),
                estimator,
                cap_at_estimate,
                slo,
                ..TenantSpec::new(
                    TenantId(i as u32),
                    t.name.clone(),
                    min.to_pages(),
                    max.to_pages(),
                )
            },
            vm: VmConfig {
                kind,
                max: max.to_pages(),
                overhead: overhead.to_pages(),
                kernel: kernel.to_pages(),
                guest_swap: guest_swap.to_pages(),
                balloon: balloon.map(|(rate, limit, starts_after)| BalloonConfig {
                    rate_per_s: rate.to_pages(),
                    limit: limit.to_pages(),
                    starts_after,
                }),
                initial_balloon,
                sampling,
                workload,
                content: self.content(&at.key("content"), t.content)?,
                io: self.io(&at.key("io"), t.io)?,
                disk: disk.map(|(config, _)| config),
            },
            start,
            stop,
        };
        Ok((
            tenant,
            Facts {
                name: t.name,
                min,
                max,
                slo: slo.is_some(),
            },
        ))
    }

    /// The kernel's share of the guest: at most `max`.
    fn kernel(&self, at: &FieldPath, given: Option<Size>, max: Size) -> Result<Size> {
        let kernel = self.size(&at.key("kernel"), given.unwrap_or(DEFAULT_KERNEL))?;
        if kernel > max {
            let message = format!("must not exceed max = {}", shown(max));
            return Err(match given {
                Some(_) => self.err(&at.key("kernel"), message),
                None => self.doc.error_with_value(
                    &at.key("kernel"),
                    Some(shown(kernel)),
                    format!("{message} (the default; set kernel lower)"),
                ),
            });
        }
        Ok(kernel)
    }

    /// When the tenant starts (a tick before the end of the run) and stops (after it starts).
    fn run_time(
        &self,
        at: &FieldPath,
        start: Option<memtide_config::Duration>,
        stop: Option<memtide_config::Duration>,
        duration: Duration,
    ) -> Result<(Duration, Option<Duration>)> {
        let start = match start {
            None => Duration::ZERO,
            Some(s) => self.tick_time(&at.key("start"), s)?,
        };
        // A run shortened on the command line keeps the tenant, which never starts (said
        // in the scenario's notes); in the file, a start past the end is a mistake.
        if start >= duration && !self.shortened() {
            return Err(self.err(
                &at.key("start"),
                format!(
                    "must be before the end of the run (duration = {})",
                    shown_time(duration)
                ),
            ));
        }
        let stop = match stop {
            None => None,
            Some(s) => {
                let stop = self.tick_time(&at.key("stop"), s)?;
                if stop <= start {
                    return Err(self.err(
                        &at.key("stop"),
                        format!("must be after start = {}", shown_time(start)),
                    ));
                }
                Some(stop)
            }
        };
        Ok((start, stop))
    }

    /// A VM's balloon driver (`None`: a container, or a driver turned off); a container with
    /// a balloon table or an initial size is refused.
    fn tenant_balloon(
        &self,
        at: &FieldPath,
        kind: TenantKind,
        b: Option<BalloonDoc>,
        initial: bool,
        max: Size,
        kernel: Size,
    ) -> Result<Option<(Size, Size, Duration)>> {
        let balloon_room = Size(max.bytes() - kernel.bytes());
        if kind == TenantKind::Container {
            if b.is_some() {
                return Err(self.err(
                    &at.key("balloon"),
                    "a container has no balloon driver: its limit moves its memory",
                ));
            }
            if initial {
                return Err(self.err(
                    &at.key("initial"),
                    "a container starts without a limit: it has no initial balloon",
                ));
            }
        }
        let b = b.unwrap_or_default();
        Ok(if kind == TenantKind::Vm && b.enabled.unwrap_or(true) {
            Some(self.balloon(&at.key("balloon"), b, balloon_room)?)
        } else {
            None
        })
    }

    /// The balloon the tenant starts with, for an `initial` size below max.
    fn initial_balloon(
        &self,
        at: &FieldPath,
        initial: Option<Size>,
        max: Size,
        kernel: Size,
        balloon: Option<(Size, Size, Duration)>,
    ) -> Result<Pages> {
        Ok(match initial {
            None => Pages::ZERO,
            Some(initial) => {
                let path = at.key("initial");
                if initial < kernel || initial > max {
                    return Err(self.err(
                        &path,
                        format!(
                            "must be in [kernel, max] = [{}, {}]",
                            shown(kernel),
                            shown(max)
                        ),
                    ));
                }
                let Some((_, limit, _)) = balloon else {
                    return Err(self.err(
                        &path,
                        "needs a balloon driver to start below max (balloon.enabled = false)",
                    ));
                };
                let needed = Size(max.bytes() - initial.bytes());
                if needed > limit {
                    return Err(self.err(
                        &path,
                        format!(
                            "needs a {} balloon, above balloon.limit = {}",
                            shown(needed),
                            shown(limit)
                        ),
                    ));
                }
                max.to_pages().saturating_sub(initial.to_pages())
            }
        })
    }

    /// The balloon driver's rate, limit (at most `room` = max - kernel) and load time.
    fn balloon(&self, at: &FieldPath, b: BalloonDoc, room: Size) -> Result<(Size, Size, Duration)> {
        let rate = self.positive_size(
            &at.key("rate_per_s"),
            b.rate_per_s.unwrap_or(DEFAULT_BALLOON_RATE_PER_S),
        )?;
        let limit = b.limit.unwrap_or(room);
        if limit > room {
            return Err(self.err(
                &at.key("limit"),
                format!("must not exceed max - kernel = {}", shown(room)),
            ));
        }
        let starts_after = match b.starts_after {
            Some(d) => self.tick_time(&at.key("starts_after"), d)?,
            None => Duration::ZERO,
        };
        Ok((rate, limit, starts_after))
    }

    /// A tenant's io table: buffer pages and a transfer rate of at most 10^7 a second.
    fn io(&self, at: &FieldPath, d: Option<IoDoc>) -> Result<Option<VmIoConfig>> {
        let Some(d) = d else {
            return Ok(None);
        };
        let buffers = self.positive_size(&at.key("buffers"), d.buffers)?;
        let rate = self.number(
            &at.key("transfers_per_sec"),
            d.transfers_per_sec,
            |v| (0.0..=1e7).contains(&v),
            "must be between 0 and 10000000",
        )?;
        Ok(Some(VmIoConfig {
            buffers: buffers.to_pages(),
            transfers_per_sec: rate,
        }))
    }

    /// A tenant's content table: fractions in [0, 1] adding up to at most 1.
    fn content(&self, at: &FieldPath, d: Option<ContentDoc>) -> Result<ContentMix> {
        let Some(d) = d else {
            return Ok(ContentMix::default());
        };
        let mut sum = 0.0;
        let mut fraction = |key: &str, v: Option<f64>| -> Result<f64> {
            let v = v.unwrap_or(0.0);
            self.number(
                &at.key(key),
                v,
                |v| (0.0..=1.0).contains(&v),
                "must be a fraction in [0, 1]",
            )?;
            sum += v;
            if sum > 1.0 + 1e-9 {
                return Err(self.err(
                    &at.key(key),
                    format!("zero + common + duplicate must not exceed 1 (they add up to {sum})"),
                ));
            }
            Ok(v)
        };
        let zero = fraction("zero", d.zero)?;
        let common = fraction("common", d.common)?;
        let duplicate = fraction("duplicate", d.duplicate)?;
        let duplicate_copies = d.duplicate_copies.unwrap_or(2);
        if duplicate_copies < 2 {
            return Err(self.err(&at.key("duplicate_copies"), "must be >= 2"));
        }
        let image = d.image.unwrap_or_default();
        if (common > 0.0 || d.common_files == Some(true)) && image.is_empty() {
            return Err(self.err(
                &at.key("image"),
                "is needed for common pages: the tenants that share them name the same image",
            ));
        }
        Ok(ContentMix {
            image,
            zero,
            common,
            duplicate,
            duplicate_copies,
            common_files: d.common_files.unwrap_or(false),
        })
    }
}
