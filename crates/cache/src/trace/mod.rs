//! Block traces, read as streams: a CSV block trace (`time,tenant,block,size,op`) and libCacheSim's `oracleGeneral` binary format, either plain or zstd-compressed (`.zst`, decompressed as it is read); none is ever loaded whole.
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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
    #[error("{}: unknown trace format; name it *.csv or *.oracleGeneral[.bin], with .zst after it if zstd-compressed", path.display())]
    Format { path: PathBuf },
}

/// What a trace's name says it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Csv,
    Oracle,
}

/// The format `path`'s name calls for (`*.csv`, `*.oracleGeneral`, `*.oracleGeneral.bin`,
/// each optionally `.zst`), and whether it is zstd-compressed.
fn kind(path: &Path) -> Result<(Kind, bool), TraceError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let (rest, zst) = match name.strip_suffix(".zst") {
        Some(rest) => (rest, true),
        None => (name.as_str(), false),
    };
    if rest.ends_with(".csv") {
        Ok((Kind::Csv, zst))
    } else if rest.ends_with(".oraclegeneral") || rest.ends_with(".oraclegeneral.bin") {
        Ok((Kind::Oracle, zst))
    } else {
        Err(TraceError::Format {
            path: path.to_path_buf(),
        })
    }
}

/// A file counting the bytes read from it, for progress through a compressed one.
struct Counted {
    file: std::fs::File,
    read: Arc<AtomicU64>,
}

impl io::Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A trace's bytes: the file itself, or decompressed from it as they are read (zstd, one
/// window in memory, never the whole file).
enum Input {
    Plain(io::BufReader<std::fs::File>),
    Zstd(io::BufReader<zstd::Decoder<'static, io::BufReader<Counted>>>),
}

impl io::Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain(r) => r.read(buf),
            Input::Zstd(r) => r.read(buf),
        }
    }
}

impl io::BufRead for Input {
    #[inline]
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match self {
            Input::Plain(r) => r.fill_buf(),
            Input::Zstd(r) => r.fill_buf(),
        }
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        match self {
            Input::Plain(r) => r.consume(n),
            Input::Zstd(r) => r.consume(n),
        }
    }
}

/// A trace file opened with the reader its name calls for.
pub struct TraceReader {
    records: Records,
    /// Compressed bytes read, for a zstd file.
    compressed: Option<Arc<AtomicU64>>,
}

enum Records {
    Csv(CsvReader<Input>),
    Oracle(OracleReader<Input>),
}

