//! Which kdamonds are memtide's: a process-wide record of the slots this process created, a survey of the others (another user's, another memtide's, or orphans of a dead memtide), and claiming, growing and shrinking `nr_kdamonds` without disturbing anyone else's kdamond.
//!
//! The kernel makes this delicate: writing `nr_kdamonds` removes and recreates every kdamond
//! directory (losing their setup), and fails with EBUSY while any kdamond is on. So memtide
//! reuses its own idle slots first, reclaims kdamonds marked by a memtide process that no longer
//! exists, and grows only when no other user's kdamond would be touched: it then stops its own
//! running kdamonds, grows, and writes their setup back before turning them on again.

use super::error::DamonError;
use super::sysfs;
use super::DamonConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

/// The slots this process owns under one DAMON sysfs root. Reads of running monitors take the
/// lock shared; starting, retargeting, stopping (and so growing and shrinking) take it
/// exclusively, so `nr_kdamonds` never changes under a read in flight.
#[derive(Debug, Default)]
pub(super) struct RootSlots {
    slots: RwLock<Slots>,
}

impl RootSlots {
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Slots> {
        self.slots.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Slots> {
        self.slots.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug, Default)]
pub(super) struct Slots {
    /// Kdamonds monitoring for this process, with what was written into them (to write it back
    /// after `nr_kdamonds` is rewritten).
    pub(super) held: BTreeMap<usize, Held>,
    /// Kdamonds this process created or reclaimed and is not using; off.
    pub(super) free: BTreeSet<usize>,
}

#[derive(Clone, Debug)]
pub(super) struct Held {
    pub(super) pids: Vec<u32>,
    pub(super) config: DamonConfig,
}

static REGISTRY: Mutex<Vec<(PathBuf, Arc<RootSlots>)>> = Mutex::new(Vec::new());

/// This process's slots under `root` (one record per canonical root path).
pub(super) fn for_root(root: &Path) -> Arc<RootSlots> {
    let key = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, slots)) = registry.iter().find(|(path, _)| *path == key) {
        return Arc::clone(slots);
    }
    let slots = Arc::new(RootSlots::default());
    registry.push((key, Arc::clone(&slots)));
    slots
}

/// What a kdamond slot is, as seen from this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Monitoring for this process.
    Held,
    /// Created by this process and idle.
    Free,
    /// Marked by a memtide process that no longer exists (or by this one, and forgotten).
    Orphan { owner: u32 },
    /// Marked by another memtide process that is alive.
    OtherMemtide { owner: u32 },
    /// Another user's kdamond with a context set up.
    Configured,
    /// Another user's kdamond with no context: nothing is lost when it is recreated.
    Blank,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SlotView {
    pub(super) index: usize,
    pub(super) kind: Kind,
    pub(super) on: bool,
}

/// Reads `nr_kdamonds` and classifies every slot. Only reads.
pub(super) fn survey(
    root: &Path,
    slots: &Slots,
    alive: &dyn Fn(u32) -> bool,
) -> Result<Vec<SlotView>, DamonError> {
    let count = sysfs::read_number(&sysfs::nr_kdamonds_path(root))?;
    let our_pid = std::process::id();
    (0..count as usize)
        .map(|index| {
            if slots.held.contains_key(&index) {
                return Ok(SlotView {
                    index,
                    kind: Kind::Held,
                    on: true,
                });
            }
            let kdamond = sysfs::kdamond_dir(root, index);
            let on = sysfs::is_on(&kdamond)?;
            let kind = if slots.free.contains(&index) {
                Kind::Free
            } else {
                match sysfs::owner(&kdamond)? {
                    Some(owner) if owner == our_pid || !alive(owner) => Kind::Orphan { owner },
                    Some(owner) => Kind::OtherMemtide { owner },
                    None if sysfs::nr_contexts(&kdamond)? == 0 => Kind::Blank,
                    None => Kind::Configured,
                }
            };
            Ok(SlotView { index, kind, on })
        })
        .collect()
}

/// Why growing `nr_kdamonds` would disturb a kdamond this process does not own, if it would.
fn growth_blocker(root: &Path, view: &[SlotView]) -> Option<String> {
    view.iter().find_map(|slot| {
        let dir = sysfs::kdamond_dir(root, slot.index);
        let dir = dir.display();
        match (&slot.kind, slot.on) {
            (Kind::Blank | Kind::Configured, true) => Some(format!(
                "{dir} is on and not memtide's; writing nr_kdamonds would need it off (the kernel answers EBUSY)"
            )),
            (Kind::Configured, false) => Some(format!(
                "{dir} is off but set up by another user; writing nr_kdamonds would erase its setup"
            )),
            (Kind::Free, true) => Some(format!(
                "{dir} is on although memtide left it idle; writing nr_kdamonds would need it off"
            )),
            (Kind::OtherMemtide { owner }, on) => Some(format!(
                "{dir} belongs to memtide process {owner} (state {})",
                if on { "on" } else { "off" }
            )),
            _ => None,
        }
    })
}

