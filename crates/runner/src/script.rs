//! Changes at times: a scenario's timeline, which a service carries out as each falls due.

use crate::change::Change;
use std::time::Duration;

/// Changes in time order (at one time, in the order given), and how far a run has come.
pub struct Script<C> {
    changes: Vec<(Duration, Change<C>)>,
    next: usize,
}

impl<C> Script<C> {
    /// `changes` must be in time order.
    pub fn new(changes: Vec<(Duration, Change<C>)>) -> Script<C> {
        debug_assert!(changes.windows(2).all(|w| w[0].0 <= w[1].0));
        Script { changes, next: 0 }
    }

    /// The next change due by run time `now`, each once.
    pub(crate) fn due(&mut self, now: Duration) -> Option<&Change<C>> {
        let (at, change) = self.changes.get(self.next)?;
        if *at > now {
            return None;
        }
        self.next += 1;
        Some(change)
    }
}

impl<C> Default for Script<C> {
    /// No changes.
    fn default() -> Script<C> {
        Script::new(Vec::new())
    }
}
