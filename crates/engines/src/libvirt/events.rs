//! `DomainWatcher`: a thread on `virsh event --all --loop --timestamp` that marks the watched domains each event touches, with the engines' [`Stamp`] promise (see [`crate::watch`]), so memtide asks libvirt again only about those.
//!
//! virsh prints one line per event (libvirt.md §5):
//! `2026-11-29 21:05:49.777+0000: event 'lifecycle' for domain 'h30a': Started Booted`. A
//! line marks a watched name when it is about that domain (matched against the watched
//! names, so a name may hold quotes) and its kind is not one of three that change nothing
//! memtide learns of a domain: `reboot` (a guest's reboot keeps its QEMU, id and cgroup;
//! virsh prints it twice), `balloon-change` (the balloon moved: a figure, read through
//! `dommemstat`) and `rtc-change`. Every other kind marks it: `lifecycle` above all (start,
//! stop, define, undefine, pause, resume), and the rarer ones conservatively.
//!
//! virsh says nothing when its callback is registered, so the stream counts as up once virsh
//! has run for a moment (one second) without exiting, or at its first event, whichever comes
//! first; a stamp taken before is stale. (virsh connects in about 20 ms: an event is missed
//! only if it took longer than that moment.) When libvirtd goes away virsh exits (status 1,
//! `error: Disconnected from qemu:///system due to end of file`) and does not reconnect: the
//! watcher starts it again after a growing wait, a new epoch, so every name is stale. Lines
//! are bounded at 64 KiB (a longer one is skipped), virsh's error text at 4 KiB. Dropping
//! the watcher kills virsh (its process group) and joins the thread.

use super::process::{self, Started, Stop};
use super::{error_lines, Virsh};
use crate::watch::{lock, Backoff, Book, Lines, Stamp};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long virsh must run without exiting before its stream counts as up.
const SETTLE: Duration = Duration::from_secs(1);
/// The longest wait in `poll(2)`, so that a stop is seen soon.
const SLICE: Duration = Duration::from_millis(50);
/// The most of virsh's stderr kept for the error.
const MAX_STDERR: usize = 4 << 10;
/// How long virsh may take to exit once its pipes closed.
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// The event kinds that change nothing memtide learns of a domain (see the module docs).
const IGNORED: [&str; 3] = ["reboot", "balloon-change", "rtc-change"];
/// virsh's arguments after `-c URI`.
const EVENT_ARGS: [&str; 4] = ["event", "--all", "--loop", "--timestamp"];

/// What the thread and the watcher's holder share: the watched domain names.
type Shared = Book<()>;

/// A thread on libvirt's domain events through `virsh event` (see the module docs).
/// Dropping it stops virsh and the thread.
#[derive(Debug)]
pub struct DomainWatcher {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DomainWatcher {
    /// Starts following the domain events of libvirt at `virsh.uri` through `virsh.program`
    /// (and again whenever virsh exits, with a growing wait). `virsh.timeout` does not apply:
    /// the stream runs for as long as the watcher.
    pub fn start(virsh: &Virsh) -> std::io::Result<DomainWatcher> {
        DomainWatcher::start_settling(virsh, SETTLE)
    }