/// Finds an off kdamond for this process: one of its own idle slots, else an orphan (turned off
/// first), else a new slot from growing `nr_kdamonds`. The slot returned is in neither `held`
/// nor `free`; the caller sets it up and records it.
pub(super) fn claim(
    root: &Path,
    slots: &mut Slots,
    alive: &dyn Fn(u32) -> bool,
    busy: Duration,
) -> Result<usize, DamonError> {
    let view = survey(root, slots, alive)?;
    // A free slot found on (someone turned it on) is no longer ours to reuse.
    for slot in &view {
        if slot.kind == Kind::Free && slot.on {
            slots.free.remove(&slot.index);
        }
    }
    if let Some(slot) = view.iter().find(|s| s.kind == Kind::Free && !s.on) {
        slots.free.remove(&slot.index);
        return Ok(slot.index);
    }
    if let Some(slot) = view.iter().find(|s| matches!(s.kind, Kind::Orphan { .. })) {
        turn_off(&sysfs::kdamond_dir(root, slot.index), busy)?;
        return Ok(slot.index);
    }
    if let Some(reason) = growth_blocker(root, &view) {
        return Err(DamonError::NoFreeKdamond {
            path: sysfs::nr_kdamonds_path(root),
            reason,
        });
    }
    grow(root, slots, view.len(), busy)
}

/// Grows `nr_kdamonds` by as many slots as this process holds (at least one), so growing is
/// rare; stops this process's running kdamonds for the rewrite and then restarts them. A
/// kdamond that cannot be restarted is left off: its monitor's next read reports it.
fn grow(root: &Path, slots: &mut Slots, count: usize, busy: Duration) -> Result<usize, DamonError> {
    let mut stopped = Vec::new();
    let mut result = Ok(());
    for &index in slots.held.keys() {
        match turn_off(&sysfs::kdamond_dir(root, index), busy) {
            Ok(()) => stopped.push(index),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let added = slots.held.len().max(1);
    if result.is_ok() {
        result = sysfs::write_value(
            &sysfs::nr_kdamonds_path(root),
            &(count + added).to_string(),
            busy,
        );
    }
    for index in stopped {
        let held = &slots.held[&index];
        let _ = start_kdamond(root, index, &held.pids, &held.config);
    }
    result?;
    slots.free.extend(count + 1..count + added);
    Ok(count)
}

/// Turns a kdamond off if it is on. (Writing `off` to a kdamond that is already off is an
/// error, and one that stopped by itself may be off already.)
pub(super) fn turn_off(kdamond: &Path, busy: Duration) -> Result<(), DamonError> {
    if !sysfs::is_on(kdamond)? {
        return Ok(());
    }
    match sysfs::write_value(&sysfs::state_path(kdamond), "off", busy) {
        Err(_) if !sysfs::is_on(kdamond)? => Ok(()),
        result => result,
    }
}

/// Writes the setup into slot `index` and turns it on. A refusal while some pid no longer
/// exists is `TargetsGone`.
pub(super) fn start_kdamond(
    root: &Path,
    index: usize,
    pids: &[u32],
    config: &DamonConfig,
) -> Result<(), DamonError> {
    let kdamond = sysfs::kdamond_dir(root, index);
    sysfs::write_setup(root, &kdamond, pids, config, std::process::id())?;
    sysfs::write_value(&sysfs::state_path(&kdamond), "on", config.busy_timeout)
        .map_err(|e| targets_gone_or(e, pids, &super::pid_alive))
}

/// A failed `on` or `commit` is `TargetsGone` when some monitored pid no longer exists (the
/// kernel answers EINVAL or ESRCH for a pid it cannot find); otherwise the error stands.
pub(super) fn targets_gone_or(
    error: DamonError,
    pids: &[u32],
    alive: &dyn Fn(u32) -> bool,
) -> DamonError {
    let gone: Vec<u32> = pids.iter().copied().filter(|&pid| !alive(pid)).collect();
    match error {
        DamonError::Write {
            path,
            value,
            source,
        } if !gone.is_empty() => DamonError::TargetsGone {
            detail: format!("writing {value:?} failed ({source}); pids {gone:?} no longer exist"),
            path,
            gone,
        },
        other => other,
    }
}

/// After a slot is released: shrinks `nr_kdamonds` past trailing free slots when nothing of
/// this process runs and every slot that would be recreated is this process's idle one or
/// another user's blank one. Best effort: any obstacle leaves the count as it is.
pub(super) fn shrink(
    root: &Path,
    slots: &mut Slots,
    alive: &dyn Fn(u32) -> bool,
    busy: Duration,
) -> Result<(), DamonError> {
    if !slots.held.is_empty() {
        return Ok(());
    }
    let view = survey(root, slots, alive)?;
    let idle = |slot: &SlotView| slot.kind == Kind::Free && !slot.on;
    let keep = view
        .iter()
        .rposition(|slot| !idle(slot))
        .map_or(0, |i| i + 1);
    if keep == view.len() {
        return Ok(());
    }
    let recreated_safely = view[..keep]
        .iter()
        .all(|slot| !slot.on && matches!(slot.kind, Kind::Free | Kind::Blank));
    if !recreated_safely {
        return Ok(());
    }
    sysfs::write_value(&sysfs::nr_kdamonds_path(root), &keep.to_string(), busy)?;
    slots.free.retain(|&index| index < keep);
    Ok(())
}
