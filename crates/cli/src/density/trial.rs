//! One trial of the density benchmark: N real servers in their own cgroups under a parent limited to the budget, filled, put under one policy, then driven together by their load generators for the run's length; what each saw and what the host did is collected, and everything the trial made is removed.
//!
//! The order, each step bounded in time:
//!
//! 1. the parent cgroup `<own>/memtide-density-<pid>` with `budget` as its limit, and one child
//!    per tenant (`t000`, ...), each holding its server (`redis-server`, or `memcached` with
//!    `MALLOC_MMAP_THRESHOLD_=131072` so a shrunk pool is given back) on a loopback port;
//! 2. each server filled by `memtide-loadgen --fill-only`, one after the other;
//! 3. the policy: `static` writes each child's limit (its kind's peak and 10%); `kernel` leaves
//!    the parent's limit alone; `sampling`, `tws` and `app` start `memtide daemon` adopting the
//!    children (with `app`, each server's adapter); `senpai` starts one `senpai.py` per child
//!    (cgroup v2 only), every setting its default but `--min-size`, memtide's floor
//!    ([`TENANT_MIN`]), so both may take a tenant as low;
//! 4. `warmup` idle seconds, then every generator starts on one clock (`--start-at`) for
//!    `duration`; the parent's usage is read each second and the servers are watched;
//! 5. the daemon is stopped (SIGTERM: it gives back what it changed), Senpai killed, servers
//!    killed, cgroups removed; the same happens when the trial fails half-way ([`Rig`]'s drop).
//!
//! On cgroup v2 the parent enables the memory controller for its children; the benchmark's own
//! cgroup must already give it to the parent (the root cgroup does, as in the QEMU guest of
//! scripts/density-guest.sh).
//!
//! The load generators run in the benchmark's own cgroup, not the tenants': the budget holds
//! the servers only.

use crate::density::config::{DensityConfig, Policy, ServerKind, TenantKind};
use crate::density::DensityError;
use memtide_demand::{attainment, static_limit, wake_time, Attainment, Second, Slo, Window};
use memtide_linux::cgroup::{Limit, MemoryCgroup};
use memtide_linux::fs::hierarchy::{CgroupVersion, MemoryHierarchy};
use memtide_linux::fs::subtree::set_subtree_control;
use memtide_linux::fs::{read_cpu_time, CpuTime};
use memtide_model::Bytes;
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Set by SIGINT or SIGTERM (registered by `density::run`). Every wait of a trial checks it and
/// returns [`DensityError::Stopped`], so the trial's drops stop what it started and remove its
/// cgroups before the process exits.
pub(crate) static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

/// `Err(Stopped)` once a signal asked the benchmark to stop.
fn stopped() -> Result<(), DensityError> {
    if STOP.load(Ordering::Relaxed) {
        Err(DensityError::Stopped)
    } else {
        Ok(())
    }
}

