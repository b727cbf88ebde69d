//! MariaDB and MySQL as a balloon pool: the InnoDB buffer pool (`innodb_buffer_pool_size`) is the pool, moved with `SET GLOBAL innodb_buffer_pool_size = N` on the server's own unit, and a move is done only once the server's resize status says it finished and the size read back is the one asked.
//!
//! - **Sets.** `SET GLOBAL innodb_buffer_pool_size = N`, N being memtide's target rounded
//!   *down* to the server's unit (never above what memtide asked). The statement needs `SUPER`
//!   (MariaDB) or `SYSTEM_VARIABLES_ADMIN` (MySQL 8).
//! - **Two resize engines.** MariaDB ≥ 10.11.12 (and 11.4.6, 11.8) resizes in place: the pool
//!   is one reserved range of `innodb_buffer_pool_size_max`, `innodb_buffer_pool_chunk_size` is
//!   0 (ignored), a size is truncated down to whole MiB, and the `SET` itself returns once the
//!   pages are withdrawn and their memory handed back to the kernel. Older MariaDB and MySQL
//!   resize in chunks: a size is rounded *up* to `innodb_buffer_pool_chunk_size ×
//!   innodb_buffer_pool_instances` (instances absent, as on MariaDB ≥ 10.6: 1), and a background
//!   thread does the work after the `SET` returns. Which engine a server has is read at
//!   connection (a chunk size above 0 means chunks).
//! - **Confirms.** After the `SET`, the adapter polls `SHOW GLOBAL STATUS LIKE
//!   'Innodb_buffer_pool_resize_status%'` (the text and, where the server has it,
//!   `Innodb_buffer_pool_resize_status_code`) until the resize is finished — for the in-place
//!   engine an idle status, for the chunked one a new "Completed …"/"… did not change" message —
//!   within [`RESIZE_DEADLINE`], and then reads `@@innodb_buffer_pool_size` back: it must be
//!   the size asked. A status naming a failure, a passed deadline or another size read back is a
//!   refusal naming it. (The chunked engine's path is written to its documented messages but was
//!   not run here: Debian 12's MariaDB 10.11.19 resizes in place.)
//! - **Granularity.** Because targets are rounded down, the granule the adapter registers is
//!   made a multiple of the server's unit (`--granule` raised to the least common multiple of
//!   the two, saying so on stderr); memtide's targets are then multiples of the unit and the
//!   rounding never moves them. `innodb_buffer_pool_size_max`, where the server has it, caps
//!   `--max` at start (saying so), and a target above it is refused, naming it.
//! - **Reports.** `used_bytes` = `Innodb_buffer_pool_pages_data` × `innodb_page_size` (pages
//!   holding data, dirty ones included; not `pages_total − pages_free`, which counts the pages
//!   InnoDB uses for itself, such as the adaptive hash index, as data); hits =
//!   `Innodb_buffer_pool_read_requests − Innodb_buffer_pool_reads` (logical reads not needing a
//!   disk read), misses = `Innodb_buffer_pool_reads`; evictions =
//!   `Innodb_buffer_pool_pages_lru_freed + Innodb_buffer_pool_pages_LRU_flushed` (MariaDB ≥
//!   10.6 counts the clean pages the LRU frees and the dirty ones it writes before freeing; MySQL
//!   only the latter); dirty_bytes = `Innodb_buffer_pool_pages_dirty` × page size. A missing
//!   counter is a refusal naming it, never 0 — except evictions, which are 0 on a server that
//!   has neither LRU counter.
//! - **Durability.** With each reading, the settings that decide what a commit costs the disk
//!   (`SHOW GLOBAL VARIABLES WHERE Variable_name IN (...)`: `innodb_flush_log_at_trx_commit`,
//!   `sync_binlog`, `innodb_log_buffer_size`, `innodb_write_io_threads`) and the sync counters
//!   (`Innodb_data_fsyncs`, `Innodb_os_log_fsyncs`, `Innodb_log_waits`, `Binlog_commits`,
//!   `Binlog_group_commits`, in the same `SHOW GLOBAL STATUS`), sent as `stats.durability`: a
//!   figure the server lacks is left out, never 0 (MariaDB 10.8 and later have no
//!   `Innodb_os_log_fsyncs`: their `Innodb_data_fsyncs` counts the redo log's fsyncs too). memtide
//!   advises on them (Lai et al.); the adapter never changes them. Reading them needs no
//!   privilege.
//! - **Time-outs.** Connect, read and write: 5 s ([`IO_TIMEOUT`]). The `SET` runs on a
//!   connection of its own whose read time-out is the resize deadline, since the in-place engine
//!   holds the statement until the resize is over.
//! - **When MariaDB refuses, dies or hangs.** A server error (privileges, a resize already
//!   running, an out-of-range size) is a refusal naming the statement and the server's message;
//!   a killed server is a refusal naming the lost connection; a hung one, a refusal after 5 s
//!   (or the deadline for the `SET`). memtide's limit then takes the tenant over, and the runner
//!   ([`crate::server`]) connects again at the next operation.
//! - **Why a crate.** The `mysql` crate (pure Rust, here without TLS and with its Rust zlib:
//!   synchronous, the same shape as the `redis` crate beside it) speaks the handshake, the
//!   `mysql_native_password` and `caching_sha2_password` logins and the text protocol; hand code
//!   would redo that, and its corner cases, for a handful of queries. Debian's `root@localhost`
//!   (`unix_socket`, no password) logs in too, when the adapter runs as the system's root and
//!   connects through the socket.

