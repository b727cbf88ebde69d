//! A runner on a clock: the one tick loop that `memtide sim` runs on a virtual clock and `memtide daemon` on the wall clock, with its inbox (a script's changes as they fall due, requests from an API as they arrive) and its state file.
//!
//! A [`Service`] owns the [`Runner`], the [`Clock`], the inbox and the [`StateSaver`]; its
//! [`Driver`] (the simulator's recorder, the daemon) is the [`Sink`] of every tick and change
//! and says when to stop and reload. The loop, once per tick:
//!
//! 1. stop when the driver says so; carry out a reload the driver has pending;
//! 2. the changes due (the script's by now, the API's that arrived), then the tick (the driver
//!    sees it before, as it happens and after), then the state file when due, then the
//!    changes that arrived meanwhile;
//! 3. wait for the next tick, `tick` after the last one was due (right away when late). On a
//!    wall clock the wait is cut in slices: before each, stop or reload end it, the API's
//!    requests are answered and the world does its work between ticks. A virtual clock jumps.

use crate::change::{Change, Outcome};
use crate::clock::Clock;
use crate::request::{self, Refusal, Request};
use crate::runner::Runner;
use crate::saver::StateSaver;
use crate::script::Script;
use crate::sink::Sink;
use crate::state_file::{ApiChanges, StateError, TenantChange};
use memtide_controller::World;
use memtide_model::{Bytes, WorldEvent};
use serde::Serialize;
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// What a service's driver plugs into the loop: where ticks and changes go (its [`Sink`]),
/// when the run ends, and what it does around ticks. Only `stop` and `unsaved` must be
/// written; the other hooks do nothing by default (`ticked` passes the tick's error on).
pub trait Driver<W: World>: Sink<W> {
    /// True when the run ends: asked before every tick and every slice of a wait.
    fn stop(&self) -> bool;

    /// True while a reload waits: it ends a wall clock's wait at once, and
    /// [`reload`](Driver::reload) runs before the next tick.
    fn reload_pending(&self) -> bool {
        false
    }

    /// Carries out the pending reload (and clears it), with the whole service at hand.
    fn reload(&mut self, _service: &mut Service<W>) {}

    /// Just before a tick.
    fn ticking(&mut self, _runner: &Runner<W>) {}

    /// Just after a tick, with what came of it. The error returned ends the run: by default
    /// the tick's own; a driver that keeps running returns `Ok`.
    fn ticked(
        &mut self,
        _runner: &Runner<W>,
        result: Result<(), W::Error>,
    ) -> Result<(), W::Error> {
        result
    }

    /// What happened in the world between two ticks (a wall clock only), when anything did.
    fn between(&mut self, _runner: &Runner<W>, _events: Vec<WorldEvent>) {}

    /// A request was answered (`result` is what its sender is told).
    fn answered(
        &mut self,
        _runner: &Runner<W>,
        _change: &request::Change,
        _result: &Result<(), Refusal>,
    ) {
    }

    /// The state file could not be written after a tick; the run goes on.
    fn unsaved(&mut self, error: StateError);
}

/// A runner on a clock, with its inbox and its state file.
pub struct Service<W: World> {
    runner: Runner<W>,
    clock: Box<dyn Clock>,
    script: Script<W::Command>,
    requests: Option<Receiver<Request>>,
    /// What the requests changed since start (kept in the state file).
    changes: ApiChanges,
    /// `None`: no state file (the simulator, a dry run).
    state: Option<StateSaver<W::Record>>,
}

