//! What every event watcher shares: the [`Stamp`] and the book of watched names it is checked against, the growing wait before a stream is started again, and the splitting of a stream into bounded lines.
//!
//! The promise a stamp makes is the same for every source of events: [`Book::stale`] is
//! false only while the stream has been up since the stamp was taken and no event touched
//! the name since, so nothing known at the stamp can have changed unseen. A stream that broke
//! or started again makes every name stale: its events meanwhile are lost.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The longest event line kept; a longer one is skipped.
pub(crate) const MAX_LINE: usize = 64 << 10;
/// The most names watched at once (one per tenant).
pub(crate) const MAX_WATCHED: usize = 4096;
/// The waits before starting a stream again, doubling from the first to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(5));
/// How often a wait looks whether it should stop.
const STOP_POLL: Duration = Duration::from_millis(50);

/// When something was known: the stream's connection and the events seen by then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    epoch: u64,
    seq: u64,
    connected: bool,
}

/// The watched names and the events that touched them, shared by a watcher's thread and its
/// holder. `T` is what the watcher keeps per name besides (Docker's: the id last found).
#[derive(Debug)]
pub(crate) struct Book<T> {
    /// The stream is up now.
    connected: bool,
    /// Counts the stream's connections.
    epoch: u64,
    /// Counts the events that touched a watched name.
    seq: u64,
    /// The watched names, each with what the watcher keeps for it.
    pub(crate) watched: BTreeMap<String, T>,
    /// The last event (`seq`) that touched each watched name.
    pub(crate) touched: BTreeMap<String, u64>,
    /// Why the stream last broke.
    error: Option<String>,
}

impl<T> Default for Book<T> {
    fn default() -> Book<T> {
        Book {
            connected: false,
            epoch: 0,
            seq: 0,
            watched: BTreeMap::new(),
            touched: BTreeMap::new(),
            error: None,
        }
    }
}

impl<T> Book<T> {
    /// Watches `name`, keeping `kept` for it. At most [`MAX_WATCHED`] names; beyond, a name
    /// is always stale.
    pub(crate) fn watch(&mut self, name: &str, kept: T) {
        if self.watched.len() < MAX_WATCHED || self.watched.contains_key(name) {
            self.watched.insert(name.to_string(), kept);
        }
    }

    pub(crate) fn unwatch(&mut self, name: &str) {
        self.watched.remove(name);
        self.touched.remove(name);
    }

    /// Marks the watched `name` touched by an event now.
    pub(crate) fn mark(&mut self, name: &str) {
        if self.watched.contains_key(name) {
            self.seq += 1;
            self.touched.insert(name.to_string(), self.seq);
        }
    }

    /// The stream is up: a new epoch.
    pub(crate) fn up(&mut self) {
        self.connected = true;
        self.epoch += 1;
        self.error = None;
    }

    /// The stream is down, for `why`.
    pub(crate) fn down(&mut self, why: String) {
        self.connected = false;
        self.error = Some(why);
    }

    pub(crate) fn stamp(&self) -> Stamp {
        Stamp {
            epoch: self.epoch,
            seq: self.seq,
            connected: self.connected,
        }
    }

    /// Whether what was learnt of `name` at `stamp` may be out of date (see the module docs).
    pub(crate) fn stale(&self, name: &str, stamp: Stamp) -> bool {
        !stamp.connected
            || !self.connected
            || self.epoch != stamp.epoch
            || !self.watched.contains_key(name)
            || self.touched.get(name).is_some_and(|&t| t > stamp.seq)
    }

    pub(crate) fn connected(&self) -> bool {
        self.connected
    }

    pub(crate) fn error(&self) -> Option<String> {
        self.error.clone()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The wait before a stream is started again: it doubles from the first of [`BACKOFF`] to the
/// last, and starts again from the first once a stream was up.
#[derive(Debug)]
pub(crate) struct Backoff {
    wait: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { wait: BACKOFF.0 }
    }
}

impl Backoff {
    /// Waits before the next start (from the first wait again if the stream `was_up`),
    /// returning early once `stop` is set.
    pub(crate) fn wait(&mut self, was_up: bool, stop: &AtomicBool) {
        if was_up {
            self.wait = BACKOFF.0;
        }
        let mut slept = Duration::ZERO;
        while slept < self.wait && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(STOP_POLL);
            slept += STOP_POLL;
        }
        self.wait = (self.wait * 2).min(BACKOFF.1);
    }
}

/// Splits bytes into lines of at most [`MAX_LINE`] bytes; a longer line is skipped whole.
#[derive(Default)]
pub(crate) struct Lines {
    line: Vec<u8>,
    overlong: bool,
}

impl Lines {
    pub(crate) fn feed(&mut self, mut data: &[u8], on_line: &mut impl FnMut(&[u8])) {
        while let Some(i) = data.iter().position(|&b| b == b'\n') {
            self.push(&data[..i]);
            if !self.overlong && !self.line.is_empty() {
                on_line(&self.line);
            }
            self.line.clear();
            self.overlong = false;
            data = &data[i + 1..];
        }
        self.push(data);
    }

    fn push(&mut self, data: &[u8]) {
        if self.overlong {
            return;
        }
        if self.line.len() + data.len() > MAX_LINE {
            self.overlong = true;
            self.line.clear();
        } else {
            self.line.extend_from_slice(data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlong_line_is_skipped_and_the_next_is_read() {
        let mut seen = Vec::new();
        let mut lines = Lines::default();
        let long = vec![b'x'; MAX_LINE + 10];
        lines.feed(&long, &mut |l| seen.push(l.to_vec()));
        lines.feed(b"\n{\"ok\":1}\n", &mut |l| seen.push(l.to_vec()));
        assert_eq!(seen, vec![b"{\"ok\":1}".to_vec()]);
    }

    #[test]
    fn a_name_is_stale_when_touched_after_the_stamp_unwatched_or_across_a_new_epoch() {
        let mut book = Book::<()>::default();
        book.watch("a", ());
        book.watch("b", ());
        assert!(book.stale("a", book.stamp()), "not up yet");
        book.up();
        let stamp = book.stamp();
        assert!(!book.stale("a", stamp));
        book.mark("a");
        book.mark("unwatched");
        assert!(book.stale("a", stamp));
        assert!(!book.stale("b", stamp));
        assert!(book.stale("unwatched", stamp));
        book.down("gone".into());
        assert!(book.stale("b", stamp));
        assert_eq!(book.error().as_deref(), Some("gone"));
        book.up();
        assert!(book.stale("b", stamp), "a stamp from before the break");
        assert!(!book.stale("b", book.stamp()));
        assert_eq!(book.error(), None);
    }

    #[test]
    fn watching_stops_at_the_bound_but_a_watched_name_is_kept() {
        let mut book = Book::<u8>::default();
        for i in 0..MAX_WATCHED {
            book.watch(&format!("n{i}"), 0);
        }
        book.watch("one-too-many", 0);
        assert!(!book.watched.contains_key("one-too-many"));
        book.watch("n0", 7);
        assert_eq!(book.watched["n0"], 7);
    }
}
