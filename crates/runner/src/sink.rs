//! Where a run's ticks and changes go: the simulator's recorder, the daemon's publisher.

use crate::change::{Change, Outcome};
use memtide_controller::{Controller, World};
use memtide_model::{Decision, HostObservation, WorldEvent};
use std::time::Duration;

/// One tick as it happened: the observation, the decision and the world after it ran.
pub struct TickView<'a, W> {
    /// Run time at the start of the tick.
    pub at: Duration,
    pub world: &'a W,
    pub controller: &'a Controller,
    pub observation: &'a HostObservation,
    pub decision: &'a Decision,
    /// What happened in the world during the tick (limits written, tenants gone …).
    pub events: &'a [WorldEvent],
}

/// Receives a run as it goes.
pub trait Sink<W: World> {
    /// After each tick (the world has run it).
    fn tick(&mut self, tick: TickView<'_, W>);

    /// After each change, with the name of the tenant it concerned.
    fn changed(
        &mut self,
        at: Duration,
        tenant: Option<&str>,
        change: &Change<W::Command>,
        outcome: &Outcome,
    );
}
