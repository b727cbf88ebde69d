//! memtide-attack: what the security tests run as an unprivileged user against a real daemon's
//! sockets. Arguments are parsed by hand: a test tool with two verbs, not worth clap.
//!
//! - `memtide-attack hold (--unix PATH | --tcp ADDR) --count N [--send TEXT] --hold SECS`:
//!   opens N connections, writes TEXT (escapes `\n` understood) on each, keeps them all open
//!   SECS seconds and prints `opened K of N`.
//! - `memtide-attack request (--unix PATH | --tcp ADDR) --send TEXT [--timeout SECS]`: writes
//!   TEXT, prints what comes back until the peer closes or the timeout passes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

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
                s.write_all(text.as_bytes())
                    .unwrap_or_else(|e| fail(&format!("write: {e}")));
            }
            let mut reply = Vec::new();
            let _ = s.read_to_end(&mut reply);
            print!("{}", String::from_utf8_lossy(&reply));
        }
        _ => fail("usage: memtide-attack hold|request (--unix PATH | --tcp ADDR) ..."),
    }
}

fn fail(why: &str) -> ! {
    eprintln!("memtide-attack: {why}");
    std::process::exit(2);
}
