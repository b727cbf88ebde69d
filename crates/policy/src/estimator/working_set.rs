//! TWS working-set probing (Chiang et al. 2013, as restated in the papers digest): a FAST / COOL_DOWN / SLOW state machine driven by swap-in and refault events.
//!
//! The probe starts at the tenant's committed memory and lowers its working-set estimate (WSS)
//! step by step until the tenant shows swap-ins or page-cache refaults; it then raises the WSS by
//! the number of those events, waits out a cool-down and keeps probing, more slowly.
//!
//! memtide's additions, each off by default so the published algorithm is what the simulator
//! runs: (1) without committed memory (a cgroup has none) the probe starts at what the tenant
//! holds, not at its max, so nothing waits while an estimate falls from max; (2) the caller may
//! pause probing (`EstimatorInput::probe = false`: memory is not wanted, or a dry run that
//! writes no limit), and the WSS then holds, rising only on events; (3) with `max_cool_down`
//! above `cool_down`, each SLOW step that finds the working set again doubles the next
//! cool-down, so a tenant known to be busy is probed less and less often, and two SLOW steps
//! in a row without events, from at or below the WSS where events last showed, bring the
//! cool-down back to its base (steps above it only take back the raise those events made:
//! a cyclic scan refaults many times the pages it misses, and without that rule the steps
//! back down reset the doubling after every find, measured beside Senpai); (4) `resume` starts a probe
//! from an estimate kept across a restart, in COOL_DOWN rather than FAST; (5) a real guest
//! (no committed memory; a balloon lever) starts from its memory less its balloon, not from
//! what it holds while it boots, and where its host does not back its free memory
//! (`BalloonLever::free_unbacked`: free page reporting) rule (b) below measures what its
//! balloon leaves it, since its resident memory stays short of that by the guest's free
//! memory even as it pages (without this a real 1 GiB guest's probe fell to 100 MiB under a
//! 300 MiB working set, every swap-in read as paging within room).
//!
//! Two rules make the published algorithm measure what it means to when a balloon moves at a
//! bounded rate (ESX: about 128 MB/s), and are always on. (a) A step waits while the tenant
//! still holds more than the WSS plus a step: the last decrease has not taken effect, so no
//! event could show an overshoot yet. (b) Events that arrive while the tenant holds less than
//! the WSS (by more than a SLOW step) do not raise the WSS or start a cool-down: the tenant is
//! paging within room the WSS already gives it (a VM started small whose balloon is still
//! deflating, or one the host cannot give more), and raising the WSS by every page it faulted
//! while it grew would push the WSS above the working set (in tws-convergence, the 1200 MB VM's
//! WSS stayed near committed memory for 40 s that way, where the paper converges in about
//! 10 s). (c) While the tenant
//! grows into its WSS by at least a SLOW step an epoch, FAST and SLOW wait (a step would only
//! race the balloon); otherwise a step never takes the WSS below what the tenant holds, so the
//! unused room goes first and a probe below the working set starts from what the tenant
//! really has. Events count again as soon as the tenant holds its WSS.

use super::EstimatorInput;
use memtide_model::{EstimateNote, Pages, ProbePhase, WorkingSetConfig};
use std::fmt;
use std::time::Duration;

/// The probe's state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TwsState {
    /// Lower the WSS by `fast_step` of committed memory per epoch.
    Fast,
    /// Hold the WSS until `remaining` has passed without events.
    CoolDown { remaining: Duration },
    /// Lower the WSS by `slow_step` of committed memory per epoch.
    Slow,
}

impl TwsState {
    pub fn name(self) -> &'static str {
        match self {
            TwsState::Fast => "FAST",
            TwsState::CoolDown { .. } => "COOL_DOWN",
            TwsState::Slow => "SLOW",
        }
    }
}

impl fmt::Display for TwsState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a guest balloon leaves the tenant: its memory less the balloon.
fn balloon_room(obs: &memtide_model::TenantObservation) -> Option<Pages> {
    obs.levers.balloon.map(|b| b.memory.saturating_sub(b.size))
}

