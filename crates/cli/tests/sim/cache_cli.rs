//! `memtide cache mrc` run as a user would: the sample alone, curves by bytes and zstd-compressed traces; what it refuses (an empty trace, a SHARDS rate below its smallest, `--no-exact` with nothing to sample, with one line and exit status 2); and an OS error said once.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `memtide cache mrc TRACE ARGS...`.
fn mrc(trace: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memtide"))
        .args(["cache", "mrc"])
        .arg(trace)
        .args(args)
        .output()
        .unwrap()
}

/// Its standard error, which must be one line, and its exit status.
fn one_line(out: &Output) -> (Option<i32>, String) {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    (out.status.code(), err)
}

/// A small CSV trace in `dir`: a loop over 3 blocks, twice.
fn small(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("loop.csv");
    let text: String = (0..6)
        .map(|i| format!("{i},0,{},4096,r\n", i % 3))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn an_empty_trace_is_refused_with_one_line_exit_2() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    for (name, body) in [
        ("empty.csv", &b""[..]),
        ("header.csv", b"time,tenant,block,size,op\n# nothing\n"),
        ("empty.oracleGeneral", b""),
    ] {
        let trace = dir.path().join(name);
        std::fs::write(&trace, body).unwrap();
        let (code, err) = one_line(&mrc(&trace, &["--out", out_dir.to_str().unwrap()]));
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(name) && err.contains("no requests"),
            "{name}: {err}"
        );
        assert!(!out_dir.exists(), "nothing written");
    }
}

#[test]
fn a_shards_rate_below_its_smallest_names_the_value_and_the_limit() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let trace = small(dir.path());
    let (code, err) = one_line(&mrc(&trace, &["--shards-rate", "1e-300"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--shards-rate 1e-300") && err.contains("2^-24") && err.contains("5.960e-8"),
        "{err}"
    );
    // The smallest rate itself is taken.
    let out = dir.path().join("out");
    let ok = mrc(
        &trace,
        &[
            "--shards-rate",
            "5.9604644775390625e-8",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let (code, err) = one_line(&mrc(&trace, &["--shards-size", "0"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--shards-size 0"), "{err}");
}

#[test]
fn an_os_error_is_said_once() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let trace = small(dir.path());
    // The output directory under a file: writing it fails (exit 1, not the user's input).
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let (code, err) = one_line(&mrc(&trace, &["--out", file.join("out").to_str().unwrap()]));
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
    assert!(
        err.contains("cannot write") && err.contains("a-file"),
        "{err}"
    );
    // A missing trace (exit 2) the same.
    let (code, err) = one_line(&mrc(&dir.path().join("missing.csv"), &[]));
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.matches("os error").count(), 1, "{err}");
    // A trace written where it cannot be is a write, not a read.
    let out = Command::new(env!("CARGO_BIN_EXE_memtide"))
        .args([
            "cache",
            "gen",
            "--pattern",
            "loop",
            "--requests",
            "3",
            "--out",
        ])
        .arg(file.join("t.csv"))
        .output()
        .unwrap();
    let (code, err) = one_line(&out);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cannot write") && err.matches("os error").count() == 1,
        "{err}"
    );
}

#[test]
fn the_sample_alone_and_curves_by_bytes_are_written_and_their_misuse_refused() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let trace = small(dir.path());
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let ok = mrc(&trace, &["--shards-rate", "1", "--no-exact", "--out", o]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let csv = std::fs::read_to_string(out.join("mrc.csv")).unwrap();
    // A loop over 3 blocks: the second pass hits from 3 blocks.
    assert_eq!(
        csv,
        "size_blocks,shards_miss_ratio\n0,1.000000\n1,1.000000\n2,1.000000\n3,0.500000\n"
    );
    let ok = mrc(&trace, &["--by", "bytes", "--points", "4", "--out", o]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let csv = std::fs::read_to_string(out.join("mrc.csv")).unwrap();
    // 4096-byte blocks: the second pass hits from 12288 bytes.
    assert_eq!(
        csv,
        "size_bytes,miss_ratio,byte_miss_ratio\n0,1.000000,1.000000\n4096,1.000000,1.000000\n8192,1.000000,1.000000\n12288,0.500000,0.500000\n"
    );
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(
        stdout.contains("3 distinct objects of 12.0 KiB in all"),
        "{stdout}"
    );
    for (args, says) in [
        (&["--no-exact"][..], "--no-exact without --shards-rate"),
        (
            &["--by", "bytes", "--shards-size", "10"],
            "--shards-size with --by bytes",
        ),
    ] {
        let (code, err) = one_line(&mrc(&trace, args));
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_zstd_compressed_trace_gives_the_curve_of_the_plain_one() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let dir = tempfile::tempdir().unwrap();
    // The same generated trace, plain and compressed as it is written.
    let mut csvs = Vec::new();
    for name in ["z.oracleGeneral", "z.oracleGeneral.zst"] {
        let trace = dir.path().join(name);
        let gen = Command::new(env!("CARGO_BIN_EXE_memtide"))
            .args(["cache", "gen", "--pattern", "zipf", "--requests", "200000"])
            .args(["--blocks", "5000", "--out"])
            .arg(&trace)
            .output()
            .unwrap();
        assert!(
            gen.status.success(),
            "{}",
            String::from_utf8_lossy(&gen.stderr)
        );
        let out = dir.path().join(format!("out-{name}"));
        let run = mrc(&trace, &["--by", "bytes", "--out", out.to_str().unwrap()]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        csvs.push(std::fs::read_to_string(out.join("mrc.csv")).unwrap());
    }
    let plain = std::fs::metadata(dir.path().join("z.oracleGeneral"))
        .unwrap()
        .len();
    let zst = std::fs::metadata(dir.path().join("z.oracleGeneral.zst"))
        .unwrap()
        .len();
    assert!(zst < plain / 2, "compressed: {zst} of {plain} bytes");
    assert_eq!(csvs[0], csvs[1]);
    assert!(csvs[0].lines().count() > 100);
    // Cut short, it is one line naming the file, exit 2.
    let cut = dir.path().join("cut.oracleGeneral.zst");
    let bytes = std::fs::read(dir.path().join("z.oracleGeneral.zst")).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (code, err) = one_line(&mrc(&cut, &[]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cut.oracleGeneral.zst"), "{err}");
}