use crate::server::Pool;
use memtide_balloon::agent::{PoolStats, Refusal};
use memtide_balloon::protocol::Durability;
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Connect, read and write time-out of every statement but the `SET` of a resize.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a resize may take, from the `SET` to the status saying it finished.
pub const RESIZE_DEADLINE: Duration = Duration::from_secs(60);

const MIB: u64 = 1 << 20;

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Socket(PathBuf),
}

impl Endpoint {
    /// `unix:///run/mysqld/mysqld.sock`, `mysql://127.0.0.1:3306` (or `mariadb://`; port 3306
    /// when left out). The user and password are not part of the URL.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        if let Some(path) = url.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(format!(
                    "{url}: a unix URL names an absolute path, unix:///path"
                ));
            }
            return Ok(Endpoint::Socket(PathBuf::from(path)));
        }
        let rest = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
            .ok_or_else(|| {
                format!("{url}: expected mysql://HOST:PORT or unix:///path/mysqld.sock")
            })?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['@', '/', '?']) {
            return Err(format!(
                "{url}: only HOST:PORT after mysql:// (the user goes in --user, the password in \
                 --password-file)"
            ));
        }
        let (host, port) = match rest.rsplit_once(':') {
            // An IPv6 address in brackets, with or without a port.
            Some((h, p)) if !p.ends_with(']') => (
                h,
                p.parse::<u16>()
                    .map_err(|_| format!("{url}: the port {p:?} is not a number up to 65535"))?,
            ),
            _ => (rest, 3306),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        Ok(Endpoint::Tcp {
            host: host.to_string(),
            port,
        })
    }
}

/// How to log in: where, as whom.
#[derive(Clone)]
pub struct Login {
    /// The URL as given, for messages.
    pub url: String,
    pub endpoint: Endpoint,
    pub user: String,
    pub password: Option<String>,
    /// A shrink's largest step (0: in one go).
    pub shrink_step: u64,
}

impl Login {
    fn opts(&self, read_timeout: Duration) -> Opts {
        let b = OptsBuilder::new()
            .user(Some(self.user.clone()))
            .pass(self.password.clone())
            .read_timeout(Some(read_timeout))
            .write_timeout(Some(IO_TIMEOUT))
            .tcp_connect_timeout(Some(IO_TIMEOUT))
            // Over TCP, stay on TCP (the crate would otherwise move to the server's socket).
            .prefer_socket(false)
            .stmt_cache_size(0);
        let b = match &self.endpoint {
            Endpoint::Tcp { host, port } => b.ip_or_hostname(Some(host.clone())).tcp_port(*port),
            Endpoint::Socket(path) => b.socket(Some(path.to_string_lossy().into_owned())),
        };
        b.into()
    }

