//! The toucher's run: sets up memory and file, then goes through the phases (fill or release,
//! then passes and pauses) while a reporter thread prints status lines.

use crate::args::Config;
use crate::file::CacheFile;
use crate::region::{self, pages_for, Region, Walk};
use crate::report::{rss_bytes, Progress, Sink, StatusLine};
use crate::signal::{self, STOP};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest sleep between two looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// Why a run failed: bad input found while setting up (exit 2), or a failure mid-run (exit 1).
#[derive(Debug)]
pub enum RunError {
    BadInput(String),
    Failed(String),
}

/// Runs `config` until the phases are over (with `--exit-after-phases`) or a signal arrives.
pub fn run(config: &Config) -> Result<(), RunError> {
    let started = Instant::now();
    signal::install().map_err(RunError::Failed)?;
    let page_bytes = region::page_bytes();

    let capacity_pages = config
        .phases
        .iter()
        .map(|p| {
            pages_for(p.active_bytes, page_bytes)
                .saturating_add(pages_for(p.idle_bytes, page_bytes))
        })
        .max()
        .unwrap_or(0);
    let mut region = Region::map(capacity_pages, page_bytes, config.content).map_err(|e| {
        RunError::BadInput(format!(
            "--active/--idle: cannot map {} bytes (the largest active+idle of the phases): {e}",
            capacity_pages as u128 * page_bytes as u128
        ))
    })?;
    let mut cache_file = match &config.file_path {
        Some(path) => {
            let file_bytes = config
                .phases
                .iter()
                .map(|p| p.file_bytes)
                .max()
                .unwrap_or(0);
            Some(CacheFile::prepare(path, file_bytes).map_err(RunError::BadInput)?)
        }
        None => None,
    };

    let progress = Arc::new(Mutex::new(Progress::default()));
    enter_phase(&progress, config, 0, page_bytes);
    let sink = Sink::new(config.status_file.clone());
    let first = StatusLine::new(started.elapsed(), &lock(&progress), rss_bytes(page_bytes));
    sink.check(&first.to_json()).map_err(RunError::BadInput)?;

    let done = Arc::new(AtomicBool::new(false));
    let reporter = {
        let (progress, done) = (Arc::clone(&progress), Arc::clone(&done));
        let interval = Duration::from_millis(config.report_every_ms);
        std::thread::spawn(move || {
            report_loop(sink, started, interval, &progress, &done, page_bytes)
        })
    };

    let outcome = drive(
        config,
        &mut region,
        cache_file.as_mut(),
        &progress,
        page_bytes,
    );

    done.store(true, Ordering::SeqCst);
    let mut sink = reporter
        .join()
        .map_err(|_| RunError::Failed("the reporter thread failed".to_string()))?;
    let last = StatusLine::new(started.elapsed(), &lock(&progress), rss_bytes(page_bytes));
    sink.emit(&last.to_json());
    outcome
}

/// Goes through the phases. Returns early, with `Ok`, when a stop signal arrives.
fn drive(
    config: &Config,
    region: &mut Region,
    mut cache_file: Option<&mut CacheFile>,
    progress: &Mutex<Progress>,
    page_bytes: usize,
) -> Result<(), RunError> {
    let mut pass = 0u64;
    for (index, phase) in config.phases.iter().enumerate() {
        let (active_pages, idle_pages) = enter_phase(progress, config, index, page_bytes);
        if region.resize(active_pages + idle_pages, &STOP) == Walk::Stopped {
            return Ok(());
        }
        let deadline = phase
            .duration_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        loop {
            if signal::stop_requested() {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let pass_started = Instant::now();
            if region.touch(active_pages, pass, &STOP) == Walk::Stopped {
                return Ok(());
            }
            if let Some(file) = cache_file.as_deref_mut() {
                if file
                    .read(phase.file_bytes, &STOP)
                    .map_err(RunError::Failed)?
                    == Walk::Stopped
                {
                    return Ok(());
                }
            }
            pass += 1;
            lock(progress).record_pass(pass_started.elapsed());
            pause(Duration::from_millis(config.pause_ms), deadline);
        }
    }
    Ok(())
}

/// Shows phase `index` in the progress; returns its active and idle pages.
fn enter_phase(
    progress: &Mutex<Progress>,
    config: &Config,
    index: usize,
    page_bytes: usize,
) -> (usize, usize) {
    let phase = &config.phases[index];
    let active_pages = pages_for(phase.active_bytes, page_bytes);
    let idle_pages = pages_for(phase.idle_bytes, page_bytes);
    lock(progress).enter_phase(
        index,
        active_pages as u64 * page_bytes as u64,
        idle_pages as u64 * page_bytes as u64,
        phase.file_bytes,
    );
    (active_pages, idle_pages)
}

/// Sleeps `pause`, cut short by the phase deadline or a stop signal.
fn pause(pause: Duration, deadline: Option<Instant>) {
    let mut until = Instant::now() + pause;
    if let Some(d) = deadline {
        until = until.min(d);
    }
    sleep_until(until, signal::stop_requested);
}

/// Sleeps until `until` in steps of at most `STOP_POLL`, returning early once `interrupted`.
fn sleep_until(until: Instant, interrupted: impl Fn() -> bool) {
    loop {
        let now = Instant::now();
        if now >= until || interrupted() {
            return;
        }
        std::thread::sleep((until - now).min(STOP_POLL));
    }
}

/// Prints a status line every `interval` from `started` until the run is done or stopped; hands
/// the sink back for the final line.
fn report_loop(
    mut sink: Sink,
    started: Instant,
    interval: Duration,
    progress: &Mutex<Progress>,
    done: &AtomicBool,
    page_bytes: usize,
) -> Sink {
    let finished = || done.load(Ordering::SeqCst) || signal::stop_requested();
    let mut next = started;
    loop {
        sleep_until(next, finished);
        if finished() {
            return sink;
        }
        let snapshot = lock(progress).clone();
        let line = StatusLine::new(started.elapsed(), &snapshot, rss_bytes(page_bytes));
        sink.emit(&line.to_json());
        next += interval;
        // A stalled host (swapping, frozen cgroup) skips lines rather than bursting them out.
        let now = Instant::now();
        if next < now {
            next = now + interval;
        }
    }
}

/// The progress, even if another thread panicked holding it (it holds plain numbers).
fn lock(progress: &Mutex<Progress>) -> MutexGuard<'_, Progress> {
    progress
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_until_returns_early_when_interrupted() {
        let started = Instant::now();
        sleep_until(started + Duration::from_secs(10), || true);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn sleep_until_waits_for_the_instant() {
        let started = Instant::now();
        sleep_until(started + Duration::from_millis(50), || false);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn pause_stops_at_the_phase_deadline() {
        let started = Instant::now();
        pause(
            Duration::from_secs(10),
            Some(started + Duration::from_millis(30)),
        );
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
