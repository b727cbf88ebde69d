//! A world for the runner's tests: it logs what it is asked and holds every tenant at 100 MiB; and a sink that keeps what it is told as lines.

use crate::change::{Change, Outcome};
use crate::runner::Runner;
use crate::sink::{Sink, TickView};
use memtide_controller::{Attach, Controller, ControllerConfig, Host, Joined, World};
use memtide_model::{
    Decision, HostObservation, Pages, TenantId, TenantObservation, TenantSpec, WorldEvent,
};
use std::time::Duration;

/// A world that logs what it is asked, holds each attached tenant at 100 MiB, answers
/// `attach` from `answers` by tenant id (`Attached` when not set), and reports `events` at
/// the next tick and `between_events` at its first work between ticks.
#[derive(Default)]
pub(crate) struct FakeWorld {
    pub(crate) log: Vec<String>,
    pub(crate) attached: Vec<TenantId>,
    pub(crate) answers: Vec<(TenantId, Attach)>,
    pub(crate) events: Vec<WorldEvent>,
    pub(crate) between_events: Vec<WorldEvent>,
}

#[derive(Debug, thiserror::Error)]
#[error("fake world failed")]
pub(crate) struct FakeError;

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
            sharing: None,
            remapping: None,
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
    type Done = String;
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
            .map_or(Attach::Attached(Joined::Adopted), |(_, a)| a.clone());
        if answer == Attach::Attached(Joined::Adopted) {
            self.attached.push(id);
        }
        Ok(answer)
    }
    fn detach(&mut self, id: TenantId) -> Result<(), FakeError> {
        self.log.push(format!("detach {id}"));
        self.attached.retain(|&i| i != id);
        Ok(())
    }
    fn retune(&mut self, id: TenantId, spec: &TenantSpec) {
        self.log.push(format!("retune {id} max {}", spec.max));
    }
    fn run(&mut self, tick: Duration) {
        self.log.push(format!("run {}s", tick.as_secs()));
    }
    fn between_ticks(&mut self) {
        self.log.push("between".into());
        self.events.append(&mut self.between_events);
    }
    fn drain_events(&mut self) -> Vec<WorldEvent> {
        std::mem::take(&mut self.events)
    }
    fn command(&mut self, id: TenantId, c: &&'static str) -> Result<String, FakeError> {
        self.log.push(format!("command {id} {c}"));
        Ok(format!("does {c}"))
    }
    fn records(&self) -> Vec<String> {
        self.attached
            .iter()
            .map(|id| format!("record of {id}"))
            .collect()
    }
    fn restore(&mut self, record: &String) -> Result<(), FakeError> {
        self.log.push(format!("restore {record}"));
        Ok(())
    }
    fn detach_all(&mut self) -> Vec<(String, FakeError)> {
        for id in std::mem::take(&mut self.attached) {
            self.log.push(format!("detach {id}"));
        }
        Vec::new()
    }
}

/// Keeps what it is told as lines.
#[derive(Default)]
pub(crate) struct Lines(pub(crate) Vec<String>);

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

pub(crate) fn spec(id: u32, min_mib: u64) -> TenantSpec {
    TenantSpec::new(
        TenantId(id),
        format!("t{id}"),
        Pages::from_mib(min_mib),
        Pages::from_mib(1024),
    )
}

pub(crate) fn runner(world: FakeWorld) -> Runner<FakeWorld> {
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
