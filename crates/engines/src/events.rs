//! `Watcher`: a thread that follows an engine's event stream (`GET /events`, container events only) and marks the watched containers each event touches, so memtide asks the engine again only about those.
//!
//! The stream is read by hand here, on a socket the thread owns, rather than through ureq:
//! ureq's body reader can only be stopped by a timeout that ends the call, and an idle host
//! has no events for hours. Owning the socket lets the [`Watcher`] stop the thread at once
//! (it shuts down a clone of the socket). httparse parses the answer's head and each chunk's
//! size; this file only frames them and splits the body into its JSON lines. Every buffer is
//! bounded: the head at 16 KiB, an event line at 64 KiB (a longer one is skipped whole).
//!
//! What a stamp promises ([`crate::watch`] keeps the book): [`Watcher::stale`] is false only
//! while the stream has been up since the stamp was taken and no event touched the name (by
//! name, old name or the id recorded for it), so nothing known at the stamp can have changed
//! unseen. A stream that broke or reconnected makes every name stale (its events meanwhile
//! are lost; the engine keeps only its last 1,000, and the caller asks again anyway).

use crate::client::API;
use crate::watch::{lock, Backoff, Book, Lines, Stamp};
use crate::EngineKind;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The longest answer head read.
const MAX_HEAD: usize = 16 << 10;
/// The longest chunk-size line.
const MAX_CHUNK_LINE: usize = 1 << 10;
/// The longest wait for the answer's head, and for a write.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// What the thread and the watcher's holder share: each watched name with the id of the
/// container last found under it.
type Shared = Book<Option<String>>;

/// Marks the watched names event `e` touches: its name, its old name (a rename) or the id
/// last found under a name.
fn touch(book: &mut Shared, e: &Event) {
    let names: Vec<String> = book
        .watched
        .iter()
        .filter(|(name, id)| {
            e.names().any(|n| n == name.as_str()) || id.as_deref() == Some(e.actor.id.as_str())
        })
        .map(|(name, _)| name.clone())
        .collect();
    for name in names {
        book.mark(&name);
    }
}

/// One event of the stream, the parts read.
#[derive(Debug, Deserialize)]
struct Event {
    #[serde(rename = "Type", default)]
    kind: String,
    #[serde(rename = "Actor", default)]
    actor: Actor,
}

#[derive(Debug, Default, Deserialize)]
struct Actor {
    #[serde(rename = "ID", default)]
    id: String,
    #[serde(rename = "Attributes", default)]
    attributes: BTreeMap<String, String>,
}

impl Event {
    /// The container names the event is about: its name and, for a rename, its old one.
    fn names(&self) -> impl Iterator<Item = &str> {
        ["name", "oldName"]
            .into_iter()
            .filter_map(|k| self.actor.attributes.get(k))
            .map(|n| n.strip_prefix('/').unwrap_or(n))
    }
}

/// A thread on one engine's event stream (see the module docs). Dropping it stops the
/// thread.
#[derive(Debug)]
pub struct Watcher {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    /// A clone of the stream's socket, to shut down when stopping.
    stream: Arc<Mutex<Option<UnixStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts following the events of engine `kind` on `socket` (connecting, and again
    /// whenever the stream breaks, with a growing wait).
    pub fn start(kind: EngineKind, socket: &Path) -> std::io::Result<Watcher> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let stream = Arc::new(Mutex::new(None));
        let thread = {
            let (shared, stop, stream) = (shared.clone(), stop.clone(), stream.clone());
            let socket = socket.to_path_buf();
            std::thread::Builder::new()
                .name(format!("memtide-{kind}-events"))
                .spawn(move || follow_forever(&socket, &shared, &stop, &stream))?
        };
        Ok(Watcher {
            shared,
            stop,
            stream,
            thread: Some(thread),
        })
    }

    /// Watches the container named `name`, last found with id `id` (if any): events about
    /// either mark it. At most 4,096 names; beyond, a name is always stale.
    pub fn watch(&self, name: &str, id: Option<&str>) {
        lock(&self.shared).watch(name, id.map(str::to_string));
    }

    /// Stops watching `name`.
    pub fn unwatch(&self, name: &str) {
        lock(&self.shared).unwatch(name);
    }

    /// Now, for a later [`Watcher::stale`]: take it before asking the engine, so that an
    /// event during the question counts as after it.
    pub fn stamp(&self) -> Stamp {
        lock(&self.shared).stamp()
    }

    /// Whether what was learnt of `name` at `stamp` may be out of date (see the module docs).
    pub fn stale(&self, name: &str, stamp: Stamp) -> bool {
        lock(&self.shared).stale(name, stamp)
    }

    /// The stream is up.
    pub fn connected(&self) -> bool {
        lock(&self.shared).connected()
    }

