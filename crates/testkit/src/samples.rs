//! The SDKs' sample pools (Rust, Go, Python, Java, C), built and started one way for every test that runs them against memtide: their toolchains (a missing one skips, or fails under `MEMTIDE_REQUIRE_LINUX=1`), their builds, their command lines.

use crate::{repo, skip_or_fail};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `PATH` with the places toolchains are installed outside Debian's (Go's tarball).
pub fn path_env() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{path}:/usr/local/go/bin")
}

/// Whether `tool` runs; when it does not, a skip or (under `MEMTIDE_REQUIRE_LINUX=1`) a
/// failure of `test`.
pub fn have(test: &str, tool: &str) -> bool {
    // `go` has no `--version`: it asks `go version`.
    let ok = Command::new(tool)
        .arg(if tool == "go" { "version" } else { "--version" })
        .env("PATH", path_env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip_or_fail(test, &format!("`{tool}` is not installed"));
    }
    ok
}

/// Builds the workspace's binaries and examples in release (memtide runs the ones beside its
/// own binary: the adapter, the density benchmark's load generator; the Rust SDK's sample is
/// an example), once per test process.
///
/// It builds them as `cargo test --workspace --release` does: over the whole workspace with
/// its dev-dependencies (`--examples` brings them in), so the features every dependency is
/// compiled with are the test build's. Under the README's test command everything is then
/// fresh and this takes a second. A per-package build (`cargo build -p memtide-adapter`)
/// unifies features over that package alone: it compiled serde, mio, mysql and the memtide
/// crates the adapter uses again (51 s of CPU, 2 min of a busy 2-core machine) and put that
/// variant of the binary in the place of the tests' own.
pub fn build_binaries() {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        run(
            "cargo build --workspace --bins --examples",
            Command::new(cargo).args(["build", "--release", "--workspace", "--bins", "--examples"]),
        );
    });
}

/// Runs a command in the repository, failing with its output if it fails.
pub fn run(what: &str, cmd: &mut Command) {
    let out = cmd
        .current_dir(repo())
        .env("PATH", path_env())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One SDK's sample pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Sdk {
    Rust,
    Go,
    Python,
    Java,
    C,
}

pub const ALL: [Sdk; 5] = [Sdk::Rust, Sdk::Go, Sdk::Python, Sdk::Java, Sdk::C];

/// A built sample: its command line up to its pool flags, and its environment.
pub struct Sample {
    pub sdk: Sdk,
    argv: Vec<String>,
    env: Vec<(&'static str, String)>,
}

impl Sdk {
    /// The toolchain it needs.
    fn tools(self) -> &'static [&'static str] {
        match self {
            Sdk::Rust => &[],
            Sdk::Go => &["go"],
            Sdk::Python => &["python3"],
            Sdk::Java => &["mvn", "java"],
            Sdk::C => &["make", "cc"],
        }
    }

    /// Builds the sample (`None`, with a skip or failure of `test`, when its toolchain is
    /// missing). Java's and C's builds write the `target/` and `build/` their own tests use:
    /// callers run them one at a time.
    pub fn build(self, test: &str) -> Option<Sample> {
        if !self.tools().iter().all(|t| have(test, t)) {
            return None;
        }
        let s = |v: &str| v.to_string();
        let (argv, env) = match self {
            Sdk::Rust => {
                build_binaries();
                let exe = std::env::var_os("CARGO_TARGET_DIR")
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| repo().join("target"))
                    .join("release/examples/pool");
                let exe = exe.to_string_lossy().into_owned();
                (
                    vec![exe, s("--small-pages"), s("--lookups"), s("0")],
                    vec![],
                )
            }
            Sdk::Go => {
                let exe = std::env::temp_dir().join(format!("balloon-pool-{}", std::process::id()));
                run(
                    "go build",
                    Command::new("go")
                        .args(["-C", "sdk/go", "build", "-o"])
                        .arg(&exe)
                        .arg("./cmd/balloon-pool"),
                );
                (vec![exe.to_string_lossy().into_owned()], vec![])
            }
            Sdk::Python => (
                vec![
                    s("python3"),
                    repo()
                        .join("sdk/python/examples/pool.py")
                        .to_string_lossy()
                        .into_owned(),
                    s("--lookups-per-second"),
                    s("0"),
                ],
                vec![(
                    "PYTHONPATH",
                    repo().join("sdk/python/src").to_string_lossy().into_owned(),
                )],
            ),
            Sdk::Java => {
                run(
                    "mvn compile",
                    Command::new("mvn").args(["-B", "-q", "-f", "sdk/java/pom.xml", "compile"]),
                );
                (
                    vec![
                        s("java"),
                        s("-cp"),
                        repo()
                            .join("sdk/java/target/classes")
                            .to_string_lossy()
                            .into_owned(),
                        s("io.memtide.balloon.sample.PoolSample"),
                    ],
                    // glibc returns each 1 MiB direct buffer to the OS only when it was
                    // mmap'd (sdk/java/README.md, "How honest the release is").
                    vec![("MALLOC_MMAP_THRESHOLD_", s("131072"))],
                )
            }
            Sdk::C => {
                run(
                    "make examples",
                    Command::new("make").args(["-C", "sdk/c", "examples"]),
                );
                (
                    vec![
                        repo()
                            .join("sdk/c/build/pool")
                            .to_string_lossy()
                            .into_owned(),
                        s("--no-huge-pages"),
                    ],
                    vec![],
                )
            }
        };
        Some(Sample {
            sdk: self,
            argv,
            env,
        })
    }
}

impl Sample {
    /// Starts the sample with a pool of `pool` (min `min`, max `max`, 1 MiB granules) talking
    /// to `socket`; with `cgroup_procs`, it joins that cgroup before it allocates. Output is
    /// discarded; the child is the sample itself (the shell that joins the cgroup execs it).
    pub fn start(
        &self,
        sizes: (&str, &str, &str),
        socket: &Path,
        cgroup_procs: Option<&Path>,
    ) -> Running {
        self.start_with(sizes, socket, cgroup_procs, &[])
    }

    /// [`Sample::start`] with `extra` arguments after the others.
    pub fn start_with(
        &self,
        (pool, min, max): (&str, &str, &str),
        socket: &Path,
        cgroup_procs: Option<&Path>,
        extra: &[&str],
    ) -> Running {
        let mut cmd = match cgroup_procs {
            Some(procs) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg("echo $$ > \"$0\" && exec \"$@\"")
                    .arg(procs)
                    .arg(&self.argv[0]);
                c
            }
            None => Command::new(&self.argv[0]),
        };
        cmd.args(&self.argv[1..])
            .args([
                "--pool",
                pool,
                "--min",
                min,
                "--max",
                max,
                "--granule",
                "1M",
                "--socket",
            ])
            .arg(socket)
            .args(extra)
            .current_dir(repo())
            .env("PATH", path_env())
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Running(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("{:?} sample: {e}", self.sdk)),
        )
    }
}

/// A running sample, killed and reaped on drop.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
