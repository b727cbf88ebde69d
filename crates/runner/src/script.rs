//! Changes at times: a scenario's timeline, run on a virtual clock.

use crate::change::Change;
use crate::runner::Runner;
use crate::sink::Sink;
use memtide_controller::World;
use std::time::Duration;

/// Changes in time order (at one time, in the order given).
pub struct Script<C> {
    changes: Vec<(Duration, Change<C>)>,
}

impl<C> Script<C> {
    /// `changes` must be in time order.
    pub fn new(changes: Vec<(Duration, Change<C>)>) -> Script<C> {
        debug_assert!(changes.windows(2).all(|w| w[0].0 <= w[1].0));
        Script { changes }
    }

    /// Runs `ticks` ticks of `runner` on a virtual clock starting at zero: at each tick the
    /// changes due by then, then the tick.
    pub fn run<W, S>(
        &self,
        runner: &mut Runner<W>,
        ticks: u64,
        sink: &mut S,
    ) -> Result<(), W::Error>
    where
        W: World<Command = C>,
        S: Sink<W>,
    {
        let tick = runner.tick_length();
        let mut next = 0;
        for i in 0..ticks {
            let now = tick * i as u32;
            while let Some((_, change)) = self.changes.get(next).filter(|(at, _)| *at <= now) {
                next += 1;
                runner.change(now, change, sink)?;
            }
            runner.tick(now, sink)?;
        }
        Ok(())
    }
}
