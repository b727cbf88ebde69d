//! Reclamation states high/soft/hard/low from free machine memory, with hysteresis (ESX section 6.3).

use memtide_model::{Pages, ReclamationState};

/// Thresholds as fractions of machine memory (ESX: 6%, 4%, 2%, 1%).
#[derive(Clone, Debug, PartialEq)]
pub struct ReclamationThresholds {
    pub high: f64,
    pub soft: f64,
    pub hard: f64,
    pub low: f64,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("reclamation thresholds must satisfy 0 < low < hard < soft < high < 1, got high={high} soft={soft} hard={hard} low={low}")]
pub struct ThresholdError {
    pub high: f64,
    pub soft: f64,
    pub hard: f64,
    pub low: f64,
}

impl Default for ReclamationThresholds {
    fn default() -> Self {
        ReclamationThresholds { high: 0.06, soft: 0.04, hard: 0.02, low: 0.01 }
    }
}

impl ReclamationThresholds {
    pub fn validate(&self) -> Result<(), ThresholdError> {
        todo!("policy helper implements")
    }
}

/// The current reclamation state and its transitions.
#[derive(Clone, Debug, PartialEq)]
pub struct ReclamationTracker {
    thresholds: ReclamationThresholds,
    state: ReclamationState,
}

impl ReclamationTracker {
    pub fn new(thresholds: ReclamationThresholds) -> ReclamationTracker {
        ReclamationTracker { thresholds, state: ReclamationState::High }
    }

    pub fn state(&self) -> ReclamationState {
        self.state
    }

    pub fn thresholds(&self) -> &ReclamationThresholds {
        &self.thresholds
    }

    /// Moves to the state `free` memory calls for, with hysteresis, and returns it.
    pub fn update(&mut self, free: Pages, machine: Pages) -> ReclamationState {
        let _ = (free, machine);
        todo!("policy helper implements")
    }
}
