//! Test support: the protocol's test vectors (`protocol/vectors/`) loaded as typed values, and a [`Player`] that plays one side of an exchange over any stream.
//!
//! This crate's tests play every `agent/` exchange as memtide against the real [`Agent`]; the
//! daemon's tests play every `memtide/` exchange as an agent against the daemon. The rules are
//! those of docs/balloon-protocol.md, "Test vectors": `send` writes a line, `expect` reads the
//! next line and checks that it holds every key of the object with an equal value, skipping
//! `stats` lines and `progress` lines with status `working` unless the object asks for that
//! type and status, and `expect_closed` waits (at most 5 s) for the end of the stream.
//!
//! [`Agent`]: crate::agent::Agent

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::line::{Line, LineReader};
use crate::protocol::{ErrorCode, PoolInfo, PoolKind};

/// How long `expect_closed` waits for the end of the stream.
pub const CLOSE_WITHIN: Duration = Duration::from_secs(5);

/// Which way a line of `messages.json` travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ToMemtide,
    ToAgent,
}

/// What a line of `messages.json` decodes to.
#[derive(Clone, Debug, PartialEq)]
pub enum Expected {
    /// The message, as its JSON fields.
    Valid(Value),
    /// The code a reader answers with.
    Invalid(ErrorCode),
}

/// One line of `messages.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageVector {
    pub name: String,
    pub direction: Direction,
    /// The line without its newline.
    pub line: String,
    pub expected: Expected,
}

/// How an `agent/` exchange's application answers targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// The callbacks resize the pool to the target and succeed.
    Comply,
    /// They fail with a reason and leave the pool as it is.
    Refuse,
}

/// One step of an exchange.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Write this line and its newline.
    Send(String),
    /// The next line read (past skipped ones) holds every key of this object with an equal
    /// value.
    Expect(Map<String, Value>),
    /// The peer closes the connection within [`CLOSE_WITHIN`].
    ExpectClosed,
}

/// One exchange file.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    pub name: String,
    pub description: String,
    /// The application's pool at the start (`agent/` exchanges).
    pub pool: Option<PoolInfo>,
    /// How the application behaves (`agent/` exchanges).
    pub app: Option<App>,
    pub steps: Vec<Step>,
}

/// A vector file that cannot be loaded; the message names the file.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },

    #[error("{} is not a vector file: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },

    #[error("{}: {what}", path.display())]
    Invalid { path: PathBuf, what: String },
}

/// Loads `messages.json`.
pub fn load_messages(path: &Path) -> Result<Vec<MessageVector>, VectorError> {
    #[derive(Deserialize)]
    struct File {
        vectors: Vec<Raw>,
    }
    #[derive(Deserialize)]
    struct Raw {
        name: String,
        direction: String,
        line: String,
        valid: bool,
        message: Option<Value>,
        error: Option<String>,
    }
    let file: File = read_json(path)?;
    let invalid = |name: &str, what: &str| VectorError::Invalid {
        path: path.to_path_buf(),
        what: format!("vector {name:?} {what}"),
    };
    file.vectors
        .into_iter()
        .map(|raw| {
            let direction = match raw.direction.as_str() {
                "to_memtide" => Direction::ToMemtide,
                "to_agent" => Direction::ToAgent,
                other => return Err(invalid(&raw.name, &format!("has direction {other:?}"))),
            };
            let expected = match (raw.valid, raw.message, raw.error) {
                (true, Some(message), None) => Expected::Valid(message),
                (false, None, Some(code)) => Expected::Invalid(
                    ErrorCode::from_wire(&code)
                        .ok_or_else(|| invalid(&raw.name, &format!("has error {code:?}")))?,
                ),
                _ => {
                    return Err(invalid(
                        &raw.name,
                        "needs a message if valid, else an error",
                    ))
                }
            };
            Ok(MessageVector {
                name: raw.name,
                direction,
                line: raw.line,
                expected,
            })
        })
        .collect()
}

