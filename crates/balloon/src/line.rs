//! Splitting a byte stream into the protocol's lines: at most 65,536 bytes with the newline, a `\r` before it stripped, a longer line reported once and dropped up to its newline.
//!
//! [`LineSplitter`] is the whole rule and does no I/O, so a blocking reader and a non-blocking
//! event loop use it alike: feed it the bytes a read returned and take the lines they
//! complete. It keeps only the unfinished line, never more than 65,535 bytes, so one connection
//! costs at most that much however its peer writes, and nothing once the line is finished. [`LineReader`] wraps it around a blocking
//! [`Read`].

use std::collections::VecDeque;
use std::io::{self, Read};

/// The longest line, in bytes, with its `\n`.
pub const MAX_LINE_BYTES: usize = 65_536;

/// What a stream yields: a line (without its `\n` and a `\r` before it), or word that a line
/// was too long (its bytes are dropped up to its `\n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Complete(Vec<u8>),
    TooLong,
}

/// The unfinished line of one connection, and whether the rest of an over-long line is being
/// dropped.
#[derive(Debug, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
    dropping: bool,
}

impl LineSplitter {
    pub fn new() -> LineSplitter {
        LineSplitter::default()
    }

    /// Takes the bytes a read returned and answers the lines they complete, in order. A line
    /// is reported [`Line::TooLong`] as soon as it has 65,536 bytes without a newline (or
    /// when its newline comes after 65,536 bytes), once; what follows of it up to its newline
    /// is dropped.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<Line> {
        let mut lines = Vec::new();
        while !bytes.is_empty() {
            let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
                self.keep(bytes, &mut lines);
                break;
            };
            let (head, rest) = (&bytes[..end], &bytes[end + 1..]);
            bytes = rest;
            if self.dropping {
                self.dropping = false;
            } else if self.partial.len() + head.len() >= MAX_LINE_BYTES {
                self.partial = Vec::new();
                lines.push(Line::TooLong);
            } else {
                // The unfinished start becomes the line: the splitter keeps no buffer between
                // lines, so an idle connection costs none.
                let mut line = if self.partial.is_empty() {
                    head.to_vec()
                } else {
                    let mut line = std::mem::take(&mut self.partial);
                    line.extend_from_slice(head);
                    line
                };
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                lines.push(Line::Complete(line));
            }
        }
        lines
    }

    /// Keeps the start of an unfinished line, or reports it too long and starts dropping it.
    fn keep(&mut self, bytes: &[u8], lines: &mut Vec<Line>) {
        if self.dropping {
            return;
        }
        let len = self.partial.len() + bytes.len();
        if len >= MAX_LINE_BYTES {
            self.partial = Vec::new();
            self.dropping = true;
            lines.push(Line::TooLong);
            return;
        }
        if len > self.partial.capacity() {
            // Grow by doubling, but never past the longest line that can still complete.
            let capacity = (self.partial.capacity() * 2).clamp(len, MAX_LINE_BYTES - 1);
            self.partial.reserve_exact(capacity - self.partial.len());
        }
        self.partial.extend_from_slice(bytes);
    }
}

/// Lines read from a blocking [`Read`], through a [`LineSplitter`].
#[derive(Debug)]
pub struct LineReader<R> {
    inner: R,
    splitter: LineSplitter,
    ready: VecDeque<Line>,
    buffer: Box<[u8]>,
}

impl<R: Read> LineReader<R> {
    pub fn new(inner: R) -> LineReader<R> {
        LineReader {
            inner,
            splitter: LineSplitter::new(),
            ready: VecDeque::new(),
            buffer: vec![0; 16 * 1024].into_boxed_slice(),
        }
    }

