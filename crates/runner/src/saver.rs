//! When a service writes its state file: as soon as what it must hold changes (the world's records, the API's changes), for estimates alone at most every 10 s, and whenever its driver forces it (start, reload, an exit that could not give everything back).

use crate::runner::Runner;
use crate::state_file::{self, ApiChanges, StateError, StateFile, FORMAT};
use memtide_controller::World;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// Estimates that changed alone are written at most this often.
const ESTIMATES_EVERY: Duration = Duration::from_secs(10);

/// Writes one state file, holding records of type `R`, when it is due.
pub struct StateSaver<R> {
    path: PathBuf,
    /// Which world writes it (the file's `hierarchy`).
    world: String,
    /// The last state written, to skip identical writes.
    saved: Option<StateFile<R>>,
    /// Run time of the last write.
    saved_at: Duration,
}

impl<R: Clone + PartialEq + Serialize> StateSaver<R> {
    /// A saver writing to `path` for `world` (for Linux the cgroup hierarchy, `v1` or `v2`).
    pub fn new(path: PathBuf, world: &str) -> StateSaver<R> {
        StateSaver {
            path,
            world: world.to_string(),
            saved: None,
            saved_at: Duration::ZERO,
        }
    }

    /// Writes the state of `runner` (its world's records, the estimates that stand on a
    /// measurement) and the API's `changes` at run time `now`, when due or when `force`d.
    pub fn save<W: World<Record = R>>(
        &mut self,
        runner: &Runner<W>,
        changes: &ApiChanges,
        now: Duration,
        force: bool,
    ) -> Result<(), StateError> {
        let controller = runner.controller();
        let state = StateFile {
            format: FORMAT,
            pid: std::process::id(),
            hierarchy: self.world.clone(),
            tenants: runner.world().records(),
            estimates: runner
                .tenants()
                .filter_map(|t| {
                    // Only an estimate that stands on a measurement is worth starting from.
                    let view = controller.tenant(t.spec.id).filter(|v| v.measured)?;
                    Some((t.spec.name.clone(), view.active_estimate.to_bytes().0))
                })
                .collect(),
            changes: changes.clone(),
        };
        let due = match &self.saved {
            None => true,
            Some(saved) => {
                saved.tenants != state.tenants
                    || saved.changes != state.changes
                    || (saved.estimates != state.estimates
                        && now.saturating_sub(self.saved_at) >= ESTIMATES_EVERY)
            }
        };
        if !(force || due) {
            return Ok(());
        }
        state_file::save(&self.path, &state)?;
        self.saved = Some(state);
        self.saved_at = now;
        Ok(())
    }

    /// Removes the file (a clean exit); the next save writes it again.
    pub fn remove(&mut self) -> Result<(), StateError> {
        self.saved = None;
        state_file::remove(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{runner, Lines};
    use memtide_model::TenantId;

    /// Saves, and tells whether the file was written (it is removed first).
    fn written(
        saver: &mut StateSaver<String>,
        runner: &Runner<crate::fake::FakeWorld>,
        changes: &ApiChanges,
        secs: u64,
        force: bool,
    ) -> bool {
        let _ = std::fs::remove_file(&saver.path);
        saver
            .save(runner, changes, Duration::from_secs(secs), force)
            .unwrap();
        saver.path.exists()
    }

    #[test]
    fn records_and_changes_are_written_at_once_and_estimates_alone_at_most_every_10_s() {
        let dir = tempfile::tempdir().unwrap();
        let mut saver = StateSaver::new(dir.path().join("state.json"), "fake");
        let mut r = runner(Default::default());
        let mut changes = ApiChanges::default();
        r.start(TenantId(0), None, None).unwrap();
        assert!(
            written(&mut saver, &r, &changes, 0, false),
            "the first save"
        );
        assert!(
            !written(&mut saver, &r, &changes, 1, false),
            "nothing changed"
        );
        // The first tick measures t0's estimate.
        r.tick(Duration::from_secs(1), &mut Lines::default())
            .unwrap();
        assert!(!written(&mut saver, &r, &changes, 9, false));
        assert!(written(&mut saver, &r, &changes, 10, false));
        changes.tax_rate = memtide_model::TaxRate::new(0.5).ok();
        assert!(written(&mut saver, &r, &changes, 11, false));
        r.start(TenantId(1), None, None).unwrap();
        assert!(written(&mut saver, &r, &changes, 12, false));
        assert!(written(&mut saver, &r, &changes, 12, true), "forced");
        let state: StateFile<String> = state_file::load(&saver.path).unwrap().unwrap();
        assert_eq!(state.tenants, ["record of #0", "record of #1"]);
        assert_eq!(state.estimates.keys().collect::<Vec<_>>(), ["t0"]);
        assert_eq!(state.changes, changes);
        assert_eq!((state.format, state.pid), (FORMAT, std::process::id()));
    }

    #[test]
    fn a_removed_state_file_is_written_again_by_the_next_save() {
        let dir = tempfile::tempdir().unwrap();
        let mut saver = StateSaver::new(dir.path().join("state.json"), "fake");
        let r = runner(Default::default());
        let changes = ApiChanges::default();
        saver.save(&r, &changes, Duration::ZERO, false).unwrap();
        saver.remove().unwrap();
        assert!(!saver.path.exists());
        saver.save(&r, &changes, Duration::ZERO, false).unwrap();
        assert!(saver.path.exists());
    }
}
