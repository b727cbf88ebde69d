//! Lai et al.'s mitigations of fsync-bound disk interference as advice to a database's operator (issue 14): which durability setting to change, to what, the paper's measured effect, and the figures that call for it. Advice only: memtide never changes a database's durability settings itself.
//!
//! Lai et al. trace the interference between databases sharing a disk to their fsyncs, and
//! measure three settings that mitigate it (RUBBoS on InnoDB, two systems on one disk):
//!
//! - `sync_binlog` 1 → 100: response time more than 400% lower (10 lies between);
//! - `innodb_log_buffer_size` 8 → 64 MB: more commit records per group-commit fsync, response
//!   time halved (64% lower under a growing neighbour);
//! - `innodb_write_io_threads` 4 → 1: about 4x better response time under contention (57%
//!   lower under increasing load).
//!
//! [`advise`] gives each as an [`Advice`] when the tenant's own figures show the cost the
//! setting governs:
//!
//! - **`sync_binlog` in 1..=10 while the binary log is fsynced at least
//!   [`BINLOG_FSYNCS_AT_LEAST`] (10 per second)** → 100. The fsyncs are the group commits
//!   (or, without that counter, the commits) over `sync_binlog`. Why 10/s: a contended fsync
//!   costs a disk milliseconds (the paper's grew more than 600% from one database to four),
//!   so ten a second hold it a few percent of its time or more for this log alone, and every
//!   other tenant's requests queue behind them; below that, syncing less often buys little.
//!   `sync_binlog` 0 (never synced by the server) and above 10 are left alone.
//! - **Log waits while `innodb_log_buffer_size` is under 64 MiB** → 64 MiB. Any wait counts:
//!   a redo record waited for room in the buffer, so commits stalled behind a flush.
//! - **`innodb_write_io_threads` above 2 while the tenant's mean I/O latency on the shared
//!   disk is above [`SLOW_DISK_US`] (10 ms) and InnoDB fsyncs** → 1. 10 ms is a rotating
//!   disk's whole random write: a mean above it is queueing behind other requests, the
//!   contention the paper measured. Above 2, not 1: MariaDB 10.11 takes no fewer than 2
//!   (`SET GLOBAL innodb_write_io_threads = 1` leaves 2, with a warning), so advice at 2 would
//!   stand for ever on a server that has done what it can; MySQL takes the paper's 1.
//!
//! `innodb_flush_log_at_trx_commit` is never advised on: at 1 every commit fsyncs the redo log
//! too, and the advice on the commit path says so as a fact, but how durable a commit is, is
//! the operator's call.
//!
//! **Cost.** A few comparisons and no heap: the list is a fixed array of at most
//! [`MAX_ADVICE`], so the publisher may call [`advise`] every tick for every tenant with
//! durability figures (`AppBalloonLever::durability`); the text is formatted only when
//! written ([`Advice`]'s `Display`).

use memtide_model::{Bytes, DiskIo, Durability, PerSecond};
use std::fmt;

/// The paper's `sync_binlog`.
pub const LAI_SYNC_BINLOG: u32 = 100;
/// `sync_binlog` at most this is advised on (the paper measured 1, 10 and 100).
pub const SMALL_SYNC_BINLOG: u32 = 10;
/// Binary log fsyncs per second from which `sync_binlog` is advised on.
pub const BINLOG_FSYNCS_AT_LEAST: PerSecond = PerSecond::from_milli(10_000);
/// The paper's log buffer: 64 MiB.
pub const LAI_LOG_BUFFER: Bytes = Bytes(64 << 20);
/// The paper's write I/O threads.
pub const LAI_WRITE_IO_THREADS: u32 = 1;
/// Write I/O threads above this are advised on (MariaDB 10.11's least: see the module docs).
pub const WRITE_IO_THREADS_ABOVE: u32 = 2;
/// A mean I/O latency on the shared disk above this (µs) is contention.
pub const SLOW_DISK_US: f64 = 10_000.0;
/// The most advice [`advise`] gives: one per setting.
pub const MAX_ADVICE: usize = 3;

