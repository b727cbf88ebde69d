//! `memtide discover`: what memtide could manage on this host (the cgroups under a parent, systemd's running units, the engines' containers, libvirt's domains) with their memory now, as a table or as a starting configuration, so that a new user writes a config from what runs rather than from scratch.
//!
//! Each source is asked on its own and says in one line why it has nothing when it is
//! absent or fails; the others still list. The host is read behind small functions that take
//! the root `/proc` and `/sys` are read under (`--proc-root`, as `[host] proc_root`), and the
//! programs asked (`systemctl`, `virsh`), so that tests run on fake trees; commands are
//! bounded in time by `memtide_daemon::bounded`. What is printed is made by pure functions
//! ([`render_table`], [`render_toml`]) from what was [`Found`].

use crate::status::{aligned, human_bytes};
use memtide_daemon::config::cgroup_is_strictly_under;
use memtide_engines::{Engine, EngineKind};
use memtide_linux::fs::hierarchy::{own_cgroup, CgroupVersion};
use memtide_linux::fs::{cgroup_v1 as v1, cgroup_v2 as v2, procs};
use memtide_linux::{Limit, MemoryHierarchy};
use memtide_model::written::format_size;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// How long each `systemctl` command and each engine call may take; `virsh`'s commands share
/// one such wait.
const DEADLINE: Duration = Duration::from_secs(10);

/// The smallest `max` suggested from what a tenant holds.
const SMALLEST_MAX: u64 = 64 * MIB;

/// The `max` suggested for a tenant of which nothing is known.
const UNKNOWN_MAX: u64 = GIB;
/// What a domain's cgroup holds beside its guest's memory: QEMU's own (as the daemon asks of a
/// launched VM's max).
const QEMU_ROOM: u64 = 128 * MIB;

/// The longest tenant name the daemon takes.
const NAME_MAX: usize = 64;

/// Where to look and whom to ask.
#[derive(Clone, Debug)]
pub struct Options {
    /// The parent cgroup whose children are listed; `None`: the one `[host] parent =
    /// "self"` would take for a daemon started here.
    pub parent: Option<String>,
    /// Root under which `/proc`, `/sys` and `/run/systemd/system` are read.
    pub proc_root: PathBuf,
    pub docker_socket: PathBuf,
    pub podman_socket: PathBuf,
    /// The `systemctl` program.
    pub systemctl: PathBuf,
    /// The `virsh` program; `None`: there is none.
    pub virsh: Option<PathBuf>,
}

impl Options {
    /// The defaults on a live host: the engines' default sockets, `systemctl` and the `virsh`
    /// found on `PATH`.
    pub fn new(parent: Option<String>, proc_root: PathBuf) -> Options {
        Options {
            parent,
            proc_root,
            docker_socket: EngineKind::Docker.default_socket(),
            podman_socket: EngineKind::Podman.default_socket(),
            systemctl: PathBuf::from("systemctl"),
            virsh: on_path("virsh"),
        }
    }
}

/// Why `memtide discover` cannot list at all.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    /// `--parent` is not a cgroup path, or no such cgroup exists (the user's mistake).
    #[error("--parent {parent:?}: {why}")]
    Parent { parent: String, why: String },
    /// The memory controller could not be found.
    #[error("cannot find the memory cgroup controller under {}: {why}", proc_root.display())]
    Hierarchy { proc_root: PathBuf, why: String },
}

impl DiscoverError {
    /// The user's own mistake (exit 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, DiscoverError::Parent { .. })
    }
}

/// A cgroup's memory now; a figure the kernel (or systemd, or the engine) does not give is
/// `None`, shown as `-`, never 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub usage: Option<u64>,
    /// The limit in force (`Limit::Max`: none).
    pub limit: Option<Limit>,
    pub swap: Option<u64>,
}

/// A child cgroup of the parent holding processes (in it or below).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundCgroup {
    /// Its path inside the hierarchy.
    pub path: String,
    /// Processes in it and below.
    pub procs: usize,
    pub memory: Memory,
}

/// A running systemd service or scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundUnit {
    pub unit: String,
    /// Its `ControlGroup`; `None` when systemd gives none.
    pub cgroup: Option<String>,
    pub memory: Memory,
}

/// A container of one engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundContainer {
    pub name: String,
    pub engine: EngineKind,
    pub running: bool,
    /// Its first process's memory cgroup, while it runs.
    pub cgroup: Option<String>,
    /// Usage and swap from its cgroup; the limit is the engine's (`HostConfig.Memory`).
    pub memory: Memory,
}

/// A libvirt domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundDomain {
    pub name: String,
    /// As `virsh dominfo` says (`running`, `shut off`, ...); `None` when it did not answer.
    pub state: Option<String>,
    /// `Used memory`, in bytes.
    pub memory: Option<u64>,
}

/// What one source found, or why it has nothing (one line).
pub type Source<T> = Result<Vec<T>, String>;

/// Everything found.
#[derive(Clone, Debug)]
pub struct Found {
    pub version: CgroupVersion,
    pub parent: String,
    /// The parent is the default (`[host] parent = "self"`'s), not `--parent`.
    pub parent_is_default: bool,
    pub cgroups: Source<FoundCgroup>,
    /// Children of the parent that hold no process (not listed).
    pub empty_cgroups: usize,
    pub units: Source<FoundUnit>,
    /// Docker's, then Podman's.
    pub containers: Vec<(EngineKind, Source<FoundContainer>)>,
    pub domains: Source<FoundDomain>,
}

