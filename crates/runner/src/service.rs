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
use memtide_model::{Bytes, TaxRate, WorldEvent};
use serde::Serialize;
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// What a service's driver plugs into the loop: where ticks and changes go (its [`Sink`]),
/// when the run ends, and what it does around ticks. Every hook but `stop` and `unsaved`
/// does nothing by default.
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
            request::Change::TaxRate(t) => {
                let tax = TaxRate::new(*t).map_err(|e| Refusal::Conflict(e.to_string()))?;
                self.runner
                    .change(at, &Change::TaxRate(tax), driver)
                    .map_err(conflict)?;
                self.changes.tax_rate = Some(tax.value());
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