/// A setting advised on, by its name in MariaDB and MySQL.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Setting {
    SyncBinlog,
    LogBufferSize,
    WriteIoThreads,
}

impl Setting {
    /// The server's name of the setting.
    pub fn name(self) -> &'static str {
        match self {
            Setting::SyncBinlog => "sync_binlog",
            Setting::LogBufferSize => "innodb_log_buffer_size",
            Setting::WriteIoThreads => "innodb_write_io_threads",
        }
    }

    /// What Lai et al. measured of the change.
    pub fn effect(self) -> &'static str {
        match self {
            Setting::SyncBinlog => "Lai et al.: response time >400% lower at 100 than at 1",
            Setting::LogBufferSize => {
                "Lai et al.: 8 -> 64 MB halved response time, more commits per group-commit fsync"
            }
            Setting::WriteIoThreads => {
                "Lai et al.: 4 -> 1 about 4x better response time under contention"
            }
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The figures an advice stands on.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Evidence {
    /// The binary log's commits and fsyncs per second, and the redo log's flush setting (a
    /// fact, not advised on).
    BinlogSyncs {
        commits: PerSecond,
        fsyncs: PerSecond,
        flush_log_at_trx_commit: Option<u8>,
    },
    /// Waits for room in the log buffer per second, and the redo log's flush setting.
    LogWaits {
        waits: PerSecond,
        flush_log_at_trx_commit: Option<u8>,
    },
    /// The tenant's mean I/O latency on the shared disk (µs) and InnoDB's fsyncs per second.
    DiskLatency {
        latency_us: f64,
        data_fsyncs: PerSecond,
    },
}

/// One piece of advice: change `setting` from `value` to `suggested` (a count, or bytes for
/// the log buffer), for the paper's effect ([`Advice::effect`]), on the `evidence`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Advice {
    pub setting: Setting,
    pub value: u64,
    pub suggested: u64,
    pub evidence: Evidence,
}

impl Advice {
    /// What Lai et al. measured of the change.
    pub fn effect(&self) -> &'static str {
        self.setting.effect()
    }
}

impl fmt::Display for Advice {
    /// One line: `sync_binlog 1 -> 100: 240 commits/s, 240 binlog fsyncs/s (Lai et al.: ...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.setting {
            Setting::LogBufferSize => write!(
                f,
                "{} {} -> {}: ",
                self.setting,
                Bytes(self.value),
                Bytes(self.suggested)
            )?,
            Setting::SyncBinlog | Setting::WriteIoThreads => {
                write!(f, "{} {} -> {}: ", self.setting, self.value, self.suggested)?
            }
        }
        let flush = match self.evidence {
            Evidence::BinlogSyncs {
                commits,
                fsyncs,
                flush_log_at_trx_commit,
            } => {
                let fsyncs = Rate(fsyncs, "binlog fsyncs");
                write!(f, "{}, {fsyncs}", Rate(commits, "commits"))?;
                flush_log_at_trx_commit
            }
            Evidence::LogWaits {
                waits,
                flush_log_at_trx_commit,
            } => {
                write!(f, "{} for room in the log buffer", Rate(waits, "log waits"))?;
                flush_log_at_trx_commit
            }
            Evidence::DiskLatency {
                latency_us,
                data_fsyncs,
            } => {
                let ms = latency_us / 1000.0;
                let fsyncs = Rate(data_fsyncs, "InnoDB fsyncs");
                write!(f, "I/O latency {ms:.1} ms on the shared disk, {fsyncs}")?;
                None
            }
        };
        // At 1 (MariaDB's 3 too) each commit fsyncs the redo log as well: a fact, kept.
        if let Some(flush @ (1 | 3)) = flush {
            write!(
                f,
                "; innodb_flush_log_at_trx_commit = {flush} fsyncs the redo log at each commit too (kept: the operator's call)"
            )?;
        }
        write!(f, " ({})", self.effect())
    }
}

