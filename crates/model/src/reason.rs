//! Why a tenant's action is what it is: the figures behind each decision, formatted into one readable line only when someone reads it.

use crate::curve::Slo;
use crate::mechanism::{DiskNote, MechanismNote};
use crate::units::Pages;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The explanation of one tenant's action: the mechanism choice and the estimator's state.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reason {
    pub mechanism: MechanismNote,
    pub estimate: EstimateNote,
    /// The tenant's cache quota, where its pool's size is chosen by its SLO (Gemini).
    pub cache: Option<CacheNote>,
    /// Its weight on the shared disk, where memtide shares one (Lai et al.).
    pub disk: Option<DiskNote>,
}

/// A tenant's cache quota (Gemini): its share of the pools' budget, chosen for the summed
/// utility of every SLO, and the latency its pool's miss-ratio curve predicts there.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheNote {
    pub slo: Slo,
    /// The pool the quota gives it.
    pub quota: Pages,
    /// The budget the tenants' pools share.
    pub budget: Pages,
    /// The mean latency its curve predicts at `quota`, in µs.
    pub latency_us: f32,
    /// What that latency is worth under its SLO.
    pub utility: f32,
}

impl fmt::Display for CacheNote {
    /// `cache quota 412 MiB of 1024 MiB for SLO 500 µs (+10%): 481 µs predicted`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cache quota {} of {} for {}: {:.0} µs predicted",
            self.quota, self.budget, self.slo, self.latency_us
        )
    }
}

/// An estimator's state, as it stood when the decision was taken.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum EstimateNote {
    /// ESX sampling; EWMAs as fractions, `None` before they have a value. `bound` is the upper
    /// confidence bound of the estimate, what the idle tax charges for. `measured` is false
    /// while no sampling counts ever arrived (the tenant counts as fully active).
    Sampling {
        estimate: Pages,
        bound: Pages,
        measured: bool,
        slow: Option<f64>,
        fast: Option<f64>,
        partial: Option<f64>,
    },
    /// TWS probing; `cool_down_s` in COOL_DOWN; `blind` when the counters are missing;
    /// `paused` when probing was paused (memory not wanted, or a dry run).
    WorkingSet {
        wss: Pages,
        phase: ProbePhase,
        cool_down_s: Option<f64>,
        blind: bool,
        paused: bool,
    },
    /// Committed memory; `known` is false while the world never reported it.
    Committed { estimate: Pages, known: bool },
}

/// The TWS probe's state machine states.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbePhase {
    Fast,
    CoolDown,
    Slow,
}

impl ProbePhase {
    pub fn name(self) -> &'static str {
        match self {
            ProbePhase::Fast => "FAST",
            ProbePhase::CoolDown => "COOL_DOWN",
            ProbePhase::Slow => "SLOW",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; estimate {}", self.mechanism, self.estimate)?;
        if let Some(c) = &self.cache {
            write!(f, "; {c}")?;
        }
        if let Some(d) = &self.disk {
            write!(f, "; {d}")?;
        }
        Ok(())
    }
}

impl fmt::Display for EstimateNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Fraction(Option<f64>);
        impl fmt::Display for Fraction {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Some(v) => write!(f, "{v:.2}"),
                    None => f.write_str("-"),
                }
            }
        }
        match *self {
            EstimateNote::Sampling {
                estimate,
                measured: false,
                ..
            } => write!(f, "sampling unmeasured est={estimate} (max)"),
            EstimateNote::Sampling {
                estimate,
                bound,
                slow,
                fast,
                partial,
                ..
            } => write!(
                f,
                "sampling est={estimate} bound={bound} slow={} fast={} partial={}",
                Fraction(slow),
                Fraction(fast),
                Fraction(partial)
            ),
            EstimateNote::WorkingSet {
                wss,
                phase,
                cool_down_s,
                blind,
                paused,
            } => {
                write!(f, "tws {} wss={wss}", phase.name())?;
                if let Some(s) = cool_down_s {
                    write!(f, " cool_down={s:.1}s")?;
                }
                if blind {
                    f.write_str(" (holding: no swap-in or refault counters)")?;
                } else if paused {
                    f.write_str(" (not probing: memory is not wanted, or a dry run)")?;
                }
                Ok(())
            }
            EstimateNote::Committed {
                estimate,
                known: true,
            } => write!(f, "committed est={estimate}"),
            EstimateNote::Committed { estimate, .. } => {
                write!(f, "committed unknown est={estimate} (max)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::ReclamationState;
    use crate::mechanism::tests::note;

    #[test]
    fn reason_reads_as_one_line_with_mechanism_and_estimate() {
        let r = Reason {
            disk: None,
            mechanism: note(ReclamationState::Soft),
            estimate: EstimateNote::WorkingSet {
                wss: Pages::from_mib(300),
                phase: ProbePhase::CoolDown,
                cool_down_s: Some(3.0),
                blind: false,
                paused: false,
            },
            cache: None,
        };
        assert_eq!(
            r.to_string(),
            "soft: allocated 256.0 MiB > target 180.0 MiB; balloon 0.0 MiB -> 76.0 MiB; \
             estimate tws COOL_DOWN wss=300.0 MiB cool_down=3.0s"
        );
    }

    #[test]
    fn a_cache_quota_reads_after_the_estimate() {
        let r = Reason {
            disk: None,
            mechanism: MechanismNote::new(
                ReclamationState::High,
                Pages::from_mib(512),
                Pages::from_mib(512),
            ),
            estimate: EstimateNote::Committed {
                estimate: Pages::from_mib(512),
                known: true,
            },
            cache: Some(CacheNote {
                slo: Slo::Strict {
                    target_us: 500.0,
                    slack: 0.1,
                },
                quota: Pages::from_mib(412),
                budget: Pages::from_mib(1024),
                latency_us: 481.4,
                utility: 0.0,
            }),
        };
        assert_eq!(
            r.to_string(),
            "high: at target; estimate committed est=512.0 MiB; cache quota 412.0 MiB of \
             1024.0 MiB for SLO 500 µs (+10%): 481 µs predicted"
        );
    }

    #[test]
    fn estimate_notes_name_their_estimator() {
        let s = EstimateNote::Sampling {
            estimate: Pages::from_mib(100),
            bound: Pages::from_mib(120),
            measured: true,
            slow: Some(0.5),
            fast: None,
            partial: Some(0.25),
        };
        assert_eq!(
            s.to_string(),
            "sampling est=100.0 MiB bound=120.0 MiB slow=0.50 fast=- partial=0.25"
        );
        let c = EstimateNote::Committed {
            estimate: Pages::from_mib(64),
            known: false,
        };
        assert_eq!(c.to_string(), "committed unknown est=64.0 MiB (max)");
    }
}
