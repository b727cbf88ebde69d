//! Command-line parsing for memtide-toucher: sizes, durations, phase specs, and the run plan they make.

use memtide_model::written::{parse_duration, parse_size};
use std::path::PathBuf;

pub const USAGE: &str = "\
usage: memtide-toucher [--active SIZE] [--idle SIZE] [--file PATH --file-size SIZE]
                       [--pause-ms N] [--phase SPEC]... [--exit-after-phases]
                       [--report-every-ms N] [--status-file PATH] [--content KIND]

Allocates memory and touches it in phases, so a memory manager has a real tenant to squeeze.
Each pass writes one word in every page of the active set, then reads --file-size bytes of
--file through the page cache (pread, 1 MiB chunks), then sleeps --pause-ms. The idle set is
written once when a phase needs it and then left alone (allocated, resident, not touched).
Memory is one anonymous mapping: the active set is its start, the idle set follows. A phase
writes pages it newly needs (incompressible, page-distinct data) before its clock starts, and
gives back pages beyond its active+idle.

  --active SIZE          working set, touched every pass (default 0)
  --idle SIZE            allocated after the active set, written once, never touched again (default 0)
  --file PATH            file read every pass; created or extended with non-zero data if short
  --file-size SIZE       bytes of --file read every pass (default 0)
  --pause-ms N           sleep between passes, milliseconds (default 200)
  --phase SPEC           DURATION[:KEY=SIZE,...] with keys active, idle, file; keys left out take
                         --active, --idle, --file-size. Repeatable; phases run in order and the
                         last one runs forever, e.g. --phase \"30s:active=400M,idle=300M,file=0\"
  --exit-after-phases    exit 0 when the last phase's duration is over instead
  --report-every-ms N    print a JSON status line this often, milliseconds (default 1000)
  --status-file PATH     also keep the latest status line in PATH (written atomically)
  --content KIND         what the pages hold: unique (default: every page different,
                         incompressible), zero (pages of zeros, written so they are resident)
                         or seeded:SEED (every page different, but the same pages in every
                         toucher given the same SEED: what page sharing can merge across
                         processes). With zero or seeded a pass reads one word per page
                         instead of writing it, so merged pages stay merged.
  -h, --help             print this help

SIZE is bytes, or a number with K, M, G or T (binary: 400M = 400 MiB, 1.5G, 2GiB).
DURATION is a number with ms, s, m or h (300ms, 1.5s, 2m), in whole milliseconds.
Without --phase there is one endless phase of --active, --idle and --file-size.
SIGTERM or SIGINT ends the run with status 0.";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Help,
    Run(Config),
}

/// One phase: for how long, and how much memory and file it works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// `None`: the phase never ends (the implicit phase, or the last one without
    /// `--exit-after-phases`).
    pub duration_ms: Option<u64>,
    pub active_bytes: u64,
    pub idle_bytes: u64,
    pub file_bytes: u64,
}

/// A validated run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// At least one; only the last may have no duration.
    pub phases: Vec<Phase>,
    /// Exit after the last phase instead of staying in it.
    pub exit_after_phases: bool,
    pub file_path: Option<PathBuf>,
    pub pause_ms: u64,
    pub report_every_ms: u64,
    pub status_file: Option<PathBuf>,
    pub content: Content,
}

/// What the pages hold (`--content`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Content {
    /// Every page different from every other, in this toucher and any other; passes write.
    #[default]
    Unique,
    /// Pages of zeros; passes read.
    Zero,
    /// Page i holds the same bytes in every toucher given the same seed; passes read.
    Seeded(u64),
}

impl Content {
    /// Parses `unique`, `zero` or `seeded:SEED`.
    pub fn parse(text: &str) -> Result<Content, String> {
        match text {
            "unique" => Ok(Content::Unique),
            "zero" => Ok(Content::Zero),
            _ => match text.strip_prefix("seeded:").map(parse_digits) {
                Some(Some(seed)) => Ok(Content::Seeded(seed)),
                _ => Err(format!(
                    "--content: bad value '{text}' (expected unique, zero or seeded:SEED with a \
                     whole number SEED)"
                )),
            },
        }
    }
}

/// A `--phase` as written: keys left out are `None` and take the global values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseSpec {
    pub duration_ms: u64,
    pub active_bytes: Option<u64>,
    pub idle_bytes: Option<u64>,
    pub file_bytes: Option<u64>,
}

