//! One simulated VM or container: its guest, balloon (for a container, the limit), sampler and workload, and the tick that runs its page accesses against the guest and the host.
//!
//! A container is the same guest model under a limit instead of a balloon driver: lowering
//! the limit makes the kernel reclaim at once (an internal balloon that moves the whole way
//! within a tick and cannot take kernel pages), raising it gives the room back. It reports a
//! limit lever, and no balloon or host swap lever.
//!
//! A tick: the workload moves to the current time, the balloon driver polls its target and
//! moves, then (unless the tenant is blocked) accesses are drawn in batches and carried out
//! until the tick's time is used or the open-loop demand is met. Each access costs the
//! workload's CPU time plus the stalls of the cost model: nothing for a resident hit, a
//! minor fault for a new anonymous page (zero-fill) or a page the host backs on first
//! touch, a guest swap-in, a disk read for a cache miss, a host swap-in, a guest swap-out
//! (plus a host swap-in when that is double paging), and a host swap-out for each page the
//! host had to page out to find a frame (charged to the faulting VM, which waits for it).
//! Time spent beyond the end of a tick (and host paging the controller ordered) is carried
//! into the next tick.

use crate::app::{AgentConfig, Link};
use crate::balloon::{Balloon, Step};
use crate::config::{BalloonConfig, TenantKind};
use crate::cost::CostModel;
use crate::guest::{AnonState, Guest, Victim};
use crate::paging::{Backing, HostMemory, PagedOut};
use crate::pmap::PageState;
use crate::rng::SimRng;
use crate::sampler::Sampler;
use crate::sharing::Write;
use crate::slo::SloMeter;
use crate::stats::{TickStats, Totals};
use crate::workload::{Access, Workload};
use memtide_model::{
    BalloonLever, HostSwapLever, Levers, LimitLever, Moves, Pages, TenantId, TenantObservation,
};
use std::time::Duration;

/// Accesses drawn from the workload at a time.
const BATCH: usize = 256;

/// The cost model in whole nanoseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Costs {
    pub minor_fault: u64,
    pub guest_swap_in: u64,
    pub guest_swap_out: u64,
    pub disk_read: u64,
    pub disk_seq_read: u64,
    pub host_swap_in: u64,
    pub host_swap_out: u64,
}

fn us_to_ns(us: f64) -> u64 {
    if us.is_finite() && us > 0.0 {
        (us * 1000.0).round() as u64
    } else {
        0
    }
}

impl Costs {
    pub fn new(model: &CostModel) -> Costs {
        Costs {
            minor_fault: us_to_ns(model.minor_fault_us),
            guest_swap_in: us_to_ns(model.guest_swap_in_us),
            guest_swap_out: us_to_ns(model.guest_swap_out_us),
            disk_read: us_to_ns(model.disk_read_us),
            disk_seq_read: us_to_ns(model.disk_seq_read_us),
            host_swap_in: us_to_ns(model.host_swap_in_us),
            host_swap_out: us_to_ns(model.host_swap_out_us),
        }
    }

    /// Host-side stall of backing a page, minor faults excepted (the caller charges those).
    fn backing(&self, b: Backing) -> u64 {
        let mut ns = u64::from(b.sync_swap_outs) * self.host_swap_out;
        if b.host_swap_in {
            ns += self.host_swap_in;
        }
        ns
    }
}

/// The parts a VM is built from (see `world.rs`, which validates them).
pub struct VmParts {
    pub id: TenantId,
    pub kind: TenantKind,
    pub guest: Guest,
    pub balloon: Balloon,
    pub sampler: Option<Sampler>,
    pub workload: Workload,
    pub now: Duration,
    pub overhead: Pages,
    pub rng: SimRng,
    pub host_rng: SimRng,
    /// The balloon agent linked into the workload's application, if it has one.
    pub agent: Option<AgentConfig>,
    /// A balloon driver that loads later in boot, and when.
    pub late_driver: Option<(Duration, BalloonConfig)>,
}

