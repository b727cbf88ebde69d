//! The toucher's page-cache load: a file made long enough with non-zero data, read each pass with
//! pread in 1 MiB chunks.

use crate::region::{fill_page, Walk};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub const CHUNK_BYTES: usize = 1 << 20;

/// A file read through the page cache.
pub struct CacheFile {
    file: File,
    buffer: Vec<u8>,
}

impl CacheFile {
    /// Opens `path`, first creating it or appending non-zero data until it holds at least
    /// `size_bytes`. The error names the path.
    pub fn prepare(path: &Path, size_bytes: u64) -> Result<CacheFile, String> {
        let shown = path.display();
        let len_bytes = match std::fs::metadata(path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("--file {shown}: cannot stat: {e}")),
        };
        let mut chunk = vec![0u8; CHUNK_BYTES];
        if len_bytes < size_bytes || len_bytes == 0 {
            extend(path, len_bytes, size_bytes, &mut chunk)
                .map_err(|e| format!("--file {shown}: cannot write {size_bytes} bytes: {e}"))?;
        }
        let file = File::open(path).map_err(|e| format!("--file {shown}: cannot open: {e}"))?;
        Ok(CacheFile {
            file,
            buffer: chunk,
        })
    }

    /// Reads the first `size_bytes` of the file (or up to its end) in 1 MiB chunks, checking
    /// `stop` between chunks. The error names the path.
    pub fn read(&mut self, size_bytes: u64, stop: &AtomicBool) -> Result<Walk, String> {
        let mut offset = 0u64;
        while offset < size_bytes {
            if stop.load(Ordering::Relaxed) {
                return Ok(Walk::Stopped);
            }
            let n = (size_bytes - offset).min(CHUNK_BYTES as u64) as usize;
            match self.file.read_at(&mut self.buffer[..n], offset) {
                Ok(0) => break,
                Ok(read) => offset += read as u64,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("--file: read at byte {offset} failed: {e}")),
            }
        }
        Ok(Walk::Done)
    }
}

/// Appends non-zero data to `path` (creating it) from `from_bytes` up to `to_bytes`.
fn extend(
    path: &Path,
    mut from_bytes: u64,
    to_bytes: u64,
    chunk: &mut [u8],
) -> std::io::Result<()> {
    let mut file = OpenOptions::new().append(true).create(true).open(path)?;
    while from_bytes < to_bytes {
        let n = (to_bytes - from_bytes).min(chunk.len() as u64) as usize;
        fill_bytes(&mut chunk[..n], from_bytes);
        file.write_all(&chunk[..n])?;
        from_bytes += n as u64;
    }
    Ok(())
}

/// Non-zero content for file bytes starting at `offset_bytes`: the memory pattern in 4 KiB
/// blocks, indexed from the top of the u64 range so it differs from the memory's pages.
fn fill_bytes(out: &mut [u8], offset_bytes: u64) {
    const BLOCK_BYTES: usize = 4096;
    let mut words = [0u64; BLOCK_BYTES / 8];
    for (i, block) in out.chunks_mut(BLOCK_BYTES).enumerate() {
        let block_index = offset_bytes / BLOCK_BYTES as u64 + i as u64;
        fill_page(&mut words, u64::MAX - block_index);
        for (dst, word) in block.chunks_mut(8).zip(words.iter()) {
            dst.copy_from_slice(&word.to_le_bytes()[..dst.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("memtide-toucher-{}-{name}", std::process::id()))
    }

    #[test]
    fn prepare_creates_then_extends_but_never_shrinks() {
        let path = temp_path("extend");
        let _ = std::fs::remove_file(&path);
        let stop = AtomicBool::new(false);
        let mut f = CacheFile::prepare(&path, 3 * CHUNK_BYTES as u64 / 2).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 3 << 19);
        assert_eq!(
            f.read(4 << 20, &stop),
            Ok(Walk::Done),
            "reading past the end stops at it"
        );
        drop(f);
        CacheFile::prepare(&path, 2 << 20).unwrap();
        CacheFile::prepare(&path, 1 << 20).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 2 << 20);
        assert!(
            bytes.chunks(8).all(|w| w != [0; 8]),
            "file holds a zero word"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn file_content_is_the_same_whether_written_in_one_go_or_extended() {
        let mut whole = vec![0u8; 3 * 4096];
        fill_bytes(&mut whole, 0);
        let mut tail = vec![0u8; 4096];
        fill_bytes(&mut tail, 2 * 4096);
        assert_eq!(whole[2 * 4096..], tail[..]);
        assert_ne!(whole[..4096], whole[4096..2 * 4096]);
    }

    #[test]
    fn an_unopenable_path_is_named_in_the_error() {
        let err = CacheFile::prepare(Path::new("/nonexistent-dir/x"), 1)
            .err()
            .unwrap();
        assert!(err.contains("/nonexistent-dir/x"), "{err}");
    }
}
