//! The resize thread: it calls the application's shrink or grow callback for one target at a time and hands the outcome back to the agent's thread, which stays free to talk to memtide meanwhile.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::thread::{self, JoinHandle};

use super::runner::Event;
use super::{Refusal, ResizeFn};

/// One resize: move the pool from `from` bytes to `target` bytes for target `seq` of
/// connection `connection`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Job {
    pub connection: u64,
    pub seq: u64,
    pub from: u64,
    pub target: u64,
}

/// The resize thread, fed one job at a time.
pub(super) struct Resizer {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
}

impl Resizer {
    /// Starts the thread; each job's outcome comes back as [`Event::Resized`].
    pub(super) fn spawn(
        mut shrink: ResizeFn,
        mut grow: ResizeFn,
        events: SyncSender<Event>,
    ) -> io::Result<Resizer> {
        let (jobs, incoming) = mpsc::channel::<Job>();
        let thread = thread::Builder::new()
            .name("memtide-balloon-resize".into())
            .spawn(move || {
                for job in incoming {
                    let (callback, name) = if job.target < job.from {
                        (&mut shrink, "shrink")
                    } else {
                        (&mut grow, "grow")
                    };
                    let outcome = panic::catch_unwind(AssertUnwindSafe(|| callback(job.target)))
                        .unwrap_or_else(|_| {
                            Err(Refusal::new(format!("the {name} callback panicked")))
                        });
                    if events.send(Event::Resized { job, outcome }).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Resizer { jobs, thread })
    }

    pub(super) fn start(&self, job: Job) {
        // The thread only ends when this sender is dropped (in `finish`) or the agent's
        // thread is gone: neither can have happened while the agent's thread calls this.
        let _ = self.jobs.send(job);
    }

    /// Lets the thread end after its running callback, and waits for it.
    pub(super) fn finish(self) {
        drop(self.jobs);
        let _ = self.thread.join();
    }
}
