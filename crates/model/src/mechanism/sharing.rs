//! Content-based page sharing (ESX §4, Linux KSM): a tenant's lever (pages shared and shareable), its move (`Moves::share`) and its planner's note with the clause it adds to the reason line; host-wide, how fast memtide asks the host's scanner to look for identical pages, and what sharing saves.
//!
//! ESX keeps two figures apart, and so does memtide: guest pages **shared** (backed by a frame
//! that holds the same contents for other pages too) and memory **reclaimed** (shared pages
//! less the one copy each shared frame keeps). Linux KSM counts the same two:
//! `pages_shared` frames and `pages_sharing` pages saved.

use super::{Clause, Moves, Standing};
use crate::units::{Bytes, Pages};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Content-based page sharing of a tenant's memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingLever {
    /// Pages backed by a frame shared with other pages now.
    pub shared: Pages,
    /// Pages found identical to another page but not merged yet: what merging could save.
    pub shareable: Pages,
    /// Of `shared`, pages of zeros, where known.
    pub zero: Option<Pages>,
    /// What sharing saves this tenant net of the scanner's bookkeeping, in bytes, where the
    /// world knows it (KSM's `ksm_process_profit`, which can be negative).
    pub profit: Option<i64>,
}

/// Page sharing's part: pages that merging could save, and those merged this tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingNote {
    pub shareable: Pages,
    pub merge: Pages,
}

impl SharingNote {
    /// The note that makes `moves`' merging (see `MechanismNote::with_moves`).
    pub(super) fn replaying(moves: &Moves) -> Option<SharingNote> {
        (moves.share > Pages::ZERO).then_some(SharingNote {
            shareable: moves.share,
            merge: moves.share,
        })
    }
}

impl Clause for SharingNote {
    /// `; share 10.0 MiB of 10.0 MiB identical`, only when it merges.
    fn clause(&self, _at: Standing, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.merge > Pages::ZERO {
            write!(f, "; share {} of {} identical", self.merge, self.shareable)?;
        }
        Ok(())
    }
}

/// How fast the host's scanner looks at pages, host-wide: what the sharing policy decides
/// each tick (`memtide_policy::mechanism::scan_rate`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRate {
    pub pages_per_sec: u64,
}

/// The sharing policy's settings, the same for the whole host.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharingSettings {
    /// Pages per second while memory is plentiful (the high state): sharing is still found
    /// over time, at little cost.
    pub idle_rate: u64,
    /// Pages per second once the host runs short (soft, hard and low): share before swap.
    pub pressed_rate: u64,
    /// The most of one core the scanner may use (0 to 1), where the world measures its CPU
    /// time; the rate is cut to fit it.
    pub cpu_budget: Option<f64>,
}

impl SharingSettings {
    /// The fastest scan rate either world takes, pages a second (40 GB/s of 4 KiB pages):
    /// beyond it the scanner would look at a large host's every page many times a second.
    pub const MAX_RATE: u64 = 10_000_000;
}

impl Default for SharingSettings {
    /// ESX's "negligible CPU" pace when idle; KSM's own default (100 pages every 20 ms,
    /// about 20 MB/s) ramped up four times under pressure; a fifth of a core at most.
    fn default() -> Self {
        SharingSettings {
            idle_rate: 1_000,
            pressed_rate: 20_000,
            cpu_budget: Some(0.2),
        }
    }
}

/// What page sharing saves across the host, where the world measures it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSharing {
    /// Guest pages backed by a shared frame (ESX's "shared"; KSM's `pages_shared` +
    /// `pages_sharing` + `ksm_zero_pages`).
    pub shared: Pages,
    /// Distinct frames holding them (ESX's "shared − reclaimed"; KSM's `pages_shared`).
    pub frames: Pages,
    /// Of `shared`, pages of zeros, where known.
    pub zero: Option<Pages>,
    /// The sharing machinery's own memory (ESX's hash table, KSM's rmap items), where known.
    pub metadata: Option<Bytes>,
    /// Pages the scanner looked at since the previous observation, where known.
    pub scanned: Option<u64>,
    /// CPU time the scanner used since the previous observation, where known.
    pub cpu: Option<Duration>,
}

impl HostSharing {
    /// Memory reclaimed: shared pages less the one copy each frame keeps.
    pub fn reclaimed(&self) -> Pages {
        self.shared.saturating_sub(self.frames)
    }
}

/// Hot I/O page remapping (ESX §7), where the world models it: lifetime counts of the
/// transmits from guest pages, the bounce-buffer copies made for pages in high memory, the
/// pages remapped into low memory, and the copies that remapping avoided.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoRemapping {
    /// I/O transfers from guest pages.
    pub transmits: u64,
    /// Transfers from a page in high memory, copied through a bounce buffer in low memory.
    pub copies: u64,
    /// Hot pages remapped into low memory once their copies passed the threshold.
    pub remaps: u64,
    /// Remaps wanted when no low page was free (the page stays high and keeps being copied).
    pub refused: u64,
    /// Transfers from remapped pages: each a copy it would otherwise have taken.
    pub avoided: u64,
    /// Pages remapped into low memory and still there.
    pub remapped: Pages,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reclaimed_is_shared_pages_less_one_copy_per_frame() {
        let s = HostSharing {
            shared: Pages(100),
            frames: Pages(30),
            ..HostSharing::default()
        };
        assert_eq!(s.reclaimed(), Pages(70));
        assert_eq!(HostSharing::default().reclaimed(), Pages::ZERO);
    }
}
