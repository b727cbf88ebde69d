//! The host's `[disk]` and each tenant's disk table (n-tier or fsync load, weight and cap).

use crate::schema::{DbDoc, DiskDoc, FsyncDoc, NtierDoc};
use memtide_config::{FieldPath, Size};
use memtide_model::DiskSpec;
use memtide_sim::disk::device::DeviceConfig;
use memtide_sim::disk::load::{DbSettings, FsyncConfig, Growth, LoadConfig, NtierConfig};
use memtide_sim::disk::{DiskConfig, TenantDiskConfig};

use super::{Build, Result};

/// The most users an n-tier tenant may have, now or by its growth: 33 times the papers'
/// largest (Lai's 3,000). The simulator keeps every user's session and runs each of its
/// requests, so users bound both memory and time (a billion took 10 GB in 18 s, then aborted).
pub(crate) const MAX_USERS: u32 = 100_000;

/// The most writer threads an fsync tenant may have: 16 times the papers' largest (4); each
/// is a stream of writes and flushes the simulated disk serves one by one.
pub(crate) const MAX_FSYNC_THREADS: u16 = 64;

/// The shortest time a command or a seek may take, µs: the simulator serves every request as
/// an event, so the fastest disk it takes serves 100,000 a second (a SATA SSD's rate; the
/// papers' disks are 7200 RPM drives, 50 and 700 µs). A disk of 1e-300 µs ran 64 writers at a
/// million requests a simulated second.
pub(crate) const MIN_COMMAND_US: f64 = 10.0;

/// The fastest transfer rate, MB/s: 100 GB/s, beyond any one device.
pub(crate) const MAX_TRANSFER_MB_S: f64 = 100_000.0;

/// The deepest device queue: NVMe's per-queue 65,536 is beyond what the scheduler here
/// orders; SATA's NCQ (the papers' disks) is 32.
pub(crate) const MAX_QUEUE_DEPTH: u32 = 1024;

