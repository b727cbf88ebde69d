//! Block traces, read as streams: a CSV block trace (`time,tenant,block,size,op`) and libCacheSim's `oracleGeneral` binary format; neither is ever loaded whole.
//!
//! Both readers are iterators of `Result<Request, TraceError>`: a malformed record is an error
//! naming the file, the record (line or record number), the field and the value, and ends the
//! read. Which reader a path gets is decided by its name ([`TraceReader::open`]).

mod csv;
mod oracle;

pub use csv::CsvReader;
pub use oracle::OracleReader;

use std::io;
use std::path::{Path, PathBuf};

/// One request of a trace.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// When, in the trace's own unit (oracleGeneral: seconds; CSV: as written).
    pub time: u64,
    /// Which tenant (application) asked; 0 where the trace has one tenant.
    pub tenant: u32,
    /// The block (object) asked for.
    pub block: u64,
    /// Its size in bytes, as the trace says (the simulator counts blocks).
    pub size: u32,
    pub op: Op,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

/// What went wrong reading a trace; every message names the file and where in it.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The OS error is in the message and not a `source()`, so that a chain printed whole
    /// says it once.
    #[error("cannot read {}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    /// Writing a trace ([`TraceWriter`]) failed.
    #[error("cannot write {}: {error}", path.display())]
    Write { path: PathBuf, error: io::Error },
    #[error("{}:{line}: field `{field}` is {value:?}, expected {expected}", path.display())]
    Field {
        path: PathBuf,
        line: u64,
        field: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("{}:{line}: {found} fields, expected 5 (time,tenant,block,size,op)", path.display())]
    Fields {
        path: PathBuf,
        line: u64,
        found: usize,
    },
    #[error("{}: record {record} is cut short ({bytes} of 24 bytes): not an oracleGeneral trace, or truncated", path.display())]
    Truncated {
        path: PathBuf,
        record: u64,
        bytes: usize,
    },
    #[error("{}: unknown trace format; name it *.csv or *.oracleGeneral[.bin]", path.display())]
    Format { path: PathBuf },
}

/// A trace file opened with the reader its name calls for.
pub enum TraceReader {
    Csv(CsvReader<io::BufReader<std::fs::File>>),
    Oracle(OracleReader<io::BufReader<std::fs::File>>),
}

impl TraceReader {
    /// Opens `path`: `*.csv` as a CSV block trace, `*.oracleGeneral` or `*.oracleGeneral.bin`
    /// (libCacheSim's names) as oracleGeneral.
    pub fn open(path: &Path) -> Result<TraceReader, TraceError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let file = std::fs::File::open(path).map_err(|error| TraceError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let buffered = io::BufReader::with_capacity(1 << 16, file);
        if name.ends_with(".csv") {
            Ok(TraceReader::Csv(CsvReader::new(path, buffered)))
        } else if name.ends_with(".oraclegeneral") || name.ends_with(".oraclegeneral.bin") {
            Ok(TraceReader::Oracle(OracleReader::new(path, buffered)))
        } else {
            Err(TraceError::Format {
                path: path.to_path_buf(),
            })
        }
    }

    /// Bytes read so far (for progress).
    pub fn bytes_read(&self) -> u64 {
        match self {
            TraceReader::Csv(r) => r.bytes_read(),
            TraceReader::Oracle(r) => r.bytes_read(),
        }
    }
}

/// A trace file being written, in the format its name calls for (as [`TraceReader::open`]
/// reads it back).
pub struct TraceWriter {
    path: PathBuf,
    out: io::BufWriter<std::fs::File>,
    csv: bool,
}

impl TraceWriter {
    /// Creates (or replaces) `path`: `*.csv` with a header line, or `*.oracleGeneral[.bin]`.
    pub fn create(path: &Path) -> Result<TraceWriter, TraceError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let csv = name.ends_with(".csv");
        if !csv && !name.ends_with(".oraclegeneral") && !name.ends_with(".oraclegeneral.bin") {
            return Err(TraceError::Format {
                path: path.to_path_buf(),
            });
        }
        let io = |error| TraceError::Write {
            path: path.to_path_buf(),
            error,
        };
        let file = std::fs::File::create(path).map_err(io)?;
        let mut w = TraceWriter {
            path: path.to_path_buf(),
            out: io::BufWriter::with_capacity(1 << 16, file),
            csv,
        };
        if csv {
            w.put(b"time,tenant,block,size,op\n")?;
        }
        Ok(w)
    }

    pub fn write(&mut self, r: &Request) -> Result<(), TraceError> {
        if self.csv {
            let op = match r.op {
                Op::Read => 'r',
                Op::Write => 'w',
            };
            let line = format!("{},{},{},{},{op}\n", r.time, r.tenant, r.block, r.size);
            self.put(line.as_bytes())
        } else {
            self.put(&oracle::record(r))
        }
    }

    /// Flushes what is buffered; dropping the writer without it loses a write error.
    pub fn finish(mut self) -> Result<(), TraceError> {
        io::Write::flush(&mut self.out).map_err(|error| TraceError::Write {
            path: self.path.clone(),
            error,
        })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        io::Write::write_all(&mut self.out, bytes).map_err(|error| TraceError::Write {
            path: self.path.clone(),
            error,
        })
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            TraceReader::Csv(r) => r.next(),
            TraceReader::Oracle(r) => r.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_without_a_known_format_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.txt");
        std::fs::write(&path, "x").unwrap();
        let err = TraceReader::open(&path).err().unwrap().to_string();
        assert!(
            err.contains("trace.txt") && err.contains("oracleGeneral"),
            "{err}"
        );
    }

    #[test]
    fn written_traces_read_back_in_both_formats() {
        let dir = tempfile::tempdir().unwrap();
        let reqs: Vec<Request> = (0..5)
            .map(|i| Request {
                time: i,
                tenant: (i % 2) as u32,
                block: 1000 + i * 7,
                size: 16384,
                op: if i == 3 { Op::Write } else { Op::Read },
            })
            .collect();
        for name in ["t.csv", "t.oracleGeneral"] {
            let path = dir.path().join(name);
            let mut w = TraceWriter::create(&path).unwrap();
            reqs.iter().for_each(|r| w.write(r).unwrap());
            w.finish().unwrap();
            let back: Vec<Request> = TraceReader::open(&path)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            if name.ends_with(".csv") {
                assert_eq!(back, reqs);
            } else {
                // oracleGeneral has neither tenants nor writes.
                let blocks: Vec<u64> = back.iter().map(|r| r.block).collect();
                assert_eq!(blocks, reqs.iter().map(|r| r.block).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let err = TraceReader::open(Path::new("/nonexistent/t.csv"))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("/nonexistent/t.csv"), "{err}");
    }
}
