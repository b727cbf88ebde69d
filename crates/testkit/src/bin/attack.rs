//! memtide-attack: what the security tests run as an unprivileged user against a real daemon's
//! sockets. Arguments are parsed by hand: a test tool with four verbs, not worth clap.
//!
//! - `memtide-attack hold (--unix PATH | --tcp ADDR) --count N [--send TEXT] --hold SECS`:
//!   opens N connections, writes TEXT (escapes `\n` understood) on each, keeps them all open
//!   SECS seconds and prints `opened K of N`.
//! - `memtide-attack request (--unix PATH | --tcp ADDR) --send TEXT [--timeout SECS]`: writes
//!   TEXT (`{pid}` replaced by its own pid, as an agent's hello names it), prints what comes
//!   back until the peer closes or the timeout passes.
//! - `memtide-attack liar --unix PATH --pool BYTES --seconds SECS`: a balloon agent that lies.
//!   It registers a pool of BYTES (all of it data, its max too), sends `stats` every second
//!   with misses growing (a pool in use), answers every target `working` and never resizes;
//!   closed, it connects again a second later, for SECS seconds in all. It prints
//!   `target seq=N pool_bytes=P deadline_ms=D` for each target and `closed` for each close.
//! - `memtide-attack handoff --unix PATH --send TEXT --after FILE --reply FILE [--timeout
//!   SECS]`: connects, forks and exits at once, printing its own pid (the socket peer's); the
//!   child keeps the connection, waits for the first FILE to exist, writes TEXT (`{pid}`
//!   replaced by that pid) and writes what comes back to the reply FILE. The borrowed identity
//!   of issue 27: the pid the socket recorded may name another process by then.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