    fn open(&self, read_timeout: Duration) -> Result<Conn, String> {
        Conn::new(self.opts(read_timeout))
            .map_err(|e| format!("mariadb at {} as {}: {}", self.url, self.user, said(&e)))
    }

    /// Connects and reads how the server resizes.
    pub fn connect(&self) -> Result<MariadbPool, String> {
        let mut conn = self.open(IO_TIMEOUT)?;
        let vars = show(
            &mut conn,
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('innodb_page_size', \
             'innodb_buffer_pool_chunk_size', 'innodb_buffer_pool_instances', \
             'innodb_buffer_pool_size_max')",
        )
        .map_err(|r| format!("mariadb at {}: {}", self.url, r.reason))?;
        let geometry = Geometry::from_vars(&vars)
            .map_err(|r| format!("mariadb at {}: {}", self.url, r.reason))?;
        Ok(MariadbPool {
            login: self.clone(),
            conn,
            geometry,
            deadline: RESIZE_DEADLINE,
            shrink_step: self.shrink_step,
        })
    }
}

/// How a server's buffer pool resizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// The server's unit: sizes are multiples of it.
    pub unit: u64,
    /// `innodb_page_size`.
    pub page: u64,
    /// `innodb_buffer_pool_size_max`, where the server has it.
    pub size_max: Option<u64>,
    /// Resized in chunks by a background thread after the `SET` returns (older servers), not
    /// in place by the `SET` itself.
    pub background: bool,
}

impl Geometry {
    /// From `SHOW GLOBAL VARIABLES` (names in lower case).
    fn from_vars(vars: &BTreeMap<String, String>) -> Result<Geometry, Refusal> {
        let page = number(vars, "innodb_page_size")?;
        let chunk = vars
            .get("innodb_buffer_pool_chunk_size")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let instances = vars
            .get("innodb_buffer_pool_instances")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1)
            .max(1);
        let size_max = match vars.get("innodb_buffer_pool_size_max") {
            Some(_) => Some(number(vars, "innodb_buffer_pool_size_max")?),
            None => None,
        };
        if page == 0 {
            return Err(Refusal::new("mariadb: innodb_page_size is 0"));
        }
        Ok(if chunk > 0 {
            Geometry {
                unit: chunk.saturating_mul(instances),
                page,
                size_max,
                background: true,
            }
        } else {
            Geometry {
                unit: MIB.max(page),
                page,
                size_max,
                background: false,
            }
        })
    }

    /// `bytes` on the unit, rounded down.
    pub fn round_down(&self, bytes: u64) -> u64 {
        bytes / self.unit * self.unit
    }

    /// The granule to register for `asked`: the least multiple of both it and the unit, so
    /// every target memtide sends is on the server's unit.
    pub fn granule(&self, asked: u64) -> u64 {
        let asked = asked.max(1);
        let (mut a, mut b) = (asked, self.unit);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        (asked / a).saturating_mul(self.unit)
    }
}

/// Where a resize stands, from the server's status.
#[derive(Debug, PartialEq, Eq)]
enum Resize {
    Running,
    Finished,
    Failed(String),
}

/// Reads `Innodb_buffer_pool_resize_status` (`status`) and, where the server has it,
/// `Innodb_buffer_pool_resize_status_code` (`code`: 0 none running, 7 failed on MySQL);
/// `before` is the status text before the `SET`.
fn resize_state(status: &str, code: Option<u64>, before: &str, background: bool) -> Resize {
    let lower = status.to_ascii_lowercase();
    if code == Some(7) || ["fail", "abort", "error"].iter().any(|w| lower.contains(w)) {
        return Resize::Failed(status.to_string());
    }
    let terminal = lower.starts_with("completed")
        || lower.contains("nothing to do")
        || lower.contains("did not change");
    let idle = code.is_none_or(|c| c == 0);
    if background {
        // The background thread writes a new message for each resize; until it does, the last
        // one (or none) is still shown.
        if status != before && (terminal || (idle && code.is_some() && !status.is_empty())) {
            Resize::Finished
        } else {
            Resize::Running
        }
    } else if idle && (status.is_empty() || terminal) {
        Resize::Finished
    } else {
        Resize::Running
    }
}

