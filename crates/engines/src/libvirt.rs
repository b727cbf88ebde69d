//! libvirt's domains through `virsh`: their state, id, memory, balloon statistics and model, the QEMU pid, the stats period and the balloon's target ([`Virsh`]), and a watcher on `virsh event` ([`DomainWatcher`]).
//!
//! Why a `virsh` child per call and not the C library (libvirt.md §6, §8): a call costs about
//! 20 ms and 17 ms of CPU, so one per one-second tick is 2–3 % of a core; memtide builds with
//! no C library and no libvirt-dev; and the `virt` 0.5 crate pins a libc older than ours.
//! virsh runs without a shell, each argument one argv entry, in the C locale (its messages
//! are parsed, and are translated otherwise), its time and output bounded
//! ([`Virsh::timeout`], 1 MiB of stdout and of stderr): past either it is killed with its
//! process group.
//!
//! A failed call is [`LibvirtError::Virsh`]: the URI, the command and virsh's own error
//! lines, and their [`Failure`] class: no daemon, no such domain, not running, no balloon.
//!
//! What virsh prints and this reads (libvirt 9.0, libvirt.md §3–§5): `domstate` (`running`,
//! `shut off (destroyed)` with `--reason`), `domid` (`-` for a domain that is not running),
//! `dominfo`'s `Key: value` lines, `dommemstat`'s `key value` lines in KiB (a `model='none'`
//! balloon prints only `rss`; a guest without the balloon driver `actual`, `last_update 0`
//! and `rss`), `list --all`'s table (as virsh 9.0 prints it for libvirt's built-in test
//! driver, `test:///default`), and `dumpxml`'s `<memballoon model='…'>`, found by a
//! scan for that one tag (the workspace has no XML parser, and the tag's form is libvirt's
//! own: an attribute `model` quoted with `'` or `"`).
//!
//! virsh looks a domain up by id first, then by UUID, then by name
//! (`virshLookupDomainInternal`), so a name that reads as an id or a UUID could reach another
//! domain (on the test driver `dominfo 1` answered for domain `test`, id 1, though a domain
//! was named `1`): [`valid_domain_name`] refuses those, with the names virsh would read as
//! options.

mod events;
mod process;

pub use events::DomainWatcher;

use memtide_model::Bytes;
use process::{Failed, Stop};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one virsh call may take by default before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Where libvirt's QEMU driver keeps a running domain's pid file, `NAME.pid`.
pub const QEMU_RUN_DIR: &str = "/run/libvirt/qemu";
/// The longest domain name used, in bytes.
pub const MAX_DOMAIN_NAME: usize = 255;
/// What [`valid_domain_name`] accepts, for its error.
pub const DOMAIN_NAME_RULE: &str = "a libvirt domain name: 1 to 255 bytes, no control \
     character or '/', not starting with '-', not all digits (virsh reads that as an id) and \
     not a UUID";
/// The longest pid file read.
const MAX_PID_FILE: u64 = 64;
/// The most of virsh's error lines an error quotes, and the longest quoted line.
const ERROR_LINES: (usize, usize) = (3, 300);

/// Whether `name` may be handed to virsh as a domain's name (see [`DOMAIN_NAME_RULE`]).
/// No shell is involved, so quotes, spaces and the like are fine.
pub fn valid_domain_name(name: &str) -> bool {
    // virsh reads a name as an id when strtol would: spaces, a sign, digits.
    let digits = name
        .trim_start_matches(|c: char| c.is_ascii_whitespace())
        .trim_start_matches('+');
    let id_like = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let uuid_like = name.len() == 36
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b' ');
    let bad_char = name.starts_with('-') || name.chars().any(|c| c.is_control() || c == '/');
    let fits = (1..=MAX_DOMAIN_NAME).contains(&name.len());
    fits && !bad_char && !id_like && !uuid_like
}

/// What kind of failure virsh reported, from its error lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// `failed to connect to the hypervisor`: no daemon (no socket, or no one listening), or
    /// a URI it cannot serve.
    NoDaemon,
    /// `failed to get domain 'NAME'`: no domain has that name.
    NoDomain,
    /// `domain is not running`.
    NotRunning,
    /// `No memory balloon device configured` or `Unable to change memory of active domain
    /// without the balloon device`: the domain's balloon is `model='none'`.
    NoBalloon,
    /// Anything else.
    Other,
}

impl Failure {
    /// The class of virsh's error text `stderr`.
    pub fn of(stderr: &str) -> Failure {
        if stderr.contains("failed to connect to the hypervisor") {
            Failure::NoDaemon
        } else if stderr.contains("failed to get domain '") {
            Failure::NoDomain
        } else if stderr.contains("domain is not running") {
            Failure::NotRunning
        } else if stderr.contains("No memory balloon device")
            || stderr.contains("without the balloon device")
        {
            Failure::NoBalloon
        } else {
            Failure::Other
        }
    }
}

