//! The runner proper: the world, the controller and the declared tenants, carrying out changes and ticks.

use crate::change::{Change, Outcome};
use crate::sink::{Sink, TickView};
use memtide_controller::{Attach, Controller, ControllerError, World};
use memtide_model::{Decision, DiskSpec, Pages, TenantId, TenantSpec, WorldEvent};
use std::time::Duration;

/// Where a declared tenant stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Declared, not started.
    Declared,
    /// Admitted and attached: observed and decided for every tick.
    Running,
    /// Started, but the world cannot attach it yet (or it left and may come back): asked
    /// again after every tick.
    Waiting(String),
    /// Refused by admission control or by the world.
    Refused(String),
    /// Stopped (or gone from the world).
    Stopped,
}

/// A declared tenant: what policy needs, where it lives, and where it stands.
#[derive(Clone, Debug)]
pub struct Tenant<P> {
    pub spec: TenantSpec,
    pub placement: P,
    pub status: Status,
}

/// Drives world `W` with one controller.
pub struct Runner<W: World> {
    world: W,
    controller: Controller,
    tick: Duration,
    /// In declaration order (ids increase).
    tenants: Vec<Tenant<W::Placement>>,
    /// The last tick's decision, whose buffers the next step reuses.
    decision: Decision,
}

impl<W: World> Runner<W> {
    /// A runner ticking every `tick`.
    pub fn new(world: W, controller: Controller, tick: Duration) -> Runner<W> {
        Runner {
            world,
            controller,
            tick,
            tenants: Vec::new(),
            decision: Decision::default(),
        }
    }

    pub fn world(&self) -> &W {
        &self.world
    }

    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    pub fn tick_length(&self) -> Duration {
        self.tick
    }

    /// Ticks every `tick` from now on (a reloaded configuration).
    pub fn set_tick_length(&mut self, tick: Duration) {
        self.tick = tick;
    }

    /// Declares a tenant (not started). Its id is `spec.id`, unique and above every id
    /// declared before.
    pub fn declare(&mut self, spec: TenantSpec, placement: W::Placement) {
        debug_assert!(self.tenants.last().is_none_or(|t| t.spec.id < spec.id));
        self.tenants.push(Tenant {
            spec,
            placement,
            status: Status::Declared,
        });
    }

    pub fn tenant(&self, id: TenantId) -> Option<&Tenant<W::Placement>> {
        self.tenants.iter().find(|t| t.spec.id == id)
    }

    pub fn tenants(&self) -> impl Iterator<Item = &Tenant<W::Placement>> {
        self.tenants.iter()
    }

    fn index(&self, id: TenantId) -> Option<usize> {
        self.tenants.iter().position(|t| t.spec.id == id)
    }

    /// Starts tenant `id`: admission control (its estimator resumed from `estimate`, when a
    /// previous run measured one), then the world attaches it (re-adopting with `record`).
    /// A tenant the world cannot attach yet is forgotten by the controller and waits.
    pub fn start(
        &mut self,
        id: TenantId,
        record: Option<&W::Record>,
        estimate: Option<Pages>,
    ) -> Result<Outcome, W::Error> {
        let Some(i) = self.index(id) else {
            return Ok(Outcome::NotRunning);
        };
        let t = &mut self.tenants[i];
        if t.status == Status::Running {
            return Ok(Outcome::Refused(format!(
                "{} is already running",
                t.spec.name
            )));
        }
        if let Err(e) = self.controller.admit_resumed(t.spec.clone(), estimate) {
            let reason = match e {
                ControllerError::Refused(r) => r.to_string(),
                other => other.to_string(),
            };
            t.status = Status::Refused(reason.clone());
            return Ok(Outcome::Refused(reason));
        }
        let attached = self.world.attach(id, &t.spec, &t.placement, record);
        let outcome = match attached {
            Ok(Attach::Attached(how)) => {
                t.status = Status::Running;
                Outcome::Started(how)
            }
            Ok(Attach::Waiting(why)) => {
                t.status = Status::Waiting(why.clone());
                Outcome::Waiting(why)
            }
            Ok(Attach::Refused(why)) => {
                t.status = Status::Refused(why.clone());
                Outcome::Refused(why)
            }
            Err(e) => {
                self.controller.remove(id);
                return Err(e);
            }
        };
        if t.status != Status::Running {
            self.controller.remove(id);
        }
        Ok(outcome)
    }

