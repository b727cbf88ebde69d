//! Reading kernel files: whole-file reads whose errors name the path, the cgroup rule (a missing file in a missing directory is a vanished cgroup), single-number files and the kernel's octal escaping of paths.

use super::error::FsError;
use memtide_model::Bytes;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Reads a whole file. Any failure, including a missing file, is `FsError::Read`.
pub(crate) fn read_text(path: &Path) -> Result<String, FsError> {
    std::fs::read_to_string(path).map_err(|source| FsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a file that only exists when the kernel has some feature: a missing file is `None`.
pub(crate) fn read_optional_text(path: &Path) -> Result<Option<String>, FsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// True when an I/O error says the file (or the cgroup holding it) is not there.
pub(crate) fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV)
}

/// True when the directory holding `path` no longer exists.
pub(crate) fn parent_gone(path: &Path) -> bool {
    path.parent().is_some_and(|dir| !dir.is_dir())
}

/// Reads a file every cgroup of its version has. When the cgroup directory is gone this is
/// `FsError::Vanished`; a missing file in a directory that exists is `FsError::Read`.
pub(crate) fn read_cgroup_file(path: &Path) -> Result<String, FsError> {
    match read_optional_cgroup_file(path)? {
        Some(text) => Ok(text),
        None => Err(FsError::Read {
            path: path.to_path_buf(),
            source: io::Error::from(io::ErrorKind::NotFound),
        }),
    }
}

/// Reads a cgroup file that exists only with some kernel feature (e.g. swap accounting): a
/// missing file is `None` while the cgroup exists, `FsError::Vanished` once it is gone.
pub(crate) fn read_optional_cgroup_file(path: &Path) -> Result<Option<String>, FsError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if is_gone(&e) => {
            if parent_gone(path) {
                Err(FsError::Vanished {
                    path: path.to_path_buf(),
                })
            } else {
                Ok(None)
            }
        }
        Err(source) => Err(FsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads `file` from offset 0 to its end into `buf`, replacing what it held, with `pread`: no
/// `statx` for a size hint (kernel files report size 0 or 4096 anyway) and, on a kept
/// descriptor, no path walk. cgroupfs and procfs regenerate a file's text for a read at 0.
///
/// `one_record`: the kernel makes the file's whole text in one go (one seq_file record: every
/// cgroup memory file, PSI, /proc/meminfo; a plain file too), so a read that returns less than
/// it was offered has reached the end and no second read is made to see it. Not so for lists
/// such as `cgroup.procs`, whose reads may stop at any record.
pub(crate) fn read_all_at(file: &File, buf: &mut Vec<u8>, one_record: bool) -> io::Result<()> {
    const CHUNK: usize = 4096;
    buf.clear();
    let mut len = 0;
    loop {
        if buf.len() < len + CHUNK {
            buf.resize(len + CHUNK, 0);
        }
        let offered = buf.len() - len;
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if one_record && n < offered {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                buf.clear();
                return Err(e);
            }
        }
    }
    buf.truncate(len);
    Ok(())
}

/// `buf` as text; invalid UTF-8 is a read error naming `path`.
pub(crate) fn as_text<'b>(path: &Path, buf: &'b [u8]) -> Result<&'b str, FsError> {
    std::str::from_utf8(buf).map_err(|e| FsError::Read {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    })
}

/// The file's name, used as the field name for files holding one value.
pub(crate) fn file_field(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Parses one unsigned decimal number, surrounding whitespace allowed.
pub(crate) fn parse_u64(path: &Path, field: &str, value: &str) -> Result<u64, FsError> {
    value.trim().parse::<u64>().map_err(|_| FsError::Parse {
        path: path.to_path_buf(),
        field: field.to_string(),
        value: value.trim().to_string(),
        expected: "an unsigned decimal integer",
    })
}

/// Reads a cgroup file holding one number.
pub(crate) fn read_cgroup_u64(path: &Path) -> Result<u64, FsError> {
    let text = read_cgroup_file(path)?;
    parse_u64(path, &file_field(path), &text)
}

/// Reads a cgroup file holding one byte count.
pub(crate) fn read_cgroup_bytes(path: &Path) -> Result<Bytes, FsError> {
    read_cgroup_u64(path).map(Bytes)
}

/// Reads an optional cgroup file holding one number.
pub(crate) fn read_optional_cgroup_u64(path: &Path) -> Result<Option<u64>, FsError> {
    match read_optional_cgroup_file(path)? {
        Some(text) => parse_u64(path, &file_field(path), &text).map(Some),
        None => Ok(None),
    }
}

/// Undoes the kernel's `\ooo` octal escaping of whitespace and backslashes in paths printed by
/// /proc/self/mountinfo. A backslash not followed by three octal digits stays.
pub(crate) fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(b) = u8::try_from(v) {
                    out.push(b);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_in_existing_cgroup_is_none_but_gone_cgroup_is_vanished() {
        let tmp = tempfile::tempdir().unwrap();
        let present = tmp.path().join("memory.swap.max");
        assert!(read_optional_cgroup_file(&present).unwrap().is_none());
        let gone = tmp.path().join("gone").join("memory.current");
        assert!(read_optional_cgroup_file(&gone).unwrap_err().is_vanished());
        assert!(read_cgroup_file(&gone).unwrap_err().is_vanished());
    }

    #[test]
    fn octal_escapes_decode_and_stray_backslashes_stay() {
        let cases = [
            ("/mnt/a\\040b", "/mnt/a b"),
            ("/swap\\011file", "/swap\tfile"),
            ("/back\\134slash", "/back\\slash"),
            ("/plain", "/plain"),
            ("/end\\04", "/end\\04"),
            ("/bad\\089", "/bad\\089"),
            ("\\", "\\"),
        ];
        for (input, want) in cases {
            assert_eq!(unescape_octal(input), want, "{input:?}");
        }
    }

    #[test]
    fn missing_required_file_in_existing_cgroup_is_a_read_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = read_cgroup_file(&tmp.path().join("memory.current")).unwrap_err();
        assert!(matches!(err, FsError::Read { .. }), "{err}");
        assert!(err.to_string().contains("memory.current"));
    }

    #[test]
    fn number_files_parse_with_a_trailing_newline_and_reject_words() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memory.usage_in_bytes");
        std::fs::write(&path, "7516160\n").unwrap();
        assert_eq!(read_cgroup_bytes(&path).unwrap(), Bytes(7516160));
        std::fs::write(&path, "-5\n").unwrap();
        let err = read_cgroup_u64(&path).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("memory.usage_in_bytes") && msg.contains("\"-5\""),
            "{msg}"
        );
    }

    #[test]
    fn reading_at_zero_gets_the_whole_file_in_one_record_or_many() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("memory.stat");
        let long = "cache 1\n".repeat(2000);
        std::fs::write(&path, &long).unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = b"stale".to_vec();
        for one_record in [true, false] {
            read_all_at(&file, &mut buf, one_record).unwrap();
            assert_eq!(as_text(&path, &buf).unwrap(), long);
        }
        std::fs::write(&path, "").unwrap();
        read_all_at(&file, &mut buf, true).unwrap();
        assert!(buf.is_empty());
        let msg = as_text(&path, &[0xff]).unwrap_err().to_string();
        assert!(msg.contains("memory.stat"), "{msg}");
    }
}