/// Looks at the host as `options` say.
pub fn discover(options: &Options) -> Result<Found, DiscoverError> {
    let hierarchy =
        MemoryHierarchy::detect(&options.proc_root).map_err(|e| DiscoverError::Hierarchy {
            proc_root: options.proc_root.clone(),
            why: e.to_string(),
        })?;
    let (parent, parent_is_default) = match &options.parent {
        Some(p) => (checked_parent(&hierarchy, p)?, false),
        None => (memtide_daemon::run::own_parent(&hierarchy.own_cgroup), true),
    };
    let (cgroups, empty_cgroups) = match cgroups_under(&hierarchy, &parent) {
        Ok((found, empty)) => (Ok(found), empty),
        Err(why) => (Err(why), 0),
    };
    let sockets = [
        (EngineKind::Docker, &options.docker_socket),
        (EngineKind::Podman, &options.podman_socket),
    ];
    Ok(Found {
        version: hierarchy.version,
        parent,
        parent_is_default,
        cgroups,
        empty_cgroups,
        units: systemd_units(&options.systemctl, &options.proc_root, &hierarchy),
        containers: sockets
            .into_iter()
            .map(|(kind, socket)| {
                (
                    kind,
                    containers(kind, socket, &options.proc_root, &hierarchy),
                )
            })
            .collect(),
        domains: match &options.virsh {
            Some(virsh) => domains(virsh),
            None => Err("no virsh here".to_string()),
        },
    })
}

/// `--parent` normalised, if it is a cgroup path that exists.
fn checked_parent(h: &MemoryHierarchy, text: &str) -> Result<String, DiscoverError> {
    let bad = |why: String| DiscoverError::Parent {
        parent: text.to_string(),
        why,
    };
    if !text.starts_with('/') {
        return Err(bad(
            "is not a cgroup path: it does not start with \"/\" (a path inside the cgroup \
             hierarchy, such as \"/system.slice\")"
                .to_string(),
        ));
    }
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
    if parts
        .iter()
        .any(|p| *p == "." || *p == ".." || p.chars().any(char::is_control))
    {
        return Err(bad(
            "is not a cgroup path: it has a \".\" or \"..\" component or a control character"
                .to_string(),
        ));
    }
    let parent = format!("/{}", parts.join("/"));
    let dir = h.dir_of(&parent);
    if !dir.is_dir() {
        return Err(bad(format!(
            "no such cgroup ({} is not a directory)",
            dir.display()
        )));
    }
    Ok(parent)
}

/// The children of `parent` holding processes (sorted by path), and how many hold none.
/// memtide's own leaf (`memtide_linux::host::DAEMON_LEAF`) is not among them.
fn cgroups_under(h: &MemoryHierarchy, parent: &str) -> Result<(Vec<FoundCgroup>, usize), String> {
    let dir = h.dir_of(parent);
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found = Vec::new();
    let mut empty = 0;
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == memtide_linux::host::DAEMON_LEAF {
            continue;
        }
        let path = format!("{}/{name}", parent.trim_end_matches('/'));
        // A child gone meanwhile, or unreadable, holds nothing memtide could manage.
        if procs::read_subtree_procs(&entry.path(), &mut pids).is_err() || pids.is_empty() {
            empty += 1;
            continue;
        }
        found.push(FoundCgroup {
            memory: memory_of(h.version, &entry.path()),
            procs: pids.len(),
            path,
        });
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((found, empty))
}

/// The memory of the cgroup at `dir`: usage, the limit in force (v2: the lower of
/// memory.high and memory.max) and swap, each `None` where the kernel does not give it.
fn memory_of(version: CgroupVersion, dir: &Path) -> Memory {
    match version {
        CgroupVersion::V1 => {
            let usage = v1::read_usage(dir).ok().map(|b| b.0);
            Memory {
                usage,
                limit: v1::read_limit(dir).ok(),
                swap: v1::read_memsw_usage(dir)
                    .ok()
                    .flatten()
                    .zip(usage)
                    .map(|(memsw, usage)| memsw.0.saturating_sub(usage)),
            }
        }
        CgroupVersion::V2 => Memory {
            usage: v2::read_current(dir).ok().map(|b| b.0),
            limit: match (v2::read_max(dir).ok(), v2::read_high(dir).ok()) {
                (Some(max), Some(high)) => Some(max.min(high)),
                (one, other) => one.or(other),
            },
            swap: v2::read_swap_current(dir).ok().flatten().map(|b| b.0),
        },
    }
}