/// Parses a size as memtide's config files write it (`400M`, `4k`, `1.5G`, `2GiB`, plain bytes;
/// binary units), with the value named in the error.
pub fn parse_size_bytes(text: &str) -> Result<u64, String> {
    parse_size(text).map_err(|why| format!("bad size '{text}': it {why}"))
}

/// Parses a duration as memtide's config files write it (`300ms`, `30s`, `1.5s`, `2m`) into
/// whole milliseconds, more than zero.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let d = parse_duration(text).map_err(|why| format!("bad duration '{text}': it {why}"))?;
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "bad duration '{text}': it is finer than a millisecond"
        ));
    }
    match u64::try_from(d.as_millis()) {
        Ok(0) => Err(format!("bad duration '{text}' (must be more than zero)")),
        Ok(ms) => Ok(ms),
        Err(_) => Err(format!("bad duration '{text}': it is too long")),
    }
}

/// A non-empty run of ASCII digits that fits in a u64.
fn parse_digits(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses `DURATION[:KEY=SIZE,...]`, keys `active`, `idle`, `file`, each at most once.
pub fn parse_phase(spec: &str) -> Result<PhaseSpec, String> {
    let fail = |why: String| format!("--phase '{spec}': {why}");
    let (duration_text, settings) = match spec.split_once(':') {
        Some((d, s)) => (d, Some(s)),
        None => (spec, None),
    };
    let mut phase = PhaseSpec {
        duration_ms: parse_duration_ms(duration_text).map_err(fail)?,
        active_bytes: None,
        idle_bytes: None,
        file_bytes: None,
    };
    for setting in settings.into_iter().flat_map(|s| s.split(',')) {
        let Some((key, value)) = setting.split_once('=') else {
            return Err(fail(format!(
                "bad setting '{setting}' (expected KEY=SIZE with KEY active, idle or file)"
            )));
        };
        let slot = match key.trim() {
            "active" => &mut phase.active_bytes,
            "idle" => &mut phase.idle_bytes,
            "file" => &mut phase.file_bytes,
            other => {
                return Err(fail(format!(
                    "unknown key '{other}' (expected active, idle or file)"
                )))
            }
        };
        if slot.is_some() {
            return Err(fail(format!("key '{}' given twice", key.trim())));
        }
        let bytes = parse_size_bytes(value.trim()).map_err(|why| fail(format!("{key}: {why}")))?;
        *slot = Some(bytes);
    }
    Ok(phase)
}

/// Parses the arguments after the program name. The error is one line naming the argument
/// and its value.
pub fn parse_args<I>(args: I) -> Result<Command, String>
where
    I: IntoIterator<Item = String>,
{
    let mut active_bytes = 0;
    let mut idle_bytes = 0;
    let mut file_size_bytes: Option<u64> = None;
    let mut file_size_text = String::new();
    let mut file_path: Option<PathBuf> = None;
    let mut pause_ms = 200;
    let mut report_every_ms = 1_000;
    let mut status_file: Option<PathBuf> = None;
    let mut exit_after_phases = false;
    let mut content = Content::default();
    let mut specs: Vec<PhaseSpec> = Vec::new();

    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (name, inline_value) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--exit-after-phases" => {
                if inline_value.is_some() {
                    return Err(format!("{name} takes no value, got '{arg}'"));
                }
                exit_after_phases = true;
                continue;
            }
            _ => {}
        }
        let mut value = || -> Result<String, String> {
            match inline_value.clone().or_else(|| args.next()) {
                Some(v) => Ok(v),
                None => Err(format!("{name} needs a value (see --help)")),
            }
        };
        let size = |v: String| parse_size_bytes(&v).map_err(|why| format!("{name}: {why}"));
        let ms = |v: String| {
            parse_digits(&v).ok_or_else(|| format!("{name}: bad number '{v}' (whole milliseconds)"))
        };
        match name.as_str() {
            "--active" => active_bytes = size(value()?)?,
            "--idle" => idle_bytes = size(value()?)?,
            "--file-size" => {
                file_size_text = value()?;
                file_size_bytes = Some(size(file_size_text.clone())?);
            }
            "--file" => file_path = Some(non_empty_path(&name, value()?)?),
            "--status-file" => status_file = Some(non_empty_path(&name, value()?)?),
            "--pause-ms" => pause_ms = ms(value()?)?,
            "--report-every-ms" => {
                let v = value()?;
                report_every_ms = ms(v.clone())?;
                if report_every_ms == 0 {
                    return Err(format!("{name}: bad number '{v}' (must be more than zero)"));
                }
            }
            "--phase" => specs.push(parse_phase(&value()?)?),
            "--content" => content = Content::parse(&value()?)?,
            _ => return Err(format!("unknown argument '{arg}' (see --help)")),
        }
    }

    let file_default = file_size_bytes.unwrap_or(0);
    let phases: Vec<Phase> = if specs.is_empty() {
        if exit_after_phases {
            return Err("--exit-after-phases needs at least one --phase".to_string());
        }
        vec![Phase {
            duration_ms: None,
            active_bytes,
            idle_bytes,
            file_bytes: file_default,
        }]
    } else {
        let last = specs.len() - 1;
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| Phase {
                duration_ms: (i < last || exit_after_phases).then_some(s.duration_ms),
                active_bytes: s.active_bytes.unwrap_or(active_bytes),
                idle_bytes: s.idle_bytes.unwrap_or(idle_bytes),
                file_bytes: s.file_bytes.unwrap_or(file_default),
            })
            .collect()
    };

    if file_path.is_none() {
        if file_size_bytes.is_some() {
            return Err(format!("--file-size {file_size_text} needs --file PATH"));
        }
        if let Some(i) = specs.iter().position(|s| s.file_bytes.unwrap_or(0) > 0) {
            return Err(format!(
                "--phase number {} reads file={} bytes but no --file PATH was given",
                i + 1,
                phases[i].file_bytes
            ));
        }
    }
    Ok(Command::Run(Config {
        phases,
        exit_after_phases,
        file_path,
        pause_ms,
        report_every_ms,
        status_file,
        content,
    }))
}