/// Sleeps `d`, in steps short enough to stop within 0.1 s of a signal.
fn pause(d: Duration) -> Result<(), DensityError> {
    let until = Instant::now() + d;
    loop {
        stopped()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

const MIB: u64 = 1 << 20;
/// How long a cgroup write may block (a limit write can wait for reclaim).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server may take to answer on its port.
const SERVER_START: Duration = Duration::from_secs(20);
/// How long a fill may take.
const FILL_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the daemon may take to answer, and to exit after SIGTERM.
const DAEMON_START: Duration = Duration::from_secs(30);
const DAEMON_STOP: Duration = Duration::from_secs(60);
/// The generators' request timeout: an answer later than this after it was due is an error.
const REQUEST_TIMEOUT: &str = "1s";
/// The least a manager may leave a tenant: memtide's `min` and Senpai's `--min-size`.
const TENANT_MIN: u64 = 16 * MIB;

/// The programs a trial runs.
#[derive(Clone, Debug)]
pub struct Programs {
    pub memtide: PathBuf,
    pub loadgen: PathBuf,
    pub redis: Option<PathBuf>,
    pub memcached: Option<PathBuf>,
    /// `python3` and Senpai's `senpai.py`, for the `senpai` policy.
    pub senpai: Option<(PathBuf, PathBuf)>,
}

/// What every trial shares: the programs, the hierarchy, where to write.
pub struct Env {
    pub programs: Programs,
    pub hierarchy: MemoryHierarchy,
    pub out: PathBuf,
    /// What each kind of the mix holds once filled (by index into the mix).
    pub peaks: Vec<u64>,
}

impl Env {
    /// What tenant `i` (of kind `mix[i % len]`) holds once filled.
    fn peak(&self, i: usize) -> u64 {
        self.peaks[i % self.peaks.len()]
    }
}

/// One tenant's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TenantOutcome {
    pub name: String,
    pub server: String,
    pub demand: String,
    pub attainment: Attainment,
    /// Each burst's wake-up time (`None`: never back within the SLO before it ended).
    pub wakes: Vec<Option<f64>>,
    pub requests: u64,
    pub errors: u64,
    pub misses: u64,
}

/// The tenants' figures of a trial, as they are judged one by one.
#[derive(Default)]
pub struct Tally {
    /// Every active window.
    pub all: Attainment,
    /// The active windows in which the hypervisor stole less than [`STEAL_DISTURBS`] of the
    /// machine's CPU time: what the policy is judged by.
    pub unstolen: Attainment,
    pub within: u64,
    pub wakes: u64,
    /// Each wake-up's time (one never back counts as its burst's length).
    wake_times: Vec<f64>,
    pub tenants: Vec<TenantOutcome>,
}

impl Tally {
    /// Judges one tenant of `kind` by its report `windows`, its one-second `seconds` and its
    /// `bursts` (`[start, end)`, seconds of the run) against `slo`; windows starting at a time
    /// in `stolen` count in `all` only.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        name: String,
        kind: &TenantKind,
        windows: &[Window],
        seconds: &[Second],
        bursts: &[(f64, f64)],
        slo: &Slo,
        stolen: &[StolenWindow],
    ) {
        let a = attainment(windows, slo);
        self.all = self.all + a;
        let ours: Vec<Window> = windows
            .iter()
            .filter(|w| !stolen.iter().any(|s| (s.start - w.start).abs() < 1e-6))
            .cloned()
            .collect();
        self.unstolen = self.unstolen + attainment(&ours, slo);
        let mut wakes = Vec::new();
        for &(start, end) in bursts {
            let w = wake_time(start, end, seconds, slo);
            self.wakes += 1;
            self.within += u64::from(w.is_some_and(|w| w <= slo.wake_s));
            self.wake_times.push(w.unwrap_or(end - start));
            wakes.push(w);
        }
        self.tenants.push(TenantOutcome {
            name,
            server: kind.server.name().to_string(),
            demand: kind.demand.clone(),
            attainment: a,
            wakes,
            requests: windows.iter().map(|w| w.requests).sum(),
            errors: windows.iter().map(|w| w.errors).sum(),
            misses: windows.iter().map(|w| w.misses).sum(),
        });
    }

    /// The 90th percentile of the wake-up times.
    pub fn wake_p90(&mut self) -> Option<f64> {
        let t = &mut self.wake_times;
        t.sort_by(f64::total_cmp);
        (!t.is_empty()).then(|| t[(t.len() * 9 / 10).min(t.len() - 1)])
    }
}

/// The share of the machine's CPU time the hypervisor may steal in a window before the
/// window is not the policy's to answer for: a machine shared with other VMs stalls every
/// tenant at once while its CPUs wait, whatever the policy, and a window's p99 is decided by
/// its worst tenth of a second. Measured here: a quiet run steals 0-2% a second; windows
/// averaging 2.5-4% (seconds of up to 9%) gave 10 of 28 tenants a p99 of 2.5-4.8 ms with swap
/// traffic at a few MB/s, and 5-20% for 30 s gave 14 tenants 4-9 ms in a kernel-only run.
pub const STEAL_DISTURBS: f64 = 0.02;

/// A window of the run in which the hypervisor stole at least [`STEAL_DISTURBS`] of the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StolenWindow {
    /// Seconds from the run's start, as the load generators' windows.
    pub start: f64,
    /// The share of all CPU time stolen in it.
    pub share: f64,
}

/// A trial's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrialResult {
    pub policy: Policy,
    pub n: usize,
    /// False when the policy cannot place N tenants at all (static: their peaks add up to
    /// more than the budget); nothing ran then.
    pub fits: bool,
    /// The active windows the policy answers for: those the hypervisor did not steal from
    /// (what `passed` judges).
    pub attainment: Attainment,
    /// Every active window, stolen from or not.
    pub attainment_all: Attainment,
    /// The windows left out of `attainment`, and how much was stolen in each.
    pub stolen: Vec<StolenWindow>,
    pub oom_kills: u64,
    /// Tenants whose server exited during the run.
    pub died: Vec<String>,
    pub wakes_within: u64,
    pub wakes: u64,
    /// The 90th-percentile wake-up time over the tenants' bursts (a wake-up never back
    /// counts as the burst's length).
    pub wake_p90_s: Option<f64>,
    pub swap_in_mib: f64,
    pub swap_out_mib: f64,
    /// memtide's CPU (the daemon and its adapters) over the run, in seconds.
    pub manager_cpu_s: Option<f64>,
    pub run_s: f64,
    /// The parent cgroup's mean usage over the run.
    pub mean_usage: u64,
    /// What static sizing reserves for these N tenants: their peaks and 10%.
    pub reserved: u64,
    pub tenants: Vec<TenantOutcome>,
}