/// One running VM.
#[derive(Clone, Debug)]
pub struct Vm {
    id: TenantId,
    kind: TenantKind,
    /// A container's limit as last set (`None`: no limit yet).
    limit: Option<Pages>,
    guest: Guest,
    balloon: Balloon,
    sampler: Option<Sampler>,
    workload: Workload,
    /// When the current workload started: its phases are timed from here.
    workload_start: Duration,
    overhead: Pages,
    /// The workload's stream.
    rng: SimRng,
    /// The host's choices made on this VM's behalf (victim pages).
    host_rng: SimRng,
    blocked: bool,
    /// Busy time owed to the next tick, in nanoseconds.
    debt_ns: u64,
    double_pagings: u64,
    /// Pool pages the guest swapped in only for the application to overwrite them.
    app_double_pagings: u64,
    /// Accesses of the application's collector this tick (no operation of the program).
    collections: u64,
    /// Accesses charged a minor fault (zero-fill of a new anonymous page, or the host
    /// backing an unbacked page on first touch).
    minor_faults: u64,
    stalls: u64,
    prev: Totals,
    last: Option<TickStats>,
    /// The application's agent and memtide's session with it.
    /// Boxed: a session is a kilobyte, and most tenants have none.
    app: Option<Box<Link>>,
    /// Applications with an agent the tenant has started.
    agents: u64,
    /// Anonymous pages the application gave back this tick.
    released: Vec<u32>,
    /// A balloon driver that loads later in boot, and when.
    late_driver: Option<(Duration, BalloonConfig)>,
    /// The service levels of a key-value server's GETs (`kv` workloads).
    meter: Option<SloMeter>,
}

/// The meter of `workload`'s GETs, for a key-value server.
fn meter_of(workload: &Workload) -> Option<SloMeter> {
    workload.kv().map(|kv| {
        SloMeter::new(
            kv.pages_per_get(),
            kv.window_s(),
            kv.start_s(),
            kv.schedule().length(),
        )
    })
}

impl Vm {
    /// A VM from its booted parts; `totals` are the counts at boot (kernel faults), which
    /// the first tick does not report.
    pub fn new(parts: VmParts, totals_at_boot: Totals) -> Vm {
        let mut vm = Vm {
            id: parts.id,
            kind: parts.kind,
            limit: None,
            guest: parts.guest,
            balloon: parts.balloon,
            sampler: parts.sampler,
            workload: parts.workload,
            workload_start: parts.now,
            overhead: parts.overhead,
            rng: parts.rng,
            host_rng: parts.host_rng,
            blocked: false,
            debt_ns: 0,
            double_pagings: 0,
            app_double_pagings: 0,
            collections: 0,
            minor_faults: 0,
            stalls: 0,
            prev: totals_at_boot,
            last: None,
            app: None,
            agents: 0,
            released: Vec::new(),
            late_driver: parts.late_driver,
            meter: None,
        };
        vm.meter = meter_of(&vm.workload);
        vm.start_agent(parts.agent.as_ref(), parts.now);
        vm
    }

    /// Starts the workload's agent, if its application links one (replacing any before).
    fn start_agent(&mut self, agent: Option<&AgentConfig>, now: Duration) {
        self.app = None;
        if let (Some(config), Some(pool)) = (agent, self.workload.pool()) {
            self.agents += 1;
            // Each application's sessions are numbered apart from the last one's.
            self.app = Some(Box::new(Link::connect(
                config.clone(),
                self.id,
                self.agents << 32,
                now,
                self.workload.kind(),
                pool,
            )));
        }
    }

    pub fn id(&self) -> TenantId {
        self.id
    }

    pub fn overhead(&self) -> Pages {
        self.overhead
    }

    pub fn guest(&self) -> &Guest {
        &self.guest
    }

    pub fn balloon(&self) -> &Balloon {
        &self.balloon
    }

    /// Figures of the last tick (`None` before the first).
    pub fn last(&self) -> Option<&TickStats> {
        self.last.as_ref()
    }

    /// A key-value server's service levels so far.
    pub fn slo(&self) -> Option<&SloMeter> {
        self.meter.as_ref()
    }