    /// The next line, or `None` at the end of the stream (an unfinished last line is
    /// dropped: every line ends with `\n`). A read error, a read timeout included, is
    /// returned as it is; reading again goes on where it stopped.
    pub fn read_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            if let Some(line) = self.ready.pop_front() {
                return Ok(Some(line));
            }
            let read = match self.inner.read(&mut self.buffer) {
                Ok(0) => return Ok(None),
                Ok(read) => read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.ready.extend(self.splitter.feed(&self.buffer[..read]));
        }
    }

    /// The stream, to write to it or set its options.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(text: &str) -> Line {
        Line::Complete(text.as_bytes().to_vec())
    }

    #[test]
    fn a_finished_long_line_leaves_no_buffer_behind() {
        let mut splitter = LineSplitter::new();
        assert!(splitter.feed(&[b'x'; 60_000]).is_empty());
        assert!(splitter.partial.capacity() >= 60_000);
        let lines = splitter.feed(b"x\n");
        assert!(matches!(&lines[..], [Line::Complete(l)] if l.len() == 60_001));
        assert_eq!(splitter.partial.capacity(), 0, "released, not kept");
        assert!(splitter.feed(&[b'y'; 70_000]).len() == 1);
        assert!(splitter.feed(b"\n").is_empty());
        assert_eq!(
            splitter.partial.capacity(),
            0,
            "a line too long is not kept either"
        );
    }

    #[test]
    fn lines_split_at_newlines_and_lose_a_cr_before_them() {
        let mut splitter = LineSplitter::new();
        assert_eq!(
            splitter.feed(b"{\"a\":1}\n{\"b\":2}\r\n\n"),
            [complete("{\"a\":1}"), complete("{\"b\":2}"), complete("")]
        );
    }

    #[test]
    fn a_line_fed_in_pieces_comes_out_whole() {
        let mut splitter = LineSplitter::new();
        assert_eq!(splitter.feed(b"{\"type\""), []);
        assert_eq!(splitter.feed(b":\"bye\"}\r"), []);
        assert_eq!(splitter.feed(b"\n{\"x"), [complete("{\"type\":\"bye\"}")]);
        assert_eq!(splitter.feed(b"\"}\n"), [complete("{\"x\"}")]);
    }

    #[test]
    fn only_one_cr_and_only_at_the_end_is_stripped() {
        let mut splitter = LineSplitter::new();
        assert_eq!(
            splitter.feed(b"a\rb\r\r\n"),
            [Line::Complete(b"a\rb\r".to_vec())]
        );
    }

    #[test]
    fn a_line_of_65536_bytes_with_its_newline_fits() {
        let mut splitter = LineSplitter::new();
        let mut line = vec![b'x'; MAX_LINE_BYTES - 1];
        line.push(b'\n');
        assert_eq!(
            splitter.feed(&line),
            [Line::Complete(vec![b'x'; MAX_LINE_BYTES - 1])]
        );
    }

    #[test]
    fn a_line_one_byte_longer_is_too_long_and_the_next_line_is_read() {
        let mut splitter = LineSplitter::new();
        let mut bytes = vec![b'x'; MAX_LINE_BYTES];
        bytes.extend_from_slice(b"\nnext\n");
        assert_eq!(splitter.feed(&bytes), [Line::TooLong, complete("next")]);
    }

    #[test]
    fn a_long_line_is_reported_once_before_its_newline_and_dropped_up_to_it() {
        let mut splitter = LineSplitter::new();
        let chunk = vec![b'y'; 40_000];
        assert_eq!(splitter.feed(&chunk), []);
        assert_eq!(splitter.feed(&chunk), [Line::TooLong]);
        assert_eq!(splitter.feed(&chunk), []);
        assert_eq!(splitter.feed(b"yyy\r\nok\n"), [complete("ok")]);
    }

    #[test]
    fn the_buffer_never_holds_more_than_one_line_can() {
        let mut splitter = LineSplitter::new();
        for _ in 0..(MAX_LINE_BYTES - 1) {
            splitter.feed(b"z");
        }
        assert_eq!(splitter.partial.len(), MAX_LINE_BYTES - 1);
        assert!(splitter.partial.capacity() < MAX_LINE_BYTES);
        assert_eq!(splitter.feed(b"z"), [Line::TooLong]);
        assert_eq!(splitter.partial.capacity(), 0);
        assert_eq!(splitter.feed(b"\n"), []);
    }

    #[test]
    fn a_reader_yields_lines_then_none_at_the_end_dropping_an_unfinished_line() {
        let mut reader = LineReader::new(&b"one\r\ntwo\nunfinished"[..]);
        assert_eq!(reader.read_line().unwrap(), Some(complete("one")));
        assert_eq!(reader.read_line().unwrap(), Some(complete("two")));
        assert_eq!(reader.read_line().unwrap(), None);
    }
}