/// Why a libvirt question or change did not go through, naming the URI and the command.
#[derive(Debug, thiserror::Error)]
pub enum LibvirtError {
    /// Refused before running virsh: a name or a value it must not be given.
    #[error("{uri}: {command}: refused: {why}")]
    Refused {
        uri: String,
        command: String,
        why: String,
    },
    /// virsh could not be started, or its output not read.
    #[error("{uri}: {command}: cannot run it: {error}")]
    Run {
        uri: String,
        command: String,
        error: String,
    },
    /// virsh did not end within its time, and was killed.
    #[error("{uri}: {command}: no answer within {timeout:?}; killed it")]
    Timeout {
        uri: String,
        command: String,
        timeout: Duration,
    },
    /// virsh wrote more than the bound to `stream`, and was killed.
    #[error("{uri}: {command}: its {stream} is longer than {limit} bytes; killed it")]
    TooLong {
        uri: String,
        command: String,
        stream: &'static str,
        limit: usize,
    },
    /// virsh failed (a non-zero exit): its error lines, and their class.
    #[error("{uri}: {command}: {message}")]
    Virsh {
        uri: String,
        command: String,
        failure: Failure,
        message: String,
    },
    /// virsh succeeded but its answer is not what this reads.
    #[error("{uri}: {command}: the answer {why}")]
    Answer {
        uri: String,
        command: String,
        why: String,
    },
    /// A QEMU pid file could not be read, or holds no pid.
    #[error("{}: {why}", path.display())]
    PidFile { path: PathBuf, why: String },
}

impl LibvirtError {
    /// The class of virsh's failure, for [`LibvirtError::Virsh`].
    pub fn failure(&self) -> Option<Failure> {
        match self {
            LibvirtError::Virsh { failure, .. } => Some(*failure),
            _ => None,
        }
    }
}

/// A domain's state as `domstate` prints it (its reason, in parentheses, dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DomainState {
    Running,
    Paused,
    ShutOff,
    /// Another state as virsh prints it: `no state`, `idle`, `in shutdown`, `crashed`,
    /// `pmsuspended`.
    Other(String),
}

impl DomainState {
    /// Reads virsh's state text, with or without `(reason)`.
    pub fn parse(text: &str) -> DomainState {
        let text = text.trim();
        let state = match text.split_once(" (") {
            Some((state, reason)) if reason.ends_with(')') => state,
            _ => text,
        };
        match state {
            "running" => DomainState::Running,
            "paused" => DomainState::Paused,
            "shut off" => DomainState::ShutOff,
            other => DomainState::Other(other.to_string()),
        }
    }
}

/// What `dominfo` says of a domain's memory and state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainInfo {
    /// Its id while it runs (`Id: -` when it does not).
    pub id: Option<u32>,
    pub state: DomainState,
    /// `Max memory`: the domain's `<memory>`, the balloon's ceiling; `None` for virsh's
    /// `no limit`.
    pub max_memory: Option<Bytes>,
    /// `Used memory`: the balloon's `actual` (not its target) while it runs.
    pub used_memory: Bytes,
}

/// The balloon statistics `dommemstat` prints, each `None` when absent. Sizes come in KiB
/// and are kept as bytes; faults, huge page counts and `last_update` are counts.
///
/// The guest's statistics are QEMU's `guest-stats` (memtide-qemu's `GuestStats`) as libvirt
/// relays them, under other names: `unused` is `free_memory`, `available` is
/// `total_memory`, `usable` is `available_memory`, `major_fault`/`minor_fault` are
/// `major_faults`/`minor_faults`, `hugetlb_pgalloc`/`hugetlb_pgfail` are
/// `hugetlb_allocations`/`hugetlb_failures`, and a missing `last_update` is 0. libvirt
/// leaves out what the guest never sent; `actual` (the balloon's size now) and `rss` (QEMU's
/// resident memory on the host) are libvirt's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// The guest's memory as the balloon leaves it.
    pub actual: Option<Bytes>,
    pub swap_in: Option<Bytes>,
    pub swap_out: Option<Bytes>,
    pub major_fault: Option<u64>,
    pub minor_fault: Option<u64>,
    /// The guest's free memory.
    pub unused: Option<Bytes>,
    /// The guest's total memory, as the balloon reduces it.
    pub available: Option<Bytes>,
    /// What the guest could use without swapping (`MemAvailable`).
    pub usable: Option<Bytes>,
    /// When QEMU last had statistics from the guest, in seconds since the epoch; 0 never.
    pub last_update: Option<u64>,
    pub disk_caches: Option<Bytes>,
    pub hugetlb_pgalloc: Option<u64>,
    pub hugetlb_pgfail: Option<u64>,
    /// QEMU's resident memory on the host.
    pub rss: Option<Bytes>,
}

impl MemoryStats {
    /// True when the guest has sent statistics at least once (as `GuestStats::ever_updated`).
    pub fn ever_updated(&self) -> bool {
        self.last_update.is_some_and(|t| t != 0)
    }

    /// Reads `dommemstat`'s lines; unknown keys are ignored, a known one must hold a number.
    pub fn parse(text: &str) -> Result<MemoryStats, String> {
        let mut s = MemoryStats::default();
        for line in text.lines() {
            let Some((key, value)) = line.trim().split_once(' ') else {
                continue;
            };
            let count = || {
                value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| format!("has `{key}` {value:?}, not a number"))
            };
            let kib = || {
                count()?
                    .checked_mul(1024)
                    .map(Bytes)
                    .ok_or_else(|| format!("has `{key}` {value} KiB, more than 2^64 bytes"))
            };
            match key {
                "actual" => s.actual = Some(kib()?),
                "swap_in" => s.swap_in = Some(kib()?),
                "swap_out" => s.swap_out = Some(kib()?),
                "major_fault" => s.major_fault = Some(count()?),
                "minor_fault" => s.minor_fault = Some(count()?),
                "unused" => s.unused = Some(kib()?),
                "available" => s.available = Some(kib()?),
                "usable" => s.usable = Some(kib()?),
                "last_update" => s.last_update = Some(count()?),
                "disk_caches" => s.disk_caches = Some(kib()?),
                "hugetlb_pgalloc" => s.hugetlb_pgalloc = Some(count()?),
                "hugetlb_pgfail" => s.hugetlb_pgfail = Some(count()?),
                "rss" => s.rss = Some(kib()?),
                _ => {}
            }
        }
        Ok(s)
    }
}

