//! The application balloon's planner (ALB): an application that shrinks its own pool (a database's buffer pool, a JVM heap) is asked before the OS is, because it knows which of its pages matter.
//!
//! Above target, the application is asked to give back what is left of the excess, up to its
//! limit: `target_size = min(size + left, limit)`. Below target it takes memory back first:
//! `target_size = size - min(size, target - allocated)`. What it cannot give (past its limit)
//! is left to the levers after it. An application moves its own pool at its own pace, so the
//! target is absolute and asked again every tick. Cost: O(1).

use super::Need;
use memtide_model::{AppBalloonLever, AppBalloonNote, Pages};

/// Plans the application balloon and takes what it covers out of `need.left`.
pub(super) fn plan(need: &mut Need, lever: &AppBalloonLever) -> AppBalloonNote {
    let room = lever.limit.saturating_sub(lever.size);
    let target = if need.excess > Pages::ZERO {
        lever.size + need.left.min(room)
    } else {
        let deficit = need.target.saturating_sub(need.allocated);
        lever.size.saturating_sub(deficit)
    };
    need.left = need.left.saturating_sub(room);
    AppBalloonNote {
        size: lever.size,
        target,
        limit: lever.limit,
    }
}