impl TrialResult {
    /// Whether the trial met the SLO: it fit, 99% of the active windows met it (and there
    /// were some), and no server was OOM-killed or died.
    pub fn passed(&self) -> bool {
        self.fits
            && self.oom_kills == 0
            && self.died.is_empty()
            && self.attainment.fraction().is_some_and(|f| f >= 0.99)
    }

    /// The memory saved against static sizing: 1 - mean usage / what static reserves.
    pub fn saved(&self) -> Option<f64> {
        (self.reserved > 0 && self.fits)
            .then(|| 1.0 - self.mean_usage as f64 / self.reserved as f64)
    }

    pub fn not_fitting(policy: Policy, n: usize, reserved: u64) -> TrialResult {
        TrialResult {
            policy,
            n,
            fits: false,
            attainment: Attainment::default(),
            attainment_all: Attainment::default(),
            stolen: Vec::new(),
            oom_kills: 0,
            died: Vec::new(),
            wakes_within: 0,
            wakes: 0,
            wake_p90_s: None,
            swap_in_mib: 0.0,
            swap_out_mib: 0.0,
            manager_cpu_s: None,
            run_s: 0.0,
            mean_usage: 0,
            reserved,
            tenants: Vec::new(),
        }
    }
}

/// A process killed and reaped on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One tenant's server.
struct Tenant {
    name: String,
    kind: TenantKind,
    seed: u64,
    cgroup: String,
    port: u16,
    server: Proc,
}

impl Tenant {
    fn url(&self) -> String {
        match self.kind.server {
            ServerKind::Redis => format!("redis://127.0.0.1:{}", self.port),
            ServerKind::Memcached => format!("memcached://127.0.0.1:{}", self.port),
        }
    }
}

/// Everything a trial made, undone on drop: the daemon (SIGTERM, then waited for: it gives
/// back what it changed), Senpai's processes, the servers, the cgroups.
struct Rig<'a> {
    env: &'a Env,
    parent: String,
    tenants: Vec<Tenant>,
    daemon: Option<Proc>,
    senpai: Vec<Proc>,
}

impl Drop for Rig<'_> {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            // SAFETY: kill(2) with a pid we spawned and have not reaped.
            unsafe {
                libc::kill(d.0.id() as libc::pid_t, libc::SIGTERM);
            }
            let start = Instant::now();
            while start.elapsed() < DAEMON_STOP {
                if matches!(d.0.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.senpai.clear();
        let cgroups: Vec<String> = self.tenants.iter().map(|t| t.cgroup.clone()).collect();
        self.tenants.clear();
        for cg in cgroups.iter().chain([&self.parent]) {
            remove_cgroup(&self.env.hierarchy.dir_of(cg));
        }
    }
}

impl<'a> Rig<'a> {
    /// Makes the parent cgroup `<own>/memtide-density-<pid>`; nothing in it yet.
    fn new(env: &'a Env) -> Result<Rig<'a>, DensityError> {
        let h = &env.hierarchy;
        let parent = format!(
            "{}/memtide-density-{}",
            h.own_cgroup.trim_end_matches('/'),
            std::process::id()
        );
        let dir = h.dir_of(&parent);
        std::fs::create_dir(&dir).map_err(|e| DensityError::io(&dir.display().to_string(), e))?;
        let rig = Rig {
            env,
            parent,
            tenants: Vec::new(),
            daemon: None,
            senpai: Vec::new(),
        };
        if h.version == CgroupVersion::V2 {
            set_subtree_control(&dir, "memory", true, WRITE_TIMEOUT).map_err(|e| {
                DensityError::Trial(format!(
                    "{}: the memory controller for the tenants: {e}",
                    dir.display()
                ))
            })?;
        }
        Ok(rig)
    }

    /// Starts tenant `name`'s server of `kind` in a child cgroup of its own, its log in
    /// `dir`, and waits until it answers.
    fn start_tenant(
        &mut self,
        name: String,
        kind: &TenantKind,
        seed: u64,
        dir: &Path,
    ) -> Result<&Tenant, DensityError> {
        let cgroup = format!("{}/{name}", self.parent);
        let cdir = self.env.hierarchy.dir_of(&cgroup);
        std::fs::create_dir(&cdir).map_err(|e| DensityError::io(&cdir.display().to_string(), e))?;
        let port = free_port()?;
        let log = dir.join(format!("{name}-server.log"));
        let mut server = spawn_in(
            &mut server_command(&self.env.programs, kind, port, dir)?,
            &cdir,
            &log,
        )?;
        wait_for_port(port, &mut server, &log)?;
        self.tenants.push(Tenant {
            name,
            kind: kind.clone(),
            seed,
            cgroup,
            port,
            server,
        });
        Ok(self.tenants.last().expect("just pushed"))
    }
}

/// Removes an emptied cgroup directory, trying for a few seconds (its last processes may
/// still be exiting).
fn remove_cgroup(dir: &Path) {
    let start = Instant::now();
    while dir.exists()
        && std::fs::remove_dir(dir).is_err()
        && start.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A free loopback TCP port.
fn free_port() -> Result<u16, DensityError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| DensityError::io("bind a loopback port", e))?;
    Ok(l.local_addr()
        .map_err(|e| DensityError::io("read a port", e))?
        .port())
}

