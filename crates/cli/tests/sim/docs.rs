//! The docs' commands run: every command of each fenced block marked ```` ```sh runnable ```` in README.md and docs/*.md runs in a fresh clone of HEAD, the release binaries on PATH and the build's own target directory shared, and a failure names the block's file:line, the command and its stderr (CONTRIBUTING.md, "Docs").

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// The word after a block's language that marks it runnable.
const MARKER: &str = "runnable";
/// The languages a runnable block may have.
const SHELLS: [&str; 2] = ["sh", "bash"];
/// How long one command may run before it counts as hung and is killed. A guard against a
/// command that never ends, not a speed check: the whole check took 27 s here.
const HUNG_AFTER: Duration = Duration::from_secs(120);
/// How much of a failed command's stderr the failure shows (its end).
const STDERR_SHOWN: usize = 4000;

/// A runnable block: where it opens, and its commands.
#[derive(Debug, PartialEq)]
struct Block {
    file: String,
    line: usize,
    commands: Vec<Cmd>,
}

/// One command: the line it starts on, and its text (continuation lines joined).
#[derive(Debug, PartialEq)]
struct Cmd {
    line: usize,
    text: String,
}

/// The runnable blocks of one Markdown file, or a block marked wrongly (file:line and why).
fn runnable_blocks(file: &str, text: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((line, l)) = lines.next() {
        let Some(info) = l.trim_start().strip_prefix("```") else {
            continue;
        };
        let words: Vec<&str> = info.split_whitespace().collect();
        let marked = words.contains(&MARKER);
        if marked && !(words.len() == 2 && SHELLS.contains(&words[0]) && words[1] == MARKER) {
            return Err(format!(
                "{file}:{line}: a runnable block opens with ```sh {MARKER} (or bash), not ```{info}"
            ));
        }
        let mut commands: Vec<Cmd> = Vec::new();
        let mut open: Option<Cmd> = None;
        let mut closed = false;
        for (n, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            if !marked {
                continue;
            }
            let (part, continues) = match l.trim_end().strip_suffix('\\') {
                Some(p) => (p, true),
                None => (l.trim_end(), false),
            };
            match &mut open {
                Some(cmd) => {
                    cmd.text.push(' ');
                    cmd.text.push_str(part.trim());
                }
                None if part.trim().is_empty() || part.trim_start().starts_with('#') => continue,
                None => {
                    open = Some(Cmd {
                        line: n,
                        text: part.trim().to_string(),
                    })
                }
            }
            if !continues {
                commands.extend(open.take());
            }
        }
        if !closed {
            return Err(format!("{file}:{line}: the block is never closed"));
        }
        if !marked {
            continue;
        }
        if let Some(cmd) = open {
            return Err(format!(
                "{file}:{}: the command's last line ends with \\",
                cmd.line
            ));
        }
        if let Some(cmd) = commands
            .iter()
            .find(|c| c.text.split_whitespace().any(|w| w == "sudo"))
        {
            return Err(format!(
                "{file}:{}: a runnable command needs no root: `{}`",
                cmd.line, cmd.text
            ));
        }
        if commands.is_empty() {
            return Err(format!("{file}:{line}: a runnable block without a command"));
        }
        blocks.push(Block {
            file: file.to_string(),
            line,
            commands,
        });
    }
    Ok(blocks)
}

/// README.md and docs/*.md at `repo`'s HEAD, by their paths, in order.
fn markdown_files(repo: &Path) -> Vec<String> {
    let docs = git(repo, &["ls-tree", "--name-only", "HEAD", "docs/"]);
    let mut files = vec!["README.md".to_string()];
    files.extend(
        docs.lines()
            .filter(|f| f.ends_with(".md"))
            .map(str::to_string),
    );
    files
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A fresh clone of `repo`'s HEAD commit in `into`, its files dated 2000-01-01: cargo takes
/// a source newer than its last build for a change, so a clone's new files would have
/// `cargo run` rebuild everything into the shared target directory; dated before any build
/// they leave it fresh, and the binaries already built run.
fn clone_head(repo: &Path, into: &Path) {
    let head = git(repo, &["rev-parse", "HEAD"]);
    let out = Command::new("git")
        .args(["clone", "--quiet", "--no-checkout"])
        .arg(repo)
        .arg(into)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git clone {}: {}",
        repo.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    git(into, &["checkout", "--quiet", "--detach", head.trim()]);
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(946_684_800);
    for path in git(into, &["ls-files", "-z"]).split('\0') {
        let path = into.join(path);
        if path.is_symlink() || !path.is_file() {
            continue;
        }
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(old))
            .unwrap_or_else(|e| panic!("dating {}: {e}", path.display()));
    }
}