/// systemd's running services and scopes, where systemd runs (`/run/systemd/system` under
/// `proc_root`): `systemctl list-units`, then one `systemctl show` for all of them.
fn systemd_units(systemctl: &Path, proc_root: &Path, h: &MemoryHierarchy) -> Source<FoundUnit> {
    if !proc_root.join("run/systemd/system").is_dir() {
        return Err("systemd does not run here (no /run/systemd/system)".to_string());
    }
    let run = |args: &[&str], what: &str| -> Result<String, String> {
        let out = memtide_daemon::bounded::output_within(
            Command::new(systemctl).args(args),
            what,
            DEADLINE,
        )?;
        if !out.status.success() {
            return Err(format!(
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let list = run(
        &[
            "list-units",
            "--type=service,scope",
            "--state=running",
            "--plain",
            "--no-legend",
            "--no-pager",
        ],
        "systemctl list-units",
    )?;
    let units = parse_unit_list(&list);
    if units.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec![
        "show",
        "--no-pager",
        "-p",
        "Id,ControlGroup,MemoryCurrent,MemoryMax",
        "--",
    ];
    args.extend(units.iter().map(String::as_str));
    let shown = parse_unit_show(&run(&args, "systemctl show")?);
    Ok(shown
        .into_iter()
        .map(|(unit, cgroup, systemd)| {
            // The cgroup's own files where the memory hierarchy has it (they give swap too),
            // else what systemd counts.
            let memory = cgroup
                .as_deref()
                .map(|c| h.dir_of(c))
                .filter(|d| d.is_dir())
                .map_or(systemd, |d| memory_of(h.version, &d));
            FoundUnit {
                unit,
                cgroup,
                memory,
            }
        })
        .collect())
}

/// The units of `systemctl list-units --plain --no-legend`'s answer: each line's first word,
/// those that are services or scopes.
pub fn parse_unit_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|u| u.ends_with(".service") || u.ends_with(".scope"))
        .map(str::to_string)
        .collect()
}

/// `systemctl show -p Id,ControlGroup,MemoryCurrent,MemoryMax UNIT...`'s answer: one
/// block of `KEY=VALUE` lines per unit, blank lines between; each unit's name, cgroup and
/// memory as systemd counts it (`[not set]`, `infinity` and 2^64-1 are no figure).
pub fn parse_unit_show(text: &str) -> Vec<(String, Option<String>, Memory)> {
    let mut units = Vec::new();
    for block in text.split("\n\n") {
        let value = |key: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        let Some(id) = value("Id") else {
            continue;
        };
        let figure = |key: &str| {
            value(key)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&v| v != u64::MAX)
        };
        let limit = match value("MemoryMax") {
            Some("infinity") => Some(Limit::Max),
            _ => figure("MemoryMax").map(|b| Limit::Bytes(memtide_model::Bytes(b))),
        };
        units.push((
            id.to_string(),
            value("ControlGroup").map(str::to_string),
            Memory {
                usage: figure("MemoryCurrent"),
                limit,
                swap: None,
            },
        ));
    }
    units
}

/// The containers of engine `kind` on `socket`, running or not, sorted by name.
fn containers(
    kind: EngineKind,
    socket: &Path,
    proc_root: &Path,
    h: &MemoryHierarchy,
) -> Source<FoundContainer> {
    if !memtide_engines::is_socket(socket) {
        return Err(format!("{} is not a socket", socket.display()));
    }
    let engine = Engine::new(kind, socket, DEADLINE);
    let listed = engine.list().map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    for l in listed {
        if !memtide_engines::valid_name(&l.name) {
            continue;
        }
        // Gone since it was listed: not there.
        let Some(c) = engine.inspect(&l.name).map_err(|e| e.to_string())? else {
            continue;
        };
        let cgroup = c.pid.and_then(|pid| cgroup_of_pid(proc_root, pid, h));
        let from_cgroup = cgroup
            .as_deref()
            .map(|cg| memory_of(h.version, &h.dir_of(cg)))
            .unwrap_or_default();
        found.push(FoundContainer {
            name: c.name,
            engine: kind,
            running: c.running,
            cgroup,
            memory: Memory {
                limit: Some(
                    c.memory
                        .map_or(Limit::Max, |b| Limit::Bytes(memtide_model::Bytes(b))),
                ),
                ..from_cgroup
            },
        });
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// The memory cgroup of process `pid` (`/proc/PID/cgroup` under `proc_root`).
fn cgroup_of_pid(proc_root: &Path, pid: u32, h: &MemoryHierarchy) -> Option<String> {
    let path = proc_root.join(format!("proc/{pid}/cgroup"));
    let text = std::fs::read_to_string(&path).ok()?;
    own_cgroup(&path, &text, h.version).ok()
}

/// libvirt's domains on `qemu:///system`, through `virsh`: its list, then each domain's
/// `dominfo`, all within one [`DEADLINE`] (a domain left without an answer shows `-`).
fn domains(virsh: &Path) -> Source<FoundDomain> {
    let started = std::time::Instant::now();
    let run = |args: &[&str], what: &str| -> Result<String, String> {
        let left = DEADLINE.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(format!("{what}: no time left"));
        }
        let out = memtide_daemon::bounded::output_within(
            Command::new(virsh)
                .args(["-c", "qemu:///system"])
                .args(args),
            what,
            left,
        )?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let first = err.lines().map(str::trim).find(|l| !l.is_empty());
            return Err(format!("{what}: {}", first.unwrap_or("failed")));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let names = run(&["list", "--all", "--name"], "virsh list")?;
    let mut found: Vec<FoundDomain> = names
        .lines()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|name| {
            let (state, memory) = run(&["dominfo", "--", name], "virsh dominfo")
                .map(|text| parse_dominfo(&text))
                .unwrap_or_default();
            FoundDomain {
                name: name.to_string(),
                state,
                memory,
            }
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(found)
}

/// `virsh dominfo`'s state and `Used memory` (in bytes; virsh says KiB).
pub fn parse_dominfo(text: &str) -> (Option<String>, Option<u64>) {
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim_start().strip_prefix(':'))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let memory = value("Used memory").and_then(|v| {
        let (n, unit) = v.split_once(' ').unwrap_or((v, "KiB"));
        let scale = match unit.trim() {
            "KiB" => 1 << 10,
            "MiB" => MIB,
            "GiB" => GIB,
            "B" | "bytes" => 1,
            _ => return None,
        };
        n.parse::<u64>().ok()?.checked_mul(scale)
    });
    (value("State").map(str::to_string), memory)
}

/// `program` as found on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

// ---- What is printed: pure functions of what was found. ----

fn bytes_cell(b: Option<u64>) -> String {
    b.map_or_else(|| "-".to_string(), human_bytes)
}

fn limit_cell(l: Option<Limit>) -> String {
    match l {
        None => "-".to_string(),
        Some(Limit::Max) => "max".to_string(),
        Some(Limit::Bytes(b)) => human_bytes(b.0),
    }
}

/// The table `memtide discover` prints: a line on the hierarchy and the parent, then one
/// block per source, a table or one line saying why it has nothing.
pub fn render_table(f: &Found) -> String {
    let mut out = format!(
        "memtide discover · cgroup {} · parent {}{}\n",
        f.version.name(),
        f.parent,
        if f.parent_is_default {
            " (as [host] parent = \"self\" takes it here; --parent to look elsewhere)"
        } else {
            ""
        }
    );
    out.push('\n');
    match &f.cgroups {
        Err(why) => out.push_str(&format!("cgroups: {why}\n")),
        Ok(cgroups) if cgroups.is_empty() => out.push_str(&format!(
            "cgroups: none under {} holds a process{}\n",
            f.parent,
            empty_note(f.empty_cgroups)
        )),
        Ok(cgroups) => {
            let rows: Vec<Vec<String>> = cgroups
                .iter()
                .map(|c| {
                    vec![
                        c.path.clone(),
                        c.procs.to_string(),
                        bytes_cell(c.memory.usage),
                        limit_cell(c.memory.limit),
                        bytes_cell(c.memory.swap),
                    ]
                })
                .collect();
            out.push_str(&aligned(
                &["CGROUP", "PROCS", "USAGE", "LIMIT", "SWAP"],
                &rows,
            ));
            if f.empty_cgroups > 0 {
                out.push_str(&format!(
                    "({} without a process not shown)\n",
                    f.empty_cgroups
                ));
            }
        }
    }
    out.push('\n');
    match &f.units {
        Err(why) => out.push_str(&format!("systemd: {why}\n")),
        Ok(units) if units.is_empty() => out.push_str("systemd: no running service or scope\n"),
        Ok(units) => {
            let rows: Vec<Vec<String>> = units
                .iter()
                .map(|u| {
                    vec![
                        u.unit.clone(),
                        bytes_cell(u.memory.usage),
                        limit_cell(u.memory.limit),
                        bytes_cell(u.memory.swap),
                        u.cgroup.clone().unwrap_or_else(|| "-".to_string()),
                    ]
                })
                .collect();
            out.push_str(&aligned(
                &["UNIT", "USAGE", "LIMIT", "SWAP", "CGROUP"],
                &rows,
            ));
        }
    }
    out.push('\n');
    let mut rows = Vec::new();
    let mut why_not = String::new();
    for (kind, source) in &f.containers {
        match source {
            Err(why) => why_not.push_str(&format!("{kind}: {why}\n")),
            Ok(cs) if cs.is_empty() => why_not.push_str(&format!("{kind}: no container\n")),
            Ok(cs) => rows.extend(cs.iter().map(|c| {
                vec![
                    c.name.clone(),
                    c.engine.name().to_string(),
                    if c.running { "running" } else { "stopped" }.to_string(),
                    bytes_cell(c.memory.usage),
                    limit_cell(c.memory.limit),
                    bytes_cell(c.memory.swap),
                    c.cgroup.clone().unwrap_or_else(|| "-".to_string()),
                ]
            })),
        }
    }
    if !rows.is_empty() {
        out.push_str(&aligned(
            &[
                "CONTAINER",
                "ENGINE",
                "STATE",
                "USAGE",
                "LIMIT",
                "SWAP",
                "CGROUP",
            ],
            &rows,
        ));
    }
    out.push_str(&why_not);
    out.push('\n');
    match &f.domains {
        Err(why) => out.push_str(&format!("libvirt: {why}\n")),
        Ok(ds) if ds.is_empty() => out.push_str("libvirt: no domain\n"),
        Ok(ds) => {
            let rows: Vec<Vec<String>> = ds
                .iter()
                .map(|d| {
                    vec![
                        d.name.clone(),
                        bytes_cell(d.memory),
                        d.state.clone().unwrap_or_else(|| "-".to_string()),
                    ]
                })
                .collect();
            out.push_str(&aligned(&["DOMAIN", "MEMORY", "STATE"], &rows));
        }
    }
    out
}

fn empty_note(empty: usize) -> String {
    match empty {
        0 => String::new(),
        n => format!(" ({n} without a process not shown)"),
    }
}

/// What a tenant of the starting configuration comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Origin {
    Cgroup(String),
    Unit(String),
    Container(String, EngineKind),
}

/// One `[[tenant]]` of the starting configuration, before it is written.
#[derive(Clone, Debug)]
struct Candidate {
    /// What it is, for its heading comment, e.g. `container redis-a (docker)`.
    what: String,
    /// The name it is derived from.
    raw_name: String,
    origin: Origin,
    /// Its cgroup, where known (a stopped container's is not).
    cgroup: Option<String>,
    memory: Memory,
}

/// A tenant's `max`: its limit now, else twice what it holds now rounded up to a MiB (at
/// least 64 MiB), else 1 GiB; with the reason, for the comment beside it.
pub fn suggested_max(m: &Memory) -> (u64, String) {
    match (m.limit, m.usage) {
        (Some(Limit::Bytes(b)), _) if b.0 > 0 => (b.0, "its limit now".to_string()),
        (_, Some(u)) => {
            let twice = u.saturating_mul(2).div_ceil(MIB).saturating_mul(MIB);
            if twice < SMALLEST_MAX {
                (
                    SMALLEST_MAX,
                    format!(
                        "no limit now; twice the {} it holds is below 64 MiB",
                        human_bytes(u)
                    ),
                )
            } else {
                (
                    twice,
                    format!(
                        "no limit now; twice the {} it holds, rounded up to a MiB",
                        human_bytes(u)
                    ),
                )
            }
        }
        _ => (
            UNKNOWN_MAX,
            "no limit now and its usage is unknown: choose one".to_string(),
        ),
    }
}

/// A valid tenant name made of `raw`, not in `taken` (then taken): letters, digits, `-`,
/// `_` and `.` kept, any other character a `-`; a unit's type suffix dropped; at most 64
/// characters; `-2`, `-3`, ... added to a name already taken.
pub fn tenant_name(raw: &str, taken: &mut BTreeSet<String>) -> String {
    let stem = [".service", ".scope", ".slice"]
        .iter()
        .find_map(|s| raw.strip_suffix(s).filter(|s| !s.is_empty()))
        .unwrap_or(raw);
    let mut base: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(NAME_MAX)
        .collect();
    if base.is_empty() || base == "." || base == ".." {
        base = "tenant".to_string();
    }
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        let suffix = format!("-{n}");
        let keep = base.len().min(NAME_MAX - suffix.len());
        name = format!("{}{suffix}", &base[..keep]);
        n += 1;
    }
    taken.insert(name.clone());
    name
}

/// A TOML basic string: serde_json's escaping is TOML's, but for DEL, which JSON leaves as it
/// is and TOML allows only escaped.
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_string())
        .to_string()
        .replace('\u{7f}', "\\u007f")
}