fn non_empty_path(name: &str, value: String) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(format!("{name}: empty path"));
    }
    Ok(PathBuf::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn run(args: &[&str]) -> Result<Config, String> {
        match parse_args(args.iter().map(|s| s.to_string()))? {
            Command::Run(c) => Ok(c),
            Command::Help => panic!("help for {args:?}"),
        }
    }

    #[test]
    fn sizes_accept_bytes_and_binary_suffixes() {
        let table: &[(&str, u64)] = &[
            ("0", 0),
            ("4096", 4096),
            ("1K", 1 << 10),
            ("4k", 4 << 10),
            ("400M", 400 * MIB),
            ("2m", 2 * MIB),
            ("1G", 1 << 30),
            ("3g", 3 << 30),
            ("1.5G", 1536 * MIB),
            ("2GiB", 2 << 30),
        ];
        for &(text, bytes) in table {
            assert_eq!(parse_size_bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn bad_sizes_name_the_value() {
        for text in [
            "",
            "M",
            "12X",
            "-1",
            "0.1K",
            " 4M",
            "4MB",
            "99999999999999999999",
            "17179869184G",
        ] {
            let err = parse_size_bytes(text).expect_err(text);
            assert!(err.contains(&format!("'{text}'")), "{text}: {err}");
        }
    }

    #[test]
    fn durations_accept_ms_s_and_m() {
        let table: &[(&str, u64)] = &[
            ("1ms", 1),
            ("300ms", 300),
            ("30s", 30_000),
            ("1.5s", 1_500),
            ("2m", 120_000),
            ("1h", 3_600_000),
        ];
        for &(text, ms) in table {
            assert_eq!(parse_duration_ms(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn bad_durations_name_the_value() {
        for text in [
            "", "30", "s", "ms", "1d", "0.5ms", "-3s", "0s", "0ms", " 10s",
        ] {
            let err = parse_duration_ms(text).expect_err(text);
            assert!(err.contains(&format!("'{text}'")), "{text}: {err}");
        }
    }

    #[test]
    fn phase_specs_parse_keys_and_leave_missing_ones_open() {
        assert_eq!(
            parse_phase("30s:active=400M,idle=300M,file=0"),
            Ok(PhaseSpec {
                duration_ms: 30_000,
                active_bytes: Some(400 * MIB),
                idle_bytes: Some(300 * MIB),
                file_bytes: Some(0),
            })
        );
        assert_eq!(
            parse_phase("300ms:idle=4K"),
            Ok(PhaseSpec {
                duration_ms: 300,
                active_bytes: None,
                idle_bytes: Some(4096),
                file_bytes: None,
            })
        );
        assert_eq!(
            parse_phase("2m"),
            Ok(PhaseSpec {
                duration_ms: 120_000,
                active_bytes: None,
                idle_bytes: None,
                file_bytes: None,
            })
        );
    }

    #[test]
    fn bad_phase_specs_name_the_spec_and_the_bad_part() {
        let table: &[(&str, &str)] = &[
            ("30:active=1M", "'30'"),
            ("30s:active=1Q", "'1Q'"),
            ("30s:hot=1M", "'hot'"),
            ("30s:active", "'active'"),
            ("30s:active=1M,active=2M", "'active'"),
            ("30s:active=1M,", "''"),
            (":active=1M", "''"),
        ];
        for &(spec, part) in table {
            let err = parse_phase(spec).expect_err(spec);
            assert!(err.contains(&format!("'{spec}'")), "{spec}: {err}");
            assert!(err.contains(part), "{spec}: {err} lacks {part}");
            assert!(!err.contains('\n'), "{spec}: {err}");
        }
    }

    #[test]
    fn without_phases_there_is_one_endless_phase_of_the_globals() {
        let c = run(&[
            "--active",
            "8M",
            "--idle=4M",
            "--file",
            "/tmp/x",
            "--file-size",
            "2M",
        ])
        .unwrap();
        assert_eq!(
            c.phases,
            vec![Phase {
                duration_ms: None,
                active_bytes: 8 * MIB,
                idle_bytes: 4 * MIB,
                file_bytes: 2 * MIB,
            }]
        );
        assert_eq!((c.pause_ms, c.report_every_ms), (200, 1_000));
    }

    #[test]
    fn phases_inherit_globals_and_only_the_last_is_endless_unless_told_to_exit() {
        let args = [
            "--active",
            "8M",
            "--phase",
            "1s:idle=1M",
            "--phase",
            "2s:active=1M",
        ];
        let c = run(&args).unwrap();
        assert_eq!(c.phases[0].duration_ms, Some(1_000));
        assert_eq!(c.phases[0].active_bytes, 8 * MIB);
        assert_eq!(c.phases[0].idle_bytes, MIB);
        assert_eq!(c.phases[1].duration_ms, None);
        assert_eq!(c.phases[1].active_bytes, MIB);
        assert_eq!(c.phases[1].idle_bytes, 0);

        let mut exiting = args.to_vec();
        exiting.push("--exit-after-phases");
        let c = run(&exiting).unwrap();
        assert_eq!(c.phases[1].duration_ms, Some(2_000));
        assert!(c.exit_after_phases);
    }

    #[test]
    fn bad_arguments_give_one_line_naming_argument_and_value() {
        let table: &[(&[&str], &[&str])] = &[
            (&["--active", "12X"], &["--active", "'12X'"]),
            (&["--idle"], &["--idle"]),
            (&["--pause-ms", "fast"], &["--pause-ms", "'fast'"]),
            (&["--report-every-ms", "0"], &["--report-every-ms", "'0'"]),
            (&["--frobnicate"], &["'--frobnicate'"]),
            (&["--file-size", "2M"], &["--file-size 2M", "--file"]),
            (
                &["--phase", "1s:file=1M"],
                &["--phase number 1", "file=1048576", "--file"],
            ),
            (
                &["--exit-after-phases"],
                &["--exit-after-phases", "--phase"],
            ),
            (&["--exit-after-phases=yes"], &["'--exit-after-phases=yes'"]),
            (&["--phase", "1s:active=x"], &["'1s:active=x'", "'x'"]),
        ];
        for &(args, words) in table {
            let err = run(args).expect_err(&format!("{args:?}"));
            for w in words {
                assert!(err.contains(w), "{args:?}: {err} lacks {w}");
            }
            assert!(!err.contains('\n'), "{args:?}: {err}");
        }
    }

    #[test]
    fn help_is_recognised_anywhere() {
        let args = ["--active", "1M", "-h"].map(String::from);
        assert_eq!(parse_args(args), Ok(Command::Help));
    }
}