impl<W: World> Service<W>
where
    W::Record: Serialize,
{
    /// `runner` on `clock`, with no changes to make and no state file.
    pub fn new(runner: Runner<W>, clock: impl Clock + 'static) -> Service<W> {
        Service {
            runner,
            clock: Box::new(clock),
            script: Script::default(),
            requests: None,
            changes: ApiChanges::default(),
            state: None,
        }
    }

    /// Carries out `script`'s changes as they fall due.
    pub fn with_script(mut self, script: Script<W::Command>) -> Service<W> {
        self.script = script;
        self
    }

    /// Answers the requests sent to `requests` between ticks.
    pub fn with_requests(mut self, requests: Receiver<Request>) -> Service<W> {
        self.requests = Some(requests);
        self
    }

    /// Keeps a state file through `saver`.
    pub fn with_state(mut self, saver: StateSaver<W::Record>) -> Service<W> {
        self.state = Some(saver);
        self
    }

    pub fn runner(&self) -> &Runner<W> {
        &self.runner
    }

    pub fn runner_mut(&mut self) -> &mut Runner<W> {
        &mut self.runner
    }

    /// Run time on the service's clock.
    pub fn now(&self) -> Duration {
        self.clock.now()
    }

    /// What requests changed since start, or since the driver last replaced them (a restart
    /// takes them from the state file; a reloaded configuration clears them).
    pub fn changes(&self) -> &ApiChanges {
        &self.changes
    }

    pub fn changes_mut(&mut self) -> &mut ApiChanges {
        &mut self.changes
    }

    /// Writes the state file when due, or now when `force`d (nothing without one).
    pub fn save_state(&mut self, force: bool) -> Result<(), StateError> {
        let now = self.clock.now();
        match &mut self.state {
            Some(saver) => saver.save(&self.runner, &self.changes, now, force),
            None => Ok(()),
        }
    }

    /// Removes the state file (a clean exit; nothing without one).
    pub fn remove_state(&mut self) -> Result<(), StateError> {
        match &mut self.state {
            Some(saver) => saver.remove(),
            None => Ok(()),
        }
    }

    /// Ticks until `driver` says stop (see the module's doc). Errors are the world's: those
    /// of a script's change, and those of a tick that `driver` passes on.
    pub fn serve<D: Driver<W>>(&mut self, driver: &mut D) -> Result<(), W::Error> {
        let mut next = self.clock.now();
        while !driver.stop() {
            if driver.reload_pending() {
                driver.reload(self);
            }
            self.take_changes(driver)?;
            self.tick(driver)?;
            self.take_changes(driver)?;
            next += self.runner.tick_length();
            let now = self.clock.now();
            if next < now {
                next = now;
            }
            self.wait(next, driver)?;
        }
        Ok(())
    }

    /// One tick at the clock's time, seen by `driver` around it, then the state file.
    fn tick<D: Driver<W>>(&mut self, driver: &mut D) -> Result<(), W::Error> {
        driver.ticking(&self.runner);
        let result = self.runner.tick(self.clock.now(), driver);
        driver.ticked(&self.runner, result)?;
        if let Err(e) = self.save_state(false) {
            driver.unsaved(e);
        }
        Ok(())
    }

    /// Waits until run time `until`: a virtual clock at once; a wall clock in slices, each
    /// after the requests that arrived and the world's work between ticks, cut short by a
    /// stop or a reload.
    fn wait<D: Driver<W>>(&mut self, until: Duration, driver: &mut D) -> Result<(), W::Error> {
        let Some(slice) = self.clock.slice() else {
            self.clock.sleep_until(until);
            return Ok(());
        };
        while !driver.stop() && !driver.reload_pending() && self.clock.now() < until {
            self.take_changes(driver)?;
            let events = self.runner.between_ticks();
            if !events.is_empty() {
                driver.between(&self.runner, events);
            }
            let now = self.clock.now();
            self.clock.sleep_until(until.min(now + slice));
        }
        Ok(())
    }

    /// Carries out the script's changes due by now, then answers the requests that arrived.
    fn take_changes<D: Driver<W>>(&mut self, driver: &mut D) -> Result<(), W::Error> {
        let now = self.clock.now();
        while let Some(change) = self.script.due(now) {
            self.runner.change(now, change, driver)?;
        }
        while let Some(request) = self.requests.as_ref().and_then(|r| r.try_recv().ok()) {
            let result = self.carry_out(&request.change, driver);
            driver.answered(&self.runner, &request.change, &result);
            let _ = request.reply.send(result);
        }
        Ok(())
    }

    /// Carries out a request through the runner and records what it changed.
    fn carry_out<D: Driver<W>>(
        &mut self,
        change: &request::Change,
        driver: &mut D,
    ) -> Result<(), Refusal> {
        let at = self.clock.now();
        let conflict = |e: W::Error| Refusal::Conflict(e.to_string());
        match change {
            request::Change::TaxRate(tax) => {
                self.runner
                    .change(at, &Change::TaxRate(*tax), driver)
                    .map_err(conflict)?;
                self.changes.tax_rate = Some(*tax);
                Ok(())
            }
            request::Change::Tenant {
                name,
                min_bytes,
                max_bytes,
                shares,
            } => {
                let unknown = || Refusal::UnknownTenant(name.clone());
                let id = self
                    .runner
                    .tenants()
                    .find(|t| &t.spec.name == name)
                    .ok_or_else(unknown)?
                    .spec
                    .id;
                let change = Change::Tenant {
                    id,
                    min: min_bytes.map(|b| Bytes(b).to_pages_ceil()),
                    max: max_bytes.map(|b| Bytes(b).to_pages_floor()),
                    shares: *shares,
                };
                match self.runner.change(at, &change, driver).map_err(conflict)? {
                    Outcome::Done(_) => {}
                    Outcome::Refused(why) => return Err(Refusal::Conflict(why)),
                    _ => return Err(unknown()),
                }
                let spec = &self.runner.tenant(id).expect("changed, so declared").spec;
                let change = TenantChange {
                    min_bytes: Some(spec.min.to_bytes().0),
                    max_bytes: Some(spec.max.to_bytes().0),
                    shares: Some(spec.shares),
                };
                self.changes.tenants.insert(name.clone(), change);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;
    use crate::fake::{runner, FakeWorld};
    use crate::runner::Status;
    use crate::sink::TickView;
    use crate::state_file::{self, StateFile};
    use memtide_model::TaxRate;
    use memtide_model::{Pages, TenantId};
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::mpsc;

    /// A wall clock that sleeps at once: its time is shared with the test's driver.
    struct FakeWallClock(Rc<Cell<Duration>>);

    impl Clock for FakeWallClock {
        fn now(&self) -> Duration {
            self.0.get()
        }
        fn sleep_until(&mut self, at: Duration) {
            self.0.set(self.0.get().max(at));
        }
        fn slice(&self) -> Option<Duration> {
            Some(ms(250))
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Keeps what it is told as lines (times in ms), stops after `ticks` ticks, asks for a
    /// reload at the first work between ticks when told to, and can make its first tick last
    /// `late` on the shared clock.
    #[derive(Default)]
    struct Lines {
        lines: Vec<String>,
        ticks: u32,
        clock: Rc<Cell<Duration>>,
        reload_between: bool,
        reload: bool,
        late: Option<Duration>,
    }

    impl Sink<FakeWorld> for Lines {
        fn tick(&mut self, t: TickView<'_, FakeWorld>) {
            self.lines.push(format!(
                "{}ms tick: {} decided",
                t.at.as_millis(),
                t.decision.actions.len()
            ));
            self.ticks -= 1;
            if let Some(late) = self.late.take() {
                self.clock.set(self.clock.get() + late);
            }
        }
        fn changed(
            &mut self,
            at: Duration,
            tenant: Option<&str>,
            _change: &Change<&'static str>,
            outcome: &Outcome,
        ) {
            self.lines
                .push(format!("{}ms {tenant:?}: {outcome:?}", at.as_millis()));
        }
    }

    impl Driver<FakeWorld> for Lines {
        fn stop(&self) -> bool {
            self.ticks == 0
        }
        fn reload_pending(&self) -> bool {
            self.reload
        }
        fn reload(&mut self, service: &mut Service<FakeWorld>) {
            self.reload = false;
            self.lines
                .push(format!("{}ms reload", service.now().as_millis()));
        }
        fn between(&mut self, _runner: &Runner<FakeWorld>, events: Vec<WorldEvent>) {
            self.lines.push(format!("between: {events:?}"));
            self.reload |= std::mem::take(&mut self.reload_between);
        }
        fn answered(
            &mut self,
            _runner: &Runner<FakeWorld>,
            change: &request::Change,
            result: &Result<(), Refusal>,
        ) {
            self.lines.push(format!("answered {change}: {result:?}"));
        }
        fn unsaved(&mut self, error: StateError) {
            self.lines.push(format!("unsaved: {error}"));
        }
    }

    /// The world's work between ticks, as it logged it.
    fn betweens(service: &Service<FakeWorld>) -> usize {
        let log = &service.runner().world().log;
        log.iter().filter(|l| *l == "between").count()
    }

    #[test]
    fn a_script_runs_its_changes_in_order_before_each_tick_on_a_virtual_clock() {
        let s = |n| Duration::from_secs(n);
        let script = Script::new(vec![
            (s(0), Change::Start(TenantId(0))),
            (s(1), Change::Start(TenantId(1))),
            (
                s(1),
                Change::World {
                    id: TenantId(1),
                    command: "oltp",
                },
            ),
            (s(2), Change::TaxRate(TaxRate::new(0.5).unwrap())),
            (
                s(2),
                Change::Tenant {
                    id: TenantId(0),
                    min: Some(Pages::from_mib(128)),
                    max: None,
                    shares: None,
                },
            ),
            (s(2), Change::Stop(TenantId(1))),
            (s(3), Change::Stop(TenantId(0))),
        ]);
        let mut service =
            Service::new(runner(FakeWorld::default()), VirtualClock::default()).with_script(script);
        let mut driver = Lines {
            ticks: 3,
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        assert_eq!(
            driver.lines,
            [
                "0ms Some(\"t0\"): Started(Adopted)",
                "0ms tick: 1 decided",
                "1000ms Some(\"t1\"): Started(Adopted)",
                "1000ms Some(\"t1\"): Done(\"t1 does oltp\")",
                "1000ms tick: 2 decided",
                "2000ms None: Done(\"tax rate -> 0.5\")",
                "2000ms Some(\"t0\"): Done(\"t0: min 128.0 MiB, max 1024.0 MiB, shares 1000\")",
                "2000ms Some(\"t1\"): Done(\"t1 stops\")",
                "2000ms tick: 1 decided",
            ],
            "a change due after the last tick is not carried out"
        );
        let r = service.runner();
        assert_eq!(
            r.tenant(TenantId(0)).unwrap().spec.min,
            Pages::from_mib(128)
        );
        assert_eq!(r.tenant(TenantId(1)).unwrap().status, Status::Stopped);
        assert!(r.world().log.contains(&"detach #1".to_string()));
        assert_eq!(
            betweens(&service),
            0,
            "no time passes between virtual ticks"
        );
        assert_eq!(service.now(), Duration::from_secs(3));
    }

    #[test]
    fn on_a_wall_clock_ticks_come_one_tick_apart_and_the_world_works_between_them_in_slices() {
        let clock = Rc::new(Cell::new(Duration::ZERO));
        let mut service = Service::new(
            runner(FakeWorld::default()),
            FakeWallClock(Rc::clone(&clock)),
        );
        let mut driver = Lines {
            ticks: 3,
            clock,
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        assert_eq!(
            driver.lines,
            [
                "0ms tick: 0 decided",
                "1000ms tick: 0 decided",
                "2000ms tick: 0 decided"
            ]
        );
        // 0, 250, 500 and 750 ms after each of the first two ticks; none after the last.
        assert_eq!(betweens(&service), 8);
        assert_eq!(service.now(), ms(2000));
    }

    #[test]
    fn a_late_tick_is_followed_by_the_next_at_once_and_then_one_tick_apart() {
        let clock = Rc::new(Cell::new(Duration::ZERO));
        let mut service = Service::new(
            runner(FakeWorld::default()),
            FakeWallClock(Rc::clone(&clock)),
        );
        let mut driver = Lines {
            ticks: 3,
            clock,
            late: Some(ms(2500)),
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        assert_eq!(
            driver.lines,
            [
                "0ms tick: 0 decided",
                "2500ms tick: 0 decided",
                "3500ms tick: 0 decided"
            ]
        );
    }

    #[test]
    fn a_reload_cuts_the_wait_short_and_runs_before_a_tick_at_once() {
        let clock = Rc::new(Cell::new(Duration::ZERO));
        let world = FakeWorld {
            between_events: vec![WorldEvent::Rescued {
                id: TenantId(0),
                from: Pages::from_mib(1),
                to: Pages::from_mib(2),
                stall: memtide_model::Stall::OutOfMemory,
            }],
            ..FakeWorld::default()
        };
        let mut service = Service::new(runner(world), FakeWallClock(Rc::clone(&clock)));
        let mut driver = Lines {
            ticks: 3,
            clock,
            reload_between: true,
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        assert_eq!(
            driver.lines,
            [
                "0ms tick: 0 decided",
                "between: [Rescued { id: TenantId(0), from: Pages(256), to: Pages(512), stall: OutOfMemory }]",
                "250ms reload",
                "250ms tick: 0 decided",
                "2000ms tick: 0 decided",
            ]
        );
    }

    #[test]
    fn requests_are_carried_out_by_tenant_name_recorded_and_answered_before_the_next_tick() {
        let (sender, requests) = mpsc::channel();
        let mut service = Service::new(runner(FakeWorld::default()), VirtualClock::default())
            .with_requests(requests);
        service.runner_mut().start(TenantId(0), None, None).unwrap();
        let ask = |change| {
            let (reply, answer) = mpsc::channel();
            sender.send(Request { change, reply }).unwrap();
            answer
        };
        let tenant = |name: &str, min_bytes, shares| request::Change::Tenant {
            name: name.to_string(),
            min_bytes,
            max_bytes: None,
            shares,
        };
        let answers = [
            ask(request::Change::TaxRate(TaxRate::new(0.5).unwrap())),
            ask(tenant("t0", Some((100 << 20) + 1), Some(2000))),
            ask(tenant("t0", Some(2 << 30), None)),
            ask(tenant("t1", None, Some(1))),
            ask(tenant("zz", None, Some(1))),
        ];
        let mut driver = Lines {
            ticks: 1,
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        let replies: Vec<_> = answers.iter().map(|a| a.try_recv().unwrap()).collect();
        let conflict = |why: &str| Err(Refusal::Conflict(why.into()));
        assert_eq!(
            replies,
            [
                Ok(()),
                Ok(()),
                conflict("tenant t0: min 2048.0 MiB is above max 1024.0 MiB"),
                Err(Refusal::UnknownTenant("t1".into())),
                Err(Refusal::UnknownTenant("zz".into())),
            ],
            "t1 is declared but not running"
        );
        assert_eq!(
            driver.lines,
            [
                "0ms None: Done(\"tax rate -> 0.5\")",
                "answered tax_rate=0.5: Ok(())",
                "0ms Some(\"t0\"): Done(\"t0: min 100.0 MiB, max 1024.0 MiB, shares 2000\")",
                "answered tenant \"t0\": min=100.0 MiB shares=2000: Ok(())",
                "0ms Some(\"t0\"): Refused(\"tenant t0: min 2048.0 MiB is above max 1024.0 MiB\")",
                "answered tenant \"t0\": min=2048.0 MiB: Err(Conflict(\"tenant t0: min 2048.0 MiB \
                 is above max 1024.0 MiB\"))",
                "0ms Some(\"t1\"): NotRunning",
                "answered tenant \"t1\": shares=1: Err(UnknownTenant(\"t1\"))",
                "answered tenant \"zz\": shares=1: Err(UnknownTenant(\"zz\"))",
                "0ms tick: 1 decided",
            ]
        );
        // What the requests changed, for the state file: the tenant's min rounded up to a page.
        assert_eq!(service.changes().tax_rate, TaxRate::new(0.5).ok());
        assert_eq!(
            service.changes().tenants["t0"],
            TenantChange {
                min_bytes: Some((100 << 20) + 4096),
                max_bytes: Some(1 << 30),
                shares: Some(2000),
            }
        );
    }

    #[test]
    fn the_state_file_is_written_after_a_tick_and_a_failure_to_write_it_goes_to_the_driver() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut service = Service::new(runner(FakeWorld::default()), VirtualClock::default())
            .with_state(StateSaver::new(path.clone(), "fake"));
        service.runner_mut().start(TenantId(0), None, None).unwrap();
        let mut driver = Lines {
            ticks: 1,
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        let state: StateFile<String> = state_file::load(&path).unwrap().unwrap();
        assert_eq!(
            (state.hierarchy.as_str(), &state.tenants[..]),
            ("fake", &["record of #0".to_string()][..])
        );
        service.remove_state().unwrap();
        assert!(!path.exists());

        let blocked = dir.path().join("a file");
        std::fs::write(&blocked, "").unwrap();
        let mut service = Service::new(runner(FakeWorld::default()), VirtualClock::default())
            .with_state(StateSaver::new(blocked.join("state.json"), "fake"));
        let mut driver = Lines {
            ticks: 2,
            ..Lines::default()
        };
        service.serve(&mut driver).unwrap();
        assert!(
            driver.lines[1].starts_with("unsaved: state file"),
            "{:?}",
            driver.lines
        );
        assert_eq!(driver.lines.len(), 4, "the run goes on: {:?}", driver.lines);
    }
}
