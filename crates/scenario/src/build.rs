//! Turns the file as read (`schema.rs`) into a runnable [`Scenario`]: reads the tables that depend on their `kind`, fills in defaults, checks each value and the relations between fields (min <= max, names in events, the budget against the mins, times inside the run), every error pointing at the field it names; sizes become pages, rounded to the nearest page.

use crate::scenario::{Event, Scenario, ScenarioTenant, TimedEvent, Variant};
use crate::schema::{
    AgentDoc, BalloonDoc, CacheDoc, CommittedDoc, ContentDoc, CpuJobDoc, DatabaseDoc, DbDoc,
    DiskDoc, FileServerDoc, FsyncDoc, IdleDoc, IoDoc, IoRemapDoc, JobDoc, JvmDoc, KindDoc,
    NtierDoc, OltpDoc, PhaseDoc, PolicyDoc, SamplingDoc, ScenarioDoc, SetTaxRateDoc, SetTenantDoc,
    SetWorkloadDoc, SharingDoc, StopTenantDoc, TenantDoc, ToucherDoc, TwsDoc, WebDoc,
};
use memtide_config::quotas::{QuotasDoc, SloDoc};
use memtide_config::{field_names, ConfigError, Document, FieldPath, Override, Size};
use memtide_controller::ControllerConfig;
use memtide_model::{
    DiskSpec, EstimatorConfig, Pages, SamplingConfig, SharingSettings, Slo, TaxRate, TenantId,
    TenantSpec, WorkingSetConfig,
};
use memtide_policy::{QuotaSettings, ReclamationThresholds};
use memtide_sim::app::{AgentConfig, DEFAULT_GRANULE};
use memtide_sim::config::{BalloonConfig, HostConfig, SamplingSetup, TenantKind, VmConfig};
use memtide_sim::cost::CostModel;
use memtide_sim::disk::device::DeviceConfig;
use memtide_sim::disk::load::{DbSettings, FsyncConfig, Growth, LoadConfig, NtierConfig};
use memtide_sim::disk::{DiskConfig, TenantDiskConfig};
use memtide_sim::remap::{IoRemapConfig, VmIoConfig};
use memtide_sim::sharing::{ContentMix, SharingConfig};
use memtide_sim::workload::config::defaults;
use memtide_sim::workload::{Job, TouchPhase, Workload, WorkloadConfig};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

type Result<T> = std::result::Result<T, ConfigError>;

/// The sim's tick: scenario times are whole ticks.
pub(crate) const TICK: Duration = Duration::from_secs(1);
/// Longest time a scenario may give.
const MAX_TIME: Duration = Duration::from_secs(1000 * 3600);

const DEFAULT_SEED: u64 = 1;
const DEFAULT_CONVERGENCE: (f64, f64) = (0.9, 1.3);
const DEFAULT_SHARES: u64 = 1000;
const DEFAULT_OVERHEAD: Size = Size(32 << 20);
const DEFAULT_KERNEL: Size = Size(16 << 20);
const DEFAULT_BALLOON_RATE_PER_S: Size = Size(128 << 20);
const DEFAULT_HOST_SWAP_PER_S: Size = Size(32 << 20);
const DEFAULT_BALLOON_STALL_TICKS: u32 = 3;
/// Copies of a page before it is remapped into low memory, when `[io_remap]` does not say.
const DEFAULT_REMAP_THRESHOLD: u32 = 32;

const ESTIMATOR_KINDS: &str = "\"sampling\", \"tws\" or \"committed\"";
const WORKLOAD_KINDS: &str =
    "\"idle\", \"toucher\", \"file_server\", \"cpu_job\", \"oltp\", \"web\", \"cache\", \"database\" or \"jvm\"";
const EVENT_KINDS: &str = "\"set_tax_rate\", \"set_workload\", \"stop_tenant\" or \"set_tenant\"";

/// A size as messages write it: `"256M"`.
fn shown(size: Size) -> String {
    format!("\"{size}\"")
}

/// A time as messages write it: `"10m"`.
fn shown_time(d: Duration) -> String {
    format!("\"{}\"", memtide_config::Duration(d))
}

/// Builds the scenario in `doc`, read from `source`.
pub(crate) fn build(doc: &Document, source: &Path) -> Result<Scenario> {
    Build { doc }.scenario(source)
}

/// What the checks across tenants need of one.
struct Facts {
    name: String,
    min: Size,
    max: Size,
    /// Its pool is held to an SLO (Gemini's cache quotas).
    slo: bool,
}

struct Build<'a> {
    doc: &'a Document,
}

