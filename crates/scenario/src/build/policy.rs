//! The host's page sharing and I/O remapping, and the `[policy]` table: the controller's settings.

use crate::schema::{IoRemapDoc, PolicyDoc, SharingDoc};
use memtide_config::quotas::QuotasDoc;
use memtide_config::{FieldPath, Size};
use memtide_controller::ControllerConfig;
use memtide_model::{SharingSettings, TaxRate};
use memtide_policy::{QuotaSettings, ReclamationThresholds};
use memtide_sim::remap::IoRemapConfig;

use super::{shown, Build, Facts, Result};

const DEFAULT_HOST_SWAP_PER_S: Size = Size(32 << 20);
const DEFAULT_BALLOON_STALL_TICKS: u32 = 3;
/// Copies of a page before it is remapped into low memory, when `[io_remap]` does not say.
const DEFAULT_REMAP_THRESHOLD: u32 = 32;

impl Build<'_> {
    /// The policy's scan rates and the host's per-VM rate.
    pub(super) fn sharing(&self, at: &FieldPath, d: SharingDoc) -> Result<(SharingSettings, u64)> {
        let defaults = SharingSettings::default();
        let idle_rate = d.idle_rate.unwrap_or(defaults.idle_rate);
        let pressed_rate = d.pressed_rate.unwrap_or(defaults.pressed_rate);
        if pressed_rate < idle_rate {
            return Err(self.err(
                &at.key("pressed_rate"),
                format!("must be at least idle_rate = {idle_rate}"),
            ));
        }
        let per_vm_rate = d.per_vm_rate.unwrap_or(pressed_rate);
        if per_vm_rate == 0 {
            return Err(self.err(&at.key("per_vm_rate"), "must be >= 1"));
        }
        // Each scanned page is looked at one by one, as the daemon's scanner does.
        for (key, rate) in [
            ("idle_rate", idle_rate),
            ("pressed_rate", pressed_rate),
            ("per_vm_rate", per_vm_rate),
        ] {
            if rate > SharingSettings::MAX_RATE {
                return Err(self.err(
                    &at.key(key),
                    format!(
                        "must be at most {} pages a second",
                        SharingSettings::MAX_RATE
                    ),
                ));
            }
        }
        let settings = SharingSettings {
            idle_rate,
            pressed_rate,
            // The simulator does not model the scanner's CPU time.
            cpu_budget: None,
        };
        Ok((settings, per_vm_rate))
    }

    /// `[io_remap]`: low memory within the machine, a threshold of at least 1 copy.
    pub(super) fn io_remap(
        &self,
        at: &FieldPath,
        d: IoRemapDoc,
        machine: Size,
    ) -> Result<IoRemapConfig> {
        let low = self.positive_size(&at.key("low_memory"), d.low_memory)?;
        if low > machine {
            return Err(self.err(
                &at.key("low_memory"),
                format!("must be at most the host's memory ({machine})"),
            ));
        }
        let threshold = d.threshold.unwrap_or(DEFAULT_REMAP_THRESHOLD);
        if threshold == 0 {
            return Err(self.err(&at.key("threshold"), "must be >= 1"));
        }
        Ok(IoRemapConfig {
            low_memory: low.to_pages(),
            threshold: d.remap.unwrap_or(true).then_some(threshold),
        })
    }

    pub(super) fn controller(&self, p: PolicyDoc, tenants: &[Facts]) -> Result<ControllerConfig> {
        let at = FieldPath::root().key("policy");
        let cache_absent = p.cache.is_none();
        let tax_rate = p.tax_rate.unwrap_or(TaxRate::DEFAULT);
        let budget = match p.budget {
            None => None,
            Some(b) => {
                let b = self.positive_size(&at.key("budget"), b)?;
                let mins: u64 = tenants.iter().map(|t| t.min.bytes()).sum();
                if b.bytes() < mins {
                    return Err(self.err(
                        &at.key("budget"),
                        format!("below the sum of the tenants' min ({})", shown(Size(mins))),
                    ));
                }
                Some(b.to_pages())
            }
        };
        let host_swap_per_s = self.size(
            &at.key("host_swap_per_s"),
            p.host_swap_per_s.unwrap_or(DEFAULT_HOST_SWAP_PER_S),
        )?;
        let balloon_stall_ticks = p.balloon_stall_ticks.unwrap_or(DEFAULT_BALLOON_STALL_TICKS);
        if balloon_stall_ticks == 0 {
            return Err(self.err(&at.key("balloon_stall_ticks"), "must be >= 1"));
        }
        let thresholds = match p.thresholds {
            None => ReclamationThresholds::default(),
            Some(t) => {
                let d = ReclamationThresholds::default();
                let t = ReclamationThresholds {
                    high: t.high.unwrap_or(d.high),
                    soft: t.soft.unwrap_or(d.soft),
                    hard: t.hard.unwrap_or(d.hard),
                    low: t.low.unwrap_or(d.low),
                    hysteresis: t.hysteresis.unwrap_or(d.hysteresis),
                };
                if t.validate().is_err() {
                    return Err(self.err(
                        &at.key("thresholds"),
                        format!(
                            "must satisfy 0 < low < hard < soft < high < 1 and 0 <= hysteresis \
                             < 1 - high (fractions of machine memory); here high = {}, soft = {}, \
                             hard = {}, low = {}, hysteresis = {}",
                            t.high, t.soft, t.hard, t.low, t.hysteresis
                        ),
                    ));
                }
                t
            }
        };
        let controller = ControllerConfig {
            tax_rate,
            thresholds,
            budget,
            // Per tick; the tick is 1 s.
            host_swap_per_tick: host_swap_per_s.to_pages(),
            balloon_stall_ticks,
            // Simulated VMs move by balloon and host swap, never by a limit.
            rails: Default::default(),
            dry_run: false,
            reclaim_always: false,
            // The simulated host is memtide's alone: its free memory is the VMs' state.
            shared_host: false,
            backing: Default::default(),
            sharing: None,
            cache: match p.cache {
                Some(c) => self.cache_quotas(&at.key("cache"), c)?,
                None => None,
            },
        };
        if cache_absent {
            if let Some(i) = tenants.iter().position(|t| t.slo) {
                return Err(self.err(
                    &FieldPath::root().key("tenants").index(i).key("slo"),
                    "needs [policy.cache]: the budget the SLO tenants' pools share",
                ));
            }
        }
        controller
            .validate()
            .map_err(|e| self.err(&at, e.to_string()))?;
        Ok(controller)
    }

    /// `[policy.cache]`: Gemini's pool budget and latency model (`None`: disabled).
    fn cache_quotas(&self, at: &FieldPath, c: QuotasDoc) -> Result<Option<QuotaSettings>> {
        Ok(c.build(self.doc, at)?
            .map(|q| QuotaSettings::of(q.budget, q.hit_us, q.miss_us, q.steps)))
    }
}
