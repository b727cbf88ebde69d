//! `SimWorld`: the simulated host as the controller sees it — power VMs on and off, run ticks, observe, apply decisions.
//!
//! Deterministic: every VM draws from streams forked from the world's seed by tenant id,
//! and VMs always run in ascending id order.

use crate::balloon::Balloon;
use crate::config::{HostConfig, TenantKind, VmConfig};
use crate::cost::CostModel;
use crate::disk::Disk;
use crate::guest::{Guest, GuestLayout};
use crate::machine::{Machine, MAX_FRAMES};
use crate::paging::HostMemory;
use crate::pmap::{PageState, Pmap};
use crate::remap::IoRemap;
use crate::rng::SimRng;
use crate::sampler::Sampler;
use crate::sharing::{Sharing, Write};
use crate::stats::{TickStats, Totals};
use crate::vm::{Costs, Vm, VmParts};
use crate::workload::{Access, Workload, WorkloadConfig, WorkloadError};
use memtide_controller::{Attach, Host, Joined, World};
use memtide_model::{Decision, HostObservation, Pages, ScanRate, TenantId, TenantSpec, WorldEvent};
use std::time::Duration;

/// Sub-streams of a VM's generator.
const STREAM_WORKLOAD: u64 = 0;
const STREAM_HOST: u64 = 1;
const STREAM_SAMPLER: u64 = 2;
const STREAM_DISK: u64 = 3;
/// The page-sharing scanner's stream, forked from the world's seed beyond every tenant id.
const STREAM_SHARING: u64 = 1 << 40;
/// I/O page remapping's stream (buffer placement and which buffer each transfer uses).
const STREAM_REMAP: u64 = (1 << 40) + 1;

/// What the simulated host refuses. Messages name the tenant and the values.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("tenant {}: not running", .tenant.0)]
    UnknownTenant { tenant: TenantId },
    #[error("tenant {}: already running", .tenant.0)]
    AlreadyRunning { tenant: TenantId },
    #[error("tenant {}: overhead {overhead} does not fit in {free} of free machine memory", .tenant.0)]
    OverheadDoesNotFit {
        tenant: TenantId,
        overhead: Pages,
        free: Pages,
    },
    #[error("tenant {}: kernel {kernel} does not fit in machine memory ({free} free, host swap {swap_free} free)", .tenant.0)]
    KernelDoesNotFit {
        tenant: TenantId,
        kernel: Pages,
        free: Pages,
        swap_free: Pages,
    },
    #[error("tenant {}: {field} = {value} must be {rule}", .tenant.0)]
    InvalidVm {
        tenant: TenantId,
        field: &'static str,
        value: String,
        rule: String,
    },
    #[error("tenant {}: {source}", .tenant.0)]
    Workload {
        tenant: TenantId,
        #[source]
        source: WorkloadError,
    },
}

/// An n-tier application's requests in the last tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Requests {
    pub answered: u64,
    /// Their response times summed.
    pub response_us: u64,
}

/// The simulated host.
#[derive(Clone, Debug)]
pub struct SimWorld {
    config: HostConfig,
    cost: CostModel,
    costs: Costs,
    rng: SimRng,
    now: Duration,
    host: HostMemory,
    /// Running VMs in ascending id order; `vms[i]` owns `host.pmaps[i]`.
    vms: Vec<Vm>,
    /// The page-sharing scan rate: the last decision's (none before the first).
    scan_rate: ScanRate,
    /// Hot I/O page remapping, where the host models it; `remap`'s VMs are `vms`' order.
    remap: Option<IoRemap>,
    /// The shared disk, where the host models one.
    disk: Option<Disk>,
    /// The accesses of the batch a VM is running: one buffer for every VM, as they run one
    /// after the other (2 KiB a VM had cost 4 MB at 2,000 tenants).
    batch: Vec<Access>,
}

impl SimWorld {
    /// An empty host. Machine memory and host swap beyond [`MAX_FRAMES`] pages (just under
    /// 2 TiB) are cut to that.
    pub fn new(host: HostConfig, cost: CostModel, seed: u64) -> SimWorld {
        let rng = SimRng::new(seed);
        let mut memory = HostMemory::new(Machine::new(host.machine, host.host_swap));
        memory.sharing = host
            .sharing
            .as_ref()
            .map(|c| Sharing::new(c.clone(), rng.fork(STREAM_SHARING)));
        let remap = host
            .io_remap
            .as_ref()
            .map(|c| IoRemap::new(c.clone(), rng.fork(STREAM_REMAP)));
        let disk = host.disk.as_ref().map(|c| Disk::new(c, 0));
        SimWorld {
            scan_rate: ScanRate::default(),
            remap,
            disk,
            host: memory,
            config: host,
            costs: Costs::new(&cost),
            cost,
            rng,
            now: Duration::ZERO,
            vms: Vec::new(),
            batch: Vec::new(),
        }
    }