/// What the tenant holds as rule (b) measures it: what its balloon leaves it where the host
/// does not back the guest's free memory (its resident memory then falls short of that by the
/// guest's free memory, also while it pages), else its allocation.
fn held_for_events(obs: &memtide_model::TenantObservation) -> Pages {
    match obs.levers.balloon {
        Some(b) if b.free_unbacked => b.memory.saturating_sub(b.size),
        _ => obs.allocated,
    }
}

/// One tenant's working-set probe.
///
/// One epoch runs per `update` call once at least `epoch` has passed since the last one (the
/// first call only initialises). Each epoch, in order: (a) a relative change of committed memory
/// larger than `committed_change` since the probe last reset resets to FAST with
/// WSS := committed; (b) else swap-in + refault events (counted since the last epoch, so events
/// seen by calls between epochs are not lost) raise the WSS by that many pages and (re)start
/// COOL_DOWN; (c) else FAST and SLOW step down, COOL_DOWN counts down by the elapsed time and
/// enters SLOW when it reaches zero. The WSS always stays within `[min, max]`.
///
/// When the world reports neither swap-ins nor refaults the probe cannot see overshoot, so it
/// holds its WSS and state instead of shrinking (missing counters are never read as zero).
/// Without committed memory the probe starts at max and cannot detect committed changes.
#[derive(Clone, Debug)]
pub struct WorkingSetProbe {
    config: WorkingSetConfig,
    state: TwsState,
    wss: Pages,
    /// Committed memory the probe last reset on; `None` before the first update.
    reset_on: Option<Pages>,
    /// The latest committed memory reported, if any was.
    committed: Option<Pages>,
    /// When the last epoch ran (or the probe initialised).
    last_epoch: Option<Duration>,
    /// Swap-in + refault events observed since the last epoch.
    pending_events: u64,
    /// Whether any swap-in or refault counter was reported since the last epoch.
    pending_seen: bool,
    /// The last epoch was held because no counters were reported.
    blind: bool,
    /// The last epoch was held because the caller paused probing.
    paused: bool,
    /// The current cool-down length (doubles up to `max_cool_down` for a busy tenant).
    cool_down: Duration,
    /// SLOW steps in a row that met no events, from at or below `found`.
    quiet_steps: u32,
    /// The WSS at which events last showed (before they raised it): SLOW steps above it only
    /// take back that raise and are quiet by design, so they do not count as quiet steps.
    found: Option<Pages>,
    /// An estimate to start from instead of committed memory (`resume`).
    resumed: Option<Pages>,
    /// What the tenant held at the last epoch (or at initialisation).
    held: Pages,
}

impl WorkingSetProbe {
    pub fn new(config: WorkingSetConfig) -> WorkingSetProbe {
        WorkingSetProbe {
            state: TwsState::Fast,
            wss: Pages::ZERO,
            reset_on: None,
            committed: None,
            last_epoch: None,
            pending_events: 0,
            pending_seen: false,
            blind: false,
            paused: false,
            cool_down: config.cool_down,
            quiet_steps: 0,
            found: None,
            resumed: None,
            held: Pages::ZERO,
            config,
        }
    }

    /// Starts from `estimate` (kept across a daemon restart) in COOL_DOWN: the tenant is not
    /// probed below it until a cool-down has passed.
    pub fn resume(&mut self, estimate: Pages) {
        self.resumed = Some(estimate);
    }

