//! The pure crates' clippy.toml refuses what it says: a tiny crate under the same clippy.toml,
//! with one forbidden use of each family (files, environment, processes, sockets, the console,
//! clocks, randomness), fails `cargo clippy -D warnings` with the lint named at every one of
//! them; the same crate without them passes.

use memtide_testkit::{repo, skip_or_fail};
use std::path::Path;
use std::process::Command;

/// One forbidden use per family: (what it is, a function body using it).
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs::metadata", "std::fs::metadata(\"/\").is_ok()"),
    ("std::fs::remove_dir", "std::fs::remove_dir(\"/x\").is_ok()"),
    (
        "std::fs::File",
        "{ let f: Option<std::fs::File> = None; f.is_some() }",
    ),
    ("std::env::current_dir", "std::env::current_dir().is_ok()"),
    (
        "std::process::exit",
        "{ if false { std::process::exit(2) } true }",
    ),
    (
        "std::process::Command",
        "{ let c: Option<std::process::Command> = None; c.is_some() }",
    ),
    (
        "std::net::TcpStream",
        "{ let s: Option<std::net::TcpStream> = None; s.is_some() }",
    ),
    ("std::io::stdin", "{ let _ = std::io::stdin(); true }"),
    (
        "std::time::Instant::now",
        "{ let _ = std::time::Instant::now(); true }",
    ),
    (
        "std::hash::RandomState",
        "{ let r: Option<std::hash::RandomState> = None; r.is_some() }",
    ),
];

/// Runs clippy on a crate in `dir` with `lib` as its lib.rs and the pure crates' clippy.toml;
/// (success, output).
fn clippy(dir: &Path, lib: &str) -> (bool, String) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"purity-proof\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::copy(
        repo().join("crates/model/clippy.toml"),
        dir.join("clippy.toml"),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["clippy", "--quiet", "--offline", "--", "-D", "warnings"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo clippy");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn clippy_refuses_every_forbidden_family_in_the_pure_crates() {
    let test = "clippy_refuses_every_forbidden_family_in_the_pure_crates";
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if !Command::new(&cargo)
        .args(["clippy", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        skip_or_fail(
            test,
            "cargo clippy is not installed (rustup component add clippy)",
        );
        return;
    }
    for krate in ["policy", "controller"] {
        assert_eq!(
            std::fs::read_to_string(repo().join(format!("crates/{krate}/clippy.toml"))).unwrap(),
            std::fs::read_to_string(repo().join("crates/model/clippy.toml")).unwrap(),
            "crates/{krate}/clippy.toml is model's"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();

    let clean: String = FORBIDDEN
        .iter()
        .enumerate()
        .map(|(i, _)| format!("pub fn f{i}() -> bool {{ true }}\n"))
        .collect();
    let (ok, out) = clippy(&tmp.join("clean"), &clean);
    assert!(ok, "the crate without forbidden uses passes clippy:\n{out}");

    // One function a line: line i + 1 holds the use of FORBIDDEN[i].
    let lib: String = FORBIDDEN
        .iter()
        .enumerate()
        .map(|(i, (_, body))| format!("pub fn f{i}() -> bool {{ {body} }}\n"))
        .collect();
    let (ok, out) = clippy(&tmp.join("dirty"), &lib);
    assert!(!ok, "clippy passed a crate with forbidden uses:\n{out}");
    for (i, (what, _)) in FORBIDDEN.iter().enumerate() {
        let at = format!("src/lib.rs:{}:", i + 1);
        let refused = out
            .split("\nerror")
            .any(|e| e.contains(&at) && e.contains("use of a disallowed"));
        assert!(refused, "clippy did not refuse {what} at {at}:\n{out}");
    }
    for lint in ["clippy::disallowed-methods", "clippy::disallowed-types"] {
        assert!(out.contains(lint), "clippy did not name {lint}:\n{out}");
    }
}