    fn index(&self, id: TenantId) -> Result<usize, usize> {
        self.vms.binary_search_by_key(&id, Vm::id)
    }

    fn running(&self, id: TenantId) -> Result<usize, SimError> {
        self.index(id)
            .map_err(|_| SimError::UnknownTenant { tenant: id })
    }

    /// Boots a VM: reserves its overhead, touches its kernel pages (allocating frames,
    /// paging other VMs out if the machine is full) and starts it with its initial
    /// balloon, which holds the highest PPNs.
    pub fn power_on(&mut self, id: TenantId, vm: VmConfig) -> Result<(), SimError> {
        let at = match self.index(id) {
            Ok(_) => return Err(SimError::AlreadyRunning { tenant: id }),
            Err(at) => at,
        };
        let layout = validate(id, &vm)?;
        if vm.disk.is_some() && self.disk.is_none() {
            return Err(SimError::InvalidVm {
                tenant: id,
                field: "disk",
                value: "a disk workload".to_string(),
                rule: "absent unless the host has a [disk]".to_string(),
            });
        }
        let workload = Workload::new(&vm.workload, &self.cost)
            .map_err(|source| SimError::Workload { tenant: id, source })?;
        let layout = GuestLayout {
            anon_pages: workload.anon_pages(),
            file_pages: workload.file_pages(),
            ..layout
        };
        self.host
            .machine
            .reserve(vm.overhead)
            .map_err(|free| SimError::OverheadDoesNotFit {
                tenant: id,
                overhead: vm.overhead,
                free,
            })?;

        let streams = self.rng.fork(u64::from(id.0));
        let mut host_rng = streams.fork(STREAM_HOST);
        let mut pmap = Pmap::new(layout.pages);
        let first_balloon = layout.pages - layout.balloon;
        for ppn in first_balloon..layout.pages {
            pmap.set(ppn, PageState::Ballooned);
        }
        self.host.insert(at, pmap, id.0, &vm.content);
        for ppn in 0..layout.kernel {
            let booted = self.host.back(at, ppn, &mut host_rng).and_then(|_| {
                self.host
                    .write(at, ppn, Write::Kernel(ppn), &mut host_rng)
                    .map(|_| ())
            });
            if booted.is_err() {
                self.host.remove(at);
                self.host.machine.release(vm.overhead);
                return Err(SimError::KernelDoesNotFit {
                    tenant: id,
                    kernel: Pages(u64::from(layout.kernel)),
                    free: self.host.machine.free(),
                    swap_free: self
                        .host
                        .machine
                        .swap_total()
                        .saturating_sub(self.host.machine.swap_used()),
                });
            }
        }
        let sampler = vm.sampling.as_ref().map(|s| {
            Sampler::start(
                s,
                self.now,
                streams.fork(STREAM_SAMPLER),
                &mut self.host.pmaps[at],
            )
        });
        let mut driver = match vm.kind {
            TenantKind::Vm => vm.balloon.clone(),
            TenantKind::Container => Some(Vm::limit_balloon(vm.max, vm.kernel)),
        };
        let late_driver = driver
            .take_if(|d| !d.starts_after.is_zero())
            .map(|d| (self.now + d.starts_after, d));
        let parts = VmParts {
            id,
            kind: vm.kind,
            guest: Guest::boot(layout),
            balloon: Balloon::new(driver),
            sampler,
            workload,
            now: self.now,
            overhead: vm.overhead,
            rng: streams.fork(STREAM_WORKLOAD),
            host_rng,
            agent: vm.workload.agent().cloned(),
            late_driver,
        };
        let c = &self.host.pmaps[at].counters;
        let totals = Totals {
            host_swap_ins: c.host_swap_ins,
            host_swap_outs: c.host_swap_outs,
            ..Totals::default()
        };
        self.vms.insert(at, Vm::new(parts, totals));
        if let (Some(disk), Some(config)) = (&mut self.disk, &vm.disk) {
            disk.insert(id, config, streams.fork(STREAM_DISK));
        }
        if let Some(r) = &mut self.remap {
            r.insert(at, vm.io.as_ref(), &self.host.machine);
        }
        Ok(())
    }