impl Build<'_> {
    /// `[disk]`: positive times and rate within the bounds above, a queue depth from 1 to
    /// [`MAX_QUEUE_DEPTH`].
    pub(super) fn disk(&self, at: &FieldPath, d: DiskDoc) -> Result<DiskConfig> {
        let base = DeviceConfig::default();
        let positive = |key: &str, v: Option<f64>, default: f64| -> Result<f64> {
            self.number(
                &at.key(key),
                v.unwrap_or(default),
                |x| x > 0.0,
                "must be > 0",
            )
        };
        let at_least_a_command = |key: &str, v: Option<f64>, default: f64| -> Result<f64> {
            self.number(
                &at.key(key),
                v.unwrap_or(default),
                |x| x >= MIN_COMMAND_US,
                &format!("must be at least {MIN_COMMAND_US} (µs; every request is an event)"),
            )
        };
        let device = DeviceConfig {
            seek_us: at_least_a_command("seek_us", d.seek_us, base.seek_us)?,
            near_us: positive("near_us", d.near_us, base.near_us)?,
            transfer_mb_s: self.number(
                &at.key("transfer_mb_s"),
                d.transfer_mb_s.unwrap_or(base.transfer_mb_s),
                |x| x > 0.0 && x <= MAX_TRANSFER_MB_S,
                &format!("must be > 0 and at most {MAX_TRANSFER_MB_S}"),
            )?,
            command_us: at_least_a_command("command_us", d.command_us, base.command_us)?,
            flush_us: positive("flush_us", d.flush_us, base.flush_us)?,
            cache_bytes: d
                .cache
                .map(|c| self.size(&at.key("cache"), c))
                .transpose()?
                .map_or(base.cache_bytes, Size::bytes),
        };
        let queue_depth = d.queue_depth.unwrap_or(1);
        if !(1..=MAX_QUEUE_DEPTH).contains(&queue_depth) {
            return Err(self.err(
                &at.key("queue_depth"),
                format!("must be from 1 to {MAX_QUEUE_DEPTH}"),
            ));
        }
        Ok(DiskConfig {
            device,
            queue_depth,
        })
    }

    /// A tenant's disk table, read by its kind (`ntier` or `fsync`): its workload, and what the
    /// controller gives it (its weight, a latency target).
    pub(super) fn tenant_disk(
        &self,
        at: &FieldPath,
        value: &toml::Value,
    ) -> Result<(TenantDiskConfig, DiskSpec)> {
        let (kind, rest) = self.doc.kind(at, value, None)?;
        let micros = |d: Option<memtide_config::Duration>, default_us: u64| {
            d.map_or(default_us, |d| d.get().as_micros() as u64)
        };
        let (load, weight, cap_iops, target) = match kind.as_str() {
            "ntier" => {
                let d: NtierDoc = self.read(at, rest)?;
                if d.users > MAX_USERS {
                    return Err(self.err(
                        &at.key("users"),
                        format!(
                            "must be at most {MAX_USERS} (the simulator runs each user's session)"
                        ),
                    ));
                }
                let growth = match d.growth {
                    Some(g) => {
                        let every = self.period(&at.key("growth").key("every"), g.every)?;
                        if g.until > MAX_USERS {
                            return Err(self.err(
                                &at.key("growth").key("until"),
                                format!("must be at most {MAX_USERS} (the simulator runs each user's session)"),
                            ));
                        }
                        if g.until < d.users {
                            return Err(self.err(
                                &at.key("growth").key("until"),
                                format!("must be at least users = {}", d.users),
                            ));
                        }
                        Some(Growth {
                            add: g.add,
                            every: every.as_micros() as u64,
                            until: g.until,
                        })
                    }
                    None => None,
                };
                let reads = self.number(
                    &at.key("reads_per_request"),
                    d.reads_per_request,
                    |v| (0.0..=1000.0).contains(&v),
                    "must be between 0 and 1000",
                )?;
                let write_share = self.number(
                    &at.key("write_share"),
                    d.write_share.unwrap_or(0.1),
                    |v| (0.0..=1.0).contains(&v),
                    "must be between 0 and 1",
                )?;
                let db = self.db(&at.key("db"), d.db.unwrap_or_default())?;
                let load = LoadConfig::Ntier(NtierConfig {
                    users: d.users,
                    growth,
                    think_ms: micros(d.think, 7_000_000) as f64 / 1000.0,
                    cpu_ms: micros(d.cpu, 10_000) as f64 / 1000.0,
                    reads_per_request: reads,
                    read_bytes: d.read_size.map_or(16 << 10, Size::bytes),
                    write_share,
                    db,
                });
                (load, d.weight, d.cap_iops, d.latency_target)
            }
            "fsync" => {
                let d: FsyncDoc = self.read(at, rest)?;
                if d.threads == 0 || d.threads > MAX_FSYNC_THREADS {
                    return Err(self.err(
                        &at.key("threads"),
                        format!("must be from 1 to {MAX_FSYNC_THREADS}"),
                    ));
                }
                let load = LoadConfig::Fsync(FsyncConfig {
                    threads: d.threads,
                    write_bytes: self.size(&at.key("write"), d.write)?.bytes(),
                    gap_us: micros(d.gap, 1000),
                    stagger_us: micros(d.stagger, 100),
                });
                (load, d.weight, d.cap_iops, d.latency_target)
            }
            _ => {
                return Err(self.err(
                    &at.key("kind"),
                    "unknown disk workload kind (expected \"ntier\" or \"fsync\")",
                ))
            }
        };
        let weight = weight.unwrap_or(100);
        if !DiskSpec::WEIGHTS.contains(&weight) {
            return Err(self.err(&at.key("weight"), "must be between 1 and 1000"));
        }
        if cap_iops == Some(0) {
            return Err(self.err(&at.key("cap_iops"), "must be >= 1"));
        }
        let latency_target_us = target
            .map(|d| {
                let us = d.get().as_micros();
                if us == 0 || us > u128::from(u32::MAX) {
                    Err(self.err(
                        &at.key("latency_target"),
                        "must be between 1 µs and 71 minutes",
                    ))
                } else {
                    Ok(us as u32)
                }
            })
            .transpose()?;
        Ok((
            TenantDiskConfig {
                load,
                cap_iops,
                weight,
            },
            DiskSpec {
                weight,
                latency_target_us,
            },
        ))
    }

    /// A database's settings: the paper's MySQL 5.5 unless given.
    fn db(&self, at: &FieldPath, d: DbDoc) -> Result<DbSettings> {
        let bytes = |key: &str, s: Option<Size>, default: u64| -> Result<u64> {
            s.map(|s| self.positive_size(&at.key(key), s).map(Size::bytes))
                .transpose()
                .map(|b| b.unwrap_or(default))
        };
        let at_least_one = |key: &str, v: Option<u32>, default: u32| -> Result<u32> {
            match v.unwrap_or(default) {
                0 => Err(self.err(&at.key(key), "must be >= 1")),
                n => Ok(n),
            }
        };
        let pages_dirtied = self.number(
            &at.key("pages_dirtied"),
            d.pages_dirtied.unwrap_or(3.0),
            |v| (0.0..=1000.0).contains(&v),
            "must be between 0 and 1000",
        )?;
        Ok(DbSettings {
            log_buffer: bytes("log_buffer", d.log_buffer, 8 << 20)?,
            redo_bytes: bytes("redo", d.redo, 256 << 10)?,
            sync_binlog: at_least_one("sync_binlog", d.sync_binlog, 3)?,
            binlog_bytes: bytes("binlog", d.binlog, 2 << 10)?,
            pages_dirtied,
            page_bytes: bytes("page_size", d.page_size, 16 << 10)?,
            io_capacity: at_least_one("io_capacity", d.io_capacity, 200)?,
            write_io_threads: at_least_one(
                "write_io_threads",
                d.write_io_threads.map(u32::from),
                4,
            )? as u16,
        })
    }
}
