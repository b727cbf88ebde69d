//! A host-wide setting memtide changed, kept in a small JSON file beside the state file (KSM's knobs, the disk's scheduler) so that a run that crashed leaves the original for the next to give back: written whole or not at all.

use serde::Serialize;
use std::path::Path;

/// Writes `value` to `path` (its directory created if needed) through a fresh temporary beside
/// it and a rename, never through a link planted there ([`memtide_files::write_fresh`]); the
/// error says what failed, for the caller's own error type.
pub(crate) fn store(path: &Path, value: &impl Serialize) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    memtide_files::write_fresh(path, text.as_bytes()).map_err(|e| e.to_string())
}