/// libvirt at one URI, asked through `virsh -c URI …`.
#[derive(Clone, Debug)]
pub struct Virsh {
    /// The connection URI (`qemu:///system`).
    pub uri: String,
    /// The virsh program (`virsh`, found on the `PATH`).
    pub program: PathBuf,
    /// How long one call may take before it is killed.
    pub timeout: Duration,
}

impl Virsh {
    /// libvirt at `uri` through `virsh` on the `PATH`, each call within [`DEFAULT_TIMEOUT`].
    pub fn new(uri: &str) -> Virsh {
        Virsh {
            uri: uri.to_string(),
            program: PathBuf::from("virsh"),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The command as an error names it: the program and the arguments after `-c URI`.
    fn command(&self, args: &[&str]) -> String {
        let mut words = vec![self.program.display().to_string()];
        words.extend(args.iter().map(|a| {
            if !a.is_empty() && !a.contains(|c: char| c.is_whitespace() || "'\"\\".contains(c)) {
                a.to_string()
            } else {
                format!("{a:?}")
            }
        }));
        words.join(" ")
    }

    fn refused(&self, args: &[&str], why: String) -> LibvirtError {
        LibvirtError::Refused {
            uri: self.uri.clone(),
            command: self.command(args),
            why,
        }
    }

    fn answer(&self, args: &[&str], why: String) -> LibvirtError {
        LibvirtError::Answer {
            uri: self.uri.clone(),
            command: self.command(args),
            why,
        }
    }

    /// Refuses `name` unless [`valid_domain_name`].
    fn check_name(&self, args: &[&str], name: &str) -> Result<(), LibvirtError> {
        if valid_domain_name(name) {
            Ok(())
        } else {
            Err(self.refused(args, format!("{name:?} is not {DOMAIN_NAME_RULE}")))
        }
    }

    /// Runs `virsh -c URI args…`: its stdout when it succeeds.
    pub fn run(&self, args: &[&str]) -> Result<String, LibvirtError> {
        let command = || self.command(args);
        let uri = || self.uri.clone();
        let mut argv = vec!["-c".to_string(), self.uri.clone()];
        argv.extend(args.iter().map(|a| a.to_string()));
        let done = process::run(&self.program, &argv, self.timeout).map_err(|e| match e {
            Failed::Spawn(e) | Failed::Stopped(Stop::Io(e)) => LibvirtError::Run {
                uri: uri(),
                command: command(),
                error: e.to_string(),
            },
            Failed::Stopped(Stop::Timeout | Stop::Stopped) => LibvirtError::Timeout {
                uri: uri(),
                command: command(),
                timeout: self.timeout,
            },
            Failed::Stopped(Stop::TooLong(stream)) => LibvirtError::TooLong {
                uri: uri(),
                command: command(),
                stream,
                limit: process::MAX_OUTPUT,
            },
        })?;
        if !done.status.success() {
            let stderr = String::from_utf8_lossy(&done.stderr);
            return Err(LibvirtError::Virsh {
                uri: uri(),
                command: command(),
                failure: Failure::of(&stderr),
                message: error_lines(&stderr, done.status),
            });
        }
        String::from_utf8(done.stdout).map_err(|_| self.answer(args, "is not UTF-8".to_string()))
    }

    /// The domain's state (`domstate NAME`).
    pub fn state(&self, name: &str) -> Result<DomainState, LibvirtError> {
        let args = ["domstate", name];
        self.check_name(&args, name)?;
        let out = self.run(&args)?;
        match out.lines().map(str::trim).find(|l| !l.is_empty()) {
            Some(line) => Ok(DomainState::parse(line)),
            None => Err(self.answer(&args, "is empty".to_string())),
        }
    }

    /// The domain's id while it runs (`domid NAME`; `-` is none).
    pub fn id(&self, name: &str) -> Result<Option<u32>, LibvirtError> {
        let args = ["domid", name];
        self.check_name(&args, name)?;
        let out = self.run(&args)?;
        let line = out.lines().map(str::trim).find(|l| !l.is_empty());
        match line {
            Some("-") => Ok(None),
            Some(id) => id
                .parse()
                .map(Some)
                .map_err(|_| self.answer(&args, format!("{id:?} is not an id or '-'"))),
            None => Err(self.answer(&args, "is empty".to_string())),
        }
    }

    /// The domain's id, state and memory (`dominfo NAME`).
    pub fn info(&self, name: &str) -> Result<DomainInfo, LibvirtError> {
        let args = ["dominfo", name];
        self.check_name(&args, name)?;
        let out = self.run(&args)?;
        parse_dominfo(&out).map_err(|why| self.answer(&args, why))
    }

    /// The balloon's statistics (`dommemstat NAME`).
    pub fn memory_stats(&self, name: &str) -> Result<MemoryStats, LibvirtError> {
        let args = ["dommemstat", name];
        self.check_name(&args, name)?;
        let out = self.run(&args)?;
        MemoryStats::parse(&out).map_err(|why| self.answer(&args, why))
    }

    /// Has the running domain's guest send statistics every `seconds` (0: stop)
    /// (`dommemstat NAME --period N --live`).
    pub fn set_stats_period(&self, name: &str, seconds: u32) -> Result<(), LibvirtError> {
        let period = seconds.to_string();
        let args = ["dommemstat", name, "--period", &period, "--live"];
        self.check_name(&args, name)?;
        if i32::try_from(seconds).is_err() {
            return Err(self.refused(&args, format!("a period of at most {} s", i32::MAX)));
        }
        self.run(&args).map(drop)
    }

    /// Sets the running domain's balloon target to `bytes`, rounded down to whole KiB
    /// (`setmem NAME KiB --live`). The balloon moves afterwards, over about a second.
    pub fn set_memory(&self, name: &str, bytes: Bytes) -> Result<(), LibvirtError> {
        let kib = (bytes.0 / 1024).to_string();
        let args = ["setmem", name, &kib, "--live"];
        self.check_name(&args, name)?;
        if bytes.0 < 1024 {
            return Err(self.refused(
                &args,
                format!("a target of {} bytes: at least 1 KiB", bytes.0),
            ));
        }
        self.run(&args).map(drop)
    }

    /// The model of the domain's balloon (`virtio`, `none`, …) from its live XML
    /// (`dumpxml NAME`); `None` when the XML has no `<memballoon>`.
    pub fn balloon_model(&self, name: &str) -> Result<Option<String>, LibvirtError> {
        let args = ["dumpxml", name];
        self.check_name(&args, name)?;
        let out = self.run(&args)?;
        Ok(balloon_model_in(&out))
    }

    /// Every domain with its state (`list --all`), in virsh's order.
    pub fn list_all(&self) -> Result<Vec<(String, DomainState)>, LibvirtError> {
        let args = ["list", "--all"];
        let out = self.run(&args)?;
        parse_list(&out).map_err(|why| self.answer(&args, why))
    }
}

/// virsh's error lines for a message: the first few non-empty ones of `stderr`, each cut to
/// a bound, or how it exited when it wrote none.
fn error_lines(stderr: &str, status: std::process::ExitStatus) -> String {
    let lines: Vec<String> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(ERROR_LINES.0)
        .map(|l| l.chars().take(ERROR_LINES.1).collect())
        .collect();
    if !lines.is_empty() {
        return lines.join("; ");
    }
    match status.code() {
        Some(code) => format!("exited with status {code} and no message"),
        None => "was killed by a signal".to_string(),
    }
}

/// Reads `dominfo`'s `Key: value` lines: `Id`, `State`, `Max memory`, `Used memory`.
fn parse_dominfo(text: &str) -> Result<DomainInfo, String> {
    let field = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim())
            .ok_or_else(|| format!("has no `{key}:` line"))
    };
    let kib = |key: &str| -> Result<Option<Bytes>, String> {
        let value = field(key)?;
        if value == "no limit" {
            return Ok(None);
        }
        value
            .strip_suffix(" KiB")
            .and_then(|n| n.trim().parse::<u64>().ok())
            .and_then(|n| n.checked_mul(1024))
            .map(|b| Some(Bytes(b)))
            .ok_or_else(|| format!("has `{key}: {value}`, not a size in KiB"))
    };
    let id = match field("Id")? {
        "-" => None,
        n => Some(
            n.parse()
                .map_err(|_| format!("has `Id: {n}`, not an id or '-'"))?,
        ),
    };
    Ok(DomainInfo {
        id,
        state: DomainState::parse(field("State")?),
        max_memory: kib("Max memory")?,
        used_memory: kib("Used memory")?.ok_or("has `Used memory: no limit`")?,
    })
}