    /// Stops a VM and returns every frame, host swap slot and its overhead to the machine.
    pub fn power_off(&mut self, id: TenantId) -> Result<(), SimError> {
        let at = self.running(id)?;
        let vm = self.vms.remove(at);
        self.host.remove(at);
        if let Some(d) = &mut self.disk {
            d.remove(id);
        }
        if let Some(r) = &mut self.remap {
            r.remove(at);
        }
        self.host.machine.release(vm.overhead());
        Ok(())
    }

    /// Starts a new workload in a running VM, timed from now. The guest keeps its memory:
    /// the old workload's anonymous pages are freed (process exit: they stay backed on the
    /// host, like any free guest page), its page cache stays cached.
    pub fn set_workload(&mut self, id: TenantId, w: WorkloadConfig) -> Result<(), SimError> {
        let at = self.running(id)?;
        let workload = Workload::new(&w, &self.cost)
            .map_err(|source| SimError::Workload { tenant: id, source })?;
        self.vms[at].set_workload(workload, w.agent(), self.now);
        Ok(())
    }

    /// Simulated time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Simulates `[now, now + tick)` for every VM in id order with the last applied
    /// decision, then advances the clock (ending sampling periods that are over).
    pub fn run_tick(&mut self) {
        let tick = self.config.tick;
        for (i, vm) in self.vms.iter_mut().enumerate() {
            vm.run_tick(
                i,
                &mut self.host,
                self.now,
                tick,
                &self.costs,
                &mut self.batch,
            );
        }
        self.host
            .scan(self.scan_rate.pages_per_sec, tick.as_secs_f64());
        if let Some(r) = &mut self.remap {
            r.run(tick.as_secs_f64(), &self.host.machine);
        }
        self.now += tick;
        if let Some(d) = &mut self.disk {
            d.run(self.now.as_micros() as u64);
        }
        for (i, vm) in self.vms.iter_mut().enumerate() {
            vm.roll_sampler(self.now, &mut self.host, i);
        }
    }

    /// Figures of the tenant's last tick (`None` if not running or before its first tick).
    pub fn tenant_stats(&self, id: TenantId) -> Option<&TickStats> {
        let at = self.index(id).ok()?;
        self.vms[at].last()
    }

    /// A running key-value server's service levels so far (`kv` workloads).
    pub fn slo(&self, id: TenantId) -> Option<&crate::slo::SloMeter> {
        let at = self.index(id).ok()?;
        self.vms[at].slo()
    }

    /// What `id`'s n-tier application answered in the last tick, where it runs one.
    pub fn requests(&self, id: TenantId) -> Option<Requests> {
        let d = self.disk.as_ref()?;
        let t = d.last(id).filter(|_| d.answers_requests(id))?;
        Some(Requests {
            answered: t.requests,
            response_us: t.response_us,
        })
    }

    pub fn tenant_ids(&self) -> Vec<TenantId> {
        self.vms.iter().map(Vm::id).collect()
    }

    /// The host configuration.
    pub fn host_config(&self) -> &HostConfig {
        &self.config
    }

    /// The guest of a running tenant (for inspection and tests).
    pub fn guest(&self, id: TenantId) -> Option<&Guest> {
        self.index(id).ok().map(|i| self.vms[i].guest())
    }

    /// The pmap of a running tenant (for inspection and tests).
    pub fn pmap(&self, id: TenantId) -> Option<&Pmap> {
        self.index(id).ok().map(|i| &self.host.pmaps[i])
    }

    /// Free machine memory.
    pub fn free(&self) -> Pages {
        self.host.machine.free()
    }
}

