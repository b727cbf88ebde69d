//! Mechanism choice per reclamation state: balloon first, host swap only where the balloon cannot.
//!
//! For a tenant holding `allocated` pages with a `target`, the excess is `allocated - target`.
//!
//! - The balloon (when the tenant has a driver) always tracks the target, in every state:
//!   `balloon_target = min(max - target, driver limit)`. It is cheap and cooperative, and
//!   deflates by itself when the target rises.
//! - The part of the excess the balloon cannot reclaim is all of it without a driver or with
//!   a stalled one, else what lies beyond the guest's balloon limit.
//! - `high`: no host swap. `soft`: host swap only that part (ESX: "page only where the
//!   balloon cannot"). `hard`: host swap the whole excess to force reclamation, the balloon
//!   continuing alongside. `low`: as hard, and the tenant is blocked while above its target.
//!   Host swap is always limited by the tick's host swap budget.

use memtide_model::{
    BalloonDriverInfo, Mechanism, MechanismNote, Mechanisms, Pages, ReclamationState,
};

/// One tenant's situation, as the mechanism choice needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct MechanismInput {
    pub state: ReclamationState,
    pub target: Pages,
    pub allocated: Pages,
    pub max: Pages,
    pub balloon: Pages,
    pub driver: Option<BalloonDriverInfo>,
    /// The driver has not moved toward its target for several ticks (too slow or unresponsive).
    pub balloon_stalled: bool,
    /// Most pages the host may page out of this tenant in this tick.
    pub host_swap_budget: Pages,
}

/// How to move one tenant toward its target this tick.
#[derive(Clone, Debug, PartialEq)]
pub struct MechanismPlan {
    pub balloon_target: Option<Pages>,
    pub host_swap_out: Pages,
    pub blocked: bool,
    pub mechanisms: Mechanisms,
    /// The figures behind the plan; `Display` gives the readable line.
    pub reason: MechanismNote,
}