enum Target {
    Unix(String),
    Tcp(String),
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn connect(target: &Target, timeout: Duration) -> std::io::Result<Box<dyn Stream>> {
    Ok(match target {
        Target::Unix(path) => {
            let s = UnixStream::connect(path)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            Box::new(s)
        }
        Target::Tcp(addr) => {
            let s = TcpStream::connect(addr)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            Box::new(s)
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let verb = args.first().map(String::as_str).unwrap_or("");
    let value = |flag: &str| -> Option<String> {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let number = |flag: &str, default: u64| -> u64 {
        value(flag).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| fail(&format!("{flag}: not a number: {v}")))
        })
    };
    let target = match (value("--unix"), value("--tcp")) {
        (Some(p), None) => Target::Unix(p),
        (None, Some(a)) => Target::Tcp(a),
        _ => fail("give exactly one of --unix PATH or --tcp ADDR"),
    };
    let send = value("--send").map(|t| t.replace("\\n", "\n").replace("\\r", "\r"));
    match verb {
        "hold" => {
            let count = number("--count", 1);
            let hold = Duration::from_secs(number("--hold", 10));
            let mut open = Vec::new();
            for _ in 0..count {
                match connect(&target, Duration::from_secs(2)) {
                    Ok(mut s) => {
                        if let Some(text) = &send {
                            let _ = s.write_all(text.as_bytes());
                        }
                        open.push(s);
                    }
                    Err(_) => continue,
                }
            }
            println!("opened {} of {count}", open.len());
            std::thread::sleep(hold);
        }
        "request" => {
            let timeout = Duration::from_secs(number("--timeout", 5));
            let mut s =
                connect(&target, timeout).unwrap_or_else(|e| fail(&format!("connect: {e}")));
            if let Some(text) = &send {
                let text = text.replace("{pid}", &std::process::id().to_string());
                s.write_all(text.as_bytes())
                    .unwrap_or_else(|e| fail(&format!("write: {e}")));
            }
            let mut reply = Vec::new();
            let _ = s.read_to_end(&mut reply);
            print!("{}", String::from_utf8_lossy(&reply));
        }
        "liar" => {
            let Target::Unix(path) = &target else {
                fail("liar speaks on a --unix socket")
            };
            let until = Instant::now() + Duration::from_secs(number("--seconds", 60));
            let pool = number("--pool", 1 << 40);
            while Instant::now() < until {
                if let Err(e) = lie(path, pool, until) {
                    eprintln!("memtide-attack: liar: {e}");
                }
                println!("closed");
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        "handoff" => {
            let timeout = Duration::from_secs(number("--timeout", 30));
            let after = value("--after").unwrap_or_else(|| fail("--after FILE is needed"));
            let reply_to = value("--reply").unwrap_or_else(|| fail("--reply FILE is needed"));
            let mut s =
                connect(&target, timeout).unwrap_or_else(|e| fail(&format!("connect: {e}")));
            let me = std::process::id();
            println!("{me}");
            let _ = std::io::stdout().flush();
            // SAFETY: this program has one thread; the child only makes system calls and
            // allocates, as a single-threaded process may after fork.
            match unsafe { libc::fork() } {
                -1 => fail("fork failed"),
                0 => {}
                _ => std::process::exit(0),
            }
            // The child: let go of the caller's pipes, so it sees the parent end.
            let null = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .unwrap_or_else(|e| fail(&format!("/dev/null: {e}")));
            // SAFETY: dup2 onto the standard descriptors this process owns.
            unsafe {
                libc::dup2(null.as_raw_fd(), 1);
                libc::dup2(null.as_raw_fd(), 2);
            }
            let until = std::time::Instant::now() + timeout;
            while !std::path::Path::new(&after).exists() {
                if std::time::Instant::now() > until {
                    std::process::exit(3);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let text = send.unwrap_or_default().replace("{pid}", &me.to_string());
            let _ = s.write_all(text.as_bytes());
            let mut reply = Vec::new();
            let _ = s.read_to_end(&mut reply);
            let _ = std::fs::write(&reply_to, reply);
        }
        _ => fail("usage: memtide-attack hold|request|liar|handoff (--unix PATH | --tcp ADDR) ..."),
    }
}

/// One session of the liar: hello with a pool of `pool` bytes, then `stats` every second and
/// `working` for every target, until the socket closes or `until`.
fn lie(path: &str, pool: u64, until: Instant) -> std::io::Result<()> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let pid = std::process::id();
    writeln!(
        s,
        r#"{{"type":"hello","version":1,"app":"liar","kind":"cache","pid":{pid},"pool_bytes":{pool},"min_bytes":0,"max_bytes":{pool},"granule_bytes":1048576}}"#
    )?;
    let mut reader = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    let mut misses = 0u64;
    // Stats from the welcome on.
    let mut stats_at = None;
    while Instant::now() < until {
        if let Some(at) = stats_at.as_mut().filter(|at| Instant::now() >= **at) {
            misses += 1000;
            writeln!(
                s,
                r#"{{"type":"stats","pool_bytes":{pool},"used_bytes":{pool},"hits":{misses},"misses":{misses},"evictions":0,"dirty_bytes":0}}"#
            )?;
            *at += Duration::from_secs(1);
        }
        match reader.read_line(&mut line) {
            Ok(0) => return Ok(()),
            Ok(_) if line.ends_with('\n') => {
                if line.contains(r#""type":"welcome""#) {
                    stats_at = Some(Instant::now());
                }
                if line.contains(r#""type":"target""#) {
                    let field = |name: &str| {
                        line.split(&format!(r#""{name}":"#))
                            .nth(1)
                            .and_then(|v| v.split([',', '}']).next())
                            .and_then(|v| v.trim().parse::<u64>().ok())
                            .unwrap_or(0)
                    };
                    let seq = field("seq");
                    println!(
                        "target seq={seq} pool_bytes={} deadline_ms={}",
                        field("pool_bytes"),
                        field("deadline_ms")
                    );
                    writeln!(
                        s,
                        r#"{{"type":"progress","seq":{seq},"pool_bytes":{pool},"status":"working"}}"#
                    )?;
                }
                line.clear();
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn fail(why: &str) -> ! {
    eprintln!("memtide-attack: {why}");
    std::process::exit(2);
}