/// A rate with what it counts: `240 commits/s`, `3.5 log waits/s` (as [`PerSecond`] prints:
/// whole from 10, one decimal below).
struct Rate(PerSecond, &'static str);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rate, counts) = (self.0.per_s(), self.1);
        let decimals = if rate >= 10.0 { 0 } else { 1 };
        write!(f, "{rate:.decimals$} {counts}/s")
    }
}

/// At most [`MAX_ADVICE`] advice, inline (no heap).
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct AdviceList {
    items: [Option<Advice>; MAX_ADVICE],
}

impl AdviceList {
    fn push(&mut self, advice: Advice) {
        if let Some(slot) = self.items.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(advice);
        }
    }

    /// The advice, in the order of the module docs' rules.
    pub fn iter(&self) -> impl Iterator<Item = &Advice> {
        self.items.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.items[0].is_none()
    }
}

impl<'a> IntoIterator for &'a AdviceList {
    type Item = &'a Advice;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Option<Advice>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.items.iter().flatten()
    }
}

/// Lai et al.'s advice for a database with durability figures `d`, whose I/O on the disk it
/// shares with other tenants is `disk` (`None`: not on a shared disk, or not measured). See
/// the module docs for the rules.
pub fn advise(d: &Durability, disk: Option<&DiskIo>) -> AdviceList {
    let mut list = AdviceList::default();
    let flush = d.flush_log_at_trx_commit;
    if let (Some(sync @ 1..=SMALL_SYNC_BINLOG), Some(commits)) = (d.sync_binlog, d.binlog_commits) {
        let groups = d.binlog_group_commits.unwrap_or(commits);
        let fsyncs = PerSecond::from_milli(groups.milli() / u64::from(sync));
        if fsyncs >= BINLOG_FSYNCS_AT_LEAST {
            list.push(Advice {
                setting: Setting::SyncBinlog,
                value: u64::from(sync),
                suggested: u64::from(LAI_SYNC_BINLOG),
                evidence: Evidence::BinlogSyncs {
                    commits,
                    fsyncs,
                    flush_log_at_trx_commit: flush,
                },
            });
        }
    }
    if let (Some(buffer), Some(waits)) = (d.log_buffer, d.log_waits) {
        if buffer < LAI_LOG_BUFFER && waits > PerSecond::ZERO {
            list.push(Advice {
                setting: Setting::LogBufferSize,
                value: buffer.0,
                suggested: LAI_LOG_BUFFER.0,
                evidence: Evidence::LogWaits {
                    waits,
                    flush_log_at_trx_commit: flush,
                },
            });
        }
    }
    let latency = disk.and_then(|io| io.latency_us.filter(|_| io.ops > 0));
    if let (Some(threads), Some(latency_us), Some(data_fsyncs)) =
        (d.write_io_threads, latency, d.data_fsyncs)
    {
        if threads > WRITE_IO_THREADS_ABOVE
            && latency_us > SLOW_DISK_US
            && data_fsyncs > PerSecond::ZERO
        {
            list.push(Advice {
                setting: Setting::WriteIoThreads,
                value: u64::from(threads),
                suggested: u64::from(LAI_WRITE_IO_THREADS),
                evidence: Evidence::DiskLatency {
                    latency_us,
                    data_fsyncs,
                },
            });
        }
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    fn per_s(n: u64) -> Option<PerSecond> {
        Some(PerSecond::from_milli(n * 1000))
    }

    /// A busy MariaDB with the paper's bad settings but nothing yet showing their cost.
    fn quiet() -> Durability {
        Durability {
            flush_log_at_trx_commit: Some(1),
            sync_binlog: Some(1),
            log_buffer: Some(Bytes(8 << 20)),
            write_io_threads: Some(4),
            data_fsyncs: per_s(0),
            log_fsyncs: None,
            log_waits: per_s(0),
            binlog_commits: per_s(0),
            binlog_group_commits: per_s(0),
        }
    }

    fn shared_disk(latency_us: f64) -> DiskIo {
        DiskIo {
            weight: Some(100),
            ops: 500,
            latency_us: Some(latency_us),
            ..DiskIo::default()
        }
    }

    fn settings(list: &AdviceList) -> Vec<Setting> {
        list.iter().map(|a| a.setting).collect()
    }

    #[test]
    fn a_healthy_database_gets_no_advice() {
        let healthy = Durability {
            sync_binlog: Some(100),
            log_buffer: Some(LAI_LOG_BUFFER),
            write_io_threads: Some(1),
            data_fsyncs: per_s(300),
            log_waits: per_s(0),
            binlog_commits: per_s(2000),
            binlog_group_commits: per_s(900),
            ..quiet()
        };
        let list = advise(&healthy, Some(&shared_disk(40_000.0)));
        assert!(list.is_empty(), "{list:?}");
        assert_eq!(list.len(), 0);
    }

    #[test]
    fn bad_settings_without_their_cost_showing_get_no_advice() {
        let list = advise(&quiet(), Some(&shared_disk(2_000.0)));
        assert!(list.is_empty(), "{list:?}");
        assert!(advise(&Durability::default(), None).is_empty());
    }

    #[test]
    fn sync_binlog_1_with_many_commits_is_advised_to_100() {
        let d = Durability {
            binlog_commits: per_s(240),
            binlog_group_commits: per_s(200),
            ..quiet()
        };
        let list = advise(&d, None);
        assert_eq!(settings(&list), [Setting::SyncBinlog]);
        let a = list.iter().next().unwrap();
        assert_eq!((a.value, a.suggested), (1, 100));
        assert_eq!(
            a.evidence,
            Evidence::BinlogSyncs {
                commits: PerSecond::from_milli(240_000),
                fsyncs: PerSecond::from_milli(200_000),
                flush_log_at_trx_commit: Some(1),
            }
        );
        assert_eq!(
            a.to_string(),
            "sync_binlog 1 -> 100: 240 commits/s, 200 binlog fsyncs/s; innodb_flush_log_at_trx_commit = 1 \
             fsyncs the redo log at each commit too (kept: the operator's call) \
             (Lai et al.: response time >400% lower at 100 than at 1)"
        );
    }

    #[test]
    fn binlog_fsyncs_are_the_group_commits_over_sync_binlog() {
        // 10 commit groups per fsync: 150 groups a second are 15 fsyncs, over the line.
        let ten = Durability {
            sync_binlog: Some(10),
            binlog_commits: per_s(400),
            binlog_group_commits: per_s(150),
            flush_log_at_trx_commit: Some(2),
            ..quiet()
        };
        let a = *advise(&ten, None).iter().next().unwrap();
        assert_eq!(a.value, 10);
        assert!(
            a.to_string()
                .starts_with("sync_binlog 10 -> 100: 400 commits/s, 15 binlog fsyncs/s ("),
            "{a}"
        );
        // 90 groups at 10 per fsync: 9 a second, under the line.
        let fewer = Durability {
            binlog_group_commits: per_s(90),
            ..ten
        };
        assert!(advise(&fewer, None).is_empty());
        // Without the group counter each commit is taken as its own group.
        let no_groups = Durability {
            sync_binlog: Some(1),
            binlog_commits: per_s(12),
            binlog_group_commits: None,
            ..quiet()
        };
        assert_eq!(settings(&advise(&no_groups, None)), [Setting::SyncBinlog]);
    }

    #[test]
    fn sync_binlog_0_or_above_10_or_without_commit_figures_is_left_alone() {
        for sync in [0, 11, 100] {
            let d = Durability {
                sync_binlog: Some(sync),
                binlog_commits: per_s(5000),
                binlog_group_commits: per_s(5000),
                ..quiet()
            };
            assert!(advise(&d, None).is_empty(), "sync_binlog {sync}");
        }
        let unknown = Durability {
            binlog_commits: None,
            binlog_group_commits: per_s(5000),
            ..quiet()
        };
        assert!(advise(&unknown, None).is_empty());
    }

    #[test]
    fn log_waits_with_a_small_log_buffer_are_advised_to_64_mib() {
        let d = Durability {
            log_buffer: Some(Bytes(16 << 20)),
            log_waits: Some(PerSecond::from_milli(3_500)),
            ..quiet()
        };
        let list = advise(&d, None);
        assert_eq!(settings(&list), [Setting::LogBufferSize]);
        let a = list.iter().next().unwrap();
        assert_eq!((a.value, a.suggested), (16 << 20, 64 << 20));
        assert_eq!(
            a.to_string(),
            "innodb_log_buffer_size 16.0 MiB -> 64.0 MiB: 3.5 log waits/s for room in the log buffer; \
             innodb_flush_log_at_trx_commit = 1 fsyncs the redo log at each commit too (kept: the operator's call) \
             (Lai et al.: 8 -> 64 MB halved response time, more commits per group-commit fsync)"
        );
        let big = Durability {
            log_buffer: Some(LAI_LOG_BUFFER),
            ..d
        };
        assert!(advise(&big, None).is_empty(), "already 64 MiB");
    }

    #[test]
    fn many_write_threads_on_a_slow_shared_disk_are_advised_to_1() {
        let d = Durability {
            data_fsyncs: per_s(12),
            ..quiet()
        };
        let list = advise(&d, Some(&shared_disk(23_400.0)));
        assert_eq!(settings(&list), [Setting::WriteIoThreads]);
        let a = list.iter().next().unwrap();
        assert_eq!((a.value, a.suggested), (4, 1));
        assert_eq!(
            a.to_string(),
            "innodb_write_io_threads 4 -> 1: I/O latency 23.4 ms on the shared disk, 12 InnoDB fsyncs/s \
             (Lai et al.: 4 -> 1 about 4x better response time under contention)"
        );
    }

    #[test]
    fn write_threads_are_left_alone_when_fast_unshared_idle_or_at_mariadb_s_least() {
        let d = Durability {
            data_fsyncs: per_s(12),
            ..quiet()
        };
        assert!(advise(&d, Some(&shared_disk(9_000.0))).is_empty(), "fast");
        assert!(advise(&d, None).is_empty(), "no shared disk");
        let no_ops = DiskIo {
            ops: 0,
            ..shared_disk(50_000.0)
        };
        assert!(advise(&d, Some(&no_ops)).is_empty(), "no I/O this time");
        let idle = Durability {
            data_fsyncs: per_s(0),
            ..d
        };
        assert!(advise(&idle, Some(&shared_disk(50_000.0))).is_empty());
        let two = Durability {
            write_io_threads: Some(2),
            ..d
        };
        assert!(advise(&two, Some(&shared_disk(50_000.0))).is_empty());
    }

    #[test]
    fn every_rule_can_fire_at_once_in_the_docs_order() {
        let d = Durability {
            data_fsyncs: per_s(12),
            log_waits: per_s(1),
            binlog_commits: per_s(240),
            binlog_group_commits: per_s(240),
            ..quiet()
        };
        let list = advise(&d, Some(&shared_disk(30_000.0)));
        assert_eq!(
            settings(&list),
            [
                Setting::SyncBinlog,
                Setting::LogBufferSize,
                Setting::WriteIoThreads
            ]
        );
        assert_eq!(list.len(), MAX_ADVICE);
        assert_eq!((&list).into_iter().count(), 3);
    }

    #[test]
    fn the_flush_setting_is_a_fact_only_where_each_commit_fsyncs() {
        let d = Durability {
            flush_log_at_trx_commit: Some(0),
            binlog_commits: per_s(240),
            binlog_group_commits: per_s(240),
            ..quiet()
        };
        let line = advise(&d, None).iter().next().unwrap().to_string();
        assert!(!line.contains("flush_log_at_trx_commit"), "{line}");
    }
}