/// Starts `argv` with its process already in the cgroup at `dir` (it joins before it
/// executes), its output in `log`.
fn spawn_in(cmd: &mut Command, dir: &Path, log: &Path) -> Result<Proc, DensityError> {
    let procs = dir.join("cgroup.procs");
    let out =
        std::fs::File::create(log).map_err(|e| DensityError::io(&log.display().to_string(), e))?;
    let err = out
        .try_clone()
        .map_err(|e| DensityError::io("dup a log", e))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: the closure only writes to a file between fork and exec.
    unsafe {
        cmd.pre_exec(move || std::fs::write(&procs, b"0\n"));
    }
    let what = format!("{:?}", cmd.get_program());
    cmd.spawn()
        .map(Proc)
        .map_err(|e| DensityError::io(&format!("start {what}"), e))
}

/// Waits until `port` takes a connection or `server` exits.
fn wait_for_port(port: u16, server: &mut Proc, log: &Path) -> Result<(), DensityError> {
    let start = Instant::now();
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        let exited = matches!(server.0.try_wait(), Ok(Some(_)));
        if exited || start.elapsed() > SERVER_START {
            return Err(DensityError::Trial(format!(
                "the server on port {port} {} (its log: {})",
                if exited { "exited" } else { "never answered" },
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn server_command(
    p: &Programs,
    kind: &TenantKind,
    port: u16,
    dir: &Path,
) -> Result<Command, DensityError> {
    let missing = |what: &str| {
        DensityError::Trial(format!(
            "{what} is not installed (Debian: apt-get install redis-server memcached)"
        ))
    };
    match kind.server {
        ServerKind::Redis => {
            let mut c = Command::new(p.redis.as_ref().ok_or_else(|| missing("redis-server"))?);
            c.args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--maxmemory-policy", "allkeys-lru", "--dir"])
            .arg(dir);
            Ok(c)
        }
        ServerKind::Memcached => {
            // Room for every item (a 4 KiB value takes a 4.6 KiB chunk) and half again.
            let mib = (kind.keys * (kind.value_bytes + 600) * 3 / 2).div_ceil(MIB) + 16;
            let mut c = Command::new(p.memcached.as_ref().ok_or_else(|| missing("memcached"))?);
            c.args([
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-m",
                &mib.to_string(),
                "-c",
                "64",
                // The LRU crawler walks every item now and then to find expired ones (these
                // have no expiry): an idle server pulls its whole dataset back from swap, a
                // burst its demand pattern does not have (docs/benchmarks.md, "Density").
                "-o",
                "no_lru_crawler",
            ])
            .env("MALLOC_MMAP_THRESHOLD_", "131072");
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                c.args(["-u", "root"]);
            }
            Ok(c)
        }
    }
}

/// Fills the tenant's server through the load generator.
fn fill(p: &Programs, t: &Tenant, dir: &Path) -> Result<(), DensityError> {
    let out = dir.join(format!("{}-fill.jsonl", t.name));
    let mut child = Command::new(&p.loadgen)
        .arg("--server")
        .arg(t.url())
        .args([
            "--keys",
            &t.kind.keys.to_string(),
            "--value-bytes",
            &t.kind.value_bytes.to_string(),
        ])
        .args(["--seed", &t.seed.to_string(), "--fill-only", "--out"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| DensityError::io("start memtide-loadgen", e))?;
    let start = Instant::now();
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| DensityError::io("wait for a fill", e))?
        {
            if status.success() {
                return Ok(());
            }
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return Err(DensityError::Trial(format!(
                "filling {} failed: {}",
                t.name,
                err.trim()
            )));
        }
        if start.elapsed() > FILL_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(DensityError::Trial(format!(
                "filling {} took over {FILL_TIMEOUT:?}",
                t.name
            )));
        }
        stopped()?;
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon's configuration for `policy` over `tenants`.
fn daemon_config(
    config: &DensityConfig,
    env: &Env,
    policy: Policy,
    rig: &Rig,
    port: u16,
    state: &Path,
) -> String {
    let mut s = format!(
        "[daemon]\ntick = \"1s\"\nlisten = \"127.0.0.1:{port}\"\nstate_file = \"{}\"\n\n\
         [host]\nparent = \"{}\"\nbudget = \"{}\"\n\n{}\n[balloon]\nenabled = {}\n",
        state.join("state.json").display(),
        rig.parent,
        config.budget,
        config.memtide_tables,
        policy == Policy::App
    );
    for (i, t) in rig.tenants.iter().enumerate() {
        let peak = env.peak(i);
        let estimator = if policy == Policy::Tws {
            "tws"
        } else {
            "sampling"
        };
        s.push_str(&format!(
            "\n[[tenant]]\nname = \"{}\"\ncgroup = \"{}\"\nmin = \"{TENANT_MIN}\"\nmax = \"{}\"\nestimator = \"{estimator}\"\n",
            t.name,
            t.cgroup,
            static_limit(peak) * 2
        ));
        if policy == Policy::App {
            let (kind, url) = match t.kind.server {
                ServerKind::Redis => ("redis", format!("redis://127.0.0.1:{}", t.port)),
                ServerKind::Memcached => ("memcached", format!("memcache://127.0.0.1:{}", t.port)),
            };
            s.push_str(&format!(
                "\n[tenant.app]\nkind = \"{kind}\"\nurl = \"{url}\"\nmin = \"{TENANT_MIN}\"\nmax = \"{}\"\n",
                static_limit(peak)
            ));
        }
    }
    s
}

/// Seconds of CPU (user and system) `pid` has used, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// The daemon, every `memtide-adapter` in the tenants' cgroups, and Senpai's processes.
fn manager_pids(rig: &Rig) -> Vec<u32> {
    let mut pids: Vec<u32> = rig
        .daemon
        .iter()
        .chain(&rig.senpai)
        .map(|d| d.0.id())
        .collect();
    for t in &rig.tenants {
        let cg = MemoryCgroup::new(
            rig.env.hierarchy.version,
            rig.env.hierarchy.dir_of(&t.cgroup),
        );
        for pid in cg.pids().unwrap_or_default() {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            if exe.to_string_lossy().contains("memtide-adapter") {
                pids.push(pid);
            }
        }
    }
    pids
}

/// The OOM kills counted so far in the tenants' cgroups and their parent (an error where the
/// kernel does not count them: a missing count is not zero).
fn oom_kills(rig: &Rig) -> Result<u64, DensityError> {
    let h = &rig.env.hierarchy;
    let mut sum = 0;
    for cg in rig.tenants.iter().map(|t| &t.cgroup).chain([&rig.parent]) {
        let dir = h.dir_of(cg);
        let kills = MemoryCgroup::new(h.version, dir.clone())
            .oom_kills()
            .map_err(|e| DensityError::Trial(format!("{}: {e}", dir.display())))?
            .ok_or_else(|| {
                DensityError::Host(format!(
                    "{}: this kernel does not count OOM kills, which the benchmark must see",
                    dir.display()
                ))
            })?;
        sum += kills;
    }
    Ok(sum)
}

/// Now, in seconds since the epoch.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The windows (`window` seconds each, from 0 to `duration`) in which the hypervisor stole at
/// least [`STEAL_DISTURBS`] of the CPU, from `samples` of the CPU time (seconds from the run's
/// start, about one a second): each window is judged between the samples nearest its start and
/// its end.
fn stolen_windows(samples: &[(f64, CpuTime)], window: f64, duration: f64) -> Vec<StolenWindow> {
    let nearest = |at: f64| {
        samples
            .iter()
            .min_by(|a, b| (a.0 - at).abs().total_cmp(&(b.0 - at).abs()))
    };
    let mut stolen = Vec::new();
    // Window k starts at k × window, as the load generators' windows do.
    for k in 0..(duration / window - 1e-9).ceil().max(0.0) as usize {
        let start = k as f64 * window;
        let (from, to) = (nearest(start), nearest(start + window));
        if let Some(share) = from
            .zip(to)
            .and_then(|((_, a), (_, b))| b.steal_since(a))
            .filter(|&share| share >= STEAL_DISTURBS)
        {
            stolen.push(StolenWindow { start, share });
        }
    }
    stolen
}

/// `pswpin` and `pswpout` from /proc/vmstat, in pages.
fn swap_pages() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/vmstat").unwrap_or_default();
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    };
    (get("pswpin"), get("pswpout"))
}

/// A generator's lines, read back.
struct Lines {
    bursts: Vec<(f64, f64)>,
    windows: Vec<Window>,
    seconds: Vec<Second>,
}

fn read_lines(path: &Path) -> Result<Lines, DensityError> {
    let file =
        std::fs::File::open(path).map_err(|e| DensityError::io(&path.display().to_string(), e))?;
    let mut lines = Lines {
        bursts: Vec::new(),
        windows: Vec::new(),
        seconds: Vec::new(),
    };
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| DensityError::io(&path.display().to_string(), e))?;
        let bad = |e: serde_json::Error| {
            DensityError::Trial(format!("{}:{}: {e}", path.display(), n + 1))
        };
        let v: serde_json::Value = serde_json::from_str(&line).map_err(bad)?;
        match v["kind"].as_str() {
            Some("start") => {
                lines.bursts = serde_json::from_value(v["bursts"].clone()).map_err(bad)?
            }
            Some("window") => lines.windows.push(serde_json::from_value(v).map_err(bad)?),
            Some("second") => {
                let w: Window = serde_json::from_value(v).map_err(bad)?;
                lines.seconds.push(Second::from(&w));
            }
            _ => {}
        }
    }
    Ok(lines)
}

