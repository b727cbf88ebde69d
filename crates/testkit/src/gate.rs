//! A process-wide gate between groups of tests. The tests of one binary run on parallel
//! threads; tests that used to be separate binaries (one file each, run one after another by
//! cargo) take the gate with their file's name, so that tests of different groups never
//! overlap in time while tests of the same group still may, as before the files were folded.

use std::sync::{Condvar, Mutex};

/// The group inside the gate and how many of its tests hold it.
static INSIDE: Mutex<(Option<&'static str>, usize)> = Mutex::new((None, 0));
static CHANGED: Condvar = Condvar::new();

/// Held by a test while it runs; lets the next group in when the last of its group drops it.
#[must_use = "the gate is held only while the guard lives"]
pub struct FileGate(());

/// Waits until no test of another group runs, then enters `group` (pass `module_path!()`).
pub fn file_gate(group: &'static str) -> FileGate {
    let mut inside = INSIDE.lock().unwrap_or_else(|e| e.into_inner());
    while inside.0.is_some_and(|g| g != group) {
        inside = CHANGED.wait(inside).unwrap_or_else(|e| e.into_inner());
    }
    *inside = (Some(group), inside.1 + 1);
    FileGate(())
}

impl Drop for FileGate {
    fn drop(&mut self) {
        let mut inside = INSIDE.lock().unwrap_or_else(|e| e.into_inner());
        inside.1 -= 1;
        if inside.1 == 0 {
            inside.0 = None;
            CHANGED.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn tests_of_two_groups_never_overlap() {
        static RUNNING_A: AtomicUsize = AtomicUsize::new(0);
        static RUNNING_B: AtomicUsize = AtomicUsize::new(0);
        let run = |group: &'static str, mine: &'static AtomicUsize, other: &'static AtomicUsize| {
            let _gate = file_gate(group);
            mine.fetch_add(1, Ordering::SeqCst);
            for _ in 0..20 {
                assert_eq!(other.load(Ordering::SeqCst), 0, "{group} overlapped");
                std::thread::sleep(Duration::from_millis(2));
            }
            mine.fetch_sub(1, Ordering::SeqCst);
        };
        std::thread::scope(|s| {
            for i in 0..8 {
                if i % 2 == 0 {
                    s.spawn(move || run("a", &RUNNING_A, &RUNNING_B));
                } else {
                    s.spawn(move || run("b", &RUNNING_B, &RUNNING_A));
                }
            }
        });
    }
}