    /// Feeds one observation and returns the new estimate.
    pub fn update(&mut self, input: &EstimatorInput) -> Pages {
        let obs = input.obs;
        if let Some(committed) = obs.committed {
            self.committed = Some(committed);
        }
        let events = match (obs.swap_ins, obs.refaults) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        if let Some(events) = events {
            self.pending_events = self.pending_events.saturating_add(events);
            self.pending_seen = true;
        }

        match self.last_epoch {
            None => {
                match self.resumed.take() {
                    Some(estimate) => {
                        self.reset(estimate);
                        self.state = TwsState::CoolDown {
                            remaining: self.cool_down,
                        };
                    }
                    None => {
                        // Without committed memory: what the tenant holds, or a guest's
                        // memory less its balloon when that is more (a guest that has not
                        // touched all its memory yet, as one still booting).
                        let start = self.committed.unwrap_or_else(|| {
                            balloon_room(obs).map_or(obs.allocated, |r| r.max(obs.allocated))
                        });
                        self.reset(start);
                    }
                }
                self.last_epoch = Some(input.now);
                self.held = obs.allocated;
                self.clear_pending();
            }
            Some(last) => {
                let elapsed = input.now.saturating_sub(last);
                if input.now >= last && elapsed >= self.config.epoch {
                    self.epoch(elapsed, obs.allocated, held_for_events(obs), input.probe);
                    self.held = obs.allocated;
                    self.last_epoch = Some(input.now);
                    self.clear_pending();
                }
            }
        }
        self.wss = self.wss.clamp_to(input.min, input.max);
        self.wss
    }

    pub fn estimate(&self) -> Pages {
        self.wss
    }

    /// The probe finds demand above the WSS by itself (events raise it), so its ceiling is the
    /// estimate.
    pub fn ceiling(&self) -> Pages {
        self.wss
    }

    pub fn state(&self) -> TwsState {
        self.state
    }

    /// The probe's state for explanations.
    #[inline]
    pub fn note(&self) -> EstimateNote {
        let (phase, cool_down_s) = match self.state {
            TwsState::Fast => (ProbePhase::Fast, None),
            TwsState::CoolDown { remaining } => {
                (ProbePhase::CoolDown, Some(remaining.as_secs_f64()))
            }
            TwsState::Slow => (ProbePhase::Slow, None),
        };
        EstimateNote::WorkingSet {
            wss: self.wss,
            phase,
            cool_down_s,
            blind: self.blind,
            paused: self.paused,
        }
    }

    fn reset(&mut self, committed: Pages) {
        self.state = TwsState::Fast;
        self.cool_down = self.config.cool_down;
        self.quiet_steps = 0;
        self.found = None;
        self.wss = committed;
        self.reset_on = Some(committed);
    }

    fn clear_pending(&mut self) {
        self.pending_events = 0;
        self.pending_seen = false;
    }

    fn epoch(&mut self, elapsed: Duration, allocated: Pages, held: Pages, probe: bool) {
        self.blind = false;
        self.paused = false;
        if let Some(committed) = self.committed.filter(|&c| self.committed_changed(c)) {
            self.reset(committed);
            return;
        }
        let committed = self.committed.or(self.reset_on).unwrap_or(Pages::ZERO);
        let step = |fraction: f64| committed.scale(fraction);
        // Holding less than the WSS: events are paging within room the WSS already gives.
        let short = held + step(self.config.slow_step) < self.wss;
        // ... and still growing into it by at least a SLOW step an epoch: the balloon's lag.
        let growing = short && allocated >= self.held + step(self.config.slow_step);
        if self.pending_events > 0 && !short {
            self.found = Some(self.wss);
            self.wss = Pages(self.wss.0.saturating_add(self.pending_events));
            if self.state == TwsState::Slow && probe {
                // A SLOW step found the working set again: the tenant is busy where it is.
                self.cool_down =
                    (self.cool_down * 2).min(self.config.max_cool_down.max(self.config.cool_down));
            }
            self.quiet_steps = 0;
            self.state = TwsState::CoolDown {
                remaining: self.cool_down,
            };
            return;
        }
        if !self.pending_seen {
            self.blind = true;
            return;
        }
        if !probe {
            self.paused = true;
            return;
        }
        // A balloon moves at a bounded rate: while the tenant still holds more than the WSS
        // plus one step, the last decrease has not taken effect and no event could have
        // shown an overshoot yet, so FAST and SLOW wait instead of stepping blind.
        let lagging = |fraction: f64| allocated > self.wss + step(fraction);
        match self.state {
            TwsState::Fast if lagging(self.config.fast_step) => {}
            TwsState::Slow if lagging(self.config.slow_step) => {}
            TwsState::Fast | TwsState::Slow if growing => {}
            TwsState::Fast => {
                self.step_down(committed, self.config.fast_step, short.then_some(allocated))
            }
            TwsState::CoolDown { remaining } => {
                let remaining = remaining.saturating_sub(elapsed);
                self.state = if remaining.is_zero() {
                    TwsState::Slow
                } else {
                    TwsState::CoolDown { remaining }
                };
            }
            TwsState::Slow => {
                // Steps from above where the set was last found only take back the raise its
                // events made (a cyclic scan refaults far more than the pages missing): quiet
                // by design, they say nothing of a tenant that got less busy.
                if self.found.is_none_or(|f| self.wss <= f) {
                    self.quiet_steps += 1;
                }
                if self.quiet_steps >= 2 {
                    self.cool_down = self.config.cool_down;
                }
                self.step_down(committed, self.config.slow_step, short.then_some(allocated))
            }
        }
    }

