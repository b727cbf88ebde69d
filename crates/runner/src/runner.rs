//! The runner proper: the world, the controller and the declared tenants, carrying out changes and ticks.

use crate::change::{Change, Outcome};
use crate::sink::{Sink, TickView};
use memtide_controller::{Attach, Controller, ControllerError, World};
use memtide_model::{Pages, TenantId, TenantSpec};
use std::time::Duration;

/// Where a declared tenant stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Declared, not started.
    Declared,
    /// Admitted and attached: observed and decided for every tick.
    Running,
    /// Started, but the world cannot attach it yet (asked again by [`Runner::retry_waiting`]).
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
}

impl<W: World> Runner<W> {
    /// A runner ticking every `tick`.
    pub fn new(world: W, controller: Controller, tick: Duration) -> Runner<W> {
        Runner {
            world,
            controller,
            tick,
            tenants: Vec::new(),
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
            Ok(Attach::Attached) => {
                t.status = Status::Running;
                Outcome::Done(format!("{} starts", t.spec.name))
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

    /// One tick at run time `at`: observe, decide, apply, let the world run it, tell `sink`.
    pub fn tick<S: Sink<W>>(&mut self, at: Duration, sink: &mut S) -> Result<(), W::Error> {
        let observation = self.world.observe()?;
        let decision = self.controller.step(&observation);
        self.world.apply(&decision)?;
        self.world.run(self.tick);
        sink.tick(TickView {
            at,
            world: &self.world,
            controller: &self.controller,
            observation: &observation,
            decision: &decision,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Script;
    use memtide_controller::{ControllerConfig, Host};
    use memtide_model::{Decision, EstimatorConfig, HostObservation, TaxRate, TenantObservation};

    /// A world that logs what it is asked, holds each attached tenant at 100 MiB, and answers
    /// `attach` from `answers` by tenant id (`Attached` when not set).
    #[derive(Default)]
    struct FakeWorld {
        log: Vec<String>,
        attached: Vec<TenantId>,
        answers: Vec<(TenantId, Attach)>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("fake world failed")]
    struct FakeError;

    impl Host for FakeWorld {
        type Error = FakeError;
        fn observe(&mut self) -> Result<HostObservation, FakeError> {
            self.log.push("observe".into());
            Ok(HostObservation {
                now: Duration::ZERO,
                machine: Pages::from_mib(4096),
                free: Pages::from_mib(2048),
                host_swap_total: Pages::ZERO,
                host_swap_used: Pages::ZERO,
                pressure: None,
                tenants: self
                    .attached
                    .iter()
                    .map(|&id| TenantObservation::new(id, Pages::from_mib(100)))
                    .collect(),
            })
        }
        fn apply(&mut self, d: &Decision) -> Result<(), FakeError> {
            self.log.push(format!("apply {}", d.actions.len()));
            Ok(())
        }
    }

    impl World for FakeWorld {
        type Placement = &'static str;
        type Record = String;
        type Command = &'static str;
        fn attach(
            &mut self,
            id: TenantId,
            _spec: &TenantSpec,
            placement: &&'static str,
            record: Option<&String>,
        ) -> Result<Attach, FakeError> {
            self.log
                .push(format!("attach {id} at {placement} record {record:?}"));
            let answer = self
                .answers
                .iter()
                .find(|(i, _)| *i == id)
                .map_or(Attach::Attached, |(_, a)| a.clone());
            if answer == Attach::Attached {
                self.attached.push(id);
            }
            Ok(answer)
        }
        fn detach(&mut self, id: TenantId) -> Result<(), FakeError> {
            self.log.push(format!("detach {id}"));
            self.attached.retain(|&i| i != id);
            Ok(())
        }
        fn run(&mut self, tick: Duration) {
            self.log.push(format!("run {}s", tick.as_secs()));
        }
        fn command(&mut self, id: TenantId, c: &&'static str) -> Result<String, FakeError> {
            self.log.push(format!("command {id} {c}"));
            Ok(format!("does {c}"))
        }
        fn record(&self, id: TenantId) -> Option<String> {
            Some(format!("record of {id}"))
        }
    }

    /// Keeps what it is told as lines.
    #[derive(Default)]
    struct Lines(Vec<String>);

    impl Sink<FakeWorld> for Lines {
        fn tick(&mut self, t: TickView<'_, FakeWorld>) {
            self.0.push(format!(
                "{}s tick: {} tenants decided",
                t.at.as_secs(),
                t.decision.actions.len()
            ));
        }
        fn changed(
            &mut self,
            at: Duration,
            tenant: Option<&str>,
            _change: &Change<&'static str>,
            outcome: &Outcome,
        ) {
            self.0
                .push(format!("{}s {tenant:?}: {outcome:?}", at.as_secs()));
        }
    }

    fn spec(id: u32, min_mib: u64) -> TenantSpec {
        TenantSpec {
            id: TenantId(id),
            name: format!("t{id}"),
            min: Pages::from_mib(min_mib),
            max: Pages::from_mib(1024),
            shares: 1000,
            overhead: Pages::ZERO,
            estimator: EstimatorConfig::Committed,
            cap_at_estimate: false,
        }
    }

    fn runner(world: FakeWorld) -> Runner<FakeWorld> {
        let controller = Controller::new(
            ControllerConfig::default(),
            Pages::from_mib(4096),
            Pages::from_mib(4096),
        )
        .unwrap();
        let mut r = Runner::new(world, controller, Duration::from_secs(1));
        r.declare(spec(0, 64), "a");
        r.declare(spec(1, 64), "b");
        r
    }

    #[test]
    fn a_started_tenant_is_admitted_attached_and_decided_every_tick() {
        let mut r = runner(FakeWorld::default());
        let mut sink = Lines::default();
        let out = r
            .start(TenantId(0), Some(&"old".to_string()), None)
            .unwrap();
        assert_eq!(out, Outcome::Done("t0 starts".into()));
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
    fn a_script_runs_its_changes_in_order_before_each_tick() {
        let mut r = runner(FakeWorld::default());
        let mut sink = Lines::default();
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
            (s(9), Change::Stop(TenantId(0))),
        ]);
        script.run(&mut r, 3, &mut sink).unwrap();
        assert_eq!(
            sink.0,
            [
                "0s Some(\"t0\"): Done(\"t0 starts\")",
                "0s tick: 1 tenants decided",
                "1s Some(\"t1\"): Done(\"t1 starts\")",
                "1s Some(\"t1\"): Done(\"t1 does oltp\")",
                "1s tick: 2 tenants decided",
                "2s None: Done(\"tax rate -> 0.5\")",
                "2s Some(\"t0\"): Done(\"t0: min 128.0 MiB, max 1024.0 MiB, shares 1000\")",
                "2s Some(\"t1\"): Done(\"t1 stops\")",
                "2s tick: 1 tenants decided",
            ]
        );
        assert_eq!(
            r.tenant(TenantId(0)).unwrap().spec.min,
            Pages::from_mib(128)
        );
        assert_eq!(r.tenant(TenantId(1)).unwrap().status, Status::Stopped);
        assert!(r.world().log.contains(&"detach #1".to_string()));
    }
}