    fn start_settling(virsh: &Virsh, settle: Duration) -> std::io::Result<DomainWatcher> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (shared, stop, virsh) = (shared.clone(), stop.clone(), virsh.clone());
            std::thread::Builder::new()
                .name("memtide-libvirt-events".to_string())
                .spawn(move || follow_forever(&virsh, settle, &shared, &stop))?
        };
        Ok(DomainWatcher {
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Watches the domain named `name`: events about it mark it. At most 4,096 names; beyond,
    /// a name is always stale.
    pub fn watch(&self, name: &str) {
        lock(&self.shared).watch(name, ());
    }

    /// Stops watching `name`.
    pub fn unwatch(&self, name: &str) {
        lock(&self.shared).unwatch(name);
    }

    /// Now, for a later [`DomainWatcher::stale`]: take it before asking libvirt, so that an
    /// event during the question counts as after it.
    pub fn stamp(&self) -> Stamp {
        lock(&self.shared).stamp()
    }

    /// Whether what was learnt of `name` at `stamp` may be out of date (see the module docs).
    pub fn stale(&self, name: &str, stamp: Stamp) -> bool {
        lock(&self.shared).stale(name, stamp)
    }

    /// The stream is up.
    pub fn connected(&self) -> bool {
        lock(&self.shared).connected()
    }

    /// Why the stream last ended, if it did.
    pub fn error(&self) -> Option<String> {
        lock(&self.shared).error()
    }
}

impl Drop for DomainWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: runs virsh until stopped, again after a growing wait ([`Backoff`]).
fn follow_forever(virsh: &Virsh, settle: Duration, shared: &Mutex<Shared>, stop: &AtomicBool) {
    let mut backoff = Backoff::default();
    while !stop.load(Ordering::SeqCst) {
        let up = Cell::new(false);
        let why = follow_once(virsh, settle, shared, stop, &up);
        lock(shared).down(format!(
            "{}: {}: {why}",
            virsh.uri,
            virsh.command(&EVENT_ARGS)
        ));
        backoff.wait(up.get(), stop);
    }
}

/// One virsh: its events until it exits or the watcher stops; why it ended.
fn follow_once(
    virsh: &Virsh,
    settle: Duration,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
    up: &Cell<bool>,
) -> String {
    let mut args = vec!["-c".to_string(), virsh.uri.clone()];
    args.extend(EVENT_ARGS.iter().map(|a| a.to_string()));
    let Started {
        mut child,
        mut stdout,
        mut stderr,
    } = match process::spawn(&virsh.program, &args) {
        Ok(started) => started,
        Err(e) => return format!("cannot run it: {e}"),
    };
    let started = Instant::now();
    let set_up = || {
        if !up.replace(true) {
            lock(shared).up();
        }
    };
    let mut lines = Lines::default();
    let mut err = Vec::new();
    let read = process::pump(
        &mut stdout,
        &mut stderr,
        || {
            if stop.load(Ordering::SeqCst) {
                return Err(Stop::Stopped);
            }
            if started.elapsed() >= settle {
                set_up();
            }
            Ok(SLICE)
        },
        |data| {
            lines.feed(data, &mut |line| {
                if let Ok(line) = std::str::from_utf8(line) {
                    if let Some((kind, rest)) = event_line(line) {
                        set_up();
                        if !IGNORED.contains(&kind) {
                            mark(&mut lock(shared), rest);
                        }
                    }
                }
            });
            Ok(())
        },
        |data| {
            let room = MAX_STDERR.saturating_sub(err.len());
            err.extend_from_slice(&data[..data.len().min(room)]);
            Ok(())
        },
    );
    match read {
        Ok(()) => match process::reap(&mut child, Instant::now() + EXIT_WAIT) {
            Some(status) => error_lines(&String::from_utf8_lossy(&err), status),
            None => format!("did not exit within {EXIT_WAIT:?} of closing its output; killed it"),
        },
        Err(stop) => {
            process::kill(&mut child);
            match stop {
                Stop::Io(e) => format!("reading its output failed: {e}"),
                _ => "stopped".to_string(),
            }
        }
    }
}

/// A line of `virsh event`: the event's kind and what follows `for domain '` (the name, a
/// quote, and the details if any). `None` for any other line.
fn event_line(line: &str) -> Option<(&str, &str)> {
    const EVENT: &str = "event '";
    let at = if line.starts_with(EVENT) {
        0
    } else {
        line.find(": event '")? + 2
    };
    let (kind, rest) = line[at + EVENT.len()..].split_once('\'')?;
    Some((kind, rest.strip_prefix(" for domain '")?))
}

/// Marks each watched name that `rest` (what follows `for domain '`) is about.
fn mark(book: &mut Shared, rest: &str) {
    let names: Vec<String> = book
        .watched
        .keys()
        .filter(|name| {
            rest.strip_prefix(name.as_str())
                .is_some_and(|r| r == "'" || r.starts_with("': "))
        })
        .cloned()
        .collect();
    for name in names {
        book.mark(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// What `virsh event --all --loop --timestamp` printed (libvirt.md §5), and whether each
    /// marks its domain.
    const LINES: [(&str, bool); 10] = [
        ("2026-11-29 21:05:49.770+0000: event 'lifecycle' for domain 'h30a': Resumed Unpaused", true),
        ("2026-11-29 21:05:49.777+0000: event 'lifecycle' for domain 'h30a': Started Booted", true),
        ("2026-11-29 21:06:22.229+0000: event 'balloon-change' for domain 'h30a': 523264KiB", false),
        ("2026-11-29 21:08:40.522+0000: event 'lifecycle' for domain 'h30a': Shutdown Finished after host request", true),
        ("2026-11-29 21:08:40.539+0000: event 'lifecycle' for domain 'h30a': Stopped Destroyed", true),
        ("2026-11-29 21:09:46.483+0000: event 'lifecycle' for domain 'h30a': Defined Added", true),
        ("2026-11-29 21:12:50.070+0000: event 'reboot' for domain 'h30a'", false),
        ("2026-11-29 21:15:17.809+0000: event 'lifecycle' for domain 'h30a': Suspended Paused", true),
        ("2026-11-29 21:19:33.894+0000: event 'lifecycle' for domain 'h30a': Undefined Removed", true),
        ("event 'lifecycle' for domain 'h30a': Started Booted", true),
    ];

    fn marked_by(line: &str, watched: &[&str]) -> Vec<String> {
        let mut book = Shared::default();
        for name in watched {
            book.watch(name, ());
        }
        if let Some((kind, rest)) = event_line(line) {
            if !IGNORED.contains(&kind) {
                mark(&mut book, rest);
            }
        }
        book.touched.keys().cloned().collect()
    }

    #[test]
    fn lifecycle_events_mark_their_domain_reboots_and_balloon_moves_do_not() {
        for (line, marks) in LINES {
            let want: Vec<String> = if marks { vec!["h30a".into()] } else { vec![] };
            assert_eq!(marked_by(line, &["h30a", "h30"]), want, "{line}");
        }
    }

    #[test]
    fn a_line_is_matched_to_the_whole_watched_name_quotes_and_all() {
        let line = "t: event 'lifecycle' for domain 'it's mine': Started Booted";
        assert_eq!(marked_by(line, &["it's mine", "it", "it's"]), ["it's mine"]);
        for other in [
            "events received: 2",
            "",
            "\tx509dname=foo",
            "t: event 'lifecycle'",
        ] {
            assert_eq!(event_line(other), None, "{other}");
        }
    }

    /// A fake virsh whose `event`, the first time, prints two events and exits 1 as virsh
    /// does when libvirtd goes away (libvirt.md §5), and after that waits. Written by a child
    /// process (see the fake virsh in the parent module's tests).
    fn fake_virsh(dir: &Path) -> PathBuf {
        let path = dir.join("virsh");
        let script = r#"#!/bin/sh
here=$(dirname "$0")
printf '%s\n' "$@" > "$here/argv"
n=$(cat "$here/runs" 2>/dev/null || echo 0)
n=$((n + 1))
echo $n > "$here/runs"
if [ $n = 1 ]; then
  sleep 0.3
  echo "2026-11-29 21:05:49.777+0000: event 'lifecycle' for domain 'vm1': Started Booted"
  echo "2026-11-29 21:12:50.070+0000: event 'reboot' for domain 'vm2'"
  sleep 0.5
  printf 'events received: 2\n\n'
  echo 'error: Disconnected from qemu:///test due to end of file' >&2
  echo 'error: internal error: client socket is closed' >&2
  exit 1
fi
sleep 30
"#;
        crate::libvirt::tests::write_program(&path, script);
        path
    }

    fn until(what: &str, f: impl Fn() -> bool) {
        let start = Instant::now();
        while !f() {
            assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn a_virsh_that_exits_is_started_again_and_every_name_goes_stale() {
        let dir = tempfile::tempdir().unwrap();
        let virsh = Virsh {
            program: fake_virsh(dir.path()),
            ..Virsh::new("qemu:///test")
        };
        let w = DomainWatcher::start_settling(&virsh, Duration::from_millis(100)).unwrap();
        for name in ["vm1", "vm2", "vm3"] {
            w.watch(name);
        }
        until("up", || w.connected());
        let first = w.stamp();
        until("vm1's start marked it", || {
            lock(&w.shared).touched.contains_key("vm1")
        });
        assert!(w.stale("vm1", first));
        assert!(
            !lock(&w.shared).touched.contains_key("vm2"),
            "a reboot marks nothing"
        );
        until("virsh exited", || w.error().is_some());
        let e = w.error().unwrap();
        assert!(
            e.starts_with("qemu:///test: ")
                && e.contains("event --all --loop --timestamp: error: Disconnected from qemu:///test due to end of file"),
            "{e}"
        );
        assert!(w.stale("vm3", first), "down");
        until("started again", || w.connected());
        let second = w.stamp();
        assert_ne!(first, second);
        assert!(w.stale("vm3", first), "a stamp from before the restart");
        assert!(!w.stale("vm3", second));
        let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
        assert_eq!(
            argv.lines().collect::<Vec<_>>(),
            [
                "-c",
                "qemu:///test",
                "event",
                "--all",
                "--loop",
                "--timestamp"
            ]
        );
        let start = Instant::now();
        drop(w);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap();
        assert_eq!(runs.trim(), "2");
    }

    #[test]
    fn a_virsh_that_cannot_run_leaves_the_watcher_down_with_why() {
        let virsh = Virsh {
            program: PathBuf::from("/nonexistent/virsh"),
            ..Virsh::new("qemu:///system")
        };
        let w = DomainWatcher::start_settling(&virsh, Duration::from_millis(100)).unwrap();
        w.watch("vm1");
        until("an error", || w.error().is_some());
        assert!(!w.connected());
        assert!(w.stale("vm1", w.stamp()));
        assert!(
            w.error().unwrap().contains("cannot run it"),
            "{:?}",
            w.error()
        );
    }
}
