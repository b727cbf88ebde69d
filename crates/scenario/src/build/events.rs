//! The `[[events]]`: each read, then applied in time order against the tenants' limits.

use crate::scenario::{Event, TimedEvent};
use crate::schema::{SetTaxRateDoc, SetTenantDoc, SetWorkloadDoc, StopTenantDoc};
use memtide_config::{FieldPath, Size};
use memtide_model::{TaxRate, TenantId};
use memtide_sim::cost::CostModel;
use memtide_sim::workload::WorkloadConfig;
use std::time::Duration;

use super::{shown, shown_time, Build, Facts, Result};

const EVENT_KINDS: &str = "\"set_tax_rate\", \"set_workload\", \"stop_tenant\" or \"set_tenant\"";

impl Build<'_> {
    pub(super) fn events(
        &self,
        values: &[toml::Value],
        tenants: &[Facts],
        duration: Duration,
        cost: &CostModel,
    ) -> Result<(Vec<TimedEvent>, usize)> {
        // Read each event, then apply them in time order (stable: events at the same time
        // keep their file order), so set_tenant checks see the limits of the events before.
        let mut read = Vec::with_capacity(values.len());
        let mut dropped = 0;
        for (i, value) in values.iter().enumerate() {
            let at = FieldPath::root().key("events").index(i);
            let (when, event) = self.read_event(&at, value, tenants, cost)?;
            let when = self.time(&at.key("at"), when)?;
            // Past the end of a run shortened on the command line: dropped, and said.
            if when >= duration && self.shortened() {
                dropped += 1;
                continue;
            }
            if when >= duration {
                return Err(self.err(
                    &at.key("at"),
                    format!(
                        "must be before the end of the run (duration = {})",
                        shown_time(duration)
                    ),
                ));
            }
            read.push((at, when, event));
        }
        read.sort_by_key(|(_, when, _)| *when);
        // Each tenant's (min, max) as set_tenant events change them.
        let mut limits: Vec<(Size, Size)> = tenants.iter().map(|t| (t.min, t.max)).collect();
        let mut built = Vec::with_capacity(read.len());
        for (at, when, pending) in read {
            let event = match pending {
                Pending::TaxRate(rate) => Event::SetTaxRate(rate),
                Pending::Workload(i, workload) => Event::SetWorkload {
                    tenant: TenantId(i as u32),
                    workload,
                },
                Pending::Stop(i) => Event::StopTenant(TenantId(i as u32)),
                Pending::Tenant(i, min, max, shares) => {
                    let configured = tenants[i].max;
                    if max.is_some_and(|m| m > configured) {
                        return Err(self.err(
                            &at.key("max"),
                            format!(
                                "must not exceed the tenant's configured max = {} (the guest's \
                                 memory size)",
                                shown(configured)
                            ),
                        ));
                    }
                    let (lo, hi) = (min.unwrap_or(limits[i].0), max.unwrap_or(limits[i].1));
                    if lo > hi {
                        let key = if min.is_some() { "min" } else { "max" };
                        return Err(self.err(
                            &at.key(key),
                            format!(
                                "leaves {} with min = {} above max = {}",
                                tenants[i].name,
                                shown(lo),
                                shown(hi)
                            ),
                        ));
                    }
                    limits[i] = (lo, hi);
                    Event::SetTenant {
                        tenant: TenantId(i as u32),
                        min: min.map(Size::to_pages),
                        max: max.map(Size::to_pages),
                        shares,
                    }
                }
            };
            built.push(TimedEvent { at: when, event });
        }
        Ok((built, dropped))
    }

    /// One event as read, at the time it gives.
    fn read_event(
        &self,
        at: &FieldPath,
        value: &toml::Value,
        tenants: &[Facts],
        cost: &CostModel,
    ) -> Result<(memtide_config::Duration, Pending)> {
        let (kind, rest) = self.doc.kind(at, value, None)?;
        Ok(match kind.as_str() {
            "set_tax_rate" => {
                let e: SetTaxRateDoc = self.read(at, rest)?;
                (e.at, Pending::TaxRate(e.tax_rate))
            }
            "set_workload" => {
                let e: SetWorkloadDoc = self.read(at, rest)?;
                let tenant = self.tenant_named(tenants, at, &e.tenant)?;
                let workload = self.workload(&at.key("workload"), &e.workload, cost)?;
                (e.at, Pending::Workload(tenant, workload))
            }
            "stop_tenant" => {
                let e: StopTenantDoc = self.read(at, rest)?;
                (
                    e.at,
                    Pending::Stop(self.tenant_named(tenants, at, &e.tenant)?),
                )
            }
            "set_tenant" => {
                let e: SetTenantDoc = self.read(at, rest)?;
                if e.min.is_none() && e.max.is_none() && e.shares.is_none() {
                    return Err(self.err(
                        at,
                        "a set_tenant event needs at least one of min, max, shares",
                    ));
                }
                let tenant = self.tenant_named(tenants, at, &e.tenant)?;
                if let Some(min) = e.min {
                    self.size(&at.key("min"), min)?;
                }
                if let Some(max) = e.max {
                    self.positive_size(&at.key("max"), max)?;
                }
                if e.shares == Some(0) {
                    return Err(self.err(&at.key("shares"), "must be >= 1"));
                }
                (e.at, Pending::Tenant(tenant, e.min, e.max, e.shares))
            }
            _ => {
                return Err(self.err(
                    &at.key("kind"),
                    format!("unknown event kind (expected {EVENT_KINDS})"),
                ))
            }
        })
    }

    /// The index of the tenant `name` names at `at`.
    fn tenant_named(&self, tenants: &[Facts], at: &FieldPath, name: &str) -> Result<usize> {
        tenants.iter().position(|t| t.name == name).ok_or_else(|| {
            let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
            let known = if names.is_empty() {
                "the scenario has no tenants".to_string()
            } else {
                format!("tenants are {}", names.join(", "))
            };
            self.err(&at.key("tenant"), format!("no such tenant ({known})"))
        })
    }
}

/// An event read but not yet applied in time order.
enum Pending {
    TaxRate(TaxRate),
    Workload(usize, WorkloadConfig),
    Stop(usize),
    Tenant(usize, Option<Size>, Option<Size>, Option<u64>),
}
