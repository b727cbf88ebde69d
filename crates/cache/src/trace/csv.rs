//! The CSV block trace: one request a line, `time,tenant,block,size,op` (integers; `op` is `r`/`read` or `w`/`write`), an optional header line naming those columns, `#` comments and blank lines skipped.
//!
//! Hand-rolled rather than on the `csv` crate: five integer fields and a letter, no quoting;
//! splitting on commas over a reused line buffer is what makes it stream at tens of millions of
//! lines a second.

use super::{Op, Request, TraceError};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Reads a CSV block trace from `input`, line by line.
pub struct CsvReader<R> {
    path: PathBuf,
    input: R,
    line: String,
    number: u64,
    bytes: u64,
    failed: bool,
}

impl<R: BufRead> CsvReader<R> {
    /// `path` names the input in errors.
    pub fn new(path: &Path, input: R) -> CsvReader<R> {
        CsvReader {
            path: path.to_path_buf(),
            input,
            line: String::new(),
            number: 0,
            bytes: 0,
            failed: false,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    fn field<T: std::str::FromStr>(
        &self,
        name: &'static str,
        value: Option<&str>,
        expected: &'static str,
    ) -> Result<T, TraceError> {
        let v = value.unwrap_or("").trim();
        v.parse().map_err(|_| TraceError::Field {
            path: self.path.clone(),
            line: self.number,
            field: name,
            value: v.to_string(),
            expected,
        })
    }

    fn parse(&self, text: &str) -> Result<Request, TraceError> {
        let found = text.split(',').count();
        if found != 5 {
            return Err(TraceError::Fields {
                path: self.path.clone(),
                line: self.number,
                found,
            });
        }
        let mut f = text.split(',');
        let time = self.field("time", f.next(), "an unsigned integer")?;
        let tenant = self.field("tenant", f.next(), "an unsigned 32-bit integer")?;
        let block = self.field("block", f.next(), "an unsigned 64-bit integer")?;
        let size = self.field("size", f.next(), "an unsigned 32-bit integer")?;
        let op_text = f.next().unwrap_or("").trim();
        let op = match op_text {
            "r" | "R" | "read" => Op::Read,
            "w" | "W" | "write" => Op::Write,
            other => {
                return Err(TraceError::Field {
                    path: self.path.clone(),
                    line: self.number,
                    field: "op",
                    value: other.to_string(),
                    expected: "r, read, w or write",
                })
            }
        };
        Ok(Request {
            time,
            tenant,
            block,
            size,
            op,
        })
    }
}

impl<R: BufRead> Iterator for CsvReader<R> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            self.line.clear();
            match self.input.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(n) => self.bytes += n as u64,
                Err(error) => {
                    self.failed = true;
                    return Some(Err(TraceError::Io {
                        path: self.path.clone(),
                        error,
                    }));
                }
            }
            self.number += 1;
            let text = self.line.trim();
            if text.is_empty() || text.starts_with('#') {
                continue;
            }
            if self.number == 1 && text.starts_with("time") {
                continue;
            }
            let parsed = self.parse(text);
            self.failed = parsed.is_err();
            return Some(parsed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<Result<Request, TraceError>> {
        CsvReader::new(Path::new("t.csv"), text.as_bytes()).collect()
    }

    #[test]
    fn requests_read_with_header_comments_and_blank_lines_skipped() {
        let got =
            read("time,tenant,block,size,op\n# a comment\n1,0,42,4096,r\n\n2,3,7,8192,write\n");
        let got: Vec<Request> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[1],
            Request {
                time: 2,
                tenant: 3,
                block: 7,
                size: 8192,
                op: Op::Write
            }
        );
    }

    #[test]
    fn a_bad_field_names_the_line_field_and_value_and_ends_the_read() {
        let got = read("1,0,42,4096,r\n2,0,x7,4096,r\n3,0,1,1,r\n");
        assert_eq!(got.len(), 2, "the read ends at the error");
        let err = got[1].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("t.csv:2") && err.contains("block") && err.contains("x7"),
            "{err}"
        );
        let err = read("1,0,42,4096\n")[0].as_ref().unwrap_err().to_string();
        assert!(err.contains("4 fields"), "{err}");
        let err = read("1,0,42,4096,q\n")[0].as_ref().unwrap_err().to_string();
        assert!(err.contains("`op`") && err.contains("\"q\""), "{err}");
    }
}
