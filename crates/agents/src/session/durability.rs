//! A database's durability figures as a session follows them: the settings last reported, and the sync counters as rates per second, each measured over at least [`RATE_SPAN`].
//!
//! The rates are `None` until two readings that far apart, and `None` for a counter that went
//! backwards (the server restarted: the rate starts again from that reading) or that the
//! latest reading lacks, never a negative or a zero standing for a gap.

use memtide_balloon::protocol::Durability as Reading;
use memtide_model::{Bytes, Durability, PerSecond};
use std::time::Duration;

/// The shortest time a durability rate is measured over. An adapter reads its server's
/// counters on a clock of its own and its agent sends the last reading each second, so a
/// rate between two consecutive stats would now and then count one reading twice: 0 for one
/// interval and double the next. Over 5 s such a slip moves a rate by a fifth at most.
pub const RATE_SPAN: Duration = Duration::from_secs(5);

/// A database's durability figures as a session follows them (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Syncs {
    /// The reading the rates are measured from, and when it came.
    base: Option<(Duration, Reading)>,
    /// The latest reading: a counter below it has gone backwards.
    last: Option<Reading>,
    /// What the lever reports.
    now: Option<Durability>,
}

impl Syncs {
    /// What the lever reports: the settings and rates (`None` without figures).
    pub(crate) fn figures(&self) -> Option<Durability> {
        self.now
    }

    /// Takes the durability figures of a `stats` received at `now` (`None`: the stats had
    /// none, and rates start again from the next reading).
    pub(crate) fn read(&mut self, reading: Option<&Reading>, now: Duration) {
        let Some(r) = reading else {
            *self = Syncs::default();
            return;
        };
        let mut d = self.now.unwrap_or_default();
        d.flush_log_at_trx_commit = r.flush_log_at_trx_commit;
        d.sync_binlog = r.sync_binlog;
        d.log_buffer = r.log_buffer_bytes.map(Bytes);
        d.write_io_threads = r.write_io_threads;
        let is = counters(r);
        let was = self.last.as_ref().map(counters);
        let back = |i: usize| {
            was.and_then(|w| w[i])
                .zip(is[i])
                .is_some_and(|(was, is)| is < was)
        };
        let restarted = (0..is.len()).any(back);
        for (i, rate) in rates(&mut d).into_iter().enumerate() {
            if is[i].is_none() || back(i) {
                *rate = None;
            }
        }
        match self.base {
            Some((at, base)) if !restarted && now.saturating_sub(at) >= RATE_SPAN => {
                let from = counters(&base);
                for (i, rate) in rates(&mut d).into_iter().enumerate() {
                    *rate = from[i]
                        .zip(is[i])
                        .and_then(|(was, is)| PerSecond::between(was, is, now - at));
                }
                self.base = Some((now, *r));
            }
            Some(_) if !restarted => {}
            _ => self.base = Some((now, *r)),
        }
        self.last = Some(*r);
        self.now = Some(d);
    }
}

/// A reading's counters, in the order of [`rates`].
fn counters(r: &Reading) -> [Option<u64>; 5] {
    [
        r.data_fsyncs,
        r.log_fsyncs,
        r.log_waits,
        r.binlog_commits,
        r.binlog_group_commits,
    ]
}

/// The rates of the counters of [`counters`].
fn rates(d: &mut Durability) -> [&mut Option<PerSecond>; 5] {
    [
        &mut d.data_fsyncs,
        &mut d.log_fsyncs,
        &mut d.log_waits,
        &mut d.binlog_commits,
        &mut d.binlog_group_commits,
    ]
}