    /// The balloon a container's limit works through: it moves any distance within a tick
    /// and never takes the kernel's pages.
    pub fn limit_balloon(pages: Pages, kernel: Pages) -> BalloonConfig {
        BalloonConfig {
            starts_after: Duration::ZERO,
            rate_per_s: pages,
            limit: pages.saturating_sub(kernel),
        }
    }

    /// Takes the controller's decision for this tenant: a VM's balloon target and blocking,
    /// a container's limit, and its application agent's move (`None`: nothing decided, all
    /// levers hold and nothing blocks).
    pub fn control(&mut self, moves: Option<&Moves>) {
        let moves = moves.copied().unwrap_or_default();
        match self.kind {
            TenantKind::Vm => {
                self.balloon.set_target(moves.balloon);
                self.blocked = moves.blocked;
            }
            TenantKind::Container => {
                if let Some(limit) = moves.limit {
                    let pages = Pages(u64::from(self.guest.pages()));
                    self.limit = Some(limit.min(pages));
                    self.balloon.set_target(Some(pages.saturating_sub(limit)));
                }
            }
        }
        if let Some(app) = &mut self.app {
            app.apply(moves.app_balloon);
        }
    }

    /// Host paging the controller ordered: pages out up to `pages` random victims (sharing
    /// each instead where it can), the write cost charged to this VM's next tick. Returns the
    /// pages reclaimed.
    pub fn host_swap_out(
        &mut self,
        idx: usize,
        pages: Pages,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> PagedOut {
        let done = host.page_out_random(idx, pages.0, &mut self.host_rng);
        self.debt_ns = self
            .debt_ns
            .saturating_add(done.swapped.saturating_mul(costs.host_swap_out));
        done
    }

    /// Replaces the workload (see [`Guest::replace_workload`]); its phases start at `now`,
    /// with its application's `agent` if it links one (an agent of the old application is
    /// gone with it).
    pub fn set_workload(&mut self, workload: Workload, agent: Option<&AgentConfig>, now: Duration) {
        self.guest
            .replace_workload(workload.anon_pages(), workload.file_pages());
        self.workload = workload;
        self.workload_start = now;
        self.meter = meter_of(&self.workload);
        self.start_agent(agent, now);
    }

    /// Lifetime counts of this VM.
    pub fn totals(&self, host: &HostMemory, idx: usize) -> Totals {
        let g = &self.guest.counters;
        let h = &host.pmaps[idx].counters;
        Totals {
            swap_ins: g.swap_ins,
            swap_outs: g.swap_outs,
            refaults: g.refaults,
            disk_reads: g.disk_reads,
            host_swap_ins: h.host_swap_ins,
            host_swap_outs: h.host_swap_outs,
            double_pagings: self.double_pagings,
            app_double_pagings: self.app_double_pagings,
            minor_faults: self.minor_faults,
            stalls: self.stalls,
        }
    }

    /// What the host reports about this tenant, `tick` after the last report: a VM's balloon
    /// and host swap, or a container's limit, and its application's agent.
    pub fn observe(&mut self, host: &HostMemory, idx: usize, tick: Duration) -> TenantObservation {
        let pmap = &host.pmaps[idx];
        let last = self.last.as_ref();
        let committed = u64::from(self.guest.kernel()) + u64::from(self.workload.anon_pages());
        let g = &self.guest;
        let used = Pages(
            u64::from(g.kernel())
                + u64::from(g.anon_resident())
                + u64::from(g.cache_resident())
                + u64::from(g.swap_used()),
        );
        let app_balloon = self.app.as_mut().and_then(|a| a.observe(tick, used));
        let mut levers = match self.kind {
            TenantKind::Vm => Levers {
                balloon: Some(BalloonLever {
                    memory: Pages(u64::from(self.guest.pages())),
                    size: Pages(u64::from(self.guest.balloon())),
                    driver: self.balloon.info(),
                    free_unbacked: false,
                }),
                host_swap: Some(HostSwapLever {
                    swapped: Pages(u64::from(pmap.host_swapped())),
                    swap_ins: Some(last.map_or(0, |s| s.host_swap_ins)),
                    room: None,
                }),
                ..Levers::default()
            },
            TenantKind::Container => {
                let pages = Pages(u64::from(self.guest.pages()));
                let g = &self.guest;
                // Anonymous pages that no swap is left to take, and the kernel's.
                let swap_free = g.swap_size().saturating_sub(g.swap_used());
                let stuck = g.anon_resident().saturating_sub(swap_free);
                Levers {
                    limit: Some(LimitLever {
                        limit: self.limit.unwrap_or(pages),
                        unlimited: self.limit.is_none(),
                        unreclaimable: Pages(u64::from(g.kernel()) + u64::from(stuck)),
                        major_faults: Some(last.map_or(0, |s| s.swap_ins + s.disk_reads)),
                        ..LimitLever::default()
                    }),
                    ..Levers::default()
                }
            }
        };
        levers.app_balloon = app_balloon;
        levers.sharing = host.sharing.as_ref().map(|s| s.lever(idx, pmap));
        TenantObservation {
            committed: Some(Pages(committed)),
            anon: Some(Pages(u64::from(self.guest.anon_resident()))),
            file: Some(Pages(u64::from(self.guest.cache_resident()))),
            swapped: Some(Pages(u64::from(self.guest.swap_used()))),
            swap_ins: Some(last.map_or(0, |s| s.swap_ins)),
            refaults: Some(last.map_or(0, |s| s.refaults)),
            sample: self.sampler.as_mut().map(Sampler::observe),
            throughput: last.map(|s| s.throughput),
            latency_ms: last.map(|s| s.latency_ms),
            levers,
            ..TenantObservation::new(self.id, Pages(u64::from(pmap.mapped())))
        }
    }

    /// Ends sampling periods that are over at `now`.
    pub fn roll_sampler(&mut self, now: Duration, host: &mut HostMemory, idx: usize) {
        if let Some(s) = &mut self.sampler {
            s.roll(now, &mut host.pmaps[idx]);
        }
    }

    /// Simulates `[now, now + tick)` for this VM (index `idx` in `host`).
    pub fn run_tick(
        &mut self,
        idx: usize,
        host: &mut HostMemory,
        now: Duration,
        tick: Duration,
        costs: &Costs,
        batch: &mut Vec<Access>,
    ) {
        let tick_ns = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX);
        self.workload
            .advance(now.saturating_sub(self.workload_start));
        if let (Some(meter), Some(kv)) = (&mut self.meter, self.workload.kv()) {
            // The tick's GETs due, known before it runs: each is answered as it completes.
            let t0 = self.workload.now();
            let s0 = t0.as_secs_f64();
            meter.begin_tick(t0, tick, kv.requests_due(s0, s0 + tick.as_secs_f64()));
        }
        let mut stats = TickStats {
            blocked: self.blocked,
            ..TickStats::default()
        };
        let mut used = std::mem::take(&mut self.debt_ns);
        if let (Some(app), Some(pool)) = (&mut self.app, self.workload.pool_mut()) {
            app.run(now, tick, pool, &mut self.released);
            for page in self.released.drain(..) {
                self.guest.free_anon(page);
            }
        }
        // The driver polls once per tick; its pages move in slices interleaved with the
        // workload's accesses, as a real driver allocates while the guest runs (one burst at
        // the start of the tick would make every reference bit look cold at once).
        if self.late_driver.as_ref().is_some_and(|(at, _)| now >= *at) {
            if let Some((_, driver)) = self.late_driver.take() {
                self.balloon = Balloon::new(Some(driver));
            }
        }
        let step = self.balloon.poll(tick, self.guest.balloon());
        let mut done = 0u64;
        self.collections = 0;
        for slice in 1..=BALLOON_SLICES {
            let part = step_slice(step, slice);
            used = used.saturating_add(self.balloon_move(part, idx, host, costs, &mut stats));
            if !self.blocked {
                let limit_ns = tick_ns / u64::from(BALLOON_SLICES) * u64::from(slice);
                let limit_ns = if slice == BALLOON_SLICES {
                    tick_ns
                } else {
                    limit_ns
                };
                self.run_accesses(
                    idx, host, tick, limit_ns, tick_ns, costs, &mut used, &mut done, batch,
                );
            }
        }
        stats.accesses = done;
        if let Some(meter) = &mut self.meter {
            meter.end_tick();
        }
        self.guest.end_tick();
        if let (Some(app), Some(pool)) = (&mut self.app, self.workload.pool_mut()) {
            app.report(now + tick, pool);
        }
        self.debt_ns = used.saturating_sub(tick_ns);
        let busy = used.min(tick_ns);

        let per_op = f64::from(self.workload.accesses_per_op().max(1));
        stats.ops = stats.accesses.saturating_sub(self.collections) as f64 / per_op;
        let secs = tick.as_secs_f64();
        stats.throughput = if secs > 0.0 { stats.ops / secs } else { 0.0 };
        stats.latency_ms = if stats.ops > 0.0 {
            busy as f64 / 1e6 / stats.ops
        } else {
            0.0
        };
        stats.working_set = self.workload.working_set();
        let totals = self.totals(host, idx);
        totals.delta_into(&self.prev, &mut stats);
        self.prev = totals;
        self.last = Some(stats);
    }

