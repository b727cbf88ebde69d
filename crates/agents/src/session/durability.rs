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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Admitted, Session, SessionConfig};
    use memtide_balloon::line::Line;
    use memtide_model::{Pages, TenantId};

    const MIB: u64 = 1 << 20;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn mib(n: u64) -> Pages {
        Bytes(n * MIB).to_pages_floor()
    }

    /// Feeds `line` at `at`: what the session answered, and whether it closes.
    fn feed(session: &mut Session, line: &str, at: Duration) -> (Vec<String>, bool) {
        let reply = session.line(Line::Complete(line.as_bytes().to_vec()), at, |_| {
            Ok(Admitted {
                tenant: TenantId(1),
                name: "db".into(),
                id: 1,
            })
        });
        (reply.lines, reply.close)
    }

    /// A session whose MariaDB agent registered at 0 s.
    fn registered() -> Session {
        let mut session = Session::new(SessionConfig::default());
        let hello = format!(
            r#"{{"type":"hello","version":1,"app":"mariadb","kind":"buffer_pool","pid":100,"pool_bytes":{},"min_bytes":{},"max_bytes":{},"granule_bytes":{}}}"#,
            512 * MIB,
            64 * MIB,
            1024 * MIB,
            MIB
        );
        let (lines, _) = feed(&mut session, &hello, s(0));
        assert!(lines[0].contains(r#""type":"welcome""#), "{lines:?}");
        session
    }

    fn stats(pool: u64, used: u64, hits: u64, misses: u64) -> String {
        format!(
            r#"{{"type":"stats","pool_bytes":{pool},"used_bytes":{used},"hits":{hits},"misses":{misses},"evictions":0,"dirty_bytes":0}}"#
        )
    }

    /// A stats with durability figures: the settings of a MariaDB with the paper's bad ones,
    /// and `data_fsyncs` and `binlog_commits` as given (no other counter).
    fn stats_with_syncs(fsyncs: u64, commits: u64) -> String {
        stats(512 * MIB, 400 * MIB, 100, 10).replace(
            '}',
            &format!(
                r#","durability":{{"flush_log_at_trx_commit":1,"sync_binlog":1,"log_buffer_bytes":16777216,"write_io_threads":4,"data_fsyncs":{fsyncs},"binlog_commits":{commits}}}}}"#
            ),
        )
    }

    fn durability(h: &mut Session, at: Duration) -> Option<Durability> {
        h.lever(mib(700), at).unwrap().durability.map(|d| *d)
    }

    fn per_s(n: u64) -> Option<PerSecond> {
        Some(PerSecond::from_milli(n * 1000))
    }

    #[test]
    fn durability_settings_are_in_the_lever_as_reported_and_rates_wait_for_a_second_reading() {
        let mut h = registered();
        feed(&mut h, &stats(512 * MIB, 400 * MIB, 100, 10), s(1));
        assert_eq!(durability(&mut h, s(1)), None, "no figures reported");
        assert!(feed(&mut h, &stats_with_syncs(1000, 500), s(2))
            .0
            .is_empty());
        let first = durability(&mut h, s(2)).unwrap();
        assert_eq!(
            first,
            Durability {
                flush_log_at_trx_commit: Some(1),
                sync_binlog: Some(1),
                log_buffer: Some(Bytes(16 << 20)),
                write_io_threads: Some(4),
                ..Durability::default()
            },
            "settings at once, no rate from one reading"
        );
    }

    #[test]
    fn durability_counters_become_rates_over_at_least_the_span() {
        let mut h = registered();
        // 120 fsyncs and 100 commits a second, read every second.
        for t in 0..=5 {
            feed(
                &mut h,
                &stats_with_syncs(1000 + 120 * t, 500 + 100 * t),
                s(10 + t),
            );
            let d = durability(&mut h, s(10 + t)).unwrap();
            if t < 5 {
                assert_eq!(d.data_fsyncs, None, "only {t} s since the first reading");
            } else {
                assert_eq!((d.data_fsyncs, d.binlog_commits), (per_s(120), per_s(100)));
                assert_eq!((d.log_waits, d.log_fsyncs), (None, None), "not reported");
            }
        }
        // A reading repeated (the adapter's clock slipped) moves the next span's rate, not to 0.
        feed(&mut h, &stats_with_syncs(1600, 1000), s(16));
        feed(&mut h, &stats_with_syncs(1600, 1000), s(17));
        assert_eq!(durability(&mut h, s(17)).unwrap().data_fsyncs, per_s(120));
        for t in 18..=20 {
            feed(&mut h, &stats_with_syncs(1000 + 120 * (t - 10), 1000), s(t));
        }
        let d = durability(&mut h, s(20)).unwrap();
        assert_eq!(d.data_fsyncs, per_s(120));
        assert_eq!(d.binlog_commits, Some(PerSecond::ZERO), "idle: a rate of 0");
    }

    #[test]
    fn a_counter_that_goes_backwards_has_no_rate_until_a_span_after_it() {
        let mut h = registered();
        feed(&mut h, &stats_with_syncs(1000, 500), s(0));
        feed(&mut h, &stats_with_syncs(1600, 1000), s(5));
        assert_eq!(durability(&mut h, s(5)).unwrap().data_fsyncs, per_s(120));
        // The server restarted: its counters start again from about 0.
        assert!(
            feed(&mut h, &stats_with_syncs(30, 1100), s(6)).0.is_empty(),
            "no violation"
        );
        let d = durability(&mut h, s(6)).unwrap();
        assert_eq!(
            d.data_fsyncs, None,
            "went backwards: no rate, never a negative"
        );
        assert_eq!(d.binlog_commits, per_s(100), "kept going: its rate stands");
        feed(&mut h, &stats_with_syncs(130, 1200), s(8));
        assert_eq!(durability(&mut h, s(8)).unwrap().data_fsyncs, None);
        feed(&mut h, &stats_with_syncs(530, 1600), s(11));
        let d = durability(&mut h, s(11)).unwrap();
        assert_eq!((d.data_fsyncs, d.binlog_commits), (per_s(100), per_s(100)));
    }

    #[test]
    fn a_counter_missing_from_the_latest_reading_has_no_rate_at_once() {
        let mut h = registered();
        feed(&mut h, &stats_with_syncs(1000, 500), s(0));
        feed(&mut h, &stats_with_syncs(1500, 1000), s(5));
        assert_eq!(durability(&mut h, s(5)).unwrap().binlog_commits, per_s(100));
        let no_commits = stats_with_syncs(1600, 0).replace(r#","binlog_commits":0"#, "");
        feed(&mut h, &no_commits, s(6));
        let d = durability(&mut h, s(6)).unwrap();
        assert_eq!((d.binlog_commits, d.data_fsyncs), (None, per_s(100)));
    }

    #[test]
    fn stats_without_durability_clear_it_and_rates_start_again() {
        let mut h = registered();
        feed(&mut h, &stats_with_syncs(1000, 500), s(0));
        feed(&mut h, &stats_with_syncs(1500, 1000), s(5));
        feed(&mut h, &stats(512 * MIB, 400 * MIB, 100, 10), s(6));
        assert_eq!(durability(&mut h, s(6)), None);
        feed(&mut h, &stats_with_syncs(1600, 1100), s(7));
        assert_eq!(
            durability(&mut h, s(7)).unwrap().data_fsyncs,
            None,
            "a first reading again"
        );
    }
}
