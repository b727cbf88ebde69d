//! libCacheSim's `oracleGeneral` binary trace: packed little-endian 24-byte records of u32 time, u64 object id, u32 size and i64 next-access virtual time (-1: never again), read record by record.

use super::{Op, Request, TraceError};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Bytes in one record.
pub const RECORD: usize = 24;

/// Reads an oracleGeneral trace from `input`. Every request is a read by tenant 0 (the format
/// has neither); the next-access time is not used.
pub struct OracleReader<R> {
    path: PathBuf,
    input: R,
    record: u64,
    bytes: u64,
    failed: bool,
}

impl<R: BufRead> OracleReader<R> {
    /// `path` names the input in errors.
    pub fn new(path: &Path, input: R) -> OracleReader<R> {
        OracleReader {
            path: path.to_path_buf(),
            input,
            record: 0,
            bytes: 0,
            failed: false,
        }
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }
}

impl<R: BufRead> Iterator for OracleReader<R> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        // A whole record in the buffer is read in place; one split across refills is copied.
        let mut buf = [0u8; RECORD];
        let got = match self.input.fill_buf() {
            Ok(b) if b.len() >= RECORD => {
                buf.copy_from_slice(&b[..RECORD]);
                self.input.consume(RECORD);
                RECORD
            }
            _ => match self.read_split(&mut buf) {
                Ok(n) => n,
                Err(error) => {
                    self.failed = true;
                    return Some(Err(TraceError::Io {
                        path: self.path.clone(),
                        error,
                    }));
                }
            },
        };
        self.bytes += got as u64;
        match got {
            0 => None,
            RECORD => {
                self.record += 1;
                let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().unwrap());
                Some(Ok(Request {
                    time: u64::from(u32_at(0)),
                    tenant: 0,
                    block: u64::from_le_bytes(buf[4..12].try_into().unwrap()),
                    size: u32_at(12),
                    op: Op::Read,
                }))
            }
            bytes => {
                self.failed = true;
                Some(Err(TraceError::Truncated {
                    path: self.path.clone(),
                    record: self.record + 1,
                    bytes,
                }))
            }
        }
    }
}

impl<R: BufRead> OracleReader<R> {
    /// Reads up to a record into `buf` across refills: the bytes read (fewer than a record
    /// only at the end of the input).
    fn read_split(&mut self, buf: &mut [u8; RECORD]) -> std::io::Result<usize> {
        let mut got = 0;
        while got < RECORD {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }
}

/// One request as an oracleGeneral record (time cut to 32 bits, next access unknown: -1).
pub fn record(r: &Request) -> [u8; RECORD] {
    let mut out = [0u8; RECORD];
    out[0..4].copy_from_slice(&(r.time as u32).to_le_bytes());
    out[4..12].copy_from_slice(&r.block.to_le_bytes());
    out[12..16].copy_from_slice(&r.size.to_le_bytes());
    out[16..24].copy_from_slice(&(-1i64).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let reqs: Vec<Request> = (0..3)
            .map(|i| Request {
                time: 10 + i,
                tenant: 0,
                block: u64::MAX - i,
                size: 4096 * (i as u32 + 1),
                op: Op::Read,
            })
            .collect();
        let bytes: Vec<u8> = reqs.iter().flat_map(record).collect();
        let back: Vec<Request> = OracleReader::new(Path::new("t.oracleGeneral"), &bytes[..])
            .map(Result::unwrap)
            .collect();
        assert_eq!(back, reqs);
    }

    #[test]
    fn a_cut_record_is_an_error_naming_it() {
        let r = Request {
            time: 1,
            tenant: 0,
            block: 5,
            size: 1,
            op: Op::Read,
        };
        let mut bytes: Vec<u8> = record(&r).to_vec();
        bytes.extend_from_slice(&record(&r)[..10]);
        let got: Vec<_> = OracleReader::new(Path::new("t.oracleGeneral"), &bytes[..]).collect();
        assert_eq!(got.len(), 2);
        let err = got[1].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("record 2") && err.contains("10 of 24"),
            "{err}"
        );
    }
}