/// The sizes a resize from `was` to `want` passes through, `want` last: a grow in one step, a
/// shrink in steps of at most `step` on the server's unit (`step` 0: one).
fn steps(g: Geometry, was: u64, want: u64, step: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = was;
    while at != want {
        let down = g.round_down(at.saturating_sub(step));
        at = if want < at && step > 0 && down > want && down < at {
            down
        } else {
            want
        };
        out.push(at);
    }
    out
}

/// What went wrong, without the crate's wrapping (`MySqlError { … }`): the server's own message
/// (`ERROR 1045 (28000): Access denied …`) or the I/O error.
fn said(e: &mysql::Error) -> String {
    match e {
        mysql::Error::MySqlError(e) => e.to_string(),
        mysql::Error::IoError(e) => e.to_string(),
        mysql::Error::DriverError(e) => e.to_string(),
        mysql::Error::CodecError(e) => e.to_string(),
        e => e.to_string(),
    }
}

/// Rows of a `SHOW … STATUS`/`VARIABLES`, the names in lower case (MySQL spells
/// `Innodb_buffer_pool_pages_LRU_flushed`, MariaDB `…_lru_flushed`).
fn show(conn: &mut Conn, query: &str) -> Result<BTreeMap<String, String>, Refusal> {
    let rows: Vec<(String, String)> = conn
        .query(query)
        .map_err(|e| Refusal::new(format!("mariadb: {query}: {}", said(&e))))?;
    Ok(rows
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect())
}

/// A figure the server reports; one it does not is a refusal naming it, never 0.
fn number(map: &BTreeMap<String, String>, key: &str) -> Result<u64, Refusal> {
    let v = map
        .get(key)
        .ok_or_else(|| Refusal::new(format!("mariadb: the server has no {key}")))?;
    v.trim()
        .parse()
        .map_err(|_| Refusal::new(format!("mariadb: {key} = {v:?} is not a number")))
}

/// The pool's counters and the sync counters, in one reading.
const STATUS: &str = "SHOW GLOBAL STATUS WHERE Variable_name LIKE 'Innodb_buffer_pool_%' OR \
                      Variable_name IN ('Innodb_data_fsyncs', 'Innodb_os_log_fsyncs', \
                      'Innodb_log_waits', 'Binlog_commits', 'Binlog_group_commits')";

/// The durability settings.
const DURABILITY_SETTINGS: &str = "SHOW GLOBAL VARIABLES WHERE Variable_name IN \
                                   ('innodb_flush_log_at_trx_commit', 'sync_binlog', \
                                   'innodb_log_buffer_size', 'innodb_write_io_threads')";

/// A figure the server may not have: `None` when it has not (never 0), a refusal naming it
/// when it is not a number of `T`'s range.
fn optional<T: TryFrom<u64>>(
    map: &BTreeMap<String, String>,
    key: &str,
) -> Result<Option<T>, Refusal> {
    if !map.contains_key(key) {
        return Ok(None);
    }
    let n = number(map, key)?;
    T::try_from(n)
        .map(Some)
        .map_err(|_| Refusal::new(format!("mariadb: {key} = {n} is out of range")))
}

/// The durability settings (`vars`) and sync counters (`status`) the server has; `None` when
/// it has none of them.
fn durability_of(
    vars: &BTreeMap<String, String>,
    status: &BTreeMap<String, String>,
) -> Result<Option<Durability>, Refusal> {
    let d = Durability {
        flush_log_at_trx_commit: optional(vars, "innodb_flush_log_at_trx_commit")?,
        sync_binlog: optional(vars, "sync_binlog")?,
        log_buffer_bytes: optional(vars, "innodb_log_buffer_size")?,
        write_io_threads: optional(vars, "innodb_write_io_threads")?,
        data_fsyncs: optional(status, "innodb_data_fsyncs")?,
        log_fsyncs: optional(status, "innodb_os_log_fsyncs")?,
        log_waits: optional(status, "innodb_log_waits")?,
        binlog_commits: optional(status, "binlog_commits")?,
        binlog_group_commits: optional(status, "binlog_group_commits")?,
    };
    Ok(Some(d).filter(|d| *d != Durability::default()))
}

