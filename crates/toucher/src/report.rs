//! The toucher's status line: what the run loop has done so far, as one JSON line on stdout and,
//! optionally, atomically replaced in a status file.

use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the run loop shares with the reporter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    pub phase: usize,
    /// Passes completed since the start, over all phases.
    pub passes: u64,
    pub pass_ms_last: Option<f64>,
    /// Sum and count of the pass times in the current phase.
    pub phase_pass_ms_total: f64,
    pub phase_passes: u64,
    pub active_bytes: u64,
    pub idle_bytes: u64,
    pub file_bytes: u64,
}

impl Progress {
    /// Enters phase `phase`: new sizes, and the phase's pass mean starts over.
    pub fn enter_phase(
        &mut self,
        phase: usize,
        active_bytes: u64,
        idle_bytes: u64,
        file_bytes: u64,
    ) {
        self.phase = phase;
        self.active_bytes = active_bytes;
        self.idle_bytes = idle_bytes;
        self.file_bytes = file_bytes;
        self.phase_pass_ms_total = 0.0;
        self.phase_passes = 0;
    }

    pub fn record_pass(&mut self, pass: Duration) {
        let ms = pass.as_secs_f64() * 1e3;
        self.passes += 1;
        self.pass_ms_last = Some(ms);
        self.phase_pass_ms_total += ms;
        self.phase_passes += 1;
    }
}

/// One status line. Field order is the output order.
#[derive(Debug, Serialize, PartialEq)]
pub struct StatusLine {
    /// Seconds since the toucher started.
    pub t_s: f64,
    /// Index of the current phase, from 0.
    pub phase: usize,
    /// Passes completed since the start.
    pub passes: u64,
    /// Duration of the latest pass (touching and file reads, not the pause); null before one.
    pub pass_ms_last: Option<f64>,
    /// Mean pass duration in the current phase; null before its first pass.
    pub pass_ms_mean: Option<f64>,
    pub active_bytes: u64,
    pub idle_bytes: u64,
    pub file_bytes: u64,
    /// Resident set size from /proc/self/statm; null if unreadable.
    pub rss_bytes: Option<u64>,
}

impl StatusLine {
    pub fn new(elapsed: Duration, progress: &Progress, rss_bytes: Option<u64>) -> StatusLine {
        let mean = (progress.phase_passes > 0)
            .then(|| progress.phase_pass_ms_total / progress.phase_passes as f64);
        StatusLine {
            t_s: round3(elapsed.as_secs_f64()),
            phase: progress.phase,
            passes: progress.passes,
            pass_ms_last: progress.pass_ms_last.map(round3),
            pass_ms_mean: mean.map(round3),
            active_bytes: progress.active_bytes,
            idle_bytes: progress.idle_bytes,
            file_bytes: progress.file_bytes,
            rss_bytes,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// Resident bytes of this process: the second field of /proc/self/statm, in pages.
pub fn rss_bytes(page_bytes: usize) -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    parse_statm_rss_pages(&statm).map(|pages| pages * page_bytes as u64)
}

fn parse_statm_rss_pages(statm: &str) -> Option<u64> {
    statm.split_whitespace().nth(1)?.parse().ok()
}

/// Where status lines go: stdout (flushed per line) and, optionally, a file replaced atomically.
pub struct Sink {
    status_file: Option<PathBuf>,
    warned: bool,
}

impl Sink {
    pub fn new(status_file: Option<PathBuf>) -> Sink {
        Sink {
            status_file,
            warned: false,
        }
    }

    /// Writes a first line to the status file so a bad path fails at the start. The error
    /// names the path.
    pub fn check(&self, line: &str) -> Result<(), String> {
        match &self.status_file {
            Some(path) => replace_atomically(path, line)
                .map_err(|e| format!("--status-file {}: cannot write: {e}", path.display())),
            None => Ok(()),
        }
    }

    /// Prints `line`; a closed stdout is ignored. A status file that stops being writable is
    /// reported once on stderr and the run goes on.
    pub fn emit(&mut self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        if let Some(path) = &self.status_file {
            if let Err(e) = replace_atomically(path, line) {
                if !self.warned {
                    eprintln!(
                        "memtide-toucher: --status-file {}: cannot write: {e}",
                        path.display()
                    );
                    self.warned = true;
                }
            }
        }
    }
}

/// Writes `line` to `<path>.tmp` and renames it over `path`, so readers never see half a line.
fn replace_atomically(path: &Path, line: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{line}\n"))?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_line_has_the_documented_fields_in_order() {
        let mut progress = Progress::default();
        progress.enter_phase(1, 8 << 20, 4 << 20, 2 << 20);
        let line =
            StatusLine::new(Duration::from_millis(1500), &progress, Some(12 << 20)).to_json();
        assert_eq!(
            line,
            "{\"t_s\":1.5,\"phase\":1,\"passes\":0,\"pass_ms_last\":null,\"pass_ms_mean\":null,\
             \"active_bytes\":8388608,\"idle_bytes\":4194304,\"file_bytes\":2097152,\
             \"rss_bytes\":12582912}"
        );
    }

    #[test]
    fn pass_mean_covers_the_current_phase_and_passes_the_whole_run() {
        let mut progress = Progress::default();
        progress.record_pass(Duration::from_millis(100));
        progress.enter_phase(1, 0, 0, 0);
        progress.record_pass(Duration::from_millis(2));
        progress.record_pass(Duration::from_millis(4));
        let line = StatusLine::new(Duration::ZERO, &progress, None);
        assert_eq!(line.passes, 3);
        assert_eq!(line.pass_ms_last, Some(4.0));
        assert_eq!(line.pass_ms_mean, Some(3.0));
        assert_eq!(line.rss_bytes, None);
    }

    #[test]
    fn statm_rss_is_the_second_field() {
        assert_eq!(parse_statm_rss_pages("1000 300 20 1 0 50 0\n"), Some(300));
        assert_eq!(parse_statm_rss_pages("1000"), None);
        assert_eq!(parse_statm_rss_pages(""), None);
        assert!(rss_bytes(4096).unwrap_or(0) > 0);
    }

    #[test]
    fn status_file_is_replaced_whole_and_its_tmp_is_gone() {
        let path =
            std::env::temp_dir().join(format!("memtide-toucher-{}-status", std::process::id()));
        let sink = Sink::new(Some(path.clone()));
        sink.check("{\"a\":1}").unwrap();
        sink.check("{\"a\":2}").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":2}\n");
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        assert!(!PathBuf::from(tmp).exists());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_unwritable_status_file_is_named() {
        let sink = Sink::new(Some(PathBuf::from("/nonexistent-dir/status.json")));
        let err = sink.check("{}").unwrap_err();
        assert!(
            err.contains("--status-file /nonexistent-dir/status.json"),
            "{err}"
        );
    }
}