/// The states `list --all` may end a row with, longest first where one ends another.
const LIST_STATES: [&str; 8] = [
    "no state",
    "running",
    "idle",
    "paused",
    "in shutdown",
    "shut off",
    "crashed",
    "pmsuspended",
];

/// Reads `list --all`'s table: a header, a rule of dashes, then ` ID   NAME   STATE` rows
/// (ID `-` for a domain that does not run). The state is one of virsh's few, matched at the
/// row's end, so a name may hold spaces; one beginning or ending in spaces is read trimmed.
fn parse_list(text: &str) -> Result<Vec<(String, DomainState)>, String> {
    let mut rows = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("---"));
    if rows.next().is_none() {
        return Err("has no table".to_string());
    }
    let mut all = Vec::new();
    for row in rows.map(str::trim).filter(|r| !r.is_empty()) {
        let unreadable = || format!("has a row {row:?} that is not `ID NAME STATE`");
        let (id, rest) = row.split_once(char::is_whitespace).ok_or_else(unreadable)?;
        if id != "-" && id.parse::<u32>().is_err() {
            return Err(unreadable());
        }
        let rest = rest.trim_start();
        let (name, state) = LIST_STATES
            .iter()
            .find_map(|s| {
                rest.strip_suffix(s)
                    .filter(|n| n.ends_with(char::is_whitespace))
                    .map(|n| (n.trim(), *s))
            })
            .ok_or_else(unreadable)?;
        if name.is_empty() {
            return Err(unreadable());
        }
        all.push((name.to_string(), DomainState::parse(state)));
    }
    Ok(all)
}