/// Runs `cmd` with bash in `dir`, `bin` first on PATH and cargo's target directory `target`;
/// `Err` says how it failed, with the end of its stderr.
fn run(cmd: &Cmd, dir: &Path, bin: &Path, target: &Path) -> Result<(), String> {
    let logs = tempfile::tempdir().unwrap();
    let (out, err) = (logs.path().join("out"), logs.path().join("err"));
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut child = Command::new("bash")
        .args(["-o", "pipefail", "-c", &cmd.text])
        .current_dir(dir)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", target)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() >= HUNG_AFTER {
            // SAFETY: kill(2) has no memory-safety preconditions; the group is the child's.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let mut from = stderr.len().saturating_sub(STDERR_SHOWN);
    while !stderr.is_char_boundary(from) {
        from += 1;
    }
    let tail = &stderr[from..];
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!("exited with {s}; its stderr ends:\n{tail}")),
        None => Err(format!(
            "still running after {HUNG_AFTER:?}, killed; its stderr ends:\n{tail}"
        )),
    }
}

#[test]
fn every_runnable_command_in_the_docs_runs_in_a_fresh_clone() {
    let _gate = memtide_testkit::file_gate(module_path!());
    let bin = Path::new(env!("CARGO_BIN_EXE_memtide")).parent().unwrap();
    if bin.file_name().is_none_or(|d| d != "release") {
        memtide_testkit::skip_or_fail(
            "every_runnable_command_in_the_docs_runs_in_a_fresh_clone",
            "the docs' commands use the release build: run with --release",
        );
        return;
    }
    let target = bin.parent().unwrap();
    let repo = memtide_testkit::repo().canonicalize().unwrap();
    let mut blocks = Vec::new();
    // The docs as committed: what the clones hold.
    for file in markdown_files(&repo) {
        let text = git(&repo, &["show", &format!("HEAD:{file}")]);
        blocks.extend(runnable_blocks(&file, &text).unwrap_or_else(|e| panic!("{e}")));
    }
    assert!(
        blocks.iter().any(|b| b.file == "README.md"),
        "README.md's quick start has no ```sh {MARKER} block"
    );
    let mut failed = Vec::new();
    let all = Instant::now();
    for block in &blocks {
        let clone = tempfile::tempdir().unwrap();
        clone_head(&repo, clone.path());
        let started = Instant::now();
        for cmd in &block.commands {
            if let Err(why) = run(cmd, clone.path(), bin, target) {
                failed.push(format!("{}:{}: `{}` {why}", block.file, cmd.line, cmd.text));
                break;
            }
        }
        eprintln!(
            "{}:{}: {} commands in {:.1} s",
            block.file,
            block.line,
            block.commands.len(),
            started.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "{} runnable blocks in {:.1} s",
        blocks.len(),
        all.elapsed().as_secs_f64()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

fn block(line: usize, commands: &[(usize, &str)]) -> Block {
    Block {
        file: "f.md".into(),
        line,
        commands: commands
            .iter()
            .map(|&(line, text)| Cmd {
                line,
                text: text.into(),
            })
            .collect(),
    }
}

#[test]
fn only_blocks_marked_runnable_are_taken_with_their_commands_and_lines() {
    let text = "# T\n\
                ```sh\nnot run\n```\n\
                ```sh runnable\n# a comment\n\nmemtide sim  # the demo\n\
                memtide cache gen --pattern zipf \\\n    --requests 10 --out t.csv\n```\n\
                ```toml\nx = 1\n```\n";
    assert_eq!(
        runnable_blocks("f.md", text).unwrap(),
        vec![block(
            5,
            &[
                (8, "memtide sim  # the demo"),
                (
                    9,
                    "memtide cache gen --pattern zipf --requests 10 --out t.csv"
                ),
            ]
        )]
    );
}

#[test]
fn a_block_marked_wrongly_is_named_by_file_and_line() {
    for (text, says) in [
        (
            "```toml runnable\nx = 1\n```\n",
            "f.md:1: a runnable block opens with",
        ),
        (
            "x\n```sh runnable\nsudo rm -rf /\n```\n",
            "f.md:3: a runnable command needs no root",
        ),
        (
            "```sh runnable\n# nothing\n```\n",
            "f.md:1: a runnable block without a command",
        ),
        (
            "```sh runnable\nls \\\n```\n",
            "f.md:2: the command's last line ends with",
        ),
        ("```sh runnable\nls\n", "f.md:1: the block is never closed"),
    ] {
        let err = runnable_blocks("f.md", text).unwrap_err();
        assert!(err.starts_with(says), "{err}");
    }
}

#[test]
fn a_failing_command_says_its_status_and_the_end_of_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = Cmd {
        line: 1,
        text: "pwd >&2; echo oops >&2; exit 3".into(),
    };
    let err = run(&cmd, dir.path(), dir.path(), dir.path()).unwrap_err();
    assert!(err.starts_with("exited with exit status: 3"), "{err}");
    assert!(err.ends_with("oops\n"), "{err}");
    let here = dir.path().canonicalize().unwrap();
    assert!(
        err.contains(here.to_str().unwrap()),
        "run in the clone: {err}"
    );
    // A pipeline fails with its failing part, not with its last.
    let cmd = Cmd {
        line: 1,
        text: "false | cat".into(),
    };
    assert!(run(&cmd, dir.path(), dir.path(), dir.path()).is_err());
}