impl Build<'_> {
    fn err(&self, path: &FieldPath, message: impl Into<String>) -> ConfigError {
        self.doc.error(path, message)
    }

    fn read<T: DeserializeOwned>(&self, path: &FieldPath, value: toml::Value) -> Result<T> {
        self.doc.read_value(path, value)
    }

    /// A size of at most 1 TiB.
    fn size(&self, path: &FieldPath, s: Size) -> Result<Size> {
        if s > Size::TIB {
            return Err(self.err(path, "must be at most \"1T\" (1 TiB)"));
        }
        Ok(s)
    }

    /// A size above zero and at most 1 TiB.
    fn positive_size(&self, path: &FieldPath, s: Size) -> Result<Size> {
        if s.bytes() == 0 {
            return Err(self.err(path, "must be > 0"));
        }
        self.size(path, s)
    }

    /// A workload size in MiB, as the sim takes it.
    fn mib(&self, path: &FieldPath, s: Option<Size>) -> Result<Option<f64>> {
        s.map(|s| self.size(path, s).map(Size::as_mib_f64))
            .transpose()
    }

    /// A time of at most [`MAX_TIME`].
    fn time(&self, path: &FieldPath, d: memtide_config::Duration) -> Result<Duration> {
        if d.get() > MAX_TIME {
            return Err(self.err(path, format!("must be at most {}", shown_time(MAX_TIME))));
        }
        Ok(d.get())
    }

    /// A period something is done once in: at least the tick, since the simulator observes
    /// once a tick (a shorter period could not be measured, and would cost time as its
    /// inverse).
    fn period(&self, path: &FieldPath, d: memtide_config::Duration) -> Result<Duration> {
        if d.get() < TICK {
            return Err(self.err(
                path,
                "must be at least 1 s (the tick: the simulator observes once a tick)",
            ));
        }
        self.time(path, d)
    }

    /// A time that falls on a tick.
    fn tick_time(&self, path: &FieldPath, d: memtide_config::Duration) -> Result<Duration> {
        let d = self.time(path, d)?;
        if d.subsec_nanos() != 0 {
            return Err(self.err(path, "must be a whole number of seconds (the tick is 1 s)"));
        }
        Ok(d)
    }

    /// A finite number for which `ok` holds; `rule` says which.
    fn number(
        &self,
        path: &FieldPath,
        v: f64,
        ok: impl Fn(f64) -> bool,
        rule: &str,
    ) -> Result<f64> {
        if v.is_finite() && ok(v) {
            Ok(v)
        } else {
            Err(self.err(path, rule))
        }
    }

    fn scenario(&self, source: &Path) -> Result<Scenario> {
        let root = FieldPath::root();
        let file: ScenarioDoc = self.doc.read(&root)?;
        let name = match file.name {
            Some(name) => {
                check_name(&name).map_err(|m| self.err(&root.key("name"), m))?;
                name
            }
            None => default_name(source),
        };
        let duration = self.tick_time(&root.key("duration"), file.duration)?;
        if duration.is_zero() {
            return Err(self.err(&root.key("duration"), "must be > 0"));
        }
        let convergence = match file.convergence {
            None => DEFAULT_CONVERGENCE,
            Some(c) => {
                let at = root.key("convergence");
                let low = c.low.unwrap_or(DEFAULT_CONVERGENCE.0);
                let high = c.high.unwrap_or(DEFAULT_CONVERGENCE.1);
                self.number(&at.key("low"), low, |v| v >= 0.0, "must be >= 0")?;
                self.number(&at.key("high"), high, |v| v > 0.0, "must be > 0")?;
                if low >= high {
                    return Err(self.err(&at.key("low"), format!("must be below high = {high}")));
                }
                (low, high)
            }
        };
        let host_at = root.key("host");
        let machine = self.positive_size(&host_at.key("memory"), file.host.memory)?;
        let host_swap = self.size(
            &host_at.key("host_swap"),
            file.host.host_swap.unwrap_or_default(),
        )?;
        let cost = file.cost.unwrap_or_default();
        if let Err(e) = cost.validate() {
            return Err(self.err(
                &root.key("cost").key(e.field),
                "must be a finite number >= 0",
            ));
        }

        let mut tenants = Vec::with_capacity(file.tenants.len());
        let mut facts: Vec<Facts> = Vec::with_capacity(file.tenants.len());
        let mut first_of: BTreeMap<String, usize> = BTreeMap::new();
        for (i, t) in file.tenants.into_iter().enumerate() {
            let at = root.key("tenants").index(i);
            if let Some(first) = first_of.insert(t.name.clone(), i) {
                return Err(self.err(
                    &at.key("name"),
                    format!("duplicate tenant name (tenants[{first}] has it too)"),
                ));
            }
            let (tenant, fact) = self.tenant(&at, i, t, duration, &cost)?;
            tenants.push(tenant);
            facts.push(fact);
        }
        let sharing = file
            .sharing
            .map(|d| self.sharing(&root.key("sharing"), d))
            .transpose()?;
        let io_remap = file
            .io_remap
            .map(|d| self.io_remap(&root.key("io_remap"), d, machine))
            .transpose()?;
        let disk = file
            .disk
            .map(|d| self.disk(&root.key("disk"), d))
            .transpose()?;
        if disk.is_none() {
            if let Some(i) = tenants.iter().position(|t| t.vm.disk.is_some()) {
                return Err(self.err(
                    &root.key("tenants").index(i).key("disk"),
                    "needs the host's [disk] table",
                ));
            }
        }
        let mut controller = self.controller(file.policy.unwrap_or_default(), &facts)?;
        controller.sharing = sharing.map(|(settings, _)| settings);
        let events = self.events(&file.events, &facts, duration, &cost)?;

        let mut variants: Vec<Variant> = Vec::new();
        for (i, v) in file.variants.into_iter().enumerate() {
            let at = root.key("variants").index(i);
            let valid = !v.name.is_empty()
                && v.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid {
                return Err(self.err(
                    &at.key("name"),
                    "must be letters, digits, - and _ only (it names an output directory)",
                ));
            }
            if let Some(first) = variants.iter().position(|x| x.name == v.name) {
                return Err(self.err(
                    &at.key("name"),
                    format!("duplicate variant name (variants[{first}] has it too)"),
                ));
            }
            for (j, s) in v.set.iter().enumerate() {
                Override::parse(s).map_err(|m| self.err(&at.key("set").index(j), m))?;
            }
            variants.push(Variant {
                name: v.name,
                overrides: v.set,
            });
        }

        Ok(Scenario {
            name,
            description: file.description,
            source: source.to_path_buf(),
            variant: None,
            duration,
            seed: file.seed.unwrap_or(DEFAULT_SEED),
            baseline: file.baseline,
            convergence,
            host: HostConfig {
                machine: machine.to_pages(),
                host_swap: host_swap.to_pages(),
                tick: TICK,
                sharing: sharing.map(|(_, per_vm_rate)| SharingConfig { per_vm_rate }),
                io_remap,
                disk,
            },
            cost,
            controller,
            tenants,
            events,
            variants,
        })
    }

    /// The policy's scan rates and the host's per-VM rate.
    fn sharing(&self, at: &FieldPath, d: SharingDoc) -> Result<(SharingSettings, u64)> {
        let defaults = SharingSettings::default();
        let idle_rate = d.idle_rate.unwrap_or(defaults.idle_rate);
        let pressed_rate = d.pressed_rate.unwrap_or(defaults.pressed_rate);
        if pressed_rate < idle_rate {
            return Err(self.err(
                &at.key("pressed_rate"),
                format!("must be at least idle_rate = {idle_rate}"),
            ));
        }
        let per_vm_rate = d.per_vm_rate.unwrap_or(pressed_rate);
        if per_vm_rate == 0 {
            return Err(self.err(&at.key("per_vm_rate"), "must be >= 1"));
        }
        let settings = SharingSettings {
            idle_rate,
            pressed_rate,
            // The simulator does not model the scanner's CPU time.
            cpu_budget: None,
        };
        Ok((settings, per_vm_rate))
    }

    /// `[io_remap]`: low memory within the machine, a threshold of at least 1 copy.
    fn io_remap(&self, at: &FieldPath, d: IoRemapDoc, machine: Size) -> Result<IoRemapConfig> {
        let low = self.positive_size(&at.key("low_memory"), d.low_memory)?;
        if low > machine {
            return Err(self.err(
                &at.key("low_memory"),
                format!("must be at most the host's memory ({machine})"),
            ));
        }
        let threshold = d.threshold.unwrap_or(DEFAULT_REMAP_THRESHOLD);
        if threshold == 0 {
            return Err(self.err(&at.key("threshold"), "must be >= 1"));
        }
        Ok(IoRemapConfig {
            low_memory: low.to_pages(),
            threshold: d.remap.unwrap_or(true).then_some(threshold),
        })
    }

    /// `[disk]`: positive times and rate, a queue depth of at least 1.
    fn disk(&self, at: &FieldPath, d: DiskDoc) -> Result<DiskConfig> {
        let base = DeviceConfig::default();
        let positive = |key: &str, v: Option<f64>, default: f64| -> Result<f64> {
            self.number(
                &at.key(key),
                v.unwrap_or(default),
                |x| x > 0.0,
                "must be > 0",
            )
        };
        let device = DeviceConfig {
            seek_us: positive("seek_us", d.seek_us, base.seek_us)?,
            near_us: positive("near_us", d.near_us, base.near_us)?,
            transfer_mb_s: positive("transfer_mb_s", d.transfer_mb_s, base.transfer_mb_s)?,
            command_us: positive("command_us", d.command_us, base.command_us)?,
            flush_us: positive("flush_us", d.flush_us, base.flush_us)?,
            cache_bytes: d
                .cache
                .map(|c| self.size(&at.key("cache"), c))
                .transpose()?
                .map_or(base.cache_bytes, Size::bytes),
        };
        let queue_depth = d.queue_depth.unwrap_or(1);
        if queue_depth == 0 {
            return Err(self.err(&at.key("queue_depth"), "must be >= 1"));
        }
        Ok(DiskConfig {
            device,
            queue_depth,
        })
    }

    /// A tenant's disk table, read by its kind (`ntier` or `fsync`): its workload, and what the
    /// controller gives it (its weight, a latency target).
    fn tenant_disk(
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
                let growth = match d.growth {
                    Some(g) => {
                        let every = self.period(&at.key("growth").key("every"), g.every)?;
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
                if d.threads == 0 {
                    return Err(self.err(&at.key("threads"), "must be >= 1"));
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

    /// A tenant's io table: buffer pages and a transfer rate of at most 10^7 a second.
    fn io(&self, at: &FieldPath, d: Option<IoDoc>) -> Result<Option<VmIoConfig>> {
        let Some(d) = d else {
            return Ok(None);
        };
        let buffers = self.positive_size(&at.key("buffers"), d.buffers)?;
        let rate = self.number(
            &at.key("transfers_per_sec"),
            d.transfers_per_sec,
            |v| (0.0..=1e7).contains(&v),
            "must be between 0 and 10000000",
        )?;
        Ok(Some(VmIoConfig {
            buffers: buffers.to_pages(),
            transfers_per_sec: rate,
        }))
    }

    /// A tenant's content table: fractions in [0, 1] adding up to at most 1.
    fn content(&self, at: &FieldPath, d: Option<ContentDoc>) -> Result<ContentMix> {
        let Some(d) = d else {
            return Ok(ContentMix::default());
        };
        let mut sum = 0.0;
        let mut fraction = |key: &str, v: Option<f64>| -> Result<f64> {
            let v = v.unwrap_or(0.0);
            self.number(
                &at.key(key),
                v,
                |v| (0.0..=1.0).contains(&v),
                "must be a fraction in [0, 1]",
            )?;
            sum += v;
            if sum > 1.0 + 1e-9 {
                return Err(self.err(
                    &at.key(key),
                    format!("zero + common + duplicate must not exceed 1 (they add up to {sum})"),
                ));
            }
            Ok(v)
        };
        let zero = fraction("zero", d.zero)?;
        let common = fraction("common", d.common)?;
        let duplicate = fraction("duplicate", d.duplicate)?;
        let duplicate_copies = d.duplicate_copies.unwrap_or(2);
        if duplicate_copies < 2 {
            return Err(self.err(&at.key("duplicate_copies"), "must be >= 2"));
        }
        let image = d.image.unwrap_or_default();
        if (common > 0.0 || d.common_files == Some(true)) && image.is_empty() {
            return Err(self.err(
                &at.key("image"),
                "is needed for common pages: the tenants that share them name the same image",
            ));
        }
        Ok(ContentMix {
            image,
            zero,
            common,
            duplicate,
            duplicate_copies,
            common_files: d.common_files.unwrap_or(false),
        })
    }

    fn controller(&self, p: PolicyDoc, tenants: &[Facts]) -> Result<ControllerConfig> {
        let at = FieldPath::root().key("policy");
        let cache_absent = p.cache.is_none();
        let tax_rate = match p.tax_rate {
            None => TaxRate::DEFAULT,
            Some(t) => TaxRate::new(t).map_err(|e| self.err(&at.key("tax_rate"), e.to_string()))?,
        };
        let budget = match p.budget {
            None => None,
            Some(b) => {
                let b = self.positive_size(&at.key("budget"), b)?;
                let mins: u64 = tenants.iter().map(|t| t.min.bytes()).sum();
                if b.bytes() < mins {
                    return Err(self.err(
                        &at.key("budget"),
                        format!("below the sum of the tenants' min ({})", shown(Size(mins))),
                    ));
                }
                Some(b.to_pages())
            }
        };
        let host_swap_per_s = self.size(
            &at.key("host_swap_per_s"),
            p.host_swap_per_s.unwrap_or(DEFAULT_HOST_SWAP_PER_S),
        )?;
        let balloon_stall_ticks = p.balloon_stall_ticks.unwrap_or(DEFAULT_BALLOON_STALL_TICKS);
        if balloon_stall_ticks == 0 {
            return Err(self.err(&at.key("balloon_stall_ticks"), "must be >= 1"));
        }
        let thresholds = match p.thresholds {
            None => ReclamationThresholds::default(),
            Some(t) => {
                let d = ReclamationThresholds::default();
                let t = ReclamationThresholds {
                    high: t.high.unwrap_or(d.high),
                    soft: t.soft.unwrap_or(d.soft),
                    hard: t.hard.unwrap_or(d.hard),
                    low: t.low.unwrap_or(d.low),
                    hysteresis: t.hysteresis.unwrap_or(d.hysteresis),
                };
                if t.validate().is_err() {
                    return Err(self.err(
                        &at.key("thresholds"),
                        format!(
                            "must satisfy 0 < low < hard < soft < high < 1 and 0 <= hysteresis \
                             < 1 - high (fractions of machine memory); here high = {}, soft = {}, \
                             hard = {}, low = {}, hysteresis = {}",
                            t.high, t.soft, t.hard, t.low, t.hysteresis
                        ),
                    ));
                }
                t
            }
        };
        let controller = ControllerConfig {
            tax_rate,
            thresholds,
            budget,
            // Per tick; the tick is 1 s.
            host_swap_per_tick: host_swap_per_s.to_pages(),
            balloon_stall_ticks,
            // Simulated VMs move by balloon and host swap, never by a limit.
            rails: Default::default(),
            dry_run: false,
            reclaim_always: false,
            // The simulated host is memtide's alone: its free memory is the VMs' state.
            shared_host: false,
            backing: Default::default(),
            sharing: None,
            cache: match p.cache {
                Some(c) => self.cache_quotas(&at.key("cache"), c)?,
                None => None,
            },
        };
        if cache_absent {
            if let Some(i) = tenants.iter().position(|t| t.slo) {
                return Err(self.err(
                    &FieldPath::root().key("tenants").index(i).key("slo"),
                    "needs [policy.cache]: the budget the SLO tenants' pools share",
                ));
            }
        }
        controller
            .validate()
            .map_err(|e| self.err(&at, e.to_string()))?;
        Ok(controller)
    }

    /// `[policy.cache]`: Gemini's pool budget and latency model (`None`: disabled).
    fn cache_quotas(&self, at: &FieldPath, c: QuotasDoc) -> Result<Option<QuotaSettings>> {
        Ok(c.build(self.doc, at)?
            .map(|q| QuotaSettings::of(q.budget, q.hit_us, q.miss_us, q.steps)))
    }

    /// A tenant's `slo` (`memtide_config::quotas`). It needs a
    /// database whose agent reports its pool's curve: the quota search sizes nothing else.
    fn slo(&self, at: &FieldPath, s: SloDoc, workload: &WorkloadConfig) -> Result<Slo> {
        let curve = matches!(
            workload,
            WorkloadConfig::Database {
                agent: Some(AgentConfig {
                    curve_window: Some(_),
                    ..
                }),
                ..
            }
        );
        if !curve {
            return Err(self.err(
                at,
                "needs a database workload whose agent reports its curve (agent.curve_window)",
            ));
        }
        s.build(self.doc, at)
    }

    fn tenant(
        &self,
        at: &FieldPath,
        i: usize,
        t: TenantDoc,
        duration: Duration,
        cost: &CostModel,
    ) -> Result<(ScenarioTenant, Facts)> {
        if t.name.trim().is_empty() || t.name.chars().any(char::is_control) {
            return Err(self.err(
                &at.key("name"),
                "must be non-empty and free of control characters",
            ));
        }
        let max = self.positive_size(&at.key("max"), t.max)?;
        let min = self.size(&at.key("min"), t.min.unwrap_or_default())?;
        if min > max {
            return Err(self.err(
                &at.key("min"),
                format!("must not exceed max = {}", shown(max)),
            ));
        }
        let shares = t.shares.unwrap_or(DEFAULT_SHARES);
        if shares == 0 {
            return Err(self.err(&at.key("shares"), "must be >= 1"));
        }
        let kind = match t.kind.unwrap_or(KindDoc::Vm) {
            KindDoc::Vm => TenantKind::Vm,
            KindDoc::Container => TenantKind::Container,
        };
        // A container costs the host little beside its memory.
        let default_overhead = match kind {
            TenantKind::Vm => DEFAULT_OVERHEAD,
            TenantKind::Container => Size(0),
        };
        let overhead = self.size(&at.key("overhead"), t.overhead.unwrap_or(default_overhead))?;
        let kernel = self.size(&at.key("kernel"), t.kernel.unwrap_or(DEFAULT_KERNEL))?;
        if kernel > max {
            let message = format!("must not exceed max = {}", shown(max));
            return Err(match t.kernel {
                Some(_) => self.err(&at.key("kernel"), message),
                None => self.doc.error_with_value(
                    &at.key("kernel"),
                    Some(shown(kernel)),
                    format!("{message} (the default; set kernel lower)"),
                ),
            });
        }
        let guest_swap = self.size(&at.key("guest_swap"), t.guest_swap.unwrap_or(max))?;
        let start = match t.start {
            None => Duration::ZERO,
            Some(s) => self.tick_time(&at.key("start"), s)?,
        };
        if start >= duration {
            return Err(self.err(
                &at.key("start"),
                format!(
                    "must be before the end of the run (duration = {})",
                    shown_time(duration)
                ),
            ));
        }
        let stop = match t.stop {
            None => None,
            Some(s) => {
                let stop = self.tick_time(&at.key("stop"), s)?;
                if stop <= start {
                    return Err(self.err(
                        &at.key("stop"),
                        format!("must be after start = {}", shown_time(start)),
                    ));
                }
                Some(stop)
            }
        };

        let balloon_room = Size(max.bytes() - kernel.bytes());
        if kind == TenantKind::Container {
            if t.balloon.is_some() {
                return Err(self.err(
                    &at.key("balloon"),
                    "a container has no balloon driver: its limit moves its memory",
                ));
            }
            if t.initial.is_some() {
                return Err(self.err(
                    &at.key("initial"),
                    "a container starts without a limit: it has no initial balloon",
                ));
            }
        }
        let b = t.balloon.unwrap_or_default();
        let balloon = if kind == TenantKind::Vm && b.enabled.unwrap_or(true) {
            Some(self.balloon(&at.key("balloon"), b, balloon_room)?)
        } else {
            None
        };
        let initial_balloon = match t.initial {
            None => Pages::ZERO,
            Some(initial) => {
                let path = at.key("initial");
                if initial < kernel || initial > max {
                    return Err(self.err(
                        &path,
                        format!(
                            "must be in [kernel, max] = [{}, {}]",
                            shown(kernel),
                            shown(max)
                        ),
                    ));
                }
                let Some((_, limit, _)) = balloon else {
                    return Err(self.err(
                        &path,
                        "needs a balloon driver to start below max (balloon.enabled = false)",
                    ));
                };
                let needed = Size(max.bytes() - initial.bytes());
                if needed > limit {
                    return Err(self.err(
                        &path,
                        format!(
                            "needs a {} balloon, above balloon.limit = {}",
                            shown(needed),
                            shown(limit)
                        ),
                    ));
                }
                max.to_pages().saturating_sub(initial.to_pages())
            }
        };

        let estimator = self.estimator(&at.key("estimator"), t.estimator.as_ref())?;
        let workload = self.workload(&at.key("workload"), &t.workload, cost)?;
        let sampling = match &estimator {
            EstimatorConfig::Sampling(s) => Some(SamplingSetup {
                sample_pages: s.sample_pages,
                period: s.period,
            }),
            _ => None,
        };
        let cap_at_estimate = t
            .cap_at_estimate
            .unwrap_or(!matches!(estimator, EstimatorConfig::Sampling(_)));
        let slo = t
            .slo
            .map(|s| self.slo(&at.key("slo"), s, &workload))
            .transpose()?;
        let disk = t
            .disk
            .as_ref()
            .map(|d| self.tenant_disk(&at.key("disk"), d))
            .transpose()?;
        let tenant = ScenarioTenant {
            spec: TenantSpec {
                disk: disk.as_ref().map(|(_, spec)| *spec),
                shares,
                overhead: overhead.to_pages(),
                estimator,
                cap_at_estimate,
                slo,
                ..TenantSpec::new(
                    TenantId(i as u32),
                    t.name.clone(),
                    min.to_pages(),
                    max.to_pages(),
                )
            },
            vm: VmConfig {
                kind,
                max: max.to_pages(),
                overhead: overhead.to_pages(),
                kernel: kernel.to_pages(),
                guest_swap: guest_swap.to_pages(),
                balloon: balloon.map(|(rate, limit, starts_after)| BalloonConfig {
                    rate_per_s: rate.to_pages(),
                    limit: limit.to_pages(),
                    starts_after,
                }),
                initial_balloon,
                sampling,
                workload,
                content: self.content(&at.key("content"), t.content)?,
                io: self.io(&at.key("io"), t.io)?,
                disk: disk.map(|(config, _)| config),
            },
            start,
            stop,
        };
        Ok((
            tenant,
            Facts {
                name: t.name,
                min,
                max,
                slo: slo.is_some(),
            },
        ))
    }

    /// The balloon driver's rate, limit (at most `room` = max - kernel) and load time.
    fn balloon(&self, at: &FieldPath, b: BalloonDoc, room: Size) -> Result<(Size, Size, Duration)> {
        let rate = self.positive_size(
            &at.key("rate_per_s"),
            b.rate_per_s.unwrap_or(DEFAULT_BALLOON_RATE_PER_S),
        )?;
        let limit = b.limit.unwrap_or(room);
        if limit > room {
            return Err(self.err(
                &at.key("limit"),
                format!("must not exceed max - kernel = {}", shown(room)),
            ));
        }
        let starts_after = match b.starts_after {
            Some(d) => self.tick_time(&at.key("starts_after"), d)?,
            None => Duration::ZERO,
        };
        Ok((rate, limit, starts_after))
    }

    /// The estimator table (absent: sampling with its defaults). When an override changed
    /// `kind`, fields of the file's kind are dropped: a variant such as
    /// `tenants.*.estimator.kind=committed` works on tenants with tuned `tws` parameters.
    fn estimator(&self, at: &FieldPath, value: Option<&toml::Value>) -> Result<EstimatorConfig> {
        let Some(value) = value else {
            return Ok(EstimatorConfig::Sampling(SamplingConfig::default()));
        };
        let (kind, mut rest) = self.doc.kind(at, value, Some("sampling"))?;
        let overridden = self.doc.is_overridden(&at.key("kind"));
        let mut keep_own = |fields: &[&str]| {
            if let (true, toml::Value::Table(t)) = (overridden, &mut rest) {
                t.retain(|k, _| fields.contains(&k));
            }
        };
        let unit = |v: f64| v > 0.0 && v <= 1.0;
        match kind.as_str() {
            "sampling" => {
                keep_own(field_names::<SamplingDoc>());
                let s: SamplingDoc = self.read(at, rest)?;
                let d = SamplingConfig::default();
                let sample_pages = s.sample_pages.unwrap_or(d.sample_pages);
                if !(1..=1_000_000).contains(&sample_pages) {
                    return Err(self.err(&at.key("sample_pages"), "must be in [1, 1000000]"));
                }
                Ok(EstimatorConfig::Sampling(SamplingConfig {
                    sample_pages,
                    period: match s.period {
                        Some(p) => self.period(&at.key("period"), p)?,
                        None => d.period,
                    },
                    slow_gain: match s.slow_gain {
                        Some(g) => {
                            self.number(&at.key("slow_gain"), g, unit, "must be in (0, 1]")?
                        }
                        None => d.slow_gain,
                    },
                    fast_gain: match s.fast_gain {
                        Some(g) => {
                            self.number(&at.key("fast_gain"), g, unit, "must be in (0, 1]")?
                        }
                        None => d.fast_gain,
                    },
                    headroom: match s.headroom {
                        Some(h) => self.number(
                            &at.key("headroom"),
                            h,
                            |v| (0.0..=100.0).contains(&v),
                            "must be in [0, 100]",
                        )?,
                        None => d.headroom,
                    },
                }))
            }
            "tws" => {
                keep_own(field_names::<TwsDoc>());
                let w: TwsDoc = self.read(at, rest)?;
                let d = WorkingSetConfig::default();
                let cool_down = match w.cool_down {
                    Some(c) => self.time(&at.key("cool_down"), c)?,
                    None => d.cool_down,
                };
                Ok(EstimatorConfig::WorkingSet(WorkingSetConfig {
                    epoch: match w.epoch {
                        Some(e) => self.period(&at.key("epoch"), e)?,
                        None => d.epoch,
                    },
                    fast_step: match w.fast_step {
                        Some(s) => {
                            self.number(&at.key("fast_step"), s, unit, "must be in (0, 1]")?
                        }
                        None => d.fast_step,
                    },
                    slow_step: match w.slow_step {
                        Some(s) => {
                            self.number(&at.key("slow_step"), s, unit, "must be in (0, 1]")?
                        }
                        None => d.slow_step,
                    },
                    cool_down,
                    // The simulator runs TWS as published: no growing cool-down.
                    max_cool_down: cool_down,
                    committed_change: match w.committed_change {
                        Some(c) => self.number(
                            &at.key("committed_change"),
                            c,
                            |v| (0.0..=100.0).contains(&v),
                            "must be in [0, 100]",
                        )?,
                        None => d.committed_change,
                    },
                }))
            }
            "committed" => {
                keep_own(field_names::<CommittedDoc>());
                let _: CommittedDoc = self.read(at, rest)?;
                Ok(EstimatorConfig::Committed)
            }
            _ => Err(self.err(
                &at.key("kind"),
                format!("unknown estimator kind (expected {ESTIMATOR_KINDS})"),
            )),
        }
    }

    /// A workload table, read by its kind; the sim checks the parameters without a unit.
    fn workload(
        &self,
        at: &FieldPath,
        value: &toml::Value,
        cost: &CostModel,
    ) -> Result<WorkloadConfig> {
        let (kind, rest) = self.doc.kind(at, value, None)?;
        let config = match kind.as_str() {
            "idle" => {
                let w: IdleDoc = self.read(at, rest)?;
                WorkloadConfig::Idle {
                    resident_mb: self.mib(&at.key("resident"), w.resident)?.unwrap_or(0.0),
                    background_mb: self
                        .mib(&at.key("background"), w.background)?
                        .unwrap_or(defaults::IDLE_BACKGROUND_MB),
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "toucher" => {
                let w: ToucherDoc = self.read(at, rest)?;
                if w.phases.is_empty() {
                    return Err(self.err(&at.key("phases"), "must have at least one phase"));
                }
                WorkloadConfig::Toucher {
                    phases: self.phases(at, &w.phases, w.allocated)?,
                    allocated_mb: self.mib(&at.key("allocated"), w.allocated)?,
                    skew: w.skew.unwrap_or_default(),
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "file_server" => {
                let w: FileServerDoc = self.read(at, rest)?;
                WorkloadConfig::FileServer {
                    file_set_mb: self.size(&at.key("file_set"), w.file_set)?.as_mib_f64(),
                    anon_mb: self
                        .mib(&at.key("anon"), w.anon)?
                        .unwrap_or(defaults::FILE_SERVER_ANON_MB),
                    skew: w.skew.unwrap_or_default(),
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "cpu_job" => {
                let w: CpuJobDoc = self.read(at, rest)?;
                let allocated = self.size(&at.key("allocated"), w.allocated)?;
                let working_set = self.size(&at.key("working_set"), w.working_set)?;
                if working_set > allocated {
                    return Err(self.err(
                        &at.key("working_set"),
                        format!("must not exceed allocated = {}", shown(allocated)),
                    ));
                }
                WorkloadConfig::CpuJob {
                    allocated_mb: allocated.as_mib_f64(),
                    working_set_mb: working_set.as_mib_f64(),
                    skew: w.skew.unwrap_or_default(),
                    input_mb: self.mib(&at.key("input"), w.input)?.unwrap_or(0.0),
                    input_fraction: w.input_fraction.unwrap_or(defaults::CPU_JOB_INPUT_FRACTION),
                    phases: self.phases(at, &w.phases, Some(w.allocated))?,
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "oltp" => {
                let w: OltpDoc = self.read(at, rest)?;
                WorkloadConfig::Oltp {
                    data_mb: self.size(&at.key("data"), w.data)?.as_mib_f64(),
                    buffer_pool_mb: self
                        .mib(&at.key("buffer_pool"), w.buffer_pool)?
                        .unwrap_or(0.0),
                    anon_mb: self
                        .mib(&at.key("anon"), w.anon)?
                        .unwrap_or(defaults::OLTP_ANON_MB),
                    file_fraction: w.file_fraction.unwrap_or(defaults::OLTP_FILE_FRACTION),
                    skew: w.skew.unwrap_or(defaults::OLTP_SKEW),
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "web" => {
                let w: WebDoc = self.read(at, rest)?;
                WorkloadConfig::Web {
                    anon_mb: self
                        .mib(&at.key("anon"), w.anon)?
                        .unwrap_or(defaults::WEB_ANON_MB),
                    file_mb: self
                        .mib(&at.key("file"), w.file)?
                        .unwrap_or(defaults::WEB_FILE_MB),
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "cache" => {
                let w: CacheDoc = self.read(at, rest)?;
                WorkloadConfig::Cache {
                    items_mb: self.size(&at.key("items"), w.items)?.as_mib_f64(),
                    pool_mb: self.size(&at.key("pool"), w.pool)?.as_mib_f64(),
                    min_pool_mb: self.mib(&at.key("min_pool"), w.min_pool)?.unwrap_or(0.0),
                    shrink_s_per_gib: w
                        .shrink_s_per_gib
                        .unwrap_or(defaults::INNODB_SHRINK_S_PER_GIB),
                    grow_s_per_gib: w.grow_s_per_gib.unwrap_or(defaults::INNODB_GROW_S_PER_GIB),
                    agent: self.agent(&at.key("agent"), w.agent, false)?,
                    jobs: self.jobs(&at.key("jobs"), w.jobs)?,
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "database" => {
                let w: DatabaseDoc = self.read(at, rest)?;
                WorkloadConfig::Database {
                    data_mb: self.size(&at.key("data"), w.data)?.as_mib_f64(),
                    pool_mb: self.size(&at.key("pool"), w.pool)?.as_mib_f64(),
                    min_pool_mb: self.mib(&at.key("min_pool"), w.min_pool)?.unwrap_or(0.0),
                    heap_mb: self
                        .mib(&at.key("heap"), w.heap)?
                        .unwrap_or(defaults::DATABASE_HEAP_MB),
                    work_ratio: w.work_ratio.unwrap_or(defaults::DATABASE_WORK_RATIO),
                    work_share: w.work_share.unwrap_or(defaults::DATABASE_WORK_SHARE),
                    scan_share: w.scan_share.unwrap_or(defaults::DATABASE_SCAN_SHARE),
                    scan_mb: self
                        .mib(&at.key("scan"), w.scan)?
                        .unwrap_or(defaults::DATABASE_SCAN_MB),
                    skew: w.skew.unwrap_or(defaults::DATABASE_SKEW),
                    shrink_s_per_gib: w
                        .shrink_s_per_gib
                        .unwrap_or(defaults::INNODB_SHRINK_S_PER_GIB),
                    grow_s_per_gib: w.grow_s_per_gib.unwrap_or(defaults::INNODB_GROW_S_PER_GIB),
                    agent: self.agent(&at.key("agent"), w.agent, true)?,
                    jobs: self.jobs(&at.key("jobs"), w.jobs)?,
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            "jvm" => {
                let w: JvmDoc = self.read(at, rest)?;
                WorkloadConfig::Jvm {
                    heap_mb: self.size(&at.key("heap"), w.heap)?.as_mib_f64(),
                    old_mb: self.size(&at.key("old"), w.old)?.as_mib_f64(),
                    live_mb: self.size(&at.key("live"), w.live)?.as_mib_f64(),
                    survivors_mb: self.size(&at.key("survivors"), w.survivors)?.as_mib_f64(),
                    min_eden_mb: self.size(&at.key("min_eden"), w.min_eden)?.as_mib_f64(),
                    young_live_mb: self.size(&at.key("young_live"), w.young_live)?.as_mib_f64(),
                    alloc_share: w.alloc_share.unwrap_or(defaults::JVM_ALLOC_SHARE),
                    promote: w.promote.unwrap_or(defaults::JVM_PROMOTE),
                    shrink_s_per_gib: w.shrink_s_per_gib.unwrap_or(defaults::JVM_SHRINK_S_PER_GIB),
                    grow_s_per_gib: w.grow_s_per_gib.unwrap_or(defaults::JVM_GROW_S_PER_GIB),
                    agent: self.agent(&at.key("agent"), w.agent, false)?,
                    jobs: self.jobs(&at.key("jobs"), w.jobs)?,
                    cpu_us_per_access: w.cpu_us_per_access,
                    accesses_per_op: w.accesses_per_op,
                    max_accesses_per_s: w.max_accesses_per_s,
                }
            }
            _ => {
                return Err(self.err(
                    &at.key("kind"),
                    format!("unknown workload kind (expected {WORKLOAD_KINDS})"),
                ))
            }
        };
        Workload::new(&config, cost).map_err(|e| self.err(at, e.to_string()))?;
        Ok(config)
    }

    /// An application's jobs, each at a time within the run's reach.
    fn jobs(&self, at: &FieldPath, jobs: Option<Vec<JobDoc>>) -> Result<Option<Vec<Job>>> {
        let Some(jobs) = jobs else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.into_iter().enumerate() {
            let start = self.time(&at.index(i).key("at"), j.at)?;
            out.push(Job {
                at_s: start.as_secs_f64(),
                ops: j.ops,
            });
        }
        Ok(Some(out))
    }

    /// The balloon agent of an application with a pool (`None`: absent or disabled).
    /// `curve`: the pool's requests are pages the agent can sample (a database's).
    fn agent(
        &self,
        at: &FieldPath,
        a: Option<AgentDoc>,
        curve: bool,
    ) -> Result<Option<AgentConfig>> {
        let Some(a) = a.filter(|a| a.enabled.unwrap_or(true)) else {
            return Ok(None);
        };
        if a.curve_window.is_some() && !curve {
            return Err(self.err(
                &at.key("curve_window"),
                "only a database's agent samples its pool's requests for a curve",
            ));
        }
        let granule = match a.granule {
            Some(g) => self.positive_size(&at.key("granule"), g)?.to_pages(),
            None => DEFAULT_GRANULE,
        };
        if granule == Pages::ZERO {
            return Err(self.err(&at.key("granule"), "must be at least a page (4 KiB)"));
        }
        Ok(Some(AgentConfig {
            behaviour: a.behaviour.unwrap_or_default(),
            silent_from: a
                .silent_from
                .map(|d| self.time(&at.key("silent_from"), d))
                .transpose()?,
            granule,
            curve_window: a
                .curve_window
                .map(|d| self.period(&at.key("curve_window"), d))
                .transpose()?,
        }))
    }

    /// A toucher's phases: at least one, in time order, none larger than `allocated`.
    /// A workload's phases, each after the one before and within `allocated` when given.
    fn phases(
        &self,
        at: &FieldPath,
        given: &[PhaseDoc],
        allocated: Option<Size>,
    ) -> Result<Vec<TouchPhase>> {
        let mut phases = Vec::with_capacity(given.len());
        for (i, p) in given.iter().enumerate() {
            let here = at.key("phases").index(i);
            let start = self.time(&here.key("at"), p.at)?;
            if i > 0 && p.at <= given[i - 1].at {
                return Err(self.err(
                    &here.key("at"),
                    format!(
                        "must be after phases[{}].at = {}",
                        i - 1,
                        shown_time(given[i - 1].at.get())
                    ),
                ));
            }
            let working_set = self.size(&here.key("working_set"), p.working_set)?;
            if allocated.is_some_and(|a| working_set > a) {
                return Err(self.err(
                    &at.key("allocated"),
                    format!(
                        "must be at least phases[{i}].working_set = {}",
                        shown(working_set)
                    ),
                ));
            }
            phases.push(TouchPhase {
                at_s: start.as_secs_f64(),
                working_set_mb: working_set.as_mib_f64(),
            });
        }
        Ok(phases)
    }

    fn events(
        &self,
        values: &[toml::Value],
        tenants: &[Facts],
        duration: Duration,
        cost: &CostModel,
    ) -> Result<Vec<TimedEvent>> {
        let find = |at: &FieldPath, name: &str| -> Result<usize> {
            tenants.iter().position(|t| t.name == name).ok_or_else(|| {
                let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
                let known = if names.is_empty() {
                    "the scenario has no tenants".to_string()
                } else {
                    format!("tenants are {}", names.join(", "))
                };
                self.err(&at.key("tenant"), format!("no such tenant ({known})"))
            })
        };
        // Read each event, then apply them in time order (stable: events at the same time
        // keep their file order), so set_tenant checks see the limits of the events before.
        let mut read = Vec::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let at = FieldPath::root().key("events").index(i);
            let (kind, rest) = self.doc.kind(&at, value, None)?;
            let (when, event) = match kind.as_str() {
                "set_tax_rate" => {
                    let e: SetTaxRateDoc = self.read(&at, rest)?;
                    let rate = TaxRate::new(e.tax_rate)
                        .map_err(|x| self.err(&at.key("tax_rate"), x.to_string()))?;
                    (e.at, Pending::TaxRate(rate))
                }
                "set_workload" => {
                    let e: SetWorkloadDoc = self.read(&at, rest)?;
                    let tenant = find(&at, &e.tenant)?;
                    let workload = self.workload(&at.key("workload"), &e.workload, cost)?;
                    (e.at, Pending::Workload(tenant, workload))
                }
                "stop_tenant" => {
                    let e: StopTenantDoc = self.read(&at, rest)?;
                    (e.at, Pending::Stop(find(&at, &e.tenant)?))
                }
                "set_tenant" => {
                    let e: SetTenantDoc = self.read(&at, rest)?;
                    if e.min.is_none() && e.max.is_none() && e.shares.is_none() {
                        return Err(self.err(
                            &at,
                            "a set_tenant event needs at least one of min, max, shares",
                        ));
                    }
                    let tenant = find(&at, &e.tenant)?;
                    if let Some(min) = e.min {
                        self.size(&at.key("min"), min)?;
                    }
                    if let Some(max) = e.max {
                        self.positive_size(&at.key("max"), max)?;
                    }
                    if e.shares == Some(0) {
                        return Err(self.err(&at.key("shares"), "must be >= 1"));
                    }
                    (e.at, Pending::Tenant(tenant, e.min, e.max, e.shares))
                }
                _ => {
                    return Err(self.err(
                        &at.key("kind"),
                        format!("unknown event kind (expected {EVENT_KINDS})"),
                    ))
                }
            };
            let when = self.time(&at.key("at"), when)?;
            if when >= duration {
                return Err(self.err(
                    &at.key("at"),
                    format!(
                        "must be before the end of the run (duration = {})",
                        shown_time(duration)
                    ),
                ));
            }
            read.push((at, when, event));
        }
        read.sort_by_key(|(_, when, _)| *when);
        // Each tenant's (min, max) as set_tenant events change them.
        let mut limits: Vec<(Size, Size)> = tenants.iter().map(|t| (t.min, t.max)).collect();
        let mut built = Vec::with_capacity(read.len());
        for (at, when, pending) in read {
            let event = match pending {
                Pending::TaxRate(rate) => Event::SetTaxRate(rate),
                Pending::Workload(i, workload) => Event::SetWorkload {
                    tenant: TenantId(i as u32),
                    workload,
                },
                Pending::Stop(i) => Event::StopTenant(TenantId(i as u32)),
                Pending::Tenant(i, min, max, shares) => {
                    let configured = tenants[i].max;
                    if max.is_some_and(|m| m > configured) {
                        return Err(self.err(
                            &at.key("max"),
                            format!(
                                "must not exceed the tenant's configured max = {} (the guest's \
                                 memory size)",
                                shown(configured)
                            ),
                        ));
                    }
                    let (lo, hi) = (min.unwrap_or(limits[i].0), max.unwrap_or(limits[i].1));
                    if lo > hi {
                        let key = if min.is_some() { "min" } else { "max" };
                        return Err(self.err(
                            &at.key(key),
                            format!(
                                "leaves {} with min = {} above max = {}",
                                tenants[i].name,
                                shown(lo),
                                shown(hi)
                            ),
                        ));
                    }
                    limits[i] = (lo, hi);
                    Event::SetTenant {
                        tenant: TenantId(i as u32),
                        min: min.map(Size::to_pages),
                        max: max.map(Size::to_pages),
                        shares,
                    }
                }
            };
            built.push(TimedEvent { at: when, event });
        }
        Ok(built)
    }
}

/// An event read but not yet applied in time order.
enum Pending {
    TaxRate(TaxRate),
    Workload(usize, WorkloadConfig),
    Stop(usize),
    Tenant(usize, Option<Size>, Option<Size>, Option<u64>),
}

/// Scenario names become output directories: letters, digits, `-`, `_` and `.`, not
/// starting with a dot.
fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err("must be letters, digits, -, _ and . only, not starting with a dot (it names the output directory)".to_string())
    }
}

/// The file stem, with characters unfit for a directory name replaced by `-`.
fn default_name(source: &Path) -> String {
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let cleaned = cleaned
        .trim_start_matches('.')
        .trim_matches('-')
        .to_string();
    if cleaned.is_empty() {
        "scenario".to_string()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_name_is_the_cleaned_file_stem() {
        assert_eq!(
            default_name(Path::new("scenarios/esx-idle-tax.toml")),
            "esx-idle-tax"
        );
        assert_eq!(default_name(Path::new("my scenario.toml")), "my-scenario");
        assert_eq!(default_name(Path::new("<demo>")), "demo");
        assert_eq!(default_name(Path::new("")), "scenario");
    }

    #[test]
    fn check_name_refuses_paths() {
        assert!(check_name("esx-idle-tax").is_ok());
        assert!(check_name("../x").is_err());
        assert!(check_name("a/b").is_err());
        assert!(check_name("").is_err());
    }
}
