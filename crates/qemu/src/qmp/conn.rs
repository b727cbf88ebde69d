//! The QMP socket as lines: blocking reads and writes bounded by a deadline, non-blocking reads of whatever is pending, and lines of at most [`MAX_LINE`] bytes.

use super::error::{QmpError, EXCERPT_CHARS};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest line accepted from QEMU, newline excluded. QEMU's longest answers (`qom-list`
/// of a device, `query-qmp-schema`) are a few KiB to a few hundred KiB.
pub const MAX_LINE: usize = 1 << 20;

/// How much one `read` asks for.
const CHUNK: usize = 64 * 1024;

/// When a blocking wait ends, and the time limit it came from (for the error's message).
#[derive(Copy, Clone, Debug)]
pub(crate) struct Deadline {
    at: Instant,
    limit: Duration,
}

impl Deadline {
    pub(crate) fn after(limit: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + limit,
            limit,
        }
    }

    /// The time left, or `None` once it has passed.
    fn remaining(&self) -> Option<Duration> {
        self.at
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    }
}

/// One connected QMP socket and the bytes read past its last complete line.
pub(crate) struct Conn {
    path: PathBuf,
    stream: UnixStream,
    /// Bytes read and not yet returned as a line.
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no newline.
    scanned: usize,
    /// Dropping the rest of a line that was too long, up to its newline.
    discarding: bool,
    chunk: Box<[u8]>,
}

impl Conn {
    pub(crate) fn connect(path: &Path) -> Result<Conn, QmpError> {
        let stream = UnixStream::connect(path).map_err(|source| QmpError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Conn {
            path: path.to_path_buf(),
            stream,
            pending: Vec::new(),
            scanned: 0,
            discarding: false,
            chunk: vec![0; CHUNK].into_boxed_slice(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// The next line (without its `\r\n`), waiting for it until `deadline`.
    pub(crate) fn read_line(
        &mut self,
        deadline: Deadline,
        waiting_for: &dyn Fn() -> String,
    ) -> Result<String, QmpError> {
        loop {
            if let Some(line) = self.take_line()? {
                return Ok(line);
            }
            let Some(left) = deadline.remaining() else {
                return Err(self.timed_out(waiting_for(), deadline));
            };
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match self.stream.read(&mut self.chunk) {
                Ok(0) => return Err(self.closed()),
                Ok(n) => self.absorb(n),
                Err(e) if is_wait(&e) => {}
                Err(e) => return Err(self.io(e)),
            }
        }
    }

    /// Sends `line` and its newline, all of it before `deadline`.
    pub(crate) fn write_line(
        &mut self,
        line: &str,
        deadline: Deadline,
        waiting_for: &dyn Fn() -> String,
    ) -> Result<(), QmpError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        let mut sent = 0;
        while sent < bytes.len() {
            let Some(left) = deadline.remaining() else {
                return Err(self.timed_out(waiting_for(), deadline));
            };
            self.stream
                .set_write_timeout(Some(left))
                .map_err(|e| self.io(e))?;
            match self.stream.write(&bytes[sent..]) {
                Ok(0) => return Err(self.closed()),
                Ok(n) => sent += n,
                Err(e) if is_wait(&e) => {}
                Err(e) => return Err(self.io(e)),
            }
        }
        Ok(())
    }

    /// Appends the `n` bytes just read to what is pending.
    fn absorb(&mut self, n: usize) {
        self.pending.extend_from_slice(&self.chunk[..n]);
    }

    /// The first complete line of what is pending; an error for one longer than [`MAX_LINE`]
    /// (whose rest, up to its newline, is then dropped).
    fn take_line(&mut self) -> Result<Option<String>, QmpError> {
        loop {
            let Some(at) = self.pending[self.scanned..]
                .iter()
                .position(|&b| b == b'\n')
                .map(|i| i + self.scanned)
            else {
                if self.discarding {
                    self.pending.clear();
                    self.scanned = 0;
                } else if self.pending.len() > MAX_LINE {
                    let err = self.too_long(&self.pending);
                    self.pending.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    return Err(err);
                } else {
                    self.scanned = self.pending.len();
                }
                return Ok(None);
            };
            let mut line: Vec<u8> = self.pending.drain(..=at).collect();
            self.scanned = 0;
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > MAX_LINE {
                return Err(self.too_long(&line));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return String::from_utf8(line).map(Some).map_err(|e| {
                QmpError::protocol(
                    &self.path,
                    &String::from_utf8_lossy(e.as_bytes()),
                    "a line that is not UTF-8",
                )
            });
        }
    }

    /// The error for a line longer than allowed, starting with `line`.
    fn too_long(&self, line: &[u8]) -> QmpError {
        let head = &line[..line.len().min(4 * EXCERPT_CHARS)];
        QmpError::protocol(
            &self.path,
            &String::from_utf8_lossy(head),
            format!("a line longer than {MAX_LINE} bytes"),
        )
    }

    fn timed_out(&self, waiting_for: String, deadline: Deadline) -> QmpError {
        QmpError::TimedOut {
            path: self.path.clone(),
            waiting_for,
            after: deadline.limit,
        }
    }

    fn closed(&self) -> QmpError {
        QmpError::Closed {
            path: self.path.clone(),
        }
    }

    /// An I/O error; QEMU exiting under us (`ECONNRESET`, `EPIPE`) is `Closed`.
    fn io(&self, source: io::Error) -> QmpError {
        match source.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => self.closed(),
            _ => QmpError::Io {
                path: self.path.clone(),
                source,
            },
        }
    }
}

/// A read or write that only waited: its timeout passed, or a signal interrupted it.
fn is_wait(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}