    fn committed_changed(&self, committed: Pages) -> bool {
        let Some(base) = self.reset_on else {
            return false;
        };
        if base == Pages::ZERO {
            return committed != Pages::ZERO;
        }
        let change = committed.0.abs_diff(base.0) as f64 / base.0 as f64;
        change > self.config.committed_change
    }

    /// Lowers the WSS by `step` of committed memory, but not below `short_of`, what the tenant
    /// holds when that is less than the WSS: room the tenant does not use goes first, and only
    /// a step from what it holds can show an overshoot.
    fn step_down(&mut self, committed: Pages, step: f64, short_of: Option<Pages>) {
        let lowered = self.wss.saturating_sub(committed.scale(step));
        self.wss = lowered.max(short_of.unwrap_or(Pages::ZERO));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::{TenantId, TenantObservation};

    fn mib(m: u64) -> Pages {
        Pages::from_mib(m)
    }

    /// A probe on a tenant with 2 GiB max and a 100 MiB floor, ticked once a second.
    struct Rig {
        probe: WorkingSetProbe,
        now: Duration,
        min: Pages,
        max: Pages,
        committed: Option<Pages>,
    }

    impl Rig {
        fn new(committed: Option<Pages>) -> Rig {
            let mut rig = Rig {
                probe: WorkingSetProbe::new(WorkingSetConfig::default()),
                now: Duration::ZERO,
                min: mib(100),
                max: mib(2048),
                committed,
            };
            rig.feed(Duration::ZERO, Some(0), Some(0));
            rig
        }

        fn feed(&mut self, after: Duration, swap_ins: Option<u64>, refaults: Option<u64>) -> Pages {
            self.now += after;
            // An ideal balloon: the tenant holds exactly the estimate.
            let mut obs = TenantObservation::new(TenantId(0), self.probe.estimate());
            obs.committed = self.committed;
            obs.swap_ins = swap_ins;
            obs.refaults = refaults;
            self.probe.update(&EstimatorInput {
                now: self.now,
                min: self.min,
                max: self.max,
                obs: &obs,
                probe: true,
            })
        }

        /// One 1 s epoch with this many refaults (and no swap-ins).
        fn epoch(&mut self, refaults: u64) -> Pages {
            self.feed(Duration::from_secs(1), Some(0), Some(refaults))
        }
    }

    /// One update at `now` seconds of a probe on a 2 GiB tenant with 1000 MiB committed that
    /// holds `allocated` and saw `swap_ins` since the last update.
    fn held_feed(probe: &mut WorkingSetProbe, now: u64, allocated: Pages, swap_ins: u64) -> Pages {
        let mut obs = TenantObservation::new(TenantId(0), allocated);
        obs.committed = Some(mib(1000));
        obs.swap_ins = Some(swap_ins);
        obs.refaults = Some(0);
        probe.update(&EstimatorInput {
            now: Duration::from_secs(now),
            min: mib(100),
            max: mib(2048),
            obs: &obs,
            probe: true,
        })
    }

    /// One update at `now` seconds of a real guest of 1 GiB (no committed memory) whose
    /// balloon holds `balloon`, resident `allocated`, that saw `swap_ins`.
    fn guest_feed(
        probe: &mut WorkingSetProbe,
        now: u64,
        balloon: Pages,
        allocated: Pages,
        swap_ins: u64,
        free_unbacked: bool,
    ) -> Pages {
        let mut obs = TenantObservation::new(TenantId(0), allocated);
        obs.levers.balloon = Some(memtide_model::BalloonLever {
            memory: mib(1024),
            size: balloon,
            driver: None,
            free_unbacked,
        });
        obs.swap_ins = Some(swap_ins);
        obs.refaults = Some(0);
        probe.update(&EstimatorInput {
            now: Duration::from_secs(now),
            min: mib(64),
            max: mib(2048),
            obs: &obs,
            probe: true,
        })
    }

    #[test]
    fn a_real_guest_starts_at_its_memory_and_its_swap_ins_count_while_its_balloon_holds_it() {
        for unbacked in [true, false] {
            let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
            // Booting: 140 MiB resident of 1 GiB; the probe starts at the whole guest.
            assert_eq!(
                guest_feed(&mut probe, 0, mib(0), mib(140), 0, unbacked),
                mib(1024)
            );
            // Squeezed to 400 MiB by its balloon, it keeps 30 MiB free (not resident) and
            // pages: with its free memory unbacked, that is the guest paging at the WSS.
            let wss = probe.wss;
            let balloon = mib(1024).saturating_sub(wss);
            let after = guest_feed(
                &mut probe,
                1,
                balloon,
                wss.saturating_sub(mib(30)),
                5_000,
                unbacked,
            );
            if unbacked {
                assert_eq!(after, Pages(wss.0 + 5_000), "the swap-ins raise the WSS");
            } else {
                assert!(
                    after <= wss,
                    "read as paging within room: {after:?} > {wss:?}"
                );
            }
        }
    }

    #[test]
    fn fast_waits_while_the_balloon_has_not_caught_up() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        held_feed(&mut probe, 0, mib(1000), 0);
        assert_eq!(held_feed(&mut probe, 1, mib(1000), 0), mib(950));
        // Still holding 1000 MiB, more than 950 + one 50 MiB step: wait.
        assert_eq!(held_feed(&mut probe, 2, mib(1001), 0), mib(950));
        assert_eq!(probe.state(), TwsState::Fast);
        // The balloon caught up: step again.
        assert_eq!(held_feed(&mut probe, 3, mib(960), 0), mib(900));
    }