/// Chooses the balloon size, host swap and blocking for one tenant (see the module docs).
pub fn plan(input: &MechanismInput) -> MechanismPlan {
    let excess = input.allocated.saturating_sub(input.target);
    let balloon_target = input
        .driver
        .map(|d| input.max.saturating_sub(input.target).min(d.limit));

    let beyond_balloon = match input.driver {
        Some(d) if !input.balloon_stalled => {
            excess.saturating_sub(d.limit.saturating_sub(input.balloon))
        }
        _ => excess,
    };

    let wanted_swap = match input.state {
        ReclamationState::High => Pages::ZERO,
        ReclamationState::Soft => beyond_balloon,
        ReclamationState::Hard | ReclamationState::Low => excess,
    };
    let host_swap_out = wanted_swap.min(input.host_swap_budget);
    let blocked = input.state == ReclamationState::Low && excess > Pages::ZERO;

    let mut mechanisms = Mechanisms::new();
    if let Some(bt) = balloon_target {
        if bt != input.balloon || excess > Pages::ZERO {
            mechanisms.push(Mechanism::Balloon);
        }
    }
    if host_swap_out > Pages::ZERO {
        mechanisms.push(Mechanism::HostSwap);
    }

    let reason = MechanismNote {
        state: input.state,
        allocated: input.allocated,
        target: input.target,
        balloon: input.balloon,
        balloon_target,
        balloon_limit: input.driver.map(|d| d.limit),
        balloon_stalled: input.balloon_stalled,
        beyond_balloon,
        wanted_swap,
        host_swap_out,
        blocked,
        limit: None,
    };
    MechanismPlan {
        balloon_target,
        host_swap_out,
        blocked,
        mechanisms,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ReclamationState::{Hard, High, Low, Soft};

    fn mib(m: u64) -> Pages {
        Pages::from_mib(m)
    }

    fn driver(limit_mib: u64) -> Option<BalloonDriverInfo> {
        Some(BalloonDriverInfo {
            rate_per_s: mib(16),
            limit: mib(limit_mib),
        })
    }

    /// A 256 MiB tenant holding 256 MiB with a 180 MiB target, a 200 MiB balloon limit,
    /// an empty balloon and a 64 MiB host swap budget.
    fn base(state: ReclamationState) -> MechanismInput {
        MechanismInput {
            state,
            target: mib(180),
            allocated: mib(256),
            max: mib(256),
            balloon: Pages::ZERO,
            driver: driver(200),
            balloon_stalled: false,
            host_swap_budget: mib(64),
        }
    }

    struct Case {
        name: &'static str,
        input: MechanismInput,
        balloon_target: Option<Pages>,
        host_swap_out: Pages,
        blocked: bool,
        mechanisms: Vec<Mechanism>,
    }

    fn check(cases: Vec<Case>) {
        for case in cases {
            let plan = plan(&case.input);
            assert_eq!(plan.balloon_target, case.balloon_target, "{}", case.name);
            assert_eq!(plan.host_swap_out, case.host_swap_out, "{}", case.name);
            assert_eq!(plan.blocked, case.blocked, "{}", case.name);
            assert_eq!(plan.mechanisms, case.mechanisms, "{}", case.name);
            assert!(!plan.reason.to_string().is_empty(), "{}", case.name);
            assert!(!plan.reason.to_string().contains('\n'), "{}", case.name);
        }
    }

    #[test]
    fn each_state_chooses_its_mechanisms() {
        use Mechanism::{Balloon, HostSwap};
        check(vec![
            Case {
                name: "high: balloon only",
                input: base(High),
                balloon_target: Some(mib(76)),
                host_swap_out: Pages::ZERO,
                blocked: false,
                mechanisms: vec![Balloon],
            },
            Case {
                name: "soft: balloon can take it all",
                input: base(Soft),
                balloon_target: Some(mib(76)),
                host_swap_out: Pages::ZERO,
                blocked: false,
                mechanisms: vec![Balloon],
            },
            Case {
                name: "hard: page the excess, balloon too",
                input: base(Hard),
                balloon_target: Some(mib(76)),
                host_swap_out: mib(64),
                blocked: false,
                mechanisms: vec![Balloon, HostSwap],
            },
            Case {
                name: "low: page and block",
                input: MechanismInput {
                    host_swap_budget: mib(100),
                    ..base(Low)
                },
                balloon_target: Some(mib(76)),
                host_swap_out: mib(76),
                blocked: true,
                mechanisms: vec![Balloon, HostSwap],
            },
        ]);
    }

    #[test]
    fn soft_pages_only_what_the_balloon_cannot() {
        use Mechanism::{Balloon, HostSwap};
        check(vec![
            Case {
                name: "no driver: host swap the excess",
                input: MechanismInput {
                    driver: None,
                    host_swap_budget: mib(100),
                    ..base(Soft)
                },
                balloon_target: None,
                host_swap_out: mib(76),
                blocked: false,
                mechanisms: vec![HostSwap],
            },
            Case {
                name: "stalled driver: host swap the excess, keep asking the balloon",
                input: MechanismInput {
                    balloon_stalled: true,
                    host_swap_budget: mib(100),
                    ..base(Soft)
                },
                balloon_target: Some(mib(76)),
                host_swap_out: mib(76),
                blocked: false,
                mechanisms: vec![Balloon, HostSwap],
            },
            Case {
                name: "guest limit reached: page what lies beyond it",
                input: MechanismInput {
                    driver: driver(60),
                    balloon: mib(50),
                    host_swap_budget: mib(100),
                    ..base(Soft)
                },
                balloon_target: Some(mib(60)),
                host_swap_out: mib(66),
                blocked: false,
                mechanisms: vec![Balloon, HostSwap],
            },
            Case {
                name: "budget limits host swap",
                input: MechanismInput {
                    driver: None,
                    host_swap_budget: mib(16),
                    ..base(Soft)
                },
                balloon_target: None,
                host_swap_out: mib(16),
                blocked: false,
                mechanisms: vec![HostSwap],
            },
            Case {
                name: "no budget: nothing paged",
                input: MechanismInput {
                    driver: None,
                    host_swap_budget: Pages::ZERO,
                    ..base(Soft)
                },
                balloon_target: None,
                host_swap_out: Pages::ZERO,
                blocked: false,
                mechanisms: vec![],
            },
        ]);
    }

    #[test]
    fn under_target_tenant_deflates_and_nothing_is_swapped() {
        for state in ReclamationState::ALL {
            let input = MechanismInput {
                target: mib(200),
                allocated: mib(180),
                balloon: mib(76),
                ..base(state)
            };
            let plan = plan(&input);
            assert_eq!(plan.balloon_target, Some(mib(56)), "{state}");
            assert_eq!(plan.host_swap_out, Pages::ZERO, "{state}");
            assert!(!plan.blocked, "{state}");
            assert_eq!(plan.mechanisms, vec![Mechanism::Balloon], "{state}");
        }
    }

    #[test]
    fn tenant_at_target_with_settled_balloon_needs_nothing() {
        let input = MechanismInput {
            allocated: mib(180),
            balloon: mib(76),
            ..base(High)
        };
        let plan = plan(&input);
        assert_eq!(plan.balloon_target, Some(mib(76)));
        assert!(plan.mechanisms.is_empty());
        assert_eq!(plan.reason.to_string(), "high: at target");
    }

    #[test]
    fn reason_reads_as_one_line() {
        let p = plan(&MechanismInput {
            driver: None,
            host_swap_budget: mib(16),
            ..base(Soft)
        });
        assert_eq!(
            p.reason.to_string(),
            "soft: allocated 256.0 MiB > target 180.0 MiB; no balloon driver; \
             host swap 16.0 MiB (of 76.0 MiB, limited by host swap budget)"
        );
        let p = plan(&base(Soft));
        assert_eq!(
            p.reason.to_string(),
            "soft: allocated 256.0 MiB > target 180.0 MiB; balloon 0.0 MiB -> 76.0 MiB"
        );
        let p = plan(&MechanismInput {
            host_swap_budget: mib(100),
            ..base(Low)
        });
        assert_eq!(
            p.reason.to_string(),
            "low: allocated 256.0 MiB > target 180.0 MiB; balloon 0.0 MiB -> 76.0 MiB; \
             host swap 76.0 MiB; blocked until at target"
        );
    }

    #[test]
    fn target_above_max_and_zero_limits_do_not_panic() {
        let plan = plan(&MechanismInput {
            target: mib(512),
            driver: driver(0),
            balloon: mib(10),
            ..base(Hard)
        });
        assert_eq!(plan.balloon_target, Some(Pages::ZERO));
        assert_eq!(plan.host_swap_out, Pages::ZERO);
    }
}
