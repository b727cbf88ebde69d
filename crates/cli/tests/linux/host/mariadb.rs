//! MariaDB for the real-server tests: one data directory made by `mariadb-install-db` and filled once by `sysbench oltp_read_only prepare`, `mariadbd` started on it (on a Unix socket only, in a test cgroup when given; killed on drop), SQL through the `mariadb` client, and `sysbench oltp_read_only` runs read back as TPS and p95 latency.

use super::TestCgroup;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MARIADBD: &str = "/usr/sbin/mariadbd";

/// What is missing for these tests (mariadbd, mariadb-install-db, the client, sysbench), or
/// `None` when everything is here.
pub fn missing() -> Option<String> {
    [
        MARIADBD,
        "mariadb-install-db",
        "mariadb",
        "mariadb-admin",
        "sysbench",
    ]
    .into_iter()
    .find(|p| {
        if p.starts_with('/') {
            !Path::new(p).is_file()
        } else {
            super::redis::find_program(p).is_none()
        }
    })
    .map(|p| format!("{p} is not installed (apt-get install mariadb-server sysbench)"))
}

/// sysbench's tables: `tables` tables of `rows` rows each, read uniformly.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    pub tables: u32,
    pub rows: u64,
}

/// A data directory with sysbench's tables in it; removed on drop (after every server on it
/// is gone: a [`Mariadbd`] borrows it).
pub struct DataDir {
    dir: tempfile::TempDir,
    pub tables: Tables,
    /// InnoDB's clustered indexes (what oltp_read_only reads), bytes.
    pub clustered_bytes: u64,
}