/// The `model` attribute of the first `<memballoon …>` tag in a domain's XML.
fn balloon_model_in(xml: &str) -> Option<String> {
    const TAG: &str = "<memballoon";
    let mut rest = xml;
    while let Some(at) = rest.find(TAG) {
        let after = &rest[at + TAG.len()..];
        // `<memballoon` itself, not a longer tag name.
        if after.starts_with(|c: char| c.is_whitespace() || c == '>' || c == '/') {
            let tag = &after[..after.find('>').unwrap_or(after.len())];
            return attribute(tag, "model");
        }
        rest = after;
    }
    None
}

/// The value of attribute `name` among a tag's attributes `attrs` (`a='1' b="2"`).
fn attribute(attrs: &str, name: &str) -> Option<String> {
    let mut rest = attrs;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '/');
        let (key, after) = rest.split_once('=')?;
        let after = after.trim_start();
        let quote = after.chars().next().filter(|q| *q == '\'' || *q == '"')?;
        let (value, next) = after[1..].split_once(quote)?;
        if key.trim() == name {
            return Some(value.to_string());
        }
        rest = next;
    }
}

/// The pid of the QEMU running domain `name`, from `run_dir/NAME.pid` (libvirt's QEMU driver
/// writes it at start and removes it at stop; [`QEMU_RUN_DIR`] on a host). `None`: no such
/// file, so the domain does not run.
pub fn qemu_pid(name: &str, run_dir: &Path) -> Result<Option<u32>, LibvirtError> {
    use std::io::Read;
    let path = run_dir.join(format!("{name}.pid"));
    let err = |why: String| LibvirtError::PidFile {
        path: path.clone(),
        why,
    };
    if !valid_domain_name(name) {
        return Err(err(format!("{name:?} is not {DOMAIN_NAME_RULE}")));
    }
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(format!("cannot be read: {e}"))),
    };
    let mut text = String::new();
    file.take(MAX_PID_FILE)
        .read_to_string(&mut text)
        .map_err(|e| err(format!("cannot be read: {e}")))?;
    match text.trim().parse::<u32>() {
        Ok(pid) if pid > 0 => Ok(Some(pid)),
        _ => Err(err(format!("holds {:?}, not a pid", text.trim()))),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    /// `dommemstat h30a` with the guest's driver and `<stats period='1'/>` (libvirt.md §3).
    const DOMMEMSTAT: &str = "actual 524288\nswap_in 0\nswap_out 0\nmajor_fault 0\n\
        minor_fault 29471\nunused 347300\navailable 481416\nusable 347096\n\
        last_update 1795986376\ndisk_caches 4324\nhugetlb_pgalloc 0\nhugetlb_pgfail 0\n\
        rss 333736\n\n";

    /// `dominfo h30a`, running (libvirt.md §3).
    const DOMINFO: &str = "Id:             1\nName:           h30a\n\
        UUID:           c0cab6f6-7fae-45d5-96d5-b4973cc234ea\nOS Type:        hvm\n\
        State:          running\nCPU(s):         1\nCPU time:       6.7s\n\
        Max memory:     524288 KiB\nUsed memory:    307200 KiB\nPersistent:     yes\n\
        Autostart:      disable\nManaged save:   no\nSecurity model: none\n\
        Security DOI:   0\n\n";

    const KIB: u64 = 1024;

    #[test]
    fn dommemstat_sizes_are_bytes_and_counts_are_counts() {
        let s = MemoryStats::parse(DOMMEMSTAT).unwrap();
        assert_eq!(s.actual, Some(Bytes(524288 * KIB)));
        assert_eq!(s.swap_in, Some(Bytes(0)));
        assert_eq!(s.swap_out, Some(Bytes(0)));
        assert_eq!(s.major_fault, Some(0));
        assert_eq!(s.minor_fault, Some(29471));
        assert_eq!(s.unused, Some(Bytes(347300 * KIB)));
        assert_eq!(s.available, Some(Bytes(481416 * KIB)));
        assert_eq!(s.usable, Some(Bytes(347096 * KIB)));
        assert_eq!(s.last_update, Some(1795986376));
        assert_eq!(s.disk_caches, Some(Bytes(4324 * KIB)));
        assert_eq!(s.hugetlb_pgalloc, Some(0));
        assert_eq!(s.hugetlb_pgfail, Some(0));
        assert_eq!(s.rss, Some(Bytes(333736 * KIB)));
        assert!(s.ever_updated());
    }

    #[test]
    fn a_balloon_of_model_none_has_only_rss_and_a_guest_without_driver_never_updated() {
        let none = MemoryStats::parse("rss 331120\n\n").unwrap();
        assert_eq!(
            none,
            MemoryStats {
                rss: Some(Bytes(331120 * KIB)),
                ..MemoryStats::default()
            }
        );
        assert!(!none.ever_updated());
        let no_driver = MemoryStats::parse("actual 524288\nlast_update 0\nrss 321636\n").unwrap();
        assert_eq!(no_driver.actual, Some(Bytes(524288 * KIB)));
        assert_eq!(no_driver.last_update, Some(0));
        assert_eq!(no_driver.unused, None);
        assert!(!no_driver.ever_updated());
    }

    #[test]
    fn unknown_statistics_are_ignored_and_a_malformed_one_is_named() {
        let s = MemoryStats::parse("actual 1\nstat_newer 7\n").unwrap();
        assert_eq!(s.actual, Some(Bytes(KIB)));
        let e = MemoryStats::parse("actual 1\nunused lots\n").unwrap_err();
        assert!(e.contains("unused") && e.contains("lots"), "{e}");
        let e = MemoryStats::parse(&format!("rss {}\n", u64::MAX)).unwrap_err();
        assert!(e.contains("rss"), "{e}");
    }

    #[test]
    fn dominfo_gives_id_state_and_memory() {
        let i = parse_dominfo(DOMINFO).unwrap();
        assert_eq!(
            i,
            DomainInfo {
                id: Some(1),
                state: DomainState::Running,
                max_memory: Some(Bytes(524288 * KIB)),
                used_memory: Bytes(307200 * KIB),
            }
        );
        let off = DOMINFO
            .replace("Id:             1", "Id:             -")
            .replace("running", "shut off");
        let i = parse_dominfo(&off).unwrap();
        assert_eq!((i.id, i.state), (None, DomainState::ShutOff));
        let no_limit = DOMINFO.replace("524288 KiB", "no limit");
        assert_eq!(parse_dominfo(&no_limit).unwrap().max_memory, None);
        let e = parse_dominfo("Id: 1\nState: running\n").unwrap_err();
        assert!(e.contains("Max memory"), "{e}");
    }

    #[test]
    fn domstate_is_read_with_or_without_its_reason() {
        for (text, want) in [
            ("running", DomainState::Running),
            ("running (booted)", DomainState::Running),
            ("running (unpaused)", DomainState::Running),
            ("paused (user)", DomainState::Paused),
            ("shut off", DomainState::ShutOff),
            ("shut off (shutdown)", DomainState::ShutOff),
            ("shut off (destroyed)", DomainState::ShutOff),
            ("in shutdown", DomainState::Other("in shutdown".into())),
            (
                "pmsuspended (unknown)",
                DomainState::Other("pmsuspended".into()),
            ),
        ] {
            assert_eq!(DomainState::parse(text), want, "{text}");
        }
    }

    #[test]
    fn the_balloon_model_is_the_memballoon_tags_model_attribute() {
        let live = "<domain type='qemu'>\n  <devices>\n    <memballoon model='virtio'>\n      \
            <stats period='1'/>\n      <alias name='balloon0'/>\n    </memballoon>\n  \
            </devices>\n</domain>\n";
        assert_eq!(balloon_model_in(live).as_deref(), Some("virtio"));
        assert_eq!(
            balloon_model_in("    <memballoon model='none'/>\n").as_deref(),
            Some("none")
        );
        assert_eq!(
            balloon_model_in("<memballoonish model='x'/><memballoon autodeflate=\"on\" model=\"virtio-non-transitional\">")
                .as_deref(),
            Some("virtio-non-transitional")
        );
        assert_eq!(balloon_model_in("<domain><devices/></domain>"), None);
        assert_eq!(balloon_model_in("<memballoon>"), None);
    }

    #[test]
    fn the_list_table_gives_each_name_with_its_state() {
        // virsh 9.0 on `test:///default` with three domains defined and one paused.
        let table = " Id   Name        State\n----------------------------\n \
            1    test        running\n 2    my vm two   paused\n -    1           shut off\n \
            -    it's        shut off\n\n";
        assert_eq!(
            parse_list(table).unwrap(),
            vec![
                ("test".to_string(), DomainState::Running),
                ("my vm two".to_string(), DomainState::Paused),
                ("1".to_string(), DomainState::ShutOff),
                ("it's".to_string(), DomainState::ShutOff),
            ]
        );
        assert_eq!(
            parse_list(" Id   Name   State\n----------\n\n").unwrap(),
            vec![]
        );
        assert!(parse_list("").is_err());
        let e = parse_list("---\n 1 h30a sleeping\n").unwrap_err();
        assert!(e.contains("h30a sleeping"), "{e}");
    }

    #[test]
    fn every_recorded_error_text_has_its_class() {
        for (text, want) in [
            (
                "error: failed to connect to the hypervisor\nerror: Failed to connect socket to \
                 '/var/run/libvirt/libvirt-sock': No such file or directory\n",
                Failure::NoDaemon,
            ),
            (
                "error: failed to connect to the hypervisor\nerror: Failed to connect socket to \
                 '/var/run/libvirt/libvirt-sock': Connection refused\n",
                Failure::NoDaemon,
            ),
            (
                "error: failed to connect to the hypervisor\nerror: no connection driver \
                 available for bogus:///x\n",
                Failure::NoDaemon,
            ),
            ("error: failed to get domain 'nosuch'\n", Failure::NoDomain),
            (
                "error: Failed to get memory statistics for domain h30b\nerror: Requested \
                 operation is not valid: domain is not running\n",
                Failure::NotRunning,
            ),
            (
                "error: Requested operation is not valid: domain is not running\n",
                Failure::NotRunning,
            ),
            (
                "error: Unable to change balloon collection period.\nerror: internal error: No \
                 memory balloon device configured, can not set the collection period\n",
                Failure::NoBalloon,
            ),
            (
                "error: Requested operation is not valid: Unable to change memory of active \
                 domain without the balloon device and guest OS balloon driver\n",
                Failure::NoBalloon,
            ),
            (
                "error: invalid argument: cannot set memory higher than max memory\n",
                Failure::Other,
            ),
            (
                "error: memory in virDomainSetMemoryFlags must not be zero\n",
                Failure::Other,
            ),
            (
                "error: Invalid collection period value '-1'\n",
                Failure::Other,
            ),
        ] {
            assert_eq!(Failure::of(text), want, "{text}");
        }
    }

    #[test]
    fn domain_names_are_refused_only_where_virsh_would_misread_them() {
        for ok in [
            "h30a",
            "my vm",
            "it's",
            "vm-1",
            "1vm",
            "Ω",
            &"a".repeat(255),
        ] {
            assert!(valid_domain_name(ok), "{ok:?}");
        }
        let uuid = "c0cab6f6-7fae-45d5-96d5-b4973cc234ea";
        for bad in [
            "",
            "-h",
            "--all",
            "a\nb",
            "a\tb",
            "a/b",
            "7",
            "+7",
            " 7",
            uuid,
            &"a".repeat(256),
        ] {
            assert!(!valid_domain_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_qemu_pid_is_read_from_the_domains_pid_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("h30b.pid"), "22174\n").unwrap();
        std::fs::write(dir.path().join("bad.pid"), "x\n").unwrap();
        assert_eq!(qemu_pid("h30b", dir.path()).unwrap(), Some(22174));
        assert_eq!(qemu_pid("h30a", dir.path()).unwrap(), None);
        let e = qemu_pid("bad", dir.path()).unwrap_err().to_string();
        assert!(e.contains("bad.pid") && e.contains("not a pid"), "{e}");
        assert!(qemu_pid("../etc/x", dir.path()).is_err());
    }

    /// A fake virsh, written by a child process: a file this process had open for writing
    /// could be inherited by another test's fork, and executing it would then fail with
    /// "Text file busy". It writes its argv, one per line, and its `LC_ALL` to `argv`
    /// beside itself, then answers as virsh 9.0 did (libvirt.md §3, §4).
    fn fake_virsh(dir: &Path) -> PathBuf {
        let path = dir.join("virsh");
        let script = format!(
            r#"#!/bin/sh
here=$(dirname "$0")
printf '%s\n' "$@" "LC_ALL=$LC_ALL" > "$here/argv"
if [ "$2" = qemu:///down ]; then
  echo 'error: failed to connect to the hypervisor' >&2
  echo "error: Failed to connect socket to '/var/run/libvirt/libvirt-sock': No such file or directory" >&2
  exit 1
fi
shift 2
case "$*" in
  "dommemstat vm1") printf '{DOMMEMSTAT}' ;;
  "dommemstat h30b")
    echo
    echo 'error: Failed to get memory statistics for domain h30b' >&2
    echo 'error: Requested operation is not valid: domain is not running' >&2
    exit 1 ;;
  "dommemstat h30c") printf 'rss 331120\n\n' ;;
  "dommemstat h30c --period"*)
    echo 'error: Unable to change balloon collection period.' >&2
    echo 'error: internal error: No memory balloon device configured, can not set the collection period' >&2
    exit 1 ;;
  "dommemstat slow") sleep 5 ;;
  "dommemstat loud") head -c 1100000 /dev/zero ;;
  "dommemstat mute") exit 4 ;;
  "dominfo vm1") printf '{DOMINFO}' ;;
  "domstate vm1") printf 'paused (user)\n\n' ;;
  "domid vm1") printf '5\n\n' ;;
  "domid h30b") printf -- '-\n\n' ;;
  "dumpxml vm1") printf "<domain>\n  <memballoon model='virtio'>\n  </memballoon>\n</domain>\n" ;;
  "setmem vm1 307200 --live"|"dommemstat vm1 --period 1 --live") echo ;;
  "list --all") printf ' Id   Name   State\n--------------------\n 5    vm1    running\n -    h30b   shut off\n\n' ;;
  *) echo "error: failed to get domain '$2'" >&2; exit 1 ;;
