//! A progress bar over the ticks of a run, drawn on stderr only when stderr is a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// Progress of one run (or several, counted in ticks). Hidden when stderr is not a
/// terminal, so piped output and CI logs stay clean.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar over `total_ticks`, labelled (e.g. with the scenario name).
    pub fn new(total_ticks: u64, label: &str) -> Progress {
        Progress::drawn(
            total_ticks,
            label,
            "{prefix} [{bar:40}] {pos}/{len} ticks ({per_sec}, {eta} left)",
        )
    }

    /// A bar over `total_bytes` of a file being read, labelled (e.g. with the file's name).
    pub fn bytes(total_bytes: u64, label: &str) -> Progress {
        Progress::drawn(
            total_bytes,
            label,
            "{prefix} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
        )
    }

    /// A bar over `total` stages of work, each named by [`Progress::message`] as it starts.
    pub fn steps(total: u64, label: &str) -> Progress {
        Progress::drawn(total, label, "{prefix} [{bar:40}] {pos}/{len} {msg}")
    }

    /// A bar over `total` drawn with `template`, when stderr is a terminal.
    fn drawn(total: u64, label: &str, template: &str) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(template)
            .map(|s| s.progress_chars("=> "))
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        Progress { bar }
    }

    /// Sets the position (bytes read so far).
    pub fn set(&self, position: u64) {
        self.bar.set_position(position);
    }

    /// A bar that draws nothing (tests, benchmarks).
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
        }
    }

    /// Names the stage under way.
    pub fn message(&self, text: &str) {
        self.bar.set_message(text.to_string());
    }

    /// `n` more ticks done.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    /// Ticks done so far.
    pub fn position(&self) -> u64 {
        self.bar.position()
    }

    /// Clears the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_progress_counts_without_drawing() {
        let p = Progress::hidden();
        p.inc(3);
        p.inc(2);
        assert_eq!(p.position(), 5);
        p.finish();
    }

    #[test]
    fn new_progress_counts_whether_or_not_stderr_is_a_terminal() {
        let p = Progress::new(10, "test");
        p.inc(4);
        assert_eq!(p.position(), 4);
        p.finish();
    }
}