impl TraceReader {
    /// Opens `path`: `*.csv` as a CSV block trace, `*.oracleGeneral` or `*.oracleGeneral.bin`
    /// (libCacheSim's names) as oracleGeneral; either with `.zst` after it decompressed as it
    /// is read (libCacheSim's public traces ship as `*.oracleGeneral.zst`).
    pub fn open(path: &Path) -> Result<TraceReader, TraceError> {
        let (kind, zst) = kind(path)?;
        let io = |error| TraceError::Io {
            path: path.to_path_buf(),
            error,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let mut compressed = None;
        let input = if zst {
            let read = Arc::new(AtomicU64::new(0));
            compressed = Some(Arc::clone(&read));
            let mut decoder = zstd::Decoder::new(Counted { file, read }).map_err(io)?;
            // Windows up to zstd's largest (`--long=31`), not its default limit of 2^27: a
            // trace compressed for size is read as it was written.
            decoder.window_log_max(31).map_err(io)?;
            Input::Zstd(io::BufReader::with_capacity(1 << 16, decoder))
        } else {
            Input::Plain(io::BufReader::with_capacity(1 << 16, file))
        };
        let records = match kind {
            Kind::Csv => Records::Csv(CsvReader::new(path, input)),
            Kind::Oracle => Records::Oracle(OracleReader::new(path, input)),
        };
        Ok(TraceReader {
            records,
            compressed,
        })
    }

    /// Bytes of the file read so far (for progress; of a compressed file, compressed bytes).
    pub fn bytes_read(&self) -> u64 {
        if let Some(read) = &self.compressed {
            return read.load(Ordering::Relaxed);
        }
        match &self.records {
            Records::Csv(r) => r.bytes_read(),
            Records::Oracle(r) => r.bytes_read(),
        }
    }
}

/// Where a trace is written: the file, or a zstd stream into it.
enum Sink {
    Plain(io::BufWriter<std::fs::File>),
    Zstd(zstd::Encoder<'static, io::BufWriter<std::fs::File>>),
}

/// A trace file being written, in the format its name calls for (as [`TraceReader::open`]
/// reads it back, `.zst` compressed).
pub struct TraceWriter {
    path: PathBuf,
    out: Sink,
    csv: bool,
}

impl TraceWriter {
    /// Creates (or replaces) `path`: `*.csv` with a header line, or `*.oracleGeneral[.bin]`;
    /// either with `.zst` after it compressed (zstd's default level).
    pub fn create(path: &Path) -> Result<TraceWriter, TraceError> {
        let (kind, zst) = kind(path)?;
        let io = |error| TraceError::Write {
            path: path.to_path_buf(),
            error,
        };
        let file = io::BufWriter::with_capacity(1 << 16, std::fs::File::create(path).map_err(io)?);
        let out = if zst {
            Sink::Zstd(zstd::Encoder::new(file, 0).map_err(io)?)
        } else {
            Sink::Plain(file)
        };
        let csv = kind == Kind::Csv;
        let mut w = TraceWriter {
            path: path.to_path_buf(),
            out,
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

    /// Ends a compressed stream and flushes what is buffered; dropping the writer without it
    /// loses a write error (and leaves a compressed file cut short).
    pub fn finish(self) -> Result<(), TraceError> {
        let io = |error| TraceError::Write {
            path: self.path.clone(),
            error,
        };
        let mut file = match self.out {
            Sink::Plain(file) => file,
            Sink::Zstd(encoder) => encoder.finish().map_err(io)?,
        };
        io::Write::flush(&mut file).map_err(io)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        let written = match &mut self.out {
            Sink::Plain(w) => io::Write::write_all(w, bytes),
            Sink::Zstd(w) => io::Write::write_all(w, bytes),
        };
        written.map_err(|error| TraceError::Write {
            path: self.path.clone(),
            error,
        })
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.records {
            Records::Csv(r) => r.next(),
            Records::Oracle(r) => r.next(),
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
        for name in [
            "t.csv",
            "t.oracleGeneral",
            "t.csv.zst",
            "t.oracleGeneral.bin.zst",
        ] {
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

    /// `n` oracleGeneral records of blocks 0.. with sizes 1000 + block.
    fn oracle_bytes(n: u64) -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                oracle::record(&Request {
                    time: i,
                    tenant: 0,
                    block: i % 1000,
                    size: 1000 + (i % 1000) as u32,
                    op: Op::Read,
                })
            })
            .collect()
    }

    #[test]
    fn a_zstd_trace_of_several_frames_streams_as_the_plain_one() {
        // Compressed here, in two frames (as a parallel compressor writes them).
        let dir = tempfile::tempdir().unwrap();
        let plain = oracle_bytes(50_000);
        let half = plain.len() / 2 / oracle::RECORD * oracle::RECORD;
        let mut zst = zstd::encode_all(&plain[..half], 3).unwrap();
        zst.extend(zstd::encode_all(&plain[half..], 3).unwrap());
        let (p, z) = (
            dir.path().join("t.oracleGeneral"),
            dir.path().join("t.oracleGeneral.zst"),
        );
        std::fs::write(&p, &plain).unwrap();
        std::fs::write(&z, &zst).unwrap();
        let read = |path: &Path| -> Vec<Request> {
            TraceReader::open(path)
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let want = read(&p);
        assert_eq!(want.len(), 50_000);
        assert_eq!(read(&z), want);
        // Progress counts the compressed file's bytes, all of them at the end.
        let mut r = TraceReader::open(&z).unwrap();
        r.next();
        assert!(r.bytes_read() > 0 && r.bytes_read() <= zst.len() as u64);
        r.by_ref().for_each(drop);
        assert_eq!(r.bytes_read(), zst.len() as u64);
    }

    #[test]
    fn a_cut_or_corrupt_zstd_trace_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let zst = zstd::encode_all(&oracle_bytes(10_000)[..], 3).unwrap();
        for (name, bytes) in [
            ("cut.oracleGeneral.zst", &zst[..zst.len() / 2]),
            (
                "garbage.oracleGeneral.zst",
                &b"not zstd at all, just text"[..],
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let err = match TraceReader::open(&path) {
                Err(e) => e,
                Ok(r) => r.filter_map(Result::err).next().expect("an error"),
            };
            let text = err.to_string();
            assert!(text.contains(name), "{text}");
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