esac
"#
        );
        write_program(&path, &script);
        path
    }

    /// Writes `script` to `path` as an executable, through a child process (see
    /// [`fake_virsh`]: no descriptor of ours is left open on it for a fork to inherit).
    pub(crate) fn write_program(path: &Path, script: &str) {
        let mut sh = Command::new("sh")
            .arg("-c")
            .arg(r#"cat > "$0" && chmod 755 "$0""#)
            .arg(path)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        sh.stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(sh.wait().unwrap().success());
    }

    fn virsh(dir: &Path, uri: &str) -> Virsh {
        Virsh {
            uri: uri.to_string(),
            program: fake_virsh(dir),
            timeout: Duration::from_secs(10),
        }
    }

    fn argv(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join("argv"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn each_question_runs_its_command_with_the_uri_as_argv_in_the_c_locale() {
        let dir = tempfile::tempdir().unwrap();
        let v = virsh(dir.path(), "qemu:///system");
        let stats = v.memory_stats("vm1").unwrap();
        assert_eq!(stats.rss, Some(Bytes(333736 * KIB)));
        assert_eq!(
            argv(dir.path()),
            ["-c", "qemu:///system", "dommemstat", "vm1", "LC_ALL=C"]
        );
        assert_eq!(v.state("vm1").unwrap(), DomainState::Paused);
        assert_eq!(v.id("vm1").unwrap(), Some(5));
        assert_eq!(v.id("h30b").unwrap(), None);
        assert_eq!(v.info("vm1").unwrap().used_memory, Bytes(307200 * KIB));
        assert_eq!(v.balloon_model("vm1").unwrap().as_deref(), Some("virtio"));
        assert_eq!(
            v.list_all().unwrap(),
            vec![
                ("vm1".to_string(), DomainState::Running),
                ("h30b".to_string(), DomainState::ShutOff),
            ]
        );
        assert_eq!(argv(dir.path())[2..4], ["list", "--all"]);
        v.set_memory("vm1", Bytes::from_mib(300) + Bytes(1000))
            .unwrap();
        assert_eq!(
            argv(dir.path())[2..],
            ["setmem", "vm1", "307200", "--live", "LC_ALL=C"]
        );
        v.set_stats_period("vm1", 1).unwrap();
        assert_eq!(
            argv(dir.path())[2..],
            ["dommemstat", "vm1", "--period", "1", "--live", "LC_ALL=C"]
        );
        let e = v.memory_stats("my 'vm'").unwrap_err();
        assert_eq!(e.failure(), Some(Failure::NoDomain));
        assert_eq!(argv(dir.path())[3], "my 'vm'", "one argv entry, no shell");
    }

    #[test]
    fn failures_name_uri_command_and_virshs_lines_and_are_classified() {
        let dir = tempfile::tempdir().unwrap();
        let v = virsh(dir.path(), "qemu:///system");
        let prog = v.program.display().to_string();
        let e = v.memory_stats("nosuch").unwrap_err();
        assert_eq!(e.failure(), Some(Failure::NoDomain));
        assert_eq!(
            e.to_string(),
            format!(
                "qemu:///system: {prog} dommemstat nosuch: error: failed to get domain 'nosuch'"
            )
        );
        let e = v.memory_stats("h30b").unwrap_err();
        assert_eq!(e.failure(), Some(Failure::NotRunning));
        assert!(
            e.to_string().ends_with(
                "error: Failed to get memory statistics for domain h30b; \
                 error: Requested operation is not valid: domain is not running"
            ),
            "{e}"
        );
        assert_eq!(
            v.memory_stats("h30c").unwrap(),
            MemoryStats {
                rss: Some(Bytes(331120 * KIB)),
                ..MemoryStats::default()
            }
        );
        let e = v.set_stats_period("h30c", 1).unwrap_err();
        assert_eq!(e.failure(), Some(Failure::NoBalloon));
        let e = v.memory_stats("mute").unwrap_err();
        assert_eq!(e.failure(), Some(Failure::Other));
        assert!(
            e.to_string()
                .ends_with("exited with status 4 and no message"),
            "{e}"
        );
        let down = virsh(dir.path(), "qemu:///down");
        let e = down.state("vm1").unwrap_err();
        assert_eq!(e.failure(), Some(Failure::NoDaemon));
        assert!(e.to_string().starts_with("qemu:///down: "), "{e}");
    }

    #[test]
    fn bad_names_and_sizes_are_refused_without_running_virsh() {
        let dir = tempfile::tempdir().unwrap();
        let v = virsh(dir.path(), "qemu:///system");
        for e in [
            v.set_memory("vm1", Bytes(1023)).unwrap_err(),
            v.state("--all").unwrap_err(),
            v.memory_stats("7").unwrap_err(),
            v.set_stats_period("vm1", u32::MAX).unwrap_err(),
        ] {
            assert!(matches!(e, LibvirtError::Refused { .. }), "{e}");
            assert!(e.to_string().starts_with("qemu:///system: "), "{e}");
        }
        assert!(!dir.path().join("argv").exists());
    }

    #[test]
    fn a_virsh_past_its_time_is_killed_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = virsh(dir.path(), "qemu:///system");
        v.timeout = Duration::from_millis(300);
        let start = Instant::now();
        let e = v.memory_stats("slow").unwrap_err();
        assert!(matches!(e, LibvirtError::Timeout { .. }), "{e}");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert!(
            e.to_string()
                .contains("dommemstat slow: no answer within 300ms"),
            "{e}"
        );
    }

    #[test]
    fn a_virsh_answer_past_the_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let v = virsh(dir.path(), "qemu:///system");
        let e = v.memory_stats("loud").unwrap_err();
        assert!(
            matches!(e, LibvirtError::TooLong { stream: "stdout", limit, .. } if limit == 1 << 20),
            "{e}"
        );
    }

    #[test]
    fn a_missing_virsh_cannot_be_run() {
        let v = Virsh {
            program: PathBuf::from("/nonexistent/virsh"),
            ..Virsh::new("qemu:///system")
        };
        let e = v.state("vm1").unwrap_err();
        assert!(matches!(e, LibvirtError::Run { .. }), "{e}");
        assert!(
            e.to_string().contains("/nonexistent/virsh domstate vm1"),
            "{e}"
        );
    }
}
