//! A database's durability settings and how often it syncs, as its agent reports them (Lai et al., issue 14): the settings that decide what a commit costs the disk, and its fsyncs, log waits and commits per second.
//!
//! Lai et al. trace the disk interference between co-located databases to their fsyncs: the
//! redo log flushed at each (group) commit, the binary log synced every `sync_binlog` groups,
//! the page writers' own. memtide reports these figures and advises on the settings
//! (`memtide_policy::advice`); it never changes a database's durability settings itself.
//!
//! Settings are as the server reports them. Counters come as rates since an earlier reading
//! ([`PerSecond`], held in thousandths so that an observation stays `Eq`, as a curve's miss
//! ratios are held in parts per million); a counter the server does not have, or one that went
//! backwards in the interval (the server restarted), is `None`, never 0.

use crate::units::Bytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Events per second, in thousandths: exact, ordered and `Eq`.
#[derive(
    Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct PerSecond {
    milli: u64,
}

impl PerSecond {
    pub const ZERO: PerSecond = PerSecond { milli: 0 };

    /// `milli` thousandths of an event per second.
    pub const fn from_milli(milli: u64) -> PerSecond {
        PerSecond { milli }
    }

    /// The rate of a counter that went from `before` to `after` in `over`, rounded to a
    /// thousandth: `None` when it went backwards (the server restarted: the interval's count
    /// is unknown, not negative) or when no time passed.
    pub fn between(before: u64, after: u64, over: Duration) -> Option<PerSecond> {
        let count = after.checked_sub(before)?;
        let nanos = over.as_nanos();
        if nanos == 0 {
            return None;
        }
        // Thousandths per second: count × 1000 / seconds = count × 10^12 / nanoseconds.
        let milli = (u128::from(count) * 1_000_000_000_000 + nanos / 2) / nanos;
        Some(PerSecond {
            milli: u64::try_from(milli).unwrap_or(u64::MAX),
        })
    }

    /// Thousandths of an event per second.
    pub fn milli(self) -> u64 {
        self.milli
    }

    /// Events per second.
    pub fn per_s(self) -> f64 {
        self.milli as f64 / 1000.0
    }
}

impl fmt::Display for PerSecond {
    /// `240/s`, or with one decimal below 10 (`2.5/s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rate = self.per_s();
        if rate >= 10.0 {
            write!(f, "{rate:.0}/s")
        } else {
            write!(f, "{rate:.1}/s")
        }
    }
}

/// A database's durability settings and sync rates (see the module docs). The names are
/// InnoDB's and MariaDB's (MySQL's are the same); every figure is optional, as a server may
/// not have it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durability {
    /// `innodb_flush_log_at_trx_commit`: 1 (and MariaDB's 3) writes and fsyncs the redo log
    /// at every commit; 2 writes it at commit and fsyncs it about once a second; 0 does both
    /// about once a second. Reported, never advised on: durability is the operator's call.
    pub flush_log_at_trx_commit: Option<u8>,
    /// `sync_binlog`: the binary log is fsynced after every this many group commits; 0: never
    /// by the server (the OS writes it back when it will).
    pub sync_binlog: Option<u32>,
    /// `innodb_log_buffer_size`: redo records wait for room in it when it fills before a
    /// flush.
    pub log_buffer: Option<Bytes>,
    /// `innodb_write_io_threads`: InnoDB's page writer threads.
    pub write_io_threads: Option<u32>,
    /// InnoDB's fsyncs (`Innodb_data_fsyncs`: its data files' and, on MariaDB 10.8 and later,
    /// the redo log's too).
    pub data_fsyncs: Option<PerSecond>,
    /// Redo log fsyncs (`Innodb_os_log_fsyncs`), where the server counts them apart (MySQL,
    /// MariaDB before 10.8).
    pub log_fsyncs: Option<PerSecond>,
    /// Times a redo record waited for room in the log buffer (`Innodb_log_waits`).
    pub log_waits: Option<PerSecond>,
    /// Transactions written to the binary log (`Binlog_commits`; 0 without a binary log).
    pub binlog_commits: Option<PerSecond>,
    /// The binary log's group commits (`Binlog_group_commits`): one write of the binary log
    /// each, fsynced every `sync_binlog`th.
    pub binlog_group_commits: Option<PerSecond>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_rate_is_the_count_over_the_interval_in_thousandths() {
        assert_eq!(
            PerSecond::between(1000, 1240, Duration::from_secs(1)),
            Some(PerSecond::from_milli(240_000))
        );
        assert_eq!(
            PerSecond::between(0, 1, ms(3000)).map(PerSecond::milli),
            Some(333)
        );
        assert_eq!(
            PerSecond::between(0, 2, ms(3000)).map(PerSecond::milli),
            Some(667),
            "rounded"
        );
        assert_eq!(
            PerSecond::between(7, 7, ms(5000)),
            Some(PerSecond::ZERO),
            "an idle counter is a rate of 0"
        );
    }

    #[test]
    fn a_counter_that_went_backwards_or_no_time_has_no_rate() {
        assert_eq!(PerSecond::between(500, 20, ms(1000)), None);
        assert_eq!(PerSecond::between(0, 20, Duration::ZERO), None);
    }

    #[test]
    fn a_huge_rate_saturates_instead_of_wrapping() {
        let r = PerSecond::between(0, u64::MAX, Duration::from_nanos(1)).unwrap();
        assert_eq!(r.milli(), u64::MAX);
    }

    #[test]
    fn a_rate_prints_whole_from_10_and_with_a_decimal_below() {
        assert_eq!(PerSecond::from_milli(240_400).to_string(), "240/s");
        assert_eq!(PerSecond::from_milli(2_500).to_string(), "2.5/s");
        assert_eq!(PerSecond::ZERO.to_string(), "0.0/s");
        assert_eq!(PerSecond::from_milli(1_500).per_s(), 1.5);
    }
}
