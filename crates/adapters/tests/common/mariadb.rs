//! A real `mariadbd` (Debian's) for a test: a fresh data directory made by `mariadb-install-db`, the server on a free loopback port and a socket in that directory, killed and removed when the guard drops.

use memtide_testkit::free_port;
use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MARIADBD: &str = "/usr/sbin/mariadbd";

/// Whether `mariadbd` is here; when it is not, a test skips, or fails when
/// `MEMTIDE_REQUIRE_LINUX` is set.
pub fn available() -> bool {
    if Command::new(MARIADBD)
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        return true;
    }
    let why = "mariadbd is not installed (apt-get install mariadb-server)";
    memtide_testkit::skip_or_fail(module_path!(), why);
    false
}

/// A running `mariadbd` and its data directory; dropping it kills the server and removes the
/// directory.
pub struct Mariadbd {
    child: Option<Child>,
    pool: String,
    /// Options after the test defaults (the later of two wins).
    args: Vec<String>,
    pub port: u16,
    /// The memory cgroup the server runs in (its `cgroup.procs`), when given one.
    cgroup: Option<PathBuf>,
    // Declared last: removed after the server is gone.
    dir: tempfile::TempDir,
}

impl Mariadbd {
    /// A fresh server with a buffer pool of `pool` (`"1G"`), root without a password.
    pub fn start(pool: &str) -> Mariadbd {
        Mariadbd::start_in(pool, None)
    }

    /// As [`Mariadbd::start`], the server in the memory cgroup `cg` (so that what it uses, and
    /// nothing else, is that cgroup's usage).
    pub fn start_in(pool: &str, cg: Option<&super::TestCgroup>) -> Mariadbd {
        Mariadbd::start_with(pool, cg, &[])
    }

    /// As [`Mariadbd::start_in`], with `args` after the test's own options (`--log-bin`,
    /// `--sync-binlog=1`: the later of two wins).
    pub fn start_with(pool: &str, cg: Option<&super::TestCgroup>, args: &[&str]) -> Mariadbd {
        let dir = tempfile::Builder::new().prefix("mdb").tempdir().unwrap();
        let data = dir.path().join("data");
        // Its own temporary directory: bootstraps running at once in a shared /tmp collide on
        // their temporary tables' names ("Unknown table 'mysql.tmp_user_sys'", "Error on delete of
        // '/tmp/#sql-temptable-…'"), seen in CI with three tests starting servers together.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let out = Command::new("mariadb-install-db")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut m = Mariadbd {
            child: None,
            pool: pool.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            port: free_port(),
            cgroup: cg.map(|c| c.dir.join("cgroup.procs")),
            dir,
        };
        m.launch();
        m
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("sock")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Starts the server on its data directory (again, after [`Mariadbd::kill`]) and waits until
    /// it answers.
    pub fn launch(&mut self) {
        assert!(self.child.is_none(), "already running");
        let d = self.dir.path();
        let mut command = match &self.cgroup {
            // The shell joins the cgroup, then becomes the server (same pid).
            Some(procs) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(r#"echo $$ > "$0" && exec "$@""#)
                    .arg(procs)
                    .arg(MARIADBD);
                c
            }
            None => Command::new(MARIADBD),
        };
        let child = command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", d.join("data").display()))
            .arg(format!("--tmpdir={}", d.join("tmp").display()))
            .arg(format!("--socket={}", d.join("sock").display()))
            .arg(format!("--pid-file={}", d.join("pid").display()))
            .arg(format!("--log-error={}", d.join("err.log").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--innodb-buffer-pool-size={}", self.pool))
            .args([
                "--user=root",
                "--skip-networking=0",
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-log-file-size=256M",
                "--innodb-buffer-pool-load-at-startup=0",
                "--innodb-buffer-pool-dump-at-shutdown=0",
            ])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            if self.root().is_ok() {
                return;
            }
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("mariadbd exited ({s}): {}", self.log_tail());
            }
            assert!(
                Instant::now() < until,
                "mariadbd did not answer in 120 s: {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of the server's error log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("err.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Root, through the socket.
    pub fn root(&self) -> Result<Conn, mysql::Error> {
        Conn::new(
            OptsBuilder::new()
                .socket(Some(self.socket().to_string_lossy().into_owned()))
                .user(Some("root"))
                .read_timeout(Some(Duration::from_secs(120))),
        )
    }

    /// A user allowed to resize the buffer pool, from loopback and the socket.
    pub fn add_user(&self, user: &str, password: &str) {
        let mut c = self.root().unwrap();
        for host in ["localhost", "127.0.0.1"] {
            c.query_drop(format!(
                "CREATE USER '{user}'@'{host}' IDENTIFIED BY '{password}'"
            ))
            .unwrap();
            c.query_drop(format!("GRANT SUPER ON *.* TO '{user}'@'{host}'"))
                .unwrap();
        }
    }

    /// A table `d.t` of `rows` rows of 1 KiB of random bytes (about 1.15 KiB each in InnoDB's
    /// pages), then read whole so its pages are in the buffer pool.
    pub fn fill(&self, rows: u64) {
        let mut c = self.root().unwrap();
        c.query_drop("CREATE DATABASE d").unwrap();
        c.query_drop("CREATE TABLE d.t (id INT PRIMARY KEY, pad VARBINARY(1024)) ENGINE=InnoDB")
            .unwrap();
        // The sequence engine makes the rows in one statement.
        c.query_drop(format!(
            "INSERT INTO d.t SELECT seq, RANDOM_BYTES(1024) FROM d.seq_1_to_{rows}"
        ))
        .unwrap();
        self.warm();
    }

    /// Reads the table whole.
    pub fn warm(&self) {
        let n: Option<u64> = self
            .root()
            .unwrap()
            .query_first("SELECT SUM(LENGTH(pad)) FROM d.t")
            .unwrap();
        assert!(n.is_some_and(|n| n > 0));
    }

    /// A global status or variable as a number.
    pub fn figure(&self, query: &str) -> u64 {
        let mut c = self.root().unwrap();
        if query.starts_with("SHOW") {
            let row: Option<(String, u64)> = c.query_first(query).unwrap();
            row.unwrap_or_else(|| panic!("{query}: no row")).1
        } else {
            c.query_first(query).unwrap().unwrap()
        }
    }

    /// Sends a signal (`STOP`, `CONT`) to the server.
    pub fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name}");
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Mariadbd {
    fn drop(&mut self) {
        self.kill();
    }
}