    /// Moves the balloon by one slice of this tick's step; returns the guest's time spent
    /// (swap-outs).
    fn balloon_move(
        &mut self,
        step: Step,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
        stats: &mut TickStats,
    ) -> u64 {
        let mut ns = 0u64;
        match step {
            Step::Hold => {}
            Step::Inflate(n) => {
                for _ in 0..n {
                    // The guest refuses when it can free nothing more.
                    let Some((ppn, cost)) = self.alloc_page(idx, host, costs) else {
                        break;
                    };
                    ns = ns.saturating_add(cost);
                    self.guest.give_to_balloon(ppn);
                    host.balloon(idx, ppn);
                    stats.balloon_inflated += 1;
                }
            }
            Step::Deflate(n) => {
                for _ in 0..n {
                    let Some(ppn) = self.guest.take_from_balloon() else {
                        break;
                    };
                    host.unballoon(idx, ppn);
                    stats.balloon_deflated += 1;
                }
            }
        }
        ns
    }

    /// The access loop of one slice of a tick: runs until `limit_ns` of the tick is used.
    #[allow(clippy::too_many_arguments)]
    fn run_accesses(
        &mut self,
        idx: usize,
        host: &mut HostMemory,
        tick: Duration,
        limit_ns: u64,
        tick_ns: u64,
        costs: &Costs,
        used: &mut u64,
        done: &mut u64,
        buf: &mut Vec<Access>,
    ) {
        // At least 1 ns per access, so a workload with no CPU time still ends its tick.
        let cpu = self.workload.cpu_ns_per_access().max(1);
        let demand = self.workload.demand(tick);
        'tick: while *used < limit_ns {
            let want = match demand {
                Some(d) if *done >= d => break,
                Some(d) => (d - *done).min(BATCH as u64) as usize,
                None => BATCH,
            };
            buf.clear();
            self.workload.fill(&mut self.rng, buf, want);
            if buf.is_empty() {
                break;
            }
            let sweep = self.workload.last_sweep();
            warm(&self.guest, &host.pmaps[idx], buf);
            for (i, &a) in buf.iter().enumerate() {
                match self.access(a, idx, host, costs) {
                    Some(stall) => {
                        *used = used.saturating_add(cpu + stall);
                        *done += 1;
                        if let Some(m) = self.meter.as_mut().filter(|_| i >= sweep) {
                            m.record(cpu + stall);
                        }
                    }
                    None => {
                        // Nothing can be freed for this access: the rest of the tick is lost.
                        self.stalls += 1;
                        *used = (*used).max(tick_ns);
                        self.workload.return_unused(&buf[i..]);
                        break 'tick;
                    }
                }
                if *used >= limit_ns {
                    self.workload.return_unused(&buf[i + 1..]);
                    break 'tick;
                }
            }
        }
    }

    /// One access; the stall time in nanoseconds, or `None` if it cannot proceed.
    #[inline(always)]
    fn access(
        &mut self,
        a: Access,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<u64> {
        match a {
            Access::Anon { page, write } => self.anon(page, write, idx, host, costs),
            Access::Collect { page } => {
                self.collections += 1;
                self.anon(page, false, idx, host, costs)
            }
            Access::File { block } => {
                if let Some(ppn) = self.guest.file_entry(block) {
                    if host.pmaps[idx].is_fast(ppn) {
                        self.guest.reference(ppn);
                        return Some(0);
                    }
                }
                self.file_slow(block, idx, host, costs)
            }
            Access::Fill { page, sequential } => {
                let read = if sequential {
                    costs.disk_seq_read
                } else {
                    costs.disk_read
                };
                self.fill(page, idx, host, costs).map(|stall| stall + read)
            }
        }
    }

    /// The application reads a page from disk into its anonymous page `page` (the read's
    /// cost is the caller's). If the guest had swapped that page out, it reads it back only
    /// for the application to overwrite it: double paging at the application's level.
    #[inline(never)]
    fn fill(&mut self, page: u32, idx: usize, host: &mut HostMemory, costs: &Costs) -> Option<u64> {
        if self.guest.anon_state(page) == AnonState::Swapped {
            self.app_double_pagings += 1;
        }
        let ppn = self.guest.anon_entry(page);
        let stall = if host.pmaps[idx].is_fast(ppn) {
            self.guest.reference(ppn);
            0
        } else {
            self.anon_slow(page, false, idx, host, costs)?
        };
        // The page now holds the data read from disk.
        let copy = self.write(idx, ppn, Write::Anon(page), host, costs)?;
        Some(stall + copy)
    }

    /// An access to anonymous page `page`.
    #[inline(always)]
    fn anon(
        &mut self,
        page: u32,
        write: bool,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<u64> {
        let ppn = self.guest.anon_entry(page);
        if host.pmaps[idx].is_fast(ppn) {
            self.guest.reference(ppn);
            if write && host.sharing.is_some() {
                // A page of the VM's own: new contents, nothing to copy.
                return self.write(idx, ppn, Write::Modified, host, costs);
            }
            return Some(0);
        }
        self.anon_slow(page, write, idx, host, costs)
    }

    /// The guest wrote `what` into `ppn`: copy-on-write of a shared page (a minor fault), and
    /// the page's new contents where the host shares pages. The stall in nanoseconds.
    fn write(
        &mut self,
        idx: usize,
        ppn: u32,
        what: Write,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<u64> {
        let (copied, outs) = host.write(idx, ppn, what, &mut self.host_rng).ok()?;
        if !copied {
            return Some(0);
        }
        self.minor_faults += 1;
        Some(
            costs.minor_fault
                + costs.backing(Backing {
                    sync_swap_outs: outs,
                    ..Backing::default()
                }),
        )
    }

    #[inline(never)]
    fn anon_slow(
        &mut self,
        page: u32,
        write: bool,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<u64> {
        if !self.guest.has_anon(page) {
            return Some(0);
        }
        match self.guest.anon_state(page) {
            AnonState::Resident(ppn) => {
                let touch = self.touch(ppn, false, idx, host, costs)?;
                if !write {
                    return Some(touch);
                }
                Some(touch + self.write(idx, ppn, Write::Modified, host, costs)?)
            }
            state => {
                let (ppn, reclaim) = self.alloc_page(idx, host, costs)?;
                let zero_fill = state == AnonState::Untouched;
                let Some(backing) = self.touch(ppn, zero_fill, idx, host, costs) else {
                    self.guest.release(ppn);
                    return None;
                };
                // A page back from guest swap counts as contents of its own (the guest's swap
                // does not keep what it held); a new page holds what the workload declares.
                let (io, what) = if state == AnonState::Swapped {
                    self.guest.swap_in(page, ppn);
                    (costs.guest_swap_in, Write::Modified)
                } else {
                    self.guest.install_anon(page, ppn);
                    (0, Write::Anon(page))
                };
                let copy = self.write(idx, ppn, what, host, costs)?;
                Some(reclaim + backing + io + copy)
            }
        }
    }

    #[inline(never)]
    fn file_slow(
        &mut self,
        block: u32,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<u64> {
        if !self.guest.has_block(block) {
            return Some(0);
        }
        if let Some(ppn) = self.guest.file_entry(block) {
            return self.touch(ppn, false, idx, host, costs);
        }
        let (ppn, reclaim) = self.alloc_page(idx, host, costs)?;
        let Some(backing) = self.touch(ppn, false, idx, host, costs) else {
            self.guest.release(ppn);
            return None;
        };
        self.guest.install_cache(block, ppn);
        let copy = self.write(idx, ppn, Write::File(block), host, costs)?;
        Some(reclaim + backing + copy + costs.disk_read)
    }

    /// The guest touches `ppn` (`zero_fill`: a new anonymous page, which costs a minor
    /// fault even if the host backs it already): the sampler sees it, the host backs it.
    fn touch(
        &mut self,
        ppn: u32,
        zero_fill: bool,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<u64> {
        if host.pmaps[idx].take_sampled(ppn) {
            if let Some(s) = &mut self.sampler {
                s.touch();
            }
        }
        let backing = host.back(idx, ppn, &mut self.host_rng).ok()?;
        self.guest.reference(ppn);
        let mut ns = costs.backing(backing);
        if zero_fill || backing.minor_fault {
            self.minor_faults += 1;
            ns += costs.minor_fault;
        }
        Some(ns)
    }

    /// A free guest page, reclaiming one if the free list is empty; also the time the
    /// reclaim took. Swapping out a page the host had swapped is double paging: the host
    /// reads it back first.
    fn alloc_page(
        &mut self,
        idx: usize,
        host: &mut HostMemory,
        costs: &Costs,
    ) -> Option<(u32, u64)> {
        if let Some(ppn) = self.guest.pop_free() {
            return Some((ppn, 0));
        }
        let victim = self.guest.pick_victim()?;
        match victim {
            Victim::Cache(ppn) => {
                self.guest.evict_cache(ppn);
                Some((ppn, 0))
            }
            Victim::Anon(ppn) => {
                let mut ns = costs.guest_swap_out;
                if host.pmaps[idx].state(ppn) == PageState::HostSwapped {
                    match host.back(idx, ppn, &mut self.host_rng) {
                        Ok(b) => {
                            self.double_pagings += 1;
                            ns += costs.backing(b);
                        }
                        Err(_) => {
                            self.guest.requeue(victim);
                            return None;
                        }
                    }
                }
                if !self.guest.swap_out(ppn) {
                    self.guest.requeue(victim);
                    return None;
                }
                Some((ppn, ns))
            }
        }
    }
}

/// Reads, ahead of a batch of accesses, the entries they will look up first: each page's or
/// block's map entry, then the guest flags and pmap entry of the page it names. The loads are
/// independent of each other, so the processor overlaps their cache misses, where the access
/// loop itself waits for each in turn (its misses depend on one another). Nothing is
/// changed: a page a fault of this batch moves is merely looked up in vain.
fn warm(guest: &Guest, pmap: &crate::pmap::Pmap, buf: &[Access]) {
    let mut ppns = [0u32; BATCH];
    for (ppn, a) in ppns.iter_mut().zip(buf) {
        *ppn = match *a {
            Access::Anon { page, .. } | Access::Collect { page } | Access::Fill { page, .. } => {
                guest.anon_entry(page)
            }
            Access::File { block } => guest.file_entry(block).unwrap_or(u32::MAX),
        };
    }
    let mut seen = 0u8;
    for &ppn in &ppns[..buf.len().min(BATCH)] {
        seen ^= guest.peek_flags(ppn) ^ pmap.peek(ppn);
    }
    std::hint::black_box(seen);
}

/// Slices of a tick over which the balloon's pages move, interleaved with accesses.
const BALLOON_SLICES: u32 = 10;

/// The part of a tick's balloon step that slice `slice` (1-based) carries out.
fn step_slice(step: Step, slice: u32) -> Step {
    let share = |n: u32| {
        let upto = |k: u32| (u64::from(n) * u64::from(k) / u64::from(BALLOON_SLICES)) as u32;
        upto(slice) - upto(slice - 1)
    };
    match step {
        Step::Hold => Step::Hold,
        Step::Inflate(n) => Step::Inflate(share(n)),
        Step::Deflate(n) => Step::Deflate(share(n)),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{HostConfig, TenantKind, VmConfig};
    use crate::cost::CostModel;
    use crate::workload::{Pace, Skew, TouchPhase, WorkloadConfig};
    use crate::world::SimWorld;
    use memtide_controller::Host;
    use memtide_model::{Decision, Moves, Pages, ReclamationState, TenantAction, TenantId};
    use std::time::Duration;

    const ID: TenantId = TenantId(0);

    fn toucher_vm(ws_mb: f64, rate: Option<f64>) -> SimWorld {
        let mut w = SimWorld::new(
            HostConfig {
                machine: Pages::from_mib(64),
                host_swap: Pages::from_mib(64),
                tick: Duration::from_secs(1),
                sharing: None,
                io_remap: None,
                disk: None,
            },
            CostModel::default(),
            1,
        );
        let vm = VmConfig {
            kind: TenantKind::Vm,
            max: Pages::from_mib(8),
            overhead: Pages::ZERO,
            kernel: Pages::from_mib(1),
            guest_swap: Pages::ZERO,
            balloon: None,
            initial_balloon: Pages::ZERO,
            sampling: None,
            content: Default::default(),
            workload: WorkloadConfig::Toucher {
                phases: vec![TouchPhase {
                    at_s: 0.0,
                    working_set_mb: ws_mb,
                }],
                allocated_mb: None,
                skew: Skew::Uniform,
                pace: Pace {
                    cpu_us_per_access: None,
                    accesses_per_op: None,
                    max_accesses_per_s: rate,
                },
            },
            io: None,
            disk: None,
        };
        w.power_on(ID, vm).unwrap();
        w
    }

    #[test]
    fn first_touches_cost_one_minor_fault_each() {
        let mut w = toucher_vm(1.0, None);
        w.run_tick();
        let s = w.tenant_stats(ID).unwrap();
        assert_eq!(s.minor_faults, 256);
        // 10 us of work per access and 1 us per minor fault fill one second; the access
        // that crosses the end of the tick still completes.
        assert_eq!(s.accesses, 99_975);
    }

    #[test]
    fn resident_hits_cost_only_their_work() {
        let mut w = toucher_vm(1.0, None);
        w.run_tick();
        w.run_tick();
        let s = w.tenant_stats(ID).unwrap();
        assert_eq!((s.accesses, s.minor_faults), (100_000, 0));
        assert!((s.latency_ms - 0.01).abs() < 1e-12);
        assert!((s.throughput - 100_000.0).abs() < 1e-9);
    }

    #[test]
    fn open_loop_demand_caps_accesses() {
        let mut w = toucher_vm(0.1, Some(1000.0));
        w.run_tick();
        w.run_tick();
        let s = w.tenant_stats(ID).unwrap();
        assert_eq!(s.accesses, 1000);
        assert!((s.latency_ms - 0.01).abs() < 1e-12, "busy time per op");
    }

    #[test]
    fn ordered_host_paging_is_charged_to_the_victim_tenant() {
        let mut w = toucher_vm(0.0, None);
        w.run_tick();
        let decision = Decision {
            now: w.now(),
            memory: memtide_model::ResourceState {
                resource: memtide_model::Resource::Memory,
                state: ReclamationState::Hard,
                budget: Pages::ZERO,
            },
            sharing: None,
            actions: vec![{
                let mut a = TenantAction::none(ID, ReclamationState::Hard);
                a.reason.mechanism = a.reason.mechanism.with_moves(Moves {
                    host_swap_out: Pages(100),
                    ..Moves::default()
                });
                a
            }],
        };
        w.apply(&decision).unwrap();
        // A toucher in a 0 MB phase does nothing, so the tick is all host paging: 100 x
        // 50 us = 5 ms of busy time.
        w.run_tick();
        let s = w.tenant_stats(ID).unwrap();
        assert_eq!((s.host_swap_outs, s.accesses), (100, 0));
    }
}