/// The pool's statistics from [`STATUS`], with the durability figures of `vars`
/// ([`DURABILITY_SETTINGS`]) and `status`.
fn stats_of(
    status: &BTreeMap<String, String>,
    vars: &BTreeMap<String, String>,
    page: u64,
) -> Result<PoolStats, Refusal> {
    let data = number(status, "innodb_buffer_pool_pages_data")?;
    let dirty = number(status, "innodb_buffer_pool_pages_dirty")?;
    let requests = number(status, "innodb_buffer_pool_read_requests")?;
    let reads = number(status, "innodb_buffer_pool_reads")?;
    let lru = |k: &str| {
        status
            .contains_key(k)
            .then(|| number(status, k))
            .transpose()
    };
    let freed = lru("innodb_buffer_pool_pages_lru_freed")?;
    let flushed = lru("innodb_buffer_pool_pages_lru_flushed")?;
    Ok(PoolStats {
        used_bytes: data.saturating_mul(page),
        hits: requests.saturating_sub(reads),
        misses: reads,
        evictions: freed.unwrap_or(0).saturating_add(flushed.unwrap_or(0)),
        dirty_bytes: dirty.saturating_mul(page),
        curve: None,
        durability: durability_of(vars, status)?,
    })
}

/// A connected server and how it resizes.
pub struct MariadbPool {
    login: Login,
    conn: Conn,
    geometry: Geometry,
    /// How long a resize may take.
    pub deadline: Duration,
    /// A shrink's largest step (0: in one go).
    pub shrink_step: u64,
}

impl MariadbPool {
    /// How the server resizes, as read at connection.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The resize status text and code, where the server has them.
    fn resize_status(&mut self) -> Result<(String, Option<u64>), Refusal> {
        let s = show(
            &mut self.conn,
            "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status%'",
        )?;
        let text = s
            .get("innodb_buffer_pool_resize_status")
            .cloned()
            .ok_or_else(|| {
                Refusal::new("mariadb: the server has no Innodb_buffer_pool_resize_status")
            })?;
        let code = match s.get("innodb_buffer_pool_resize_status_code") {
            Some(_) => Some(number(&s, "innodb_buffer_pool_resize_status_code")?),
            None => None,
        };
        Ok((text, code))
    }
}

impl Pool for MariadbPool {
    /// `@@innodb_buffer_pool_size`.
    fn size(&mut self) -> Result<u64, Refusal> {
        let q = "SELECT @@GLOBAL.innodb_buffer_pool_size";
        self.conn
            .query_first::<u64, _>(q)
            .map_err(|e| Refusal::new(format!("mariadb: {q}: {}", said(&e))))?
            .ok_or_else(|| Refusal::new(format!("mariadb: {q}: no row")))
    }

    /// Sets the pool to `bytes` rounded down to the unit, waits for the server to finish, and
    /// reads the size back.
    fn resize(&mut self, bytes: u64) -> Result<(), Refusal> {
        let g = self.geometry;
        if let Some(max) = g.size_max.filter(|&m| bytes > m) {
            return Err(Refusal::new(format!(
                "mariadb: {bytes} bytes is above innodb_buffer_pool_size_max = {max}, the \
                 largest pool the server can have"
            )));
        }
        let want = g.round_down(bytes);
        if want == 0 {
            return Err(Refusal::new(format!(
                "mariadb: {bytes} bytes is under the server's unit of {} bytes",
                g.unit
            )));
        }
        let was = self.size()?;
        // A shrink goes in steps of at most `shrink_step`: MariaDB stalls the queries that need
        // a free page while it withdraws pages, about as long as the step takes.
        let mut at = was;
        for next in steps(g, was, want, self.shrink_step) {
            self.set(next, at).map_err(|r| match r.pool_bytes {
                None if at != was => r.at(at),
                _ => r,
            })?;
            at = next;
        }
        Ok(())
    }