/// A size value: a quoted size with its unit, or bytes when no unit divides it.
fn size_value(bytes: u64) -> String {
    if bytes.is_multiple_of(1024) && bytes > 0 {
        quoted(&format_size(bytes))
    } else {
        bytes.to_string()
    }
}

/// Text fit for a comment line: control characters (a newline) would end it.
fn comment_text(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The candidates in the order the table lists them.
fn candidates(f: &Found) -> Vec<Candidate> {
    let mut all = Vec::new();
    for c in f.cgroups.iter().flatten() {
        all.push(Candidate {
            what: format!(
                "cgroup {}, {} process{}",
                c.path,
                c.procs,
                if c.procs == 1 { "" } else { "es" }
            ),
            raw_name: c.path.rsplit('/').next().unwrap_or_default().to_string(),
            origin: Origin::Cgroup(c.path.clone()),
            cgroup: Some(c.path.clone()),
            memory: c.memory,
        });
    }
    for u in f.units.iter().flatten() {
        all.push(Candidate {
            what: format!(
                "unit {}{}",
                u.unit,
                u.cgroup
                    .as_deref()
                    .map_or_else(String::new, |c| format!(", cgroup {c}"))
            ),
            raw_name: u.unit.clone(),
            origin: Origin::Unit(u.unit.clone()),
            cgroup: u.cgroup.clone(),
            memory: u.memory,
        });
    }
    for (_, source) in &f.containers {
        for c in source.iter().flatten() {
            all.push(Candidate {
                what: format!(
                    "container {} ({}, {}{})",
                    c.name,
                    c.engine,
                    if c.running { "running" } else { "stopped" },
                    c.cgroup
                        .as_deref()
                        .map_or_else(String::new, |cg| format!(", cgroup {cg}"))
                ),
                raw_name: c.name.clone(),
                origin: Origin::Container(c.name.clone(), c.engine),
                cgroup: c.cgroup.clone(),
                memory: c.memory,
            });
        }
    }
    all
}

/// Why the daemon would refuse candidate `c` beside those `accepted` so far, if it would: a
/// cgroup not strictly under the parent, or one that is, holds or lies in an accepted one's.
fn refusal(c: &Candidate, parent: &str, accepted: &[(String, String)]) -> Option<String> {
    let cgroup = c.cgroup.as_deref()?;
    if cgroup.chars().any(char::is_control) {
        return Some("its cgroup's path has a control character".to_string());
    }
    if !cgroup_is_strictly_under(cgroup, parent) {
        return Some(format!(
            "outside the parent {parent} (the daemon takes only cgroups strictly under it)"
        ));
    }
    accepted.iter().find_map(|(name, other)| {
        let norm = |p: &str| p.trim_end_matches('/').to_string();
        if norm(other) == norm(cgroup) {
            Some(format!("the same cgroup as tenant \"{name}\""))
        } else if cgroup_is_strictly_under(cgroup, other) {
            Some(format!("inside tenant \"{name}\"'s cgroup"))
        } else if cgroup_is_strictly_under(other, cgroup) {
            Some(format!("holds tenant \"{name}\"'s cgroup"))
        } else {
            None
        }
    })
}

/// The starting configuration `memtide discover --toml` prints: `[host]` with the parent and
/// a budget suggested (commented), then a `[[tenant]]` per thing found. A thing the daemon
/// would refuse beside the others (outside the parent, or nesting with one taken first:
/// containers before units before cgroups) is written commented out with why; libvirt's
/// domains follow (their cgroups are found as they run, so only their names are checked).
pub fn render_toml(f: &Found) -> String {
    let all = candidates(f);
    // Which are taken: containers first, then units, then cgroups (the more specific names).
    let rank = |c: &Candidate| match c.origin {
        Origin::Container(..) => 0,
        Origin::Unit(_) => 1,
        Origin::Cgroup(_) => 2,
    };
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| rank(&all[i]));
    let mut taken = BTreeSet::new();
    let mut names = vec![String::new(); all.len()];
    let mut refused: Vec<Option<String>> = vec![None; all.len()];
    let mut accepted: Vec<(String, String)> = Vec::new();
    for i in order {
        let c = &all[i];
        names[i] = tenant_name(&c.raw_name, &mut taken);
        refused[i] = refusal(c, &f.parent, &accepted);
        if let (None, Some(cg)) = (&refused[i], &c.cgroup) {
            accepted.push((names[i].clone(), cg.clone()));
        }
    }
    let held: u64 = all
        .iter()
        .zip(&refused)
        .filter(|(_, r)| r.is_none())
        .filter_map(|(c, _)| c.memory.usage)
        .sum();

    let mut out = String::new();
    out.push_str(&format!(
        "# A starting configuration from `memtide discover` (memtide {}).\n",
        env!("CARGO_PKG_VERSION")
    ));
    out.push_str(
        "# Read each tenant before you use it: max is its limit now, or where it has none\n\
         # twice what it holds now; min is yours to choose. See docs/configuration.md.\n\n",
    );
    out.push_str("[host]\n");
    out.push_str(&format!("parent = {}\n", quoted(&f.parent)));
    if held > 0 {
        out.push_str(&format!(
            "# The tenants below hold {} now; a budget of that, rounded up to a GiB:\n",
            human_bytes(held)
        ));
        out.push_str(&format!(
            "# budget = {}\n",
            quoted(&format_size(held.div_ceil(GIB) * GIB))
        ));
    }
    for (i, c) in all.iter().enumerate() {
        out.push('\n');
        let (max, why_max) = suggested_max(&c.memory);
        let mut lines = vec![
            "[[tenant]]".to_string(),
            format!("name = {}", quoted(&names[i])),
        ];
        match &c.origin {
            Origin::Cgroup(path) => lines.push(format!("cgroup = {}", quoted(path))),
            Origin::Unit(unit) => lines.push(format!("unit = {}", quoted(unit))),
            Origin::Container(name, engine) => {
                lines.push(format!("container = {}", quoted(name)));
                lines.push(format!("engine = {}", quoted(engine.name())));
            }
        }
        lines.push(format!(
            "max = {}  # {}",
            size_value(max),
            comment_text(&why_max)
        ));
        let min = c
            .memory
            .usage
            .map(|u| (u / MIB * MIB).min(max))
            .filter(|&m| m > 0);
        lines.push(match min {
            Some(m) => format!(
                "# min = {}  # what it holds now: uncomment to keep it from reclaim",
                size_value(m)
            ),
            None => "# min = \"0\"".to_string(),
        });
        out.push_str(&format!("# {}\n", comment_text(&c.what)));
        match &refused[i] {
            None => {
                for l in lines {
                    out.push_str(&l);
                    out.push('\n');
                }
            }
            Some(why) => {
                out.push_str(&format!("# not taken: {}\n", comment_text(why)));
                for l in lines {
                    let l = l.strip_prefix("# ").unwrap_or(&l);
                    out.push_str(&format!("# {l}\n"));
                }
            }
        }
    }
    if let Ok(domains) = &f.domains {
        for d in domains {
            let name = tenant_name(&d.name, &mut taken);
            // Its guest's memory and QEMU's own beside it (its cgroup holds both).
            let max = d.memory.filter(|&m| m > 0).unwrap_or(UNKNOWN_MAX) + QEMU_ROOM;
            let lines = [
                "[[tenant]]".to_string(),
                format!("name = {}", quoted(&name)),
                format!("domain = {}", quoted(&d.name)),
                format!(
                    "max = {}  # its memory and {} for QEMU's own",
                    size_value(max),
                    human_bytes(QEMU_ROOM)
                ),
            ];
            out.push_str(&format!(
                "\n# libvirt domain {}, {}\n",
                quoted(&d.name),
                d.state.as_deref().unwrap_or("state unknown")
            ));
            let refusal = (!memtide_engines::libvirt::valid_domain_name(&d.name)).then(|| {
                format!(
                    "not {} (virsh could read it as an id, a UUID or an option)",
                    memtide_engines::libvirt::DOMAIN_NAME_RULE
                )
            });
            for l in lines {
                match &refusal {
                    None => out.push_str(&format!("{l}\n")),
                    Some(_) => out.push_str(&format!("# {l}\n")),
                }
            }
            if let Some(why) = refusal {
                out.push_str(&format!("# not taken: {}\n", comment_text(&why)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use memtide_model::Bytes;

    fn memory(usage: Option<u64>, limit: Option<Limit>, swap: Option<u64>) -> Memory {
        Memory { usage, limit, swap }
    }

    fn found(parent: &str) -> Found {
        Found {
            version: CgroupVersion::V1,
            parent: parent.to_string(),
            parent_is_default: false,
            cgroups: Ok(Vec::new()),
            empty_cgroups: 0,
            units: Err("systemd does not run here (no /run/systemd/system)".to_string()),
            containers: vec![
                (
                    EngineKind::Docker,
                    Err("/var/run/docker.sock is not a socket".to_string()),
                ),
                (EngineKind::Podman, Ok(Vec::new())),
            ],
            domains: Err("no virsh here".to_string()),
        }
    }

    fn cgroup(path: &str, usage: Option<u64>, limit: Option<Limit>) -> FoundCgroup {
        FoundCgroup {
            path: path.to_string(),
            procs: 1,
            memory: memory(usage, limit, None),
        }
    }

    fn parses(toml: &str) -> memtide_daemon::config::DaemonConfig {
        memtide_daemon::config::DaemonConfig::parse(toml, Path::new("discovered.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{toml}"))
    }

    #[test]
    fn names_keep_the_allowed_characters_drop_a_unit_s_suffix_and_stay_unique() {
        let mut taken = BTreeSet::new();
        assert_eq!(
            tenant_name("redis-server@a.service", &mut taken),
            "redis-server-a"
        );
        assert_eq!(tenant_name("db_1.prod", &mut taken), "db_1.prod");
        assert_eq!(tenant_name("db_1.prod", &mut taken), "db_1.prod-2");
        assert_eq!(tenant_name("db_1.prod", &mut taken), "db_1.prod-3");
        assert_eq!(tenant_name("..", &mut taken), "tenant");
        assert_eq!(tenant_name("", &mut taken), "tenant-2");
        assert_eq!(tenant_name("é x", &mut taken), "--x");
        let long = "a".repeat(100);
        let first = tenant_name(&long, &mut taken);
        let second = tenant_name(&long, &mut taken);
        assert_eq!(first.len(), 64);
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("-2"), "{second}");
    }

    #[test]
    fn max_is_the_limit_now_else_twice_the_usage_rounded_up_to_a_mib() {
        let limited = memory(Some(10 * MIB), Some(Limit::Bytes(Bytes(512 * MIB))), None);
        assert_eq!(suggested_max(&limited).0, 512 * MIB);
        let free = memory(Some(100 * MIB + 1), Some(Limit::Max), None);
        assert_eq!(suggested_max(&free).0, 201 * MIB);
        let small = memory(Some(MIB), None, None);
        assert_eq!(suggested_max(&small).0, 64 * MIB);
        assert_eq!(suggested_max(&Memory::default()).0, GIB);
    }

    #[test]
    fn the_table_shows_a_missing_counter_as_a_dash_and_no_limit_as_max() {
        let mut f = found("/p");
        f.cgroups = Ok(vec![
            cgroup("/p/a", Some(100 * MIB), Some(Limit::Max)),
            cgroup("/p/b", None, None),
        ]);
        f.empty_cgroups = 2;
        let text = render_table(&f);
        let a = text.lines().find(|l| l.starts_with("/p/a ")).unwrap();
        assert!(a.contains("100.0 MiB") && a.contains(" max "), "{a}");
        assert!(a.ends_with(" -"), "swap unknown is '-', not 0: {a}");
        let b = text.lines().find(|l| l.starts_with("/p/b ")).unwrap();
        assert_eq!(b.split_whitespace().filter(|c| *c == "-").count(), 3, "{b}");
        assert!(text.contains("(2 without a process not shown)"), "{text}");
    }

    #[test]
    fn each_source_with_nothing_says_why_in_one_line_and_the_others_still_list() {
        let mut f = found("/p");
        f.containers[1].1 = Ok(vec![FoundContainer {
            name: "redis-a".to_string(),
            engine: EngineKind::Podman,
            running: true,
            cgroup: Some("/p/libpod-abc".to_string()),
            memory: memory(Some(20 * MIB), Some(Limit::Bytes(Bytes(200 * MIB))), None),
        }]);
        let text = render_table(&f);
        for line in [
            "cgroups: none under /p holds a process",
            "systemd: systemd does not run here (no /run/systemd/system)",
            "docker: /var/run/docker.sock is not a socket",
            "libvirt: no virsh here",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in:\n{text}");
        }
        let row = text.lines().find(|l| l.starts_with("redis-a ")).unwrap();
        assert!(
            row.contains("podman") && row.contains("running") && row.contains("200.0 MiB"),
            "{row}"
        );
    }

    #[test]
    fn the_starting_config_parses_and_names_each_cgroup_with_its_max() {
        let mut f = found("/p");
        f.cgroups = Ok(vec![
            cgroup("/p/web", Some(100 * MIB), Some(Limit::Max)),
            cgroup("/p/db", Some(300 * MIB), Some(Limit::Bytes(Bytes(GIB)))),
            cgroup("/p/we b\"\\", Some(MIB), None),
            cgroup("/p/del\u{7f}\n", Some(MIB), None),
        ]);
        let toml = render_toml(&f);
        let config = parses(&toml);
        let names: Vec<&str> = config.tenants.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["web", "db", "we-b--"]);
        assert_eq!(config.tenants[0].adopted_cgroup(), Some("/p/web"));
        assert_eq!(config.tenants[2].adopted_cgroup(), Some("/p/we b\"\\"));
        assert!(
            toml.contains("max = \"200M\"  # no limit now; twice"),
            "{toml}"
        );
        assert!(toml.contains("max = \"1G\"  # its limit now"), "{toml}");
        assert!(toml.contains("# min = \"300M\""), "{toml}");
        assert!(toml.contains("# budget = \"1G\""), "{toml}");
        assert!(
            toml.contains("# not taken: its cgroup's path has a control character"),
            "{toml}"
        );
        assert!(toml.contains("# cgroup = \"/p/del\\u007f\\n\""), "{toml}");
        assert_eq!(
            config.host.budget_bytes, None,
            "the budget is only suggested"
        );
    }

    #[test]
    fn a_unit_or_container_outside_the_parent_or_nesting_is_written_commented_out() {
        let mut f = found("/system.slice");
        f.cgroups = Ok(vec![
            cgroup("/system.slice/redis.service", Some(50 * MIB), None),
            cgroup("/system.slice/docker", Some(50 * MIB), None),
        ]);
        f.units = Ok(vec![
            FoundUnit {
                unit: "redis.service".to_string(),
                cgroup: Some("/system.slice/redis.service".to_string()),
                memory: memory(Some(50 * MIB), Some(Limit::Max), None),
            },
            FoundUnit {
                unit: "session-1.scope".to_string(),
                cgroup: Some("/user.slice/session-1.scope".to_string()),
                memory: memory(Some(5 * MIB), Some(Limit::Max), None),
            },
        ]);
        f.containers[0].1 = Ok(vec![
            FoundContainer {
                name: "web".to_string(),
                engine: EngineKind::Docker,
                running: true,
                cgroup: Some("/system.slice/docker/0123abcd".to_string()),
                memory: memory(Some(30 * MIB), Some(Limit::Max), None),
            },
            FoundContainer {
                name: "old".to_string(),
                engine: EngineKind::Docker,
                running: false,
                cgroup: None,
                memory: memory(None, Some(Limit::Bytes(Bytes(256 * MIB))), None),
            },
        ]);
        f.domains = Ok(vec![FoundDomain {
            name: "vm1".to_string(),
            state: Some("running".to_string()),
            memory: Some(GIB),
        }]);
        let toml = render_toml(&f);
        let config = parses(&toml);
        let names: Vec<&str> = config.tenants.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["redis", "web", "old", "vm1"], "{toml}");
        for note in [
            "# not taken: the same cgroup as tenant \"redis\"",
            "# not taken: outside the parent /system.slice",
            "# not taken: holds tenant \"web\"'s cgroup",
            "# libvirt domain \"vm1\", running",
            "\ndomain = \"vm1\"\n",
        ] {
            assert!(toml.contains(note), "{note:?} in:\n{toml}");
        }
        // A commented name is still taken: uncommenting it collides with none.
        assert!(toml.contains("# name = \"redis-2\""), "{toml}");
    }

    #[test]
    fn systemctl_s_answers_give_units_cgroups_and_memory() {
        let list = "cron.service   loaded active running Regular background program\n\
                    session-1.scope loaded active running Session 1 of user root\n";
        assert_eq!(parse_unit_list(list), ["cron.service", "session-1.scope"]);
        let show = "Id=cron.service\nControlGroup=/system.slice/cron.service\n\
                    MemoryCurrent=1048576\nMemoryMax=infinity\n\n\
                    Id=session-1.scope\nControlGroup=\nMemoryCurrent=[not set]\n\
                    MemoryMax=536870912\n";
        let units = parse_unit_show(show);
        assert_eq!(units.len(), 2);
        assert_eq!(units[0].0, "cron.service");
        assert_eq!(units[0].1.as_deref(), Some("/system.slice/cron.service"));
        assert_eq!(units[0].2, memory(Some(MIB), Some(Limit::Max), None));
        assert_eq!(units[1].1, None);
        assert_eq!(
            units[1].2,
            memory(None, Some(Limit::Bytes(Bytes(512 * MIB))), None)
        );
    }

    #[test]
    fn dominfo_gives_the_state_and_used_memory() {
        let text = "Id:             1\nName:           vm1\nState:          running\n\
                    Max memory:     2097152 KiB\nUsed memory:    1048576 KiB\n";
        assert_eq!(
            parse_dominfo(text),
            (Some("running".to_string()), Some(GIB))
        );
        assert_eq!(
            parse_dominfo("State: shut off\n"),
            (Some("shut off".to_string()), None)
        );
    }

    /// A v1 host under a temp dir: the memory hierarchy, this process in `/me`, and `cgroups`
    /// (path, processes, usage) under it.
    fn fake_host(cgroups: &[(&str, &str, Option<u64>)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("proc/self")).unwrap();
        std::fs::write(
            root.join("proc/self/mountinfo"),
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
        )
        .unwrap();
        std::fs::write(root.join("proc/self/cgroup"), "4:memory:/me\n").unwrap();
        let mem = root.join("sys/fs/cgroup/memory");
        std::fs::create_dir_all(mem.join("me")).unwrap();
        std::fs::write(mem.join("me/cgroup.procs"), "1\n").unwrap();
        for (path, procs, usage) in cgroups {
            let dir = mem.join(path.trim_start_matches('/'));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cgroup.procs"), procs).unwrap();
            if let Some(u) = usage {
                std::fs::write(dir.join("memory.usage_in_bytes"), format!("{u}\n")).unwrap();
                std::fs::write(dir.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
            }
        }
        tmp
    }

    fn options(root: &Path, parent: Option<&str>) -> Options {
        Options {
            parent: parent.map(str::to_string),
            proc_root: root.to_path_buf(),
            docker_socket: root.join("docker.sock"),
            podman_socket: root.join("podman.sock"),
            systemctl: root.join("systemctl"),
            virsh: None,
        }
    }

    #[test]
    fn a_fake_host_s_cgroups_holding_processes_are_listed_and_its_config_parses() {
        let tmp = fake_host(&[
            ("/me/a", "10\n11\n", Some(40 * MIB)),
            ("/me/b", "", Some(MIB)),
            ("/me/c", "", None),
            ("/me/c/inner", "12\n", None),
            ("/me/memtide-daemon", "1\n", Some(MIB)),
        ]);
        let f = discover(&options(tmp.path(), None)).unwrap();
        assert_eq!(f.parent, "/me");
        assert!(f.parent_is_default);
        let cgroups = f.cgroups.as_ref().unwrap();
        let paths: Vec<&str> = cgroups.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/me/a", "/me/c"],
            "b holds none; memtide's own leaf is not one"
        );
        assert_eq!(cgroups[0].procs, 2);
        assert_eq!(
            cgroups[0].memory,
            memory(Some(40 * MIB), Some(Limit::Max), None)
        );
        assert_eq!(cgroups[1].memory, Memory::default());
        assert_eq!(f.empty_cgroups, 1);
        let text = render_table(&f);
        assert!(
            text.contains("parent /me (as [host] parent = \"self\""),
            "{text}"
        );
        assert!(text.contains("docker: "), "{text}");
        assert!(text.contains("is not a socket"), "{text}");
        let config = parses(&render_toml(&f));
        assert_eq!(config.tenants.len(), 2);
        assert_eq!(config.tenants[0].max_bytes, 80 * MIB);
    }

    #[test]
    fn a_parent_that_is_not_a_cgroup_is_the_user_s_mistake() {
        let tmp = fake_host(&[]);
        for (parent, why) in [
            ("me", "does not start with"),
            ("/me/../x", "\"..\" component"),
            ("/nope", "no such cgroup"),
        ] {
            let e = discover(&options(tmp.path(), Some(parent))).unwrap_err();
            assert!(e.is_usage(), "{e}");
            assert!(e.to_string().contains(why), "{e}");
        }
        let f = discover(&options(tmp.path(), Some("//me/"))).unwrap();
        assert_eq!(f.parent, "/me");
        let none = tempfile::tempdir().unwrap();
        let e = discover(&options(none.path(), None)).unwrap_err();
        assert!(!e.is_usage(), "{e}");
    }

    #[test]
    fn systemd_and_virsh_are_asked_through_their_programs_where_they_run() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = fake_host(&[("/me/a", "10\n", Some(MIB))]);
        let root = tmp.path();
        let script = |name: &str, body: &str| {
            let p = root.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            p
        };
        let mut opts = options(root, None);
        let f = discover(&opts).unwrap();
        assert!(f.units.unwrap_err().contains("no /run/systemd/system"));
        std::fs::create_dir_all(root.join("run/systemd/system")).unwrap();
        script(
            "systemctl",
            "case \"$1\" in\n\
             list-units) echo 'cron.service loaded active running Cron';;\n\
             show) printf 'Id=cron.service\\nControlGroup=/me/a\\nMemoryCurrent=5\\nMemoryMax=infinity\\n';;\n\
             esac",
        );
        opts.virsh = Some(script(
            "virsh",
            "case \"$3\" in\n\
             list) echo vm1; echo;;\n\
             dominfo) echo 'State:          running'; echo 'Used memory:    1024 KiB';;\n\
             esac",
        ));
        let f = discover(&opts).unwrap();
        let units = f.units.as_ref().unwrap();
        assert_eq!(units[0].unit, "cron.service");
        assert_eq!(
            units[0].memory.usage,
            Some(MIB),
            "read from its cgroup where the hierarchy has it"
        );
        let domains = f.domains.as_ref().unwrap();
        assert_eq!(
            domains[0],
            FoundDomain {
                name: "vm1".to_string(),
                state: Some("running".to_string()),
                memory: Some(MIB),
            }
        );
        opts.virsh = Some(script(
            "virsh",
            "echo 'error: failed to connect' >&2; exit 1",
        ));
        let f = discover(&opts).unwrap();
        assert_eq!(
            f.domains.unwrap_err(),
            "virsh list: error: failed to connect"
        );
    }
}