    /// Why the stream last broke, if it did.
    pub fn error(&self) -> Option<String> {
        lock(&self.shared).error()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = lock(&self.stream).take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: follows the stream until stopped, reconnecting after a growing wait
/// ([`Backoff`]).
fn follow_forever(
    socket: &Path,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
    slot: &Mutex<Option<UnixStream>>,
) {
    let mut backoff = Backoff::default();
    while !stop.load(Ordering::SeqCst) {
        let mut was_up = false;
        let result = follow_once(socket, shared, stop, slot, &mut was_up);
        lock(shared).down(match result {
            Ok(()) => "the engine ended its event stream".to_string(),
            Err(e) => e,
        });
        *lock(slot) = None;
        backoff.wait(was_up, stop);
    }
}

/// One connection: the request, the answer's head, then events until the stream ends.
fn follow_once(
    socket: &Path,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
    slot: &Mutex<Option<UnixStream>>,
    was_up: &mut bool,
) -> Result<(), String> {
    let mut stream = UnixStream::connect(socket)
        .map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
    {
        let clone = stream.try_clone().map_err(|e| e.to_string())?;
        *lock(slot) = Some(clone);
    }
    if stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    stream
        .set_write_timeout(Some(HEAD_TIMEOUT))
        .and_then(|()| stream.set_read_timeout(Some(HEAD_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    // {"type":["container"]}
    let request = format!(
        "GET {API}/events?filters=%7B%22type%22%3A%5B%22container%22%5D%7D HTTP/1.1\r\n\
         Host: 127.0.0.1\r\nUser-Agent: memtide/{}\r\nAccept: application/json\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("cannot ask for events: {e}"))?;
    let mut reader = Framed {
        stream,
        buf: Vec::new(),
    };
    let chunked = reader.head()?;
    // Up: events come when they come.
    reader
        .stream
        .set_read_timeout(None)
        .map_err(|e| e.to_string())?;
    *was_up = true;
    lock(shared).up();
    let mut lines = Lines::default();
    let mut on_line = |line: &[u8]| {
        if let Ok(e) = serde_json::from_slice::<Event>(line) {
            if e.kind == "container" {
                touch(&mut lock(shared), &e);
            }
        }
    };
    if chunked {
        reader.chunks(|data| lines.feed(data, &mut on_line))
    } else {
        reader.until_end(|data| lines.feed(data, &mut on_line))
    }
}

/// The stream and the bytes read from it not yet used.
struct Framed {
    stream: UnixStream,
    buf: Vec<u8>,
}

impl Framed {
    /// Reads more into the buffer; `Ok(false)` at the end of the stream.
    fn fill(&mut self) -> Result<bool, String> {
        let mut chunk = [0u8; 16 << 10];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("the event stream broke: {e}")),
            }
        }
    }

    /// Reads the answer's head: it must be 200; whether the body is chunked.
    fn head(&mut self) -> Result<bool, String> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut answer = httparse::Response::new(&mut headers);
            match answer.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let code = answer.code.unwrap_or(0);
                    if code != 200 {
                        return Err(format!("the engine answered {code} to its events request"));
                    }
                    let chunked = answer.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("transfer-encoding")
                            && String::from_utf8_lossy(h.value)
                                .to_ascii_lowercase()
                                .contains("chunked")
                    });
                    self.buf.drain(..n);
                    return Ok(chunked);
                }
                Ok(httparse::Status::Partial) if self.buf.len() < MAX_HEAD => {
                    if !self.fill()? {
                        return Err("the engine closed the stream before its answer".into());
                    }
                }
                Ok(httparse::Status::Partial) => {
                    return Err(format!("the answer's head is longer than {MAX_HEAD} bytes"))
                }
                Err(e) => return Err(format!("the answer is not HTTP: {e}")),
            }
        }
    }

    /// Hands each chunk's data to `data` until the last chunk or the stream's end.
    fn chunks(&mut self, mut data: impl FnMut(&[u8])) -> Result<(), String> {
        loop {
            let size = loop {
                match httparse::parse_chunk_size(&self.buf) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        self.buf.drain(..n);
                        break size;
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() < MAX_CHUNK_LINE => {
                        if !self.fill()? {
                            return Ok(());
                        }
                    }
                    _ => return Err("a chunk of the event stream has no valid size".into()),
                }
            };
            if size == 0 {
                return Ok(());
            }
            let mut left = size;
            while left > 0 {
                if self.buf.is_empty() && !self.fill()? {
                    return Ok(());
                }
                let take = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                data(&self.buf[..take]);
                self.buf.drain(..take);
                left -= take as u64;
            }
            while self.buf.len() < 2 {
                if !self.fill()? {
                    return Ok(());
                }
            }
            if &self.buf[..2] != b"\r\n" {
                return Err("a chunk of the event stream does not end in CRLF".into());
            }
            self.buf.drain(..2);
        }
    }

    /// Hands everything to `data` until the stream's end (an answer that is not chunked).
    fn until_end(&mut self, mut data: impl FnMut(&[u8])) -> Result<(), String> {
        loop {
            if !self.buf.is_empty() {
                data(&self.buf);
                self.buf.clear();
            }
            if !self.fill()? {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::time::Instant;

    fn event(action: &str, id: &str, name: &str, old: Option<&str>) -> String {
        let old = old.map_or(String::new(), |o| format!(r#","oldName":"/{o}""#));
        format!(
            r#"{{"status":"{action}","id":"{id}","Type":"container","Action":"{action}","Actor":{{"ID":"{id}","Attributes":{{"image":"memtide-test:1","name":"{name}"{old}}}}},"scope":"local","time":1,"timeNano":1}}"#
        )
    }

    /// An engine that answers the events request with `chunks` (chunked), then holds the
    /// stream open until the watcher hangs up.
    fn engine(dir: &Path, chunks: Vec<String>) -> (PathBuf, std::thread::JoinHandle<String>) {
        let path = dir.join("engine.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut b).unwrap();
                head.push(b[0]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                .unwrap();
            for c in chunks {
                write!(s, "{:x}\r\n{c}\r\n", c.len()).unwrap();
                s.flush().unwrap();
            }
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            String::from_utf8_lossy(&head).into_owned()
        });
        (path, t)
    }

    fn until(what: &str, f: impl Fn() -> bool) {
        let start = Instant::now();
        while !f() {
            assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn events_mark_the_watched_names_they_touch_by_name_old_name_or_id() {
        let dir = tempfile::tempdir().unwrap();
        let id_a = "a".repeat(64);
        let id_b = "b".repeat(64);
        let (path, server) = engine(dir.path(), Vec::new());
        let w = Watcher::start(EngineKind::Docker, &path).unwrap();
        w.watch("redis-a", Some(&id_a));
        w.watch("redis-b", None);
        w.watch("redis-c", None);
        until("connected", || w.connected());
        let before = w.stamp();
        assert!(!w.stale("redis-a", before));
        // The events come through the shared state the thread fills.
        touch(
            &mut lock(&w.shared),
            &serde_json::from_str(&event("die", &id_a, "x", None)).unwrap(),
        );
        touch(
            &mut lock(&w.shared),
            &serde_json::from_str(&event("rename", &id_b, "z", Some("redis-b"))).unwrap(),
        );
        assert!(w.stale("redis-a", before), "by id");
        assert!(w.stale("redis-b", before), "by old name");
        assert!(!w.stale("redis-c", before));
        assert!(w.stale("unwatched", before));
        drop(w);
        let head = server.join().unwrap();
        assert!(head.starts_with("GET /v1.41/events?filters="), "{head}");
    }

    #[test]
    fn a_chunked_stream_is_framed_into_events_split_anywhere() {
        let dir = tempfile::tempdir().unwrap();
        let id = "c".repeat(64);
        let start = event("start", &id, "redis-a", None);
        let (one, two) = start.split_at(40);
        let chunks = vec![
            event("create", &"d".repeat(64), "other", None) + "\n",
            one.to_string(),
            two.to_string() + "\n",
        ];
        let (path, server) = engine(dir.path(), chunks);
        let w = Watcher::start(EngineKind::Podman, &path).unwrap();
        w.watch("redis-a", None);
        w.watch("other-not-watched-here", None);
        until("the start event marked redis-a", || {
            lock(&w.shared).touched.contains_key("redis-a")
        });
        drop(w);
        server.join().unwrap();
    }

    #[test]
    fn a_broken_stream_makes_every_name_stale_and_is_reconnected() {
        let dir = tempfile::tempdir().unwrap();
        let (path, server) = engine(dir.path(), Vec::new());
        let w = Watcher::start(EngineKind::Docker, &path).unwrap();
        w.watch("a", None);
        until("connected", || w.connected());
        let stamp = w.stamp();
        // The engine goes away: its socket's listener with it.
        std::fs::remove_file(&path).unwrap();
        drop(
            w.stream
                .lock()
                .unwrap()
                .take()
                .map(|s| s.shutdown(Shutdown::Both)),
        );
        until("down", || !w.connected());
        assert!(w.stale("a", stamp));
        assert!(w.error().is_some());
        // It comes back on the same path: the watcher connects again, a new epoch.
        let (_, server2) = engine(dir.path(), Vec::new());
        until("reconnected", || w.connected());
        assert!(
            w.stale("a", stamp),
            "a stamp from before the break stays stale"
        );
        assert!(!w.stale("a", w.stamp()));
        drop(w);
        server.join().unwrap();
        server2.join().unwrap();
    }

    #[test]
    fn a_refused_events_request_is_an_error_naming_the_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut b = [0u8; 512];
            let _ = s.read(&mut b);
            s.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        });
        let w = Watcher::start(EngineKind::Docker, &path).unwrap();
        until("an error", || w.error().is_some());
        assert!(
            w.error().unwrap().contains("answered 500"),
            "{:?}",
            w.error()
        );
        assert!(!w.connected());
        drop(w);
        t.join().unwrap();
    }
}