/// Checks a VM's sizes against each other and the sim's limits; the guest layout without
/// the workload's regions.
fn validate(id: TenantId, vm: &VmConfig) -> Result<GuestLayout, SimError> {
    let invalid = |field: &'static str, value: Pages, rule: String| SimError::InvalidVm {
        tenant: id,
        field,
        value: value.to_string(),
        rule,
    };
    let limit = Pages(MAX_FRAMES);
    if vm.max > limit {
        return Err(invalid("max", vm.max, format!("<= {limit}")));
    }
    if vm.guest_swap > limit {
        return Err(invalid("guest_swap", vm.guest_swap, format!("<= {limit}")));
    }
    if vm.kernel > vm.max {
        return Err(invalid("kernel", vm.kernel, format!("<= max = {}", vm.max)));
    }
    let room = vm.max - vm.kernel;
    if vm.kind == TenantKind::Container {
        if vm.balloon.is_some() {
            return Err(SimError::InvalidVm {
                tenant: id,
                field: "balloon",
                value: "a driver".to_string(),
                rule: "absent for a container (its limit moves its memory)".to_string(),
            });
        }
        if vm.initial_balloon > Pages::ZERO {
            return Err(invalid(
                "initial_balloon",
                vm.initial_balloon,
                "0 for a container".to_string(),
            ));
        }
    }
    if vm.initial_balloon > room {
        return Err(invalid(
            "initial_balloon",
            vm.initial_balloon,
            format!("<= max - kernel = {room}"),
        ));
    }
    if let Some(s) = &vm.sampling {
        if s.period.is_zero() {
            return Err(SimError::InvalidVm {
                tenant: id,
                field: "sampling.period",
                value: "0 s".to_string(),
                rule: "> 0".to_string(),
            });
        }
    }
    Ok(GuestLayout {
        pages: vm.max.0 as u32,
        kernel: vm.kernel.0 as u32,
        swap: vm.guest_swap.0 as u32,
        balloon: vm.initial_balloon.0 as u32,
        anon_pages: 0,
        file_pages: 0,
    })
}

/// The simulated host over a tenant's life: attaching powers a VM on (a VM that does not fit is
/// refused), detaching powers it off,
/// `run` simulates one tick, and the one world-specific command starts a new workload. A
/// simulated VM leaves nothing to restore, so it has no record.
/// What a workload command did: the tenant runs a workload of this kind from now on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Runs(pub &'static str);

impl std::fmt::Display for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "runs {}", self.0)
    }
}

impl World for SimWorld {
    type Placement = VmConfig;
    type Record = ();
    type Command = WorkloadConfig;
    type Done = Runs;

    fn attach(
        &mut self,
        id: TenantId,
        _spec: &TenantSpec,
        vm: &VmConfig,
        _record: Option<&()>,
    ) -> Result<Attach, SimError> {
        Ok(match self.power_on(id, vm.clone()) {
            Ok(()) => Attach::Attached(Joined::PoweredOn),
            Err(e) => Attach::Refused(e.to_string()),
        })
    }

    fn detach(&mut self, id: TenantId) -> Result<(), SimError> {
        self.power_off(id)
    }

    /// The VM keeps its configured size; only policy sees the new min, max and shares.
    fn retune(&mut self, _id: TenantId, _spec: &TenantSpec) {}

    /// The tick is the scenario's (`HostConfig::tick`), which the runner also uses.
    fn run(&mut self, _tick: Duration) {
        self.run_tick();
    }

    /// Virtual time passes only in `run`.
    fn between_ticks(&mut self) {}

    /// Nothing happens in the simulated world outside the decisions.
    fn drain_events(&mut self) -> Vec<WorldEvent> {
        Vec::new()
    }

    fn command(&mut self, id: TenantId, workload: &WorkloadConfig) -> Result<Runs, SimError> {
        let kind = workload.kind();
        self.set_workload(id, workload.clone())?;
        Ok(Runs(kind))
    }

    fn records(&self) -> Vec<()> {
        Vec::new()
    }

    fn restore(&mut self, _record: &()) -> Result<(), SimError> {
        Ok(())
    }

    fn detach_all(&mut self) -> Vec<(String, SimError)> {
        let ids = self.tenant_ids();
        ids.into_iter()
            .filter_map(|id| self.power_off(id).err().map(|e| (id.to_string(), e)))
            .collect()
    }
}

impl Host for SimWorld {
    type Error = SimError;

    fn observe(&mut self) -> Result<HostObservation, SimError> {
        let tenants = self
            .vms
            .iter_mut()
            .enumerate()
            .map(|(i, vm)| {
                let mut o = vm.observe(&self.host, i, self.config.tick);
                o.levers.disk = self.disk.as_ref().and_then(|d| d.io(o.id)).map(Box::new);
                o
            })
            .collect();
        let m = &self.host.machine;
        Ok(HostObservation {
            now: self.now,
            machine: m.total(),
            free: m.free(),
            host_swap_total: m.swap_total(),
            host_swap_used: m.swap_used(),
            pressure: None,
            sharing: self
                .host
                .sharing
                .as_mut()
                .map(|s| s.observe(&self.host.pmaps)),
            remapping: self.remap.as_ref().map(IoRemap::observe),
            tenants,
        })
    }