/// What a tenant of `kind` holds once filled, unconstrained: one server in a cgroup of its
/// own (no limit), filled, its cgroup's usage read a second later.
pub fn measure_peak(env: &Env, kind: &TenantKind) -> Result<u64, DensityError> {
    let dir = env.out.join("calibration");
    std::fs::create_dir_all(&dir).map_err(|e| DensityError::io(&dir.display().to_string(), e))?;
    let mut rig = Rig::new(env)?;
    let name = format!("{}-{}x{}", kind.server.name(), kind.keys, kind.value_bytes);
    let tenant = rig.start_tenant(name, kind, 0, &dir)?;
    let cdir = env.hierarchy.dir_of(&tenant.cgroup);
    fill(&env.programs, tenant, &dir)?;
    pause(Duration::from_secs(1))?;
    let usage = MemoryCgroup::new(env.hierarchy.version, cdir)
        .sample()
        .map_err(|e| DensityError::Trial(format!("the calibration cgroup: {e}")))?
        .usage
        .0;
    eprintln!(
        "density: a {} of {} values of {} bytes holds {:.1} MiB filled",
        kind.server.name(),
        kind.keys,
        kind.value_bytes,
        usage as f64 / MIB as f64
    );
    Ok(usage)
}

/// Runs `n` tenants under `policy`, writing what it ran and saw under `env.out`.
pub fn run(
    config: &DensityConfig,
    env: &Env,
    policy: Policy,
    n: usize,
) -> Result<TrialResult, DensityError> {
    let reserved: u64 = (0..n).map(|i| static_limit(env.peak(i))).sum();
    if policy == Policy::Static && reserved > config.budget {
        return Ok(TrialResult::not_fitting(policy, n, reserved));
    }
    let dir = env.out.join(format!("{}-n{n:03}", policy.name()));
    std::fs::create_dir_all(&dir).map_err(|e| DensityError::io(&dir.display().to_string(), e))?;
    let h = &env.hierarchy;
    let mut rig = Rig::new(env)?;
    let parent = rig.parent.clone();
    let parent_dir = h.dir_of(&parent);
    let parent_cg = MemoryCgroup::new(h.version, parent_dir.clone());
    parent_cg
        .set_limit(Limit::Bytes(Bytes(config.budget)), WRITE_TIMEOUT)
        .map_err(|e| DensityError::Trial(format!("the parent's limit: {e}")))?;

    for i in 0..n {
        let seed = memtide_demand::tenant_seed(config.seed, i as u64);
        rig.start_tenant(format!("t{i:03}"), config.kind(i), seed, &dir)?;
    }
    let fill_start = Instant::now();
    for t in &rig.tenants {
        fill(&env.programs, t, &dir)?;
    }
    let fill_s = fill_start.elapsed().as_secs_f64();

    match policy {
        Policy::Static => {
            for (i, t) in rig.tenants.iter().enumerate() {
                let cg = MemoryCgroup::new(h.version, h.dir_of(&t.cgroup));
                cg.set_limit(
                    Limit::Bytes(Bytes(static_limit(env.peak(i)))),
                    WRITE_TIMEOUT,
                )
                .map_err(|e| DensityError::Trial(format!("{}'s static limit: {e}", t.name)))?;
            }
        }
        Policy::Kernel => {}
        Policy::Senpai => {
            let (python, script) = env.programs.senpai.as_ref().ok_or_else(|| {
                DensityError::Host("the senpai policy needs python3 and senpai.py".into())
            })?;
            for t in &rig.tenants {
                let log = std::fs::File::create(dir.join(format!("{}-senpai.log", t.name)))
                    .map_err(|e| DensityError::io("a senpai log", e))?;
                let err = log
                    .try_clone()
                    .map_err(|e| DensityError::io("dup a log", e))?;
                let child = Command::new(python)
                    .arg("-u")
                    .arg(script)
                    .arg(h.dir_of(&t.cgroup))
                    .args(["--min-size", &TENANT_MIN.to_string()])
                    .stdin(Stdio::null())
                    .stdout(log)
                    .stderr(err)
                    .spawn()
                    .map_err(|e| DensityError::io("start senpai.py", e))?;
                rig.senpai.push(Proc(child));
            }
        }
        Policy::Sampling | Policy::Tws | Policy::App => {
            let port = free_port()?;
            let state = dir.join("state");
            std::fs::create_dir_all(&state)
                .map_err(|e| DensityError::io(&state.display().to_string(), e))?;
            let text = daemon_config(config, env, policy, &rig, port, &state);
            let path = dir.join("memtide.toml");
            std::fs::write(&path, text)
                .map_err(|e| DensityError::io(&path.display().to_string(), e))?;
            let log = std::fs::File::create(dir.join("memtide.log"))
                .map_err(|e| DensityError::io("memtide.log", e))?;
            let err = log
                .try_clone()
                .map_err(|e| DensityError::io("dup a log", e))?;
            let child = Command::new(&env.programs.memtide)
                .args(["daemon", "--config"])
                .arg(&path)
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .spawn()
                .map_err(|e| DensityError::io("start memtide daemon", e))?;
            rig.daemon = Some(Proc(child));
            let client = memtide_api::client::Client::new(
                ([127, 0, 0, 1], port).into(),
                Duration::from_secs(2),
            );
            let start = Instant::now();
            while client.status().map_or(true, |s| s.tenants.len() < n) {
                let exited = rig
                    .daemon
                    .as_mut()
                    .is_some_and(|d| matches!(d.0.try_wait(), Ok(Some(_))));
                if exited || start.elapsed() > DAEMON_START {
                    return Err(DensityError::Trial(format!(
                        "memtide daemon {} (its log: {})",
                        if exited {
                            "exited"
                        } else {
                            "did not manage every tenant in time"
                        },
                        dir.join("memtide.log").display()
                    )));
                }
                pause(Duration::from_millis(200))?;
            }
        }
    }
    pause(Duration::from_secs_f64(config.warmup))?;

    // The run: every generator on one clock.
    let t0 = unix_now() + 3.0;
    let mut generators = Vec::new();
    for t in &rig.tenants {
        let out = dir.join(format!("{}.jsonl", t.name));
        let child = Command::new(&env.programs.loadgen)
            .arg("--server")
            .arg(t.url())
            .args([
                "--keys",
                &t.kind.keys.to_string(),
                "--value-bytes",
                &t.kind.value_bytes.to_string(),
            ])
            .args(["--demand", &t.kind.demand, "--seed", &t.seed.to_string()])
            .args([
                "--duration",
                &format!("{}s", config.duration),
                "--window",
                &format!("{}s", config.window),
            ])
            .args([
                "--timeout",
                REQUEST_TIMEOUT,
                "--start-at",
                &format!("{t0:.3}"),
                "--out",
            ])
            .arg(&out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| DensityError::io("start memtide-loadgen", e))?;
        generators.push(Proc(child));
    }
    let (in0, out0) = swap_pages();
    let oom_before = oom_kills(&rig)?;
    pause(Duration::from_secs_f64((t0 - unix_now()).max(0.0)))?;
    let cpu0: Vec<(u32, f64)> = manager_pids(&rig)
        .into_iter()
        .filter_map(|p| Some((p, cpu_seconds(p)?)))
        .collect();
    let run_start = Instant::now();
    let mut cpu_times = Vec::new();
    let mut usage_sum = 0.0;
    let mut usage_samples = 0u64;
    let mut died = Vec::new();
    let deadline = Duration::from_secs_f64(config.duration + 120.0);
    loop {
        if let Ok(c) = read_cpu_time(Path::new("/")) {
            cpu_times.push((unix_now() - t0, c));
        }
        if let Ok(s) = parent_cg.sample() {
            usage_sum += s.usage.0 as f64;
            usage_samples += 1;
        }
        if let Some(i) = rig
            .senpai
            .iter_mut()
            .position(|s| matches!(s.0.try_wait(), Ok(Some(_))))
        {
            return Err(DensityError::Trial(format!(
                "senpai.py of {} exited (its log: {})",
                rig.tenants[i].name,
                dir.join(format!("{}-senpai.log", rig.tenants[i].name))
                    .display()
            )));
        }
        for t in &mut rig.tenants {
            if !died.contains(&t.name) && matches!(t.server.0.try_wait(), Ok(Some(_))) {
                died.push(t.name.clone());
            }
        }
        let running = generators
            .iter_mut()
            .filter_map(|g| g.0.try_wait().ok())
            .filter(Option::is_none)
            .count();
        if running == 0 {
            break;
        }
        stopped()?;
        if run_start.elapsed() > deadline {
            return Err(DensityError::Trial(format!(
                "{running} load generators still ran {deadline:?} after the start"
            )));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let run_s = run_start.elapsed().as_secs_f64();
    let manager_cpu_s = policy.has_manager().then(|| {
        cpu0.iter()
            .filter_map(|&(p, c)| Some(cpu_seconds(p)? - c))
            .sum::<f64>()
    });
    let (in1, out1) = swap_pages();
    let oom_after = oom_kills(&rig)?;

    let stolen = stolen_windows(&cpu_times, config.window, config.duration);
    let mut tally = Tally::default();
    for t in &rig.tenants {
        let lines = read_lines(&dir.join(format!("{}.jsonl", t.name)))?;
        tally.add(
            t.name.clone(),
            &t.kind,
            &lines.windows,
            &lines.seconds,
            &lines.bursts,
            &config.slo,
            &stolen,
        );
    }
    let page = 4096.0 / MIB as f64;
    let result = TrialResult {
        policy,
        n,
        fits: true,
        attainment: tally.unstolen,
        attainment_all: tally.all,
        stolen,
        oom_kills: oom_after.saturating_sub(oom_before),
        died,
        wakes_within: tally.within,
        wakes: tally.wakes,
        wake_p90_s: tally.wake_p90(),
        swap_in_mib: in1.saturating_sub(in0) as f64 * page,
        swap_out_mib: out1.saturating_sub(out0) as f64 * page,
        manager_cpu_s,
        run_s,
        mean_usage: if usage_samples > 0 {
            (usage_sum / usage_samples as f64) as u64
        } else {
            0
        },
        reserved,
        tenants: tally.tenants,
    };
    let json = serde_json::to_string_pretty(&result).expect("results serialize");
    let summary = dir.join("result.json");
    std::fs::write(&summary, json)
        .map_err(|e| DensityError::io(&summary.display().to_string(), e))?;
    eprintln!(
        "density: {policy} n={n}: filled in {fill_s:.0} s; {} of {} active windows met the SLO ({} of {} counting the {} windows the hypervisor stole from); {} OOM kills",
        result.attainment.met,
        result.attainment.active,
        result.attainment_all.met,
        result.attainment_all.active,
        result.stolen.len(),
        result.oom_kills
    );
    drop(generators);
    drop(rig);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: f64, total: u64, steal: u64) -> (f64, CpuTime) {
        (
            t,
            CpuTime {
                total,
                steal: Some(steal),
            },
        )
    }

    #[test]
    fn a_window_is_stolen_from_when_its_steal_share_reaches_the_bound() {
        // 200 ticks a second (2 CPUs); 1% stolen in the first window, 15% in the second, none
        // in the third.
        let samples = [
            at(-0.5, 0, 0),
            at(10.0, 2100, 21),
            at(20.2, 4140, 327),
            at(30.1, 6120, 327),
        ];
        let stolen = stolen_windows(&samples, 10.0, 30.0);
        assert_eq!(stolen.len(), 1, "{stolen:?}");
        assert_eq!(stolen[0].start, 10.0);
        assert!((stolen[0].share - 0.15).abs() < 0.001, "{stolen:?}");
    }

    #[test]
    fn without_a_steal_count_no_window_is_left_out() {
        let none = |t: f64, total| (t, CpuTime { total, steal: None });
        let samples = [none(0.0, 0), none(10.0, 2000), none(20.0, 4000)];
        assert!(stolen_windows(&samples, 10.0, 20.0).is_empty());
        assert!(stolen_windows(&[], 10.0, 20.0).is_empty());
    }
}