/// Loads every `*.json` exchange in `dir`, by file name.
pub fn load_exchanges(dir: &Path) -> Result<Vec<Exchange>, VectorError> {
    let read_error = |source| VectorError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).map_err(read_error)? {
        let path = entry.map_err(read_error)?.path();
        if path.extension().is_some_and(|ext| ext == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    paths.iter().map(|path| load_exchange(path)).collect()
}

/// Loads one exchange file.
pub fn load_exchange(path: &Path) -> Result<Exchange, VectorError> {
    #[derive(Deserialize)]
    struct Raw {
        name: String,
        description: String,
        pool: Option<RawPool>,
        app: Option<String>,
        steps: Vec<Map<String, Value>>,
    }
    #[derive(Deserialize)]
    struct RawPool {
        app: String,
        kind: String,
        pool_bytes: u64,
        min_bytes: u64,
        max_bytes: u64,
        granule_bytes: u64,
    }
    let raw: Raw = read_json(path)?;
    let invalid = |what: String| VectorError::Invalid {
        path: path.to_path_buf(),
        what,
    };
    let pool = match raw.pool {
        Some(pool) => Some(PoolInfo {
            kind: PoolKind::from_wire(&pool.kind)
                .ok_or_else(|| invalid(format!("pool.kind {:?} is no kind", pool.kind)))?,
            app: pool.app,
            pool_bytes: pool.pool_bytes,
            min_bytes: pool.min_bytes,
            max_bytes: pool.max_bytes,
            granule_bytes: pool.granule_bytes,
        }),
        None => None,
    };
    let app = match raw.app.as_deref() {
        None => None,
        Some("comply") => Some(App::Comply),
        Some("refuse") => Some(App::Refuse),
        Some(other) => {
            return Err(invalid(format!(
                "app {other:?} is neither comply nor refuse"
            )))
        }
    };
    let steps = raw
        .steps
        .into_iter()
        .enumerate()
        .map(|(index, step)| {
            let mut entries = step.into_iter();
            match (entries.next(), entries.next()) {
                (Some((key, Value::String(line))), None) if key == "send" => Ok(Step::Send(line)),
                (Some((key, Value::Object(object))), None) if key == "expect" => {
                    Ok(Step::Expect(object))
                }
                (Some((key, Value::Bool(true))), None) if key == "expect_closed" => {
                    Ok(Step::ExpectClosed)
                }
                _ => Err(invalid(format!(
                    "step {} is not one send, expect or expect_closed",
                    index + 1
                ))),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok(Exchange {
        name: raw.name,
        description: raw.description,
        pool,
        app,
        steps,
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, VectorError> {
    let text = fs::read_to_string(path).map_err(|source| VectorError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| VectorError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// A step that did not go as the exchange says; `step` counts from 1.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error("step {step}: expected {expected}, got {got}")]
    Mismatch {
        step: usize,
        expected: String,
        got: String,
    },

    #[error("step {step}: expected {expected}, but the connection closed")]
    Closed { step: usize, expected: String },

    #[error("step {step}: {what}: {source}")]
    Io {
        step: usize,
        what: &'static str,
        source: io::Error,
    },
}

/// Plays one side of exchanges over a stream: memtide against an agent, or an agent against
/// memtide (with `{{pid}}` written as this process's id in sent lines, and `{{tenant}}` in
/// expected values standing for the tenant given).
///
/// Reads block as the stream does: give it a read timeout (`UnixStream::set_read_timeout`),
/// or a peer that says nothing hangs the player.
pub struct Player<S> {
    lines: LineReader<S>,
    tenant: Option<String>,
    step: usize,
}

impl<S: Read + Write> Player<S> {
    /// Plays memtide.
    pub fn memtide(stream: S) -> Player<S> {
        Player {
            lines: LineReader::new(stream),
            tenant: None,
            step: 0,
        }
    }

    /// Plays an agent whose process the test placed in `tenant`.
    pub fn agent(stream: S, tenant: &str) -> Player<S> {
        Player {
            tenant: Some(tenant.to_string()),
            ..Player::memtide(stream)
        }
    }

    /// Runs the steps in order; the first that fails ends the play.
    pub fn play(&mut self, steps: &[Step]) -> Result<(), PlayError> {
        steps.iter().try_for_each(|step| self.run(step))
    }

    /// Runs one step; steps are numbered across calls.
    pub fn run(&mut self, step: &Step) -> Result<(), PlayError> {
        self.step += 1;
        match step {
            Step::Send(line) => self.send(line),
            Step::Expect(object) => self.expect(object),
            Step::ExpectClosed => self.expect_closed(),
        }
    }

    /// The stream, to shut it down or set its options.
    pub fn stream(&mut self) -> &mut S {
        self.lines.get_mut()
    }

    fn send(&mut self, line: &str) -> Result<(), PlayError> {
        let mut line = if self.tenant.is_some() {
            line.replace("{{pid}}", &std::process::id().to_string())
        } else {
            line.to_string()
        };
        line.push('\n');
        let step = self.step;
        self.lines
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(|source| PlayError::Io {
                step,
                what: "cannot write the line",
                source,
            })
    }

    fn expect(&mut self, object: &Map<String, Value>) -> Result<(), PlayError> {
        let object = match &self.tenant {
            Some(tenant) => substitute(object, tenant),
            None => object.clone(),
        };
        let expected = Value::Object(object.clone()).to_string();
        loop {
            let Some(line) = self.next_line()? else {
                return Err(PlayError::Closed {
                    step: self.step,
                    expected,
                });
            };
            let got = shown(&line);
            let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(&line) else {
                return Err(self.mismatch(expected, got));
            };
            if skipped(&message, &object) {
                continue;
            }
            if object
                .iter()
                .all(|(key, value)| message.get(key) == Some(value))
            {
                return Ok(());
            }
            return Err(self.mismatch(expected, got));
        }
    }

    fn expect_closed(&mut self) -> Result<(), PlayError> {
        let expected = "the connection closed".to_string();
        let since = Instant::now();
        while let Some(line) = self.next_line()? {
            let skip = matches!(
                serde_json::from_slice::<Value>(&line),
                Ok(Value::Object(message)) if skipped(&message, &Map::new())
            );
            if !skip || since.elapsed() > CLOSE_WITHIN {
                return Err(self.mismatch(expected, shown(&line)));
            }
        }
        Ok(())
    }

    /// The next line, `None` at the end of the stream; a line over the limit is a mismatch.
    fn next_line(&mut self) -> Result<Option<Vec<u8>>, PlayError> {
        match self.lines.read_line() {
            Ok(Some(Line::Complete(line))) => Ok(Some(line)),
            Ok(Some(Line::TooLong)) => {
                Err(self.mismatch("a line".into(), "a line over 65,536 bytes".into()))
            }
            Ok(None) => Ok(None),
            Err(source) => Err(PlayError::Io {
                step: self.step,
                what: "no line read",
                source,
            }),
        }
    }

    fn mismatch(&self, expected: String, got: String) -> PlayError {
        PlayError::Mismatch {
            step: self.step,
            expected,
            got,
        }
    }
}

/// Whether an expectation passes over `message`: a `stats`, or a `progress` with status
/// `working`, unless the expectation asks for that type (and, for progress, that status).
fn skipped(message: &Map<String, Value>, expected: &Map<String, Value>) -> bool {
    fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
        object.get(key).and_then(Value::as_str)
    }
    match field(message, "type") {
        Some("stats") => field(expected, "type") != Some("stats"),
        Some("progress") if field(message, "status") == Some("working") => {
            !(field(expected, "type") == Some("progress")
                && field(expected, "status") == Some("working"))
        }
        _ => false,
    }
}

/// The expectation with `{{tenant}}` in its string values replaced by `tenant`.
fn substitute(object: &Map<String, Value>, tenant: &str) -> Map<String, Value> {
    object
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Value::String(text) => Value::String(text.replace("{{tenant}}", tenant)),
                other => other.clone(),
            };
            (key.clone(), value)
        })
        .collect()
}

/// A line as an error message shows it, cut to 200 bytes.
fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    if text.len() <= 200 {
        text.into_owned()
    } else {
        format!("{}...", crate::protocol::truncate_to(&text, 200))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(object) => object,
            _ => unreachable!("the tests pass objects"),
        }
    }

    /// A stream that reads from a fixed input and collects what is written.
    struct Scripted {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn scripted(input: &str) -> Scripted {
        Scripted {
            input: io::Cursor::new(input.as_bytes().to_vec()),
            output: Vec::new(),
        }
    }

    #[test]
    fn an_expectation_skips_stats_and_working_progress_unless_it_asks_for_them() {
        let stats = object(json!({"type": "stats", "pool_bytes": 1}));
        let working = object(json!({"type": "progress", "seq": 1, "status": "working"}));
        let done = object(json!({"type": "progress", "seq": 1, "status": "done"}));
        assert!(skipped(&stats, &done));
        assert!(!skipped(&stats, &object(json!({"type": "stats"}))));
        assert!(skipped(&working, &done));
        assert!(skipped(&working, &object(json!({"type": "progress"}))));
        assert!(!skipped(
            &working,
            &object(json!({"type": "progress", "status": "working"}))
        ));
        assert!(!skipped(&done, &working));
    }

    #[test]
    fn a_player_passes_over_skipped_lines_and_checks_only_the_expected_keys() {
        let input = "{\"type\":\"stats\",\"pool_bytes\":1}\n{\"type\":\"progress\",\"seq\":2,\"status\":\"done\",\"pool_bytes\":5}\n";
        let mut player = Player::memtide(scripted(input));
        let steps = [
            Step::Send("{\"type\":\"target\"}".into()),
            Step::Expect(object(
                json!({"type": "progress", "seq": 2, "status": "done"}),
            )),
            Step::ExpectClosed,
        ];
        player.play(&steps).unwrap();
        assert_eq!(player.stream().output, b"{\"type\":\"target\"}\n");
    }

    #[test]
    fn a_player_reports_the_step_the_value_and_the_line_that_differ() {
        let mut player = Player::memtide(scripted(
            "{\"type\":\"progress\",\"seq\":1,\"status\":\"failed\"}\n",
        ));
        let error = player
            .run(&Step::Expect(object(
                json!({"type": "progress", "status": "done"}),
            )))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "step 1: expected {\"status\":\"done\",\"type\":\"progress\"}, got {\"type\":\"progress\",\"seq\":1,\"status\":\"failed\"}"
        );
        let error = player
            .run(&Step::Expect(object(json!({"type": "bye"}))))
            .unwrap_err();
        assert!(
            matches!(error, PlayError::Closed { step: 2, .. }),
            "{error}"
        );
    }

    #[test]
    fn a_line_before_the_end_fails_expect_closed() {
        let mut player = Player::memtide(scripted("{\"type\":\"bye\"}\n"));
        let error = player.run(&Step::ExpectClosed).unwrap_err();
        assert_eq!(
            error.to_string(),
            "step 1: expected the connection closed, got {\"type\":\"bye\"}"
        );
    }

    #[test]
    fn an_agent_player_writes_its_pid_and_expects_its_tenant() {
        let mut player =
            Player::agent(scripted("{\"type\":\"welcome\",\"tenant\":\"db\"}\n"), "db");
        player
            .play(&[
                Step::Send("{\"pid\":{{pid}}}".into()),
                Step::Expect(object(json!({"type": "welcome", "tenant": "{{tenant}}"}))),
            ])
            .unwrap();
        assert_eq!(
            String::from_utf8(player.stream().output.clone()).unwrap(),
            format!("{{\"pid\":{}}}\n", std::process::id())
        );
    }
}