    /// Carries out `change` at run time `at` and tells `sink` what came of it.
    pub fn change<S: Sink<W>>(
        &mut self,
        at: Duration,
        change: &Change<W::Command>,
        sink: &mut S,
    ) -> Result<Outcome, W::Error> {
        let outcome = self.carry_out(change)?;
        let name = change
            .tenant()
            .and_then(|id| self.tenant(id))
            .map(|t| t.spec.name.as_str());
        sink.changed(at, name, change, &outcome);
        Ok(outcome)
    }

    fn carry_out(&mut self, change: &Change<W::Command>) -> Result<Outcome, W::Error> {
        let running = |r: &Self, id: TenantId| {
            r.index(id)
                .filter(|&i| r.tenants[i].status == Status::Running)
        };
        Ok(match change {
            Change::Start(id) => return self.start(*id, None, None),
            Change::Stop(id) => match running(self, *id) {
                Some(i) => {
                    self.controller.remove(*id);
                    self.tenants[i].status = Status::Stopped;
                    self.world.detach(*id)?;
                    Outcome::Done(format!("{} stops", self.tenants[i].spec.name))
                }
                None => Outcome::NotRunning,
            },
            Change::TaxRate(tax) => {
                self.controller.set_tax_rate(*tax);
                Outcome::Done(format!("tax rate -> {}", tax.value()))
            }
            Change::Tenant {
                id,
                min,
                max,
                shares,
            } => {
                let Some(view) = self.controller.tenant(*id) else {
                    return Ok(Outcome::NotRunning);
                };
                let (min, max, shares) = (
                    min.unwrap_or(view.spec.min),
                    max.unwrap_or(view.spec.max),
                    shares.unwrap_or(view.spec.shares),
                );
                let name = view.spec.name.clone();
                match self.controller.update_tenant(*id, min, max, shares) {
                    Ok(()) => {
                        if let Some(i) = self.index(*id) {
                            let spec = &mut self.tenants[i].spec;
                            (spec.min, spec.max, spec.shares) = (min, max, shares);
                            self.world.retune(*id, spec);
                        }
                        Outcome::Done(format!("{name}: min {min}, max {max}, shares {shares}"))
                    }
                    Err(e) => Outcome::Refused(e.to_string()),
                }
            }
            Change::World { id, command } => match running(self, *id) {
                Some(i) => {
                    let what = self.world.command(*id, command)?;
                    Outcome::Done(format!("{} {what}", self.tenants[i].spec.name))
                }
                None => Outcome::NotRunning,
            },
        })
    }

    /// One tick at run time `at`: observe, decide, apply, let the world run it; tenants that
    /// left are forgotten by the controller (waiting when they may come back); `sink` sees the
    /// tick; then tenants waiting to be attached are tried again.
    pub fn tick<S: Sink<W>>(&mut self, at: Duration, sink: &mut S) -> Result<(), W::Error> {
        let observation = self.world.observe()?;
        let mut decision = std::mem::take(&mut self.decision);
        self.controller.step_into(&observation, &mut decision);
        let applied = self.world.apply(&decision);
        self.world.run(self.tick);
        let events = self.world.drain_events();
        self.forget_gone(&events);
        sink.tick(TickView {
            at,
            world: &self.world,
            controller: &self.controller,
            observation: &observation,
            decision: &decision,
            events: &events,
        });
        self.decision = decision;
        let waiting: Vec<TenantId> = self
            .tenants
            .iter()
            .filter(|t| matches!(t.status, Status::Waiting(_)))
            .map(|t| t.spec.id)
            .collect();
        for id in waiting {
            self.change(at, &Change::Start(id), sink)?;
        }
        applied
    }

    /// Between two ticks (a wall clock): the world's fast work, and what happened in it
    /// (tenants gone then are forgotten as at a tick).
    pub fn between_ticks(&mut self) -> Vec<WorldEvent> {
        self.world.between_ticks();
        let events = self.world.drain_events();
        self.forget_gone(&events);
        events
    }