    #[test]
    fn events_while_growing_into_the_wss_neither_raise_it_nor_start_a_cool_down() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        held_feed(&mut probe, 0, mib(263), 0);
        // A VM started at 263 MiB, its balloon deflating by 128 MiB a second, faulting.
        for (now, held) in [(1, 391), (2, 519), (3, 647)] {
            assert_eq!(held_feed(&mut probe, now, mib(held), 5_000), mib(1000));
            assert_eq!(probe.state(), TwsState::Fast);
        }
    }

    #[test]
    fn a_step_takes_unused_room_first_and_never_goes_below_what_the_tenant_holds() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        held_feed(&mut probe, 0, mib(300), 0);
        // Holding 300 MiB and no longer growing: FAST steps 50 MiB at a time from 1000.
        assert_eq!(held_feed(&mut probe, 1, mib(300), 0), mib(950));
        for now in 2..=14 {
            held_feed(&mut probe, now, mib(301), 0);
        }
        assert_eq!(probe.estimate(), mib(301));
        // Now it holds its WSS: the next step probes below it, and events count again.
        assert_eq!(held_feed(&mut probe, 15, mib(301), 0), mib(251));
        assert_eq!(
            held_feed(&mut probe, 16, mib(251), 256),
            mib(251) + Pages(256)
        );
        assert!(matches!(probe.state(), TwsState::CoolDown { .. }));
    }

    #[test]
    fn a_tenant_held_below_its_wss_is_probed_down_to_what_it_holds_then_measured() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        held_feed(&mut probe, 0, mib(600), 0);
        // The host cannot give more than 600 MiB; the tenant pages. Its events say nothing
        // while the WSS is above what it holds, so FAST comes down to 600 MiB...
        for now in 1..=8 {
            held_feed(&mut probe, now, mib(600), 1_000);
        }
        assert_eq!(probe.estimate(), mib(600));
        // ... where they count.
        assert_eq!(
            held_feed(&mut probe, 9, mib(600), 1_000),
            mib(600) + Pages(1_000)
        );
    }

    #[test]
    fn starts_fast_at_committed_memory() {
        let rig = Rig::new(Some(mib(1000)));
        assert_eq!(rig.probe.state(), TwsState::Fast);
        assert_eq!(rig.probe.estimate(), mib(1000));
        assert_eq!(rig.probe.ceiling(), mib(1000));
    }

    /// One update of `probe` at `now` seconds: the tenant holds `allocated`, no committed
    /// memory is known, and `refaults` happened; `probe` says whether it may probe.
    fn cgroup_feed(
        probe: &mut WorkingSetProbe,
        now: u64,
        allocated: Pages,
        refaults: u64,
        may_probe: bool,
    ) -> Pages {
        let mut obs = TenantObservation::new(TenantId(0), allocated);
        obs.swap_ins = Some(0);
        obs.refaults = Some(refaults);
        probe.update(&EstimatorInput {
            now: Duration::from_secs(now),
            min: mib(32),
            max: mib(1024),
            obs: &obs,
            probe: may_probe,
        })
    }

    #[test]
    fn starts_at_what_the_tenant_holds_without_committed_memory() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        assert_eq!(cgroup_feed(&mut probe, 0, mib(300), 0, true), mib(300));
        assert_eq!(cgroup_feed(&mut probe, 1, mib(300), 0, true), mib(285));
    }

    #[test]
    fn a_paused_probe_holds_but_still_rises_on_events() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        cgroup_feed(&mut probe, 0, mib(300), 0, false);
        for now in 1..20 {
            assert_eq!(cgroup_feed(&mut probe, now, mib(300), 0, false), mib(300));
        }
        assert!(
            probe.note().to_string().contains("not probing"),
            "{}",
            probe.note()
        );
        assert_eq!(
            cgroup_feed(&mut probe, 20, mib(300), 256, false),
            mib(300) + Pages(256)
        );
        assert_eq!(
            cgroup_feed(&mut probe, 21, mib(300), 0, true),
            mib(300) + Pages(256)
        );
    }

    /// The times (s) at which a SLOW step of a probe on a 300 MiB working set found it again,
    /// each step below the set refaulting `refaults_per_missing` times the pages missing (1:
    /// each missing page once; a cyclic scan refaults many times that).
    fn finds(refaults_per_missing: u64) -> Vec<u64> {
        let config = WorkingSetConfig {
            max_cool_down: Duration::from_secs(64),
            ..WorkingSetConfig::default()
        };
        let mut probe = WorkingSetProbe::new(config);
        let ws = mib(300);
        let mut now = 0;
        let mut held = cgroup_feed(&mut probe, now, ws, 0, true);
        let mut probes_at = Vec::new();
        while now < 400 {
            now += 1;
            let missing = ws.saturating_sub(held).0;
            let before = probe.state();
            held = cgroup_feed(
                &mut probe,
                now,
                held.min(ws),
                missing * refaults_per_missing,
                true,
            );
            if before == TwsState::Slow && missing > 0 {
                probes_at.push(now);
            }
        }
        probes_at
    }

    #[test]
    fn a_tenant_found_busy_again_and_again_is_probed_less_and_less_often() {
        for refaults_per_missing in [1, 4] {
            let probes_at = finds(refaults_per_missing);
            let gaps: Vec<u64> = probes_at.windows(2).map(|w| w[1] - w[0]).collect();
            assert_cool_down_grows(&probes_at, &gaps);
        }
    }

    fn assert_cool_down_grows(probes_at: &[u64], gaps: &[u64]) {
        assert!(gaps.len() >= 3, "{probes_at:?}");
        assert!(
            gaps.windows(2).all(|g| g[1] >= g[0]),
            "gaps between probes never shrink: {gaps:?}"
        );
        assert!(
            *gaps.last().unwrap() >= 60,
            "the cool-down grows to its max: {gaps:?}"
        );
        assert!(*gaps.last().unwrap() <= 70, "{gaps:?}");
    }

    #[test]
    fn a_resumed_probe_starts_at_the_kept_estimate_in_cool_down() {
        let mut probe = WorkingSetProbe::new(WorkingSetConfig::default());
        probe.resume(mib(420));
        assert_eq!(cgroup_feed(&mut probe, 0, mib(500), 0, true), mib(420));
        assert!(matches!(probe.state(), TwsState::CoolDown { .. }));
        for now in 1..=8 {
            assert_eq!(cgroup_feed(&mut probe, now, mib(420), 0, true), mib(420));
        }
        assert_eq!(probe.state(), TwsState::Slow);
    }

    #[test]
    fn fast_steps_down_five_percent_of_committed_per_epoch() {
        let mut rig = Rig::new(Some(mib(1000)));
        assert_eq!(rig.epoch(0), mib(1000) - mib(1000).scale(0.05));
        assert_eq!(rig.epoch(0), mib(1000) - mib(1000).scale(0.05).scale(2.0));
        assert_eq!(rig.probe.state(), TwsState::Fast);
        assert_eq!(rig.probe.note().to_string(), "tws FAST wss=900.0 MiB");
    }

    #[test]
    fn events_raise_wss_by_the_event_count_and_enter_cool_down() {
        let mut rig = Rig::new(Some(mib(1000)));
        let before = rig.epoch(0);
        let after = rig.feed(Duration::from_secs(1), Some(300), Some(200));
        assert_eq!(after, before + Pages(500));
        assert_eq!(
            rig.probe.state(),
            TwsState::CoolDown {
                remaining: Duration::from_secs(8)
            }
        );
        assert!(rig.probe.note().to_string().starts_with("tws COOL_DOWN"));
    }

    #[test]
    fn cool_down_restarts_on_new_events_and_expires_after_eight_seconds() {
        let mut rig = Rig::new(Some(mib(1000)));
        rig.epoch(10);
        for _ in 0..4 {
            rig.epoch(0);
        }
        let held = rig.epoch(5);
        assert!(matches!(rig.probe.state(), TwsState::CoolDown { .. }));
        for _ in 0..7 {
            assert_eq!(rig.epoch(0), held, "cool-down holds the estimate");
            assert!(matches!(rig.probe.state(), TwsState::CoolDown { .. }));
        }
        assert_eq!(rig.epoch(0), held);
        assert_eq!(rig.probe.state(), TwsState::Slow);
    }

    #[test]
    fn slow_steps_down_one_percent_of_committed_per_epoch() {
        let mut rig = Rig::new(Some(mib(1000)));
        rig.epoch(1);
        for _ in 0..8 {
            rig.epoch(0);
        }
        assert_eq!(rig.probe.state(), TwsState::Slow);
        let before = rig.probe.estimate();
        assert_eq!(rig.epoch(0), before - mib(10));
        assert_eq!(rig.epoch(0), before - mib(20));
        assert_eq!(rig.probe.state(), TwsState::Slow);
    }

    #[test]
    fn committed_change_resets_to_fast_at_the_new_committed() {
        let mut rig = Rig::new(Some(mib(1000)));
        rig.epoch(1);
        for _ in 0..8 {
            rig.epoch(0);
        }
        assert_eq!(rig.probe.state(), TwsState::Slow);
        // A 3% change is not significant.
        rig.committed = Some(mib(1030));
        let slow = rig.probe.estimate();
        assert_eq!(rig.epoch(0), slow - mib(1030).scale(0.01));
        assert_eq!(rig.probe.state(), TwsState::Slow);
        // A 20% change is, even with events in the same epoch.
        rig.committed = Some(mib(1200));
        assert_eq!(rig.epoch(7), mib(1200));
        assert_eq!(rig.probe.state(), TwsState::Fast);
        // Later changes are measured against the new committed figure.
        rig.committed = Some(mib(1230));
        assert_eq!(rig.epoch(0), mib(1200) - mib(1230).scale(0.05));
    }

    #[test]
    fn wss_is_bounded_by_the_floor_and_max() {
        let mut rig = Rig::new(Some(mib(1000)));
        for _ in 0..40 {
            assert!(rig.epoch(0) >= mib(100));
        }
        assert_eq!(rig.probe.estimate(), mib(100));
        assert_eq!(rig.epoch(u64::MAX), mib(2048));
        rig.committed = Some(mib(4096));
        assert_eq!(rig.epoch(0), mib(2048));
    }

    #[test]
    fn missing_counters_hold_the_estimate() {
        let mut rig = Rig::new(Some(mib(1000)));
        let start = rig.epoch(0);
        for _ in 0..5 {
            assert_eq!(rig.feed(Duration::from_secs(1), None, None), start);
        }
        assert_eq!(rig.probe.state(), TwsState::Fast);
        assert!(rig.probe.note().to_string().contains("holding"));
        // One counter is enough to probe again.
        assert_eq!(
            rig.feed(Duration::from_secs(1), None, Some(0)),
            start - mib(50)
        );
        assert!(!rig.probe.note().to_string().contains("holding"));
        assert_eq!(
            rig.feed(Duration::from_secs(1), Some(40), None),
            start - mib(50) + Pages(40)
        );
    }

    #[test]
    fn epochs_wait_for_the_epoch_length_without_losing_events() {
        let mut rig = Rig::new(Some(mib(1000)));
        let half = Duration::from_millis(500);
        assert_eq!(rig.feed(half, Some(0), Some(30)), mib(1000));
        assert_eq!(rig.probe.state(), TwsState::Fast);
        // The epoch ends here and counts the events reported half a second earlier.
        assert_eq!(rig.feed(half, Some(0), Some(0)), mib(1000) + Pages(30));
        assert!(matches!(rig.probe.state(), TwsState::CoolDown { .. }));
        // A longer gap counts as one epoch with its whole elapsed time.
        rig.feed(Duration::from_secs(8), Some(0), Some(0));
        assert_eq!(rig.probe.state(), TwsState::Slow);
    }

    #[test]
    fn time_going_backwards_runs_no_epoch() {
        let mut rig = Rig::new(Some(mib(1000)));
        rig.now = Duration::from_secs(100);
        rig.epoch(0);
        let est = rig.probe.estimate();
        rig.now = Duration::ZERO;
        assert_eq!(rig.feed(Duration::ZERO, Some(0), Some(0)), est);
    }

    /// Chiang et al.'s convergence example: a tenant with committed memory 1300 MiB and a
    /// constant working set of 300 MiB that refaults whenever it is given less.
    #[test]
    fn converges_just_above_a_constant_working_set() {
        let mut rig = Rig::new(Some(mib(1300)));
        rig.min = Pages::from_mib_f64(263.3);
        let working_set = mib(300);
        let mut held = rig.probe.estimate();
        let mut history = Vec::new();
        for _ in 0..300 {
            // The tenant holds last tick's estimate; every missing page of its working set
            // faults back in, twice on average, within the tick.
            let refaults = working_set.saturating_sub(held).0 * 2;
            held = rig.epoch(refaults);
            history.push(held);
        }
        let tail = &history[history.len() - 60..];
        let low = tail.iter().min().copied().unwrap_or_default();
        let high = tail.iter().max().copied().unwrap_or_default();
        assert!(low >= working_set.scale(0.95), "dips to {low}");
        assert!(high <= working_set.scale(1.10), "peaks at {high}");
        let mean = tail.iter().map(|p| p.as_mib_f64()).sum::<f64>() / tail.len() as f64;
        assert!((300.0..=330.0).contains(&mean), "mean {mean:.1} MiB");
        // FAST reaches the working set within a few seconds.
        let first_below = history.iter().position(|&p| p < working_set);
        assert!(matches!(first_below, Some(i) if i < 20), "{first_below:?}");
    }
}
