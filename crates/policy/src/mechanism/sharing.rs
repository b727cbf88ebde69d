//! Page sharing's planner (ESX): identical pages merged onto one frame free memory at no cost to the tenant, so sharing is tried before every other lever.
//!
//! Above target, the pages found identical and not merged yet are merged, up to what is left
//! of the excess: `merge = min(left, shareable)`. Below target nothing is merged (the scanner
//! keeps its own pace; a merged page is broken again only when written). Cost: O(1).

use super::Need;
use memtide_model::{SharingLever, SharingNote};

/// Plans merging and takes what it covers out of `need.left`.
pub(super) fn plan(need: &mut Need, lever: &SharingLever) -> SharingNote {
    let merge = need.left.min(lever.shareable);
    need.left -= merge;
    SharingNote {
        shareable: lever.shareable,
        merge,
    }
}