    /// Forgets in the controller the tenants `events` say are gone: they wait when they may
    /// come back, else they stopped.
    fn forget_gone(&mut self, events: &[WorldEvent]) {
        for event in events {
            if let WorldEvent::Gone {
                id,
                why,
                may_return,
                ..
            } = event
            {
                self.controller.remove(*id);
                if let Some(i) = self.index(*id) {
                    self.tenants[i].status = if *may_return {
                        Status::Waiting(why.clone())
                    } else {
                        Status::Stopped
                    };
                }
            }
        }
    }

    /// Replaces the spec of a tenant that is not running (a reloaded configuration); a tenant
    /// refused before is declared again, to be started anew. False when it is running (change
    /// a running tenant with [`Change::Tenant`]) or unknown.
    pub fn redeclare(&mut self, spec: TenantSpec) -> bool {
        let Some(i) = self.index(spec.id) else {
            return false;
        };
        let t = &mut self.tenants[i];
        if t.status == Status::Running {
            return false;
        }
        if matches!(t.status, Status::Refused(_)) {
            t.status = Status::Declared;
        }
        t.spec = spec;
        true
    }

    /// Changes tenant `id`'s disk weight and latency target, in the controller too when it
    /// runs; false for a tenant not declared.
    pub fn set_disk(&mut self, id: TenantId, disk: Option<DiskSpec>) -> bool {
        let Some(i) = self.index(id) else {
            return false;
        };
        let t = &mut self.tenants[i];
        t.spec.disk = disk;
        if t.status == Status::Running {
            // Running means admitted: the controller knows it.
            let _ = self.controller.set_disk(id, disk);
        }
        true
    }

    /// Forgets tenant `id`: a running one is removed from the controller and detached first.
    pub fn remove(&mut self, id: TenantId) -> Result<(), W::Error> {
        let Some(i) = self.index(id) else {
            return Ok(());
        };
        let t = self.tenants.remove(i);
        if t.status == Status::Running {
            self.controller.remove(id);
            self.world.detach(id)?;
        }
        Ok(())
    }

    /// Detaches every tenant (the run ends); the world's failures by tenant name.
    pub fn shutdown(&mut self) -> Vec<(String, W::Error)> {
        for t in &mut self.tenants {
            if t.status == Status::Running {
                self.controller.remove(t.spec.id);
                t.status = Status::Stopped;
            }
        }
        self.world.detach_all()
    }

    pub fn controller_mut(&mut self) -> &mut Controller {
        &mut self.controller
    }