    /// Pages holding data and dirty pages (× `innodb_page_size`), logical reads served from
    /// the pool and those that went to disk, pages the LRU evicted; the durability settings
    /// and sync counters.
    fn stats(&mut self) -> Result<PoolStats, Refusal> {
        let status = show(&mut self.conn, STATUS)?;
        let vars = show(&mut self.conn, DURABILITY_SETTINGS)?;
        stats_of(&status, &vars, self.geometry.page)
    }
}

impl MariadbPool {
    /// One `SET GLOBAL innodb_buffer_pool_size = want` from `was`: the resize status polled until
    /// it finished, the size read back.
    fn set(&mut self, want: u64, was: u64) -> Result<(), Refusal> {
        let g = self.geometry;
        let (before, _) = self.resize_status()?;
        let set = format!("SET GLOBAL innodb_buffer_pool_size = {want}");
        let started = Instant::now();
        // Its own connection: the in-place engine holds the statement until the resize is over.
        let mut setter = self
            .login
            .open(self.deadline)
            .map_err(|e| Refusal::new(format!("{set}: {e}")))?;
        setter
            .query_drop(&set)
            .map_err(|e| Refusal::new(format!("mariadb: {set}: {}", said(&e))))?;
        drop(setter);
        let until = started + self.deadline;
        loop {
            let (status, code) = self.resize_status()?;
            match resize_state(&status, code, &before, g.background) {
                Resize::Finished => break,
                Resize::Failed(why) => {
                    let now = self.size()?;
                    let r = Refusal::new(format!(
                        "mariadb: {set}: Innodb_buffer_pool_resize_status = {why:?}"
                    ));
                    return Err(if now == was { r } else { r.at(now) });
                }
                Resize::Running if Instant::now() >= until => {
                    return Err(Refusal::new(format!(
                        "mariadb: {set}: not finished within {:?} (Innodb_buffer_pool_resize_status \
                         = {status:?})",
                        self.deadline
                    )));
                }
                Resize::Running => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        let now = self.size()?;
        if now != want {
            let r = Refusal::new(format!(
                "mariadb: {set}: the server reports innodb_buffer_pool_size = {now} after it"
            ));
            return Err(if now == was { r } else { r.at(now) });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
            .collect()
    }

    #[test]
    fn urls_name_a_socket_or_a_host_and_port() {
        assert_eq!(
            Endpoint::parse("unix:///run/mysqld/mysqld.sock").unwrap(),
            Endpoint::Socket("/run/mysqld/mysqld.sock".into())
        );
        assert_eq!(
            Endpoint::parse("mysql://127.0.0.1:3307").unwrap(),
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 3307
            }
        );
        assert_eq!(
            Endpoint::parse("mariadb://localhost").unwrap(),
            Endpoint::Tcp {
                host: "localhost".into(),
                port: 3306
            }
        );
        assert_eq!(
            Endpoint::parse("mysql://[::1]:3306").unwrap(),
            Endpoint::Tcp {
                host: "::1".into(),
                port: 3306
            }
        );
    }

    #[test]
    fn bad_urls_are_refused_naming_what_is_wrong() {
        for (url, says) in [
            ("redis://127.0.0.1:6379", "expected mysql://"),
            ("mysql://root:pw@127.0.0.1", "--user"),
            ("mysql://127.0.0.1:99999", "port"),
            ("unix://relative.sock", "absolute"),
            ("mysql://:3306", "no host"),
        ] {
            let e = Endpoint::parse(url).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn the_in_place_engine_moves_in_whole_mib_and_knows_its_max() {
        let g = Geometry::from_vars(&map(&[
            ("innodb_page_size", "16384"),
            ("innodb_buffer_pool_chunk_size", "0"),
            ("innodb_buffer_pool_size_max", "8796093022208"),
        ]))
        .unwrap();
        assert_eq!(g.unit, MIB);
        assert!(!g.background);
        assert_eq!(g.size_max, Some(8796093022208));
        assert_eq!(g.round_down(384 * MIB + 4096), 384 * MIB);
    }

    #[test]
    fn the_chunked_engine_moves_in_chunks_times_instances() {
        let g = Geometry::from_vars(&map(&[
            ("innodb_page_size", "16384"),
            ("innodb_buffer_pool_chunk_size", "134217728"),
            ("innodb_buffer_pool_instances", "4"),
        ]))
        .unwrap();
        assert_eq!(g.unit, 512 * MIB);
        assert!(g.background);
        assert_eq!(g.size_max, None);
        // Rounded down, never above what memtide asked.
        assert_eq!(g.round_down(1500 * MIB), 1024 * MIB);
        // MariaDB 10.6–10.11.11: no instances variable, one instance.
        let one = Geometry::from_vars(&map(&[
            ("innodb_page_size", "16384"),
            ("innodb_buffer_pool_chunk_size", "134217728"),
        ]))
        .unwrap();
        assert_eq!(one.unit, 128 * MIB);
    }

    #[test]
    fn the_registered_granule_is_a_multiple_of_the_unit_and_of_the_one_asked() {
        let g = Geometry {
            unit: 128 * MIB,
            page: 16384,
            size_max: None,
            background: true,
        };
        assert_eq!(g.granule(MIB), 128 * MIB);
        assert_eq!(g.granule(256 * MIB), 256 * MIB);
        assert_eq!(g.granule(96 * MIB), 384 * MIB);
        assert_eq!(g.granule(0), 128 * MIB);
    }

    #[test]
    fn a_server_without_a_page_size_is_refused_naming_it() {
        let r = Geometry::from_vars(&map(&[])).unwrap_err();
        assert!(r.reason.contains("innodb_page_size"), "{}", r.reason);
    }

    #[test]
    fn an_in_place_resize_is_finished_when_the_status_is_idle() {
        assert_eq!(resize_state("", None, "", false), Resize::Finished);
        assert_eq!(
            resize_state("Resizing buffer pool", None, "", false),
            Resize::Running
        );
        assert_eq!(
            resize_state(
                "Completed resizing buffer pool at 250101 10:00:00.",
                Some(0),
                "",
                false
            ),
            Resize::Finished
        );
        assert_eq!(resize_state("", Some(3), "", false), Resize::Running);
    }

    #[test]
    fn a_chunked_resize_is_finished_only_by_a_new_completion_message() {
        let old = "Completed resizing buffer pool at 250101 10:00:00.";
        assert_eq!(resize_state(old, None, old, true), Resize::Running);
        assert_eq!(resize_state("", None, "", true), Resize::Running);
        assert_eq!(
            resize_state("Withdrawing blocks to be shrunken.", None, old, true),
            Resize::Running
        );
        assert_eq!(
            resize_state(
                "Completed resizing buffer pool at 250101 10:00:07.",
                None,
                old,
                true
            ),
            Resize::Finished
        );
        assert_eq!(
            resize_state(
                "Size did not change (old size = new size = 134217728. Nothing to do.",
                None,
                old,
                true
            ),
            Resize::Finished
        );
    }

    #[test]
    fn a_status_naming_a_failure_is_a_failure() {
        let s = "Resizing buffer pool failed, withdraw timeout";
        assert_eq!(resize_state(s, None, "", false), Resize::Failed(s.into()));
        assert_eq!(
            resize_state("Resizing", Some(7), "", true),
            Resize::Failed("Resizing".into())
        );
    }

    #[test]
    fn statistics_are_pages_times_page_size_and_read_counters() {
        let s = map(&[
            ("Innodb_buffer_pool_pages_data", "1000"),
            ("Innodb_buffer_pool_pages_dirty", "10"),
            ("Innodb_buffer_pool_read_requests", "500"),
            ("Innodb_buffer_pool_reads", "20"),
            ("Innodb_buffer_pool_pages_lru_freed", "7"),
            ("Innodb_buffer_pool_pages_LRU_flushed", "3"),
        ]);
        let st = stats_of(&s, &map(&[]), 16384).unwrap();
        assert_eq!(st.used_bytes, 1000 * 16384);
        assert_eq!(st.dirty_bytes, 10 * 16384);
        assert_eq!((st.hits, st.misses, st.evictions), (480, 20, 10));
    }

    #[test]
    fn a_missing_counter_is_a_refusal_naming_it_but_missing_lru_counters_are_no_evictions() {
        let mut s = map(&[
            ("Innodb_buffer_pool_pages_data", "1000"),
            ("Innodb_buffer_pool_pages_dirty", "10"),
            ("Innodb_buffer_pool_read_requests", "500"),
        ]);
        let r = stats_of(&s, &map(&[]), 16384).unwrap_err();
        assert!(
            r.reason.contains("innodb_buffer_pool_reads"),
            "{}",
            r.reason
        );
        s.insert("innodb_buffer_pool_reads".into(), "20".into());
        assert_eq!(stats_of(&s, &map(&[]), 16384).unwrap().evictions, 0);
        s.insert("innodb_buffer_pool_pages_data".into(), "lots".into());
        let r = stats_of(&s, &map(&[]), 16384).unwrap_err();
        assert!(r.reason.contains("not a number"), "{}", r.reason);
    }

    #[test]
    fn durability_is_the_settings_and_sync_counters_the_server_has() {
        // What MariaDB 10.11.19 answers: no Innodb_os_log_fsyncs.
        let vars = map(&[
            ("innodb_flush_log_at_trx_commit", "1"),
            ("sync_binlog", "1"),
            ("innodb_log_buffer_size", "16777216"),
            ("innodb_write_io_threads", "4"),
        ]);
        let status = map(&[
            ("Innodb_data_fsyncs", "506"),
            ("Innodb_log_waits", "0"),
            ("Binlog_commits", "500"),
            ("Binlog_group_commits", "480"),
        ]);
        assert_eq!(
            durability_of(&vars, &status).unwrap(),
            Some(Durability {
                flush_log_at_trx_commit: Some(1),
                sync_binlog: Some(1),
                log_buffer_bytes: Some(16 << 20),
                write_io_threads: Some(4),
                data_fsyncs: Some(506),
                log_fsyncs: None,
                log_waits: Some(0),
                binlog_commits: Some(500),
                binlog_group_commits: Some(480),
            })
        );
        assert_eq!(
            durability_of(&map(&[]), &map(&[])).unwrap(),
            None,
            "a server with none of them"
        );
    }

    #[test]
    fn a_durability_figure_that_is_no_number_of_its_range_is_a_refusal_naming_it() {
        let r = durability_of(&map(&[("sync_binlog", "often")]), &map(&[])).unwrap_err();
        assert!(r.reason.contains("sync_binlog"), "{}", r.reason);
        let r = durability_of(
            &map(&[("innodb_flush_log_at_trx_commit", "300")]),
            &map(&[]),
        )
        .unwrap_err();
        assert_eq!(
            r.reason,
            "mariadb: innodb_flush_log_at_trx_commit = 300 is out of range"
        );
    }

    #[test]
    fn a_shrink_goes_in_steps_on_the_unit_and_a_grow_in_one() {
        let g = Geometry {
            unit: MIB,
            page: 16384,
            size_max: None,
            background: false,
        };
        assert_eq!(
            steps(g, 1024 * MIB, 700 * MIB, 128 * MIB),
            [896 * MIB, 768 * MIB, 700 * MIB]
        );
        assert_eq!(steps(g, 1024 * MIB, 700 * MIB, 0), [700 * MIB]);
        assert_eq!(steps(g, 700 * MIB, 1024 * MIB, 128 * MIB), [1024 * MIB]);
        assert!(steps(g, 700 * MIB, 700 * MIB, 128 * MIB).is_empty());
    }
}