    /// Stores each tenant's balloon target, blocking and target (for victim selection) and
    /// pages out `host_swap_out` random victims at once. A tenant the decision does not
    /// mention is unblocked and keeps its balloon target. An unknown tenant is an error
    /// and nothing is applied.
    fn apply(&mut self, decision: &Decision) -> Result<(), SimError> {
        if let Some(rate) = decision.sharing {
            self.scan_rate = rate;
        }
        let mut order = Vec::with_capacity(decision.actions.len());
        for a in &decision.actions {
            order.push((self.running(a.id)?, a));
        }
        for vm in &mut self.vms {
            vm.control(None);
        }
        order.sort_by_key(|(i, _)| *i);
        for (i, a) in order {
            self.host.set_target(i, a.target.0);
            let vm = &mut self.vms[i];
            let moves = a.moves();
            vm.control(Some(&moves));
            if let (Some(d), Some(w)) = (&mut self.disk, moves.disk_weight) {
                d.set_weight(a.id, w);
            }
            if moves.host_swap_out > Pages::ZERO {
                vm.host_swap_out(i, moves.host_swap_out, &mut self.host, &self.costs);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Pace, Skew, TouchPhase};
    use memtide_model::{Moves, ReclamationState, TenantAction};

    fn world() -> SimWorld {
        SimWorld::new(
            HostConfig {
                machine: Pages::from_mib(64),
                host_swap: Pages::ZERO,
                tick: Duration::from_secs(1),
                sharing: None,
                io_remap: None,
                disk: None,
            },
            CostModel::default(),
            3,
        )
    }

    fn vm() -> VmConfig {
        VmConfig {
            kind: TenantKind::Vm,
            max: Pages::from_mib(4),
            overhead: Pages::from_mib(2),
            kernel: Pages::from_mib(1),
            guest_swap: Pages::ZERO,
            balloon: None,
            initial_balloon: Pages::ZERO,
            sampling: None,
            content: Default::default(),
            workload: WorkloadConfig::Toucher {
                phases: vec![TouchPhase {
                    at_s: 0.0,
                    working_set_mb: 1.0,
                }],
                allocated_mb: None,
                skew: Skew::Uniform,
                pace: Pace::default(),
            },
            io: None,
            disk: None,
        }
    }

    fn blocking(id: TenantId) -> TenantAction {
        let mut a = TenantAction::none(id, ReclamationState::Low);
        a.reason.mechanism = a.reason.mechanism.with_moves(Moves {
            blocked: true,
            ..Moves::default()
        });
        a
    }

    #[test]
    fn tenants_are_kept_in_ascending_id_order() {
        let mut w = world();
        w.power_on(TenantId(3), vm()).unwrap();
        w.power_on(TenantId(1), vm()).unwrap();
        assert_eq!(w.tenant_ids(), vec![TenantId(1), TenantId(3)]);
        let ids: Vec<TenantId> = w.observe().unwrap().tenants.iter().map(|t| t.id).collect();
        assert_eq!(ids, vec![TenantId(1), TenantId(3)]);
    }

    #[test]
    fn overhead_and_kernel_come_out_of_free_machine_memory() {
        let mut w = world();
        w.power_on(TenantId(0), vm()).unwrap();
        assert_eq!(w.free(), Pages::from_mib(64 - 2 - 1));
    }

    #[test]
    fn a_decision_naming_an_unknown_tenant_changes_nothing() {
        let mut w = world();
        w.power_on(TenantId(0), vm()).unwrap();
        let decision = Decision {
            now: w.now(),
            memory: memtide_model::ResourceState {
                resource: memtide_model::Resource::Memory,
                state: ReclamationState::Low,
                budget: Pages::ZERO,
            },
            sharing: None,
            actions: vec![blocking(TenantId(0)), blocking(TenantId(9))],
        };
        assert!(matches!(
            w.apply(&decision),
            Err(SimError::UnknownTenant {
                tenant: TenantId(9)
            })
        ));
        w.run_tick();
        assert!(!w.tenant_stats(TenantId(0)).unwrap().blocked);
    }

    #[test]
    fn the_clock_advances_by_one_tick() {
        let mut w = world();
        w.run_tick();
        w.run_tick();
        assert_eq!(w.now(), Duration::from_secs(2));
    }

    #[test]
    fn a_zero_sampling_period_is_refused() {
        let mut w = world();
        let mut config = vm();
        config.sampling = Some(crate::config::SamplingSetup {
            sample_pages: 10,
            period: Duration::ZERO,
        });
        let e = w.power_on(TenantId(0), config).unwrap_err();
        assert_eq!(e.to_string(), "tenant 0: sampling.period = 0 s must be > 0");
    }
}