    pub fn world_mut(&mut self) -> &mut W {
        &mut self.world
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{runner, spec, FakeWorld, Lines};
    use memtide_controller::Joined;

    #[test]
    fn a_started_tenant_is_admitted_attached_and_decided_every_tick() {
        let mut r = runner(FakeWorld::default());
        let mut sink = Lines::default();
        let out = r
            .start(TenantId(0), Some(&"old".to_string()), None)
            .unwrap();
        assert_eq!(out, Outcome::Started(Joined::Adopted));
        assert_eq!(r.tenant(TenantId(0)).unwrap().status, Status::Running);
        assert!(r.controller().tenant(TenantId(0)).is_some());
        r.tick(Duration::ZERO, &mut sink).unwrap();
        assert_eq!(
            r.world().log,
            [
                "attach #0 at a record Some(\"old\")",
                "observe",
                "apply 1",
                "run 1s"
            ]
        );
        assert_eq!(sink.0, ["0s tick: 1 tenants decided"]);
    }

    #[test]
    fn a_tenant_the_world_cannot_take_yet_waits_outside_the_controller() {
        let world = FakeWorld {
            answers: vec![(TenantId(1), Attach::Waiting("no cgroup yet".into()))],
            ..FakeWorld::default()
        };
        let mut r = runner(world);
        assert_eq!(
            r.start(TenantId(1), None, None).unwrap(),
            Outcome::Waiting("no cgroup yet".into())
        );
        assert_eq!(
            r.tenant(TenantId(1)).unwrap().status,
            Status::Waiting("no cgroup yet".into())
        );
        assert!(r.controller().tenant(TenantId(1)).is_none());
    }

    #[test]
    fn admission_refusals_never_reach_the_world() {
        let mut r = runner(FakeWorld::default());
        r.declare(spec(2, 8192), "huge");
        let out = r.start(TenantId(2), None, None).unwrap();
        assert!(matches!(out, Outcome::Refused(_)), "{out:?}");
        assert!(matches!(
            r.tenant(TenantId(2)).unwrap().status,
            Status::Refused(_)
        ));
        assert!(r.world().log.is_empty());
    }

    #[test]
    fn a_world_refusal_leaves_the_controller_without_the_tenant() {
        let world = FakeWorld {
            answers: vec![(TenantId(0), Attach::Refused("kernel does not fit".into()))],
            ..FakeWorld::default()
        };
        let mut r = runner(world);
        assert_eq!(
            r.start(TenantId(0), None, None).unwrap(),
            Outcome::Refused("kernel does not fit".into())
        );
        assert!(r.controller().tenant(TenantId(0)).is_none());
    }

    #[test]
    fn changes_to_tenants_not_running_do_nothing() {
        let mut r = runner(FakeWorld::default());
        let mut sink = Lines::default();
        for change in [
            Change::Stop(TenantId(1)),
            Change::World {
                id: TenantId(1),
                command: "oltp",
            },
            Change::Tenant {
                id: TenantId(1),
                min: None,
                max: None,
                shares: Some(5),
            },
        ] {
            assert_eq!(
                r.change(Duration::ZERO, &change, &mut sink).unwrap(),
                Outcome::NotRunning
            );
        }
        assert!(r.world().log.is_empty());
    }

    #[test]
    fn a_tenant_gone_for_good_stops_and_one_that_may_return_waits_and_is_tried_again() {
        let mut r = runner(FakeWorld::default());
        let mut sink = Lines::default();
        r.start(TenantId(0), None, None).unwrap();
        r.start(TenantId(1), None, None).unwrap();
        for (id, may_return) in [(0, false), (1, true)] {
            r.world.attached.retain(|&i| i != TenantId(id));
            r.world.events.push(WorldEvent::Gone {
                id: TenantId(id),
                name: format!("t{id}"),
                why: "no process left".into(),
                restored: true,
                may_return,
            });
        }
        r.world.answers = vec![(TenantId(1), Attach::Waiting("still empty".into()))];
        r.tick(Duration::ZERO, &mut sink).unwrap();
        assert_eq!(r.tenant(TenantId(0)).unwrap().status, Status::Stopped);
        assert_eq!(
            r.tenant(TenantId(1)).unwrap().status,
            Status::Waiting("still empty".into())
        );
        assert!(r.controller().tenant(TenantId(0)).is_none());
        assert!(r.controller().tenant(TenantId(1)).is_none());
        assert_eq!(
            sink.0,
            [
                "0s tick: 0 tenants decided",
                "0s Some(\"t1\"): Waiting(\"still empty\")"
            ]
        );
        // It comes back: attached at the next tick.
        r.world.answers.clear();
        r.tick(Duration::from_secs(1), &mut sink).unwrap();
        assert_eq!(r.tenant(TenantId(1)).unwrap().status, Status::Running);
    }

    #[test]
    fn a_changed_max_reaches_the_world_and_shutdown_detaches_everyone() {
        let mut r = runner(FakeWorld::default());
        let mut sink = Lines::default();
        r.start(TenantId(0), None, None).unwrap();
        let change = Change::Tenant {
            id: TenantId(0),
            min: None,
            max: Some(Pages::from_mib(512)),
            shares: None,
        };
        r.change(Duration::ZERO, &change, &mut sink).unwrap();
        assert!(r
            .world()
            .log
            .contains(&"retune #0 max 512.0 MiB".to_string()));
        assert!(r.shutdown().is_empty());
        assert_eq!(r.tenant(TenantId(0)).unwrap().status, Status::Stopped);
        assert!(r.controller().tenant(TenantId(0)).is_none());
        assert!(r.world().log.contains(&"detach #0".to_string()));
    }

    #[test]
    fn a_refused_tenant_redeclared_may_start_again_but_a_running_one_is_not_redeclared() {
        let mut r = runner(FakeWorld::default());
        r.declare(spec(2, 8192), "huge");
        assert!(matches!(
            r.start(TenantId(2), None, None).unwrap(),
            Outcome::Refused(_)
        ));
        assert!(r.redeclare(spec(2, 64)));
        assert_eq!(r.tenant(TenantId(2)).unwrap().status, Status::Declared);
        assert_eq!(
            r.start(TenantId(2), None, None).unwrap(),
            Outcome::Started(Joined::Adopted)
        );
        assert!(!r.redeclare(spec(2, 32)));
    }
}