impl DataDir {
    /// Installs a data directory and fills it with `tables` through a server of its own.
    pub fn prepare(tables: Tables) -> Result<DataDir, String> {
        let dir = tempfile::Builder::new()
            .prefix("alb-mdb")
            .tempdir()
            .map_err(|e| e.to_string())?;
        // Its own temporary directory: bootstraps running at once in a shared /tmp collide on
        // their temporary tables' names (seen in CI).
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        let out = Command::new("mariadb-install-db")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .output()
            .map_err(|e| format!("mariadb-install-db: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mariadb-install-db: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let mut data = DataDir {
            dir,
            tables,
            clustered_bytes: 0,
        };
        let mut server = Mariadbd::start(&data, "512M", None)?;
        server.sql("CREATE DATABASE sbtest")?;
        let out = data
            .sysbench(&server, 2)
            .arg("prepare")
            .output()
            .map_err(|e| format!("sysbench prepare: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "sysbench prepare: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let names: Vec<String> = (1..=tables.tables)
            .map(|t| format!("sbtest.sbtest{t}"))
            .collect();
        server.sql(&format!("ANALYZE TABLE {}", names.join(", ")))?;
        data.clustered_bytes = server
            .sql(
                "SELECT SUM(data_length) FROM information_schema.tables \
                 WHERE table_schema = 'sbtest'",
            )?
            .trim()
            .parse()
            .map_err(|e| format!("data_length: {e}"))?;
        server.shutdown()?;
        Ok(data)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// sysbench oltp_read_only on these tables against `server`, with `threads` threads; the
    /// caller adds `run` or `prepare` and the time.
    fn sysbench(&self, server: &Mariadbd, threads: u32) -> Command {
        let mut c = Command::new("sysbench");
        c.arg("oltp_read_only")
            .arg("--db-driver=mysql")
            .arg(format!("--mysql-socket={}", server.socket.display()))
            .args(["--mysql-user=root", "--mysql-db=sbtest"])
            .arg(format!("--tables={}", self.tables.tables))
            .arg(format!("--table-size={}", self.tables.rows))
            .arg("--rand-type=uniform")
            .arg(format!("--threads={threads}"))
            .stdin(Stdio::null());
        c
    }

    /// One `sysbench oltp_read_only run` of `seconds` against `server`.
    pub fn run(&self, server: &Mariadbd, threads: u32, seconds: u32) -> Result<Sysbench, String> {
        let out = self
            .sysbench(server, threads)
            .arg(format!("--time={seconds}"))
            .arg("run")
            .output()
            .map_err(|e| format!("sysbench run: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            return Err(format!(
                "sysbench run exited {}: {text}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Sysbench::parse(&text)
    }
}

/// What one sysbench run measured.
#[derive(Clone, Copy, Debug)]
pub struct Sysbench {
    pub tps: f64,
    pub p95_ms: f64,
}

impl Sysbench {
    /// Reads `transactions: N (X per sec.)` and `95th percentile: Y` from sysbench 1.0's report.
    pub fn parse(text: &str) -> Result<Sysbench, String> {
        let tps = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("transactions:"))
            .and_then(|rest| rest.split('(').nth(1))
            .and_then(|rate| rate.split_whitespace().next())
            .and_then(|x| x.parse().ok());
        let p95 = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("95th percentile:"))
            .and_then(|x| x.trim().parse().ok());
        match (tps, p95) {
            (Some(tps), Some(p95_ms)) => Ok(Sysbench { tps, p95_ms }),
            _ => Err(format!("no transactions or 95th percentile in:\n{text}")),
        }
    }
}

/// A `mariadbd` on a [`DataDir`], listening on a Unix socket only; killed on drop.
pub struct Mariadbd {
    child: Option<Child>,
    pub socket: PathBuf,
    err_log: PathBuf,
}

impl Mariadbd {
    /// Starts the server with a buffer pool of `pool` (`"1G"`), inside `cg` when given (a
    /// shell joins the cgroup and then becomes the server), and waits until it answers.
    pub fn start(data: &DataDir, pool: &str, cg: Option<&TestCgroup>) -> Result<Mariadbd, String> {
        Mariadbd::start_with(data, pool, cg, &[])
    }

    /// [`Mariadbd::start`] with `extra` server options after the usual ones (a later option
    /// wins).
    pub fn start_with(
        data: &DataDir,
        pool: &str,
        cg: Option<&TestCgroup>,
        extra: &[String],
    ) -> Result<Mariadbd, String> {
        let d = data.path();
        let socket = d.join("sock");
        let err_log = d.join("err.log");
        let procs = cg.map(|c| c.dir().join("cgroup.procs"));
        let child = Command::new("sh")
            .arg("-c")
            .arg("[ -z \"$0\" ] || echo $$ > \"$0\"; exec \"$@\"")
            .arg(procs.as_deref().unwrap_or(Path::new("")))
            .arg(MARIADBD)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--tmpdir={}", d.join("tmp").display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", d.join("pid").display()))
            .arg(format!("--log-error={}", err_log.display()))
            .arg(format!("--innodb-buffer-pool-size={pool}"))
            .args([
                "--user=root",
                "--skip-networking",
                "--innodb-flush-method=O_DIRECT",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-buffer-pool-load-at-startup=0",
                "--innodb-buffer-pool-dump-at-shutdown=0",
                "--max-connections=64",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start mariadbd: {e}"))?;
        let mut m = Mariadbd {
            child: Some(child),
            socket,
            err_log,
        };
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            if m.sql("SELECT 1").is_ok() {
                return Ok(m);
            }
            if !m.is_running() || Instant::now() > until {
                return Err(format!(
                    "mariadbd never answered; its log:\n{}",
                    std::fs::read_to_string(&m.err_log).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Runs `query` as root through the `mariadb` client; its tab-separated output, no headers.
    pub fn sql(&self, query: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .arg("-S")
            .arg(&self.socket)
            .args(["-uroot", "-N", "-B", "-e", query])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("mariadb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{query}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `@@innodb_buffer_pool_size`, bytes.
    pub fn pool_bytes(&self) -> Result<u64, String> {
        self.sql("SELECT @@innodb_buffer_pool_size")?
            .trim()
            .parse()
            .map_err(|e| format!("innodb_buffer_pool_size: {e}"))
    }

    /// Reads every table's clustered index into the pool: the working set of oltp_read_only.
    pub fn warm(&self, tables: Tables) -> Result<(), String> {
        for t in 1..=tables.tables {
            self.sql(&format!(
                "SELECT SUM(LENGTH(c) + LENGTH(pad)) FROM sbtest.sbtest{t} FORCE INDEX (PRIMARY)"
            ))?;
        }
        Ok(())
    }

    /// A clean shutdown, waited for.
    pub fn shutdown(&mut self) -> Result<(), String> {
        let _ = Command::new("mariadb-admin")
            .arg("-S")
            .arg(&self.socket)
            .args(["-uroot", "shutdown"])
            .stdin(Stdio::null())
            .output();
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err("mariadbd did not shut down within 60 s; killed".into())
    }
}

impl Drop for Mariadbd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
