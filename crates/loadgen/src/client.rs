//! One connection to the server under load: Redis (the `redis` crate) or memcached (the `memcache` crate, ASCII protocol), both blocking, with the request timeout as their socket deadline.
//!
//! Keys are `key:NNNNNNNN`; values are `value_bytes` bytes drawn from the seed (incompressible,
//! as a real dataset mostly is: zram cannot make an idle tenant free).

use crate::LoadError;
use memtide_rng::SimRng;
use std::time::Duration;

/// Where the server is, from `--server`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    /// `redis://HOST:PORT` or `redis+unix:///PATH` (as the redis crate reads them).
    Redis(String),
    /// `memcached://HOST:PORT`.
    Memcached { host: String, port: u16 },
}

impl Server {
    /// Parses `--server`.
    pub fn parse(text: &str) -> Result<Server, LoadError> {
        let bad = |why: &str| LoadError::Usage(format!("--server {text}: {why}"));
        if text.starts_with("redis://") || text.starts_with("redis+unix://") {
            return Ok(Server::Redis(text.to_string()));
        }
        let Some(rest) = text.strip_prefix("memcached://") else {
            return Err(bad(
                "expected redis://HOST:PORT, redis+unix:///PATH or memcached://HOST:PORT",
            ));
        };
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad("memcached://HOST:PORT needs its port"))?;
        let port = port
            .parse()
            .map_err(|_| bad("the port is not a number from 1 to 65535"))?;
        if host.is_empty() || port == 0 {
            return Err(bad("memcached://HOST:PORT needs a host and a port from 1"));
        }
        Ok(Server::Memcached {
            host: host.to_string(),
            port,
        })
    }
}

/// The name of key `i`.
pub fn key(i: u64) -> String {
    format!("key:{i:08}")
}

/// Key `i`'s value: `bytes` bytes fixed by `seed` and `i`.
pub fn value(seed: u64, i: u64, bytes: usize) -> Vec<u8> {
    let mut rng = SimRng::new(seed).fork(i);
    let mut v = Vec::with_capacity(bytes + 8);
    while v.len() < bytes {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(bytes);
    v
}

/// A connection.
pub enum Client {
    Redis(redis::Connection),
    Memcached(memcache::Client),
}

impl Client {
    /// Connects within `timeout`, which also bounds each request.
    pub fn connect(server: &Server, timeout: Duration) -> Result<Client, String> {
        match server {
            Server::Redis(url) => {
                let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
                let conn = client
                    .get_connection_with_timeout(timeout)
                    .map_err(|e| e.to_string())?;
                conn.set_read_timeout(Some(timeout))
                    .map_err(|e| e.to_string())?;
                conn.set_write_timeout(Some(timeout))
                    .map_err(|e| e.to_string())?;
                Ok(Client::Redis(conn))
            }
            Server::Memcached { host, port } => {
                let url = format!(
                    "memcache://{host}:{port}?timeout={}&tcp_nodelay=true&protocol=ascii",
                    timeout.as_secs_f64()
                );
                let client = memcache::Client::connect(url).map_err(|e| e.to_string())?;
                // The crate connects lazily: ask once, so a server that is not there fails
                // here.
                client.version().map_err(|e| e.to_string())?;
                Ok(Client::Memcached(client))
            }
        }
    }

    /// GETs key `i`: whether the server held it.
    pub fn get(&mut self, i: u64) -> Result<bool, String> {
        let k = key(i);
        match self {
            Client::Redis(c) => redis::cmd("GET")
                .arg(&k)
                .query::<Option<Vec<u8>>>(c)
                .map(|v| v.is_some())
                .map_err(|e| e.to_string()),
            Client::Memcached(c) => c
                .get::<Vec<u8>>(&k)
                .map(|v| v.is_some())
                .map_err(|e| e.to_string()),
        }
    }

    /// SETs keys `first..first + n` to their values (one pipeline on Redis).
    pub fn set_many(&mut self, seed: u64, first: u64, n: u64, bytes: usize) -> Result<(), String> {
        match self {
            Client::Redis(c) => {
                let mut pipe = redis::pipe();
                for i in first..first + n {
                    pipe.cmd("SET")
                        .arg(key(i))
                        .arg(value(seed, i, bytes))
                        .ignore();
                }
                pipe.query::<()>(c).map_err(|e| e.to_string())
            }
            Client::Memcached(c) => {
                for i in first..first + n {
                    c.set(&key(i), value(seed, i, bytes).as_slice(), 0)
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            Server::parse("redis://127.0.0.1:6379").unwrap(),
            Server::Redis("redis://127.0.0.1:6379".into())
        );
        assert_eq!(
            Server::parse("memcached://127.0.0.1:11211").unwrap(),
            Server::Memcached {
                host: "127.0.0.1".into(),
                port: 11211
            }
        );
        for (text, says) in [
            ("http://x", "expected redis://"),
            ("memcached://127.0.0.1", "needs its port"),
            ("memcached://127.0.0.1:0", "port from 1"),
            ("memcached://:11211", "needs a host"),
            ("memcached://h:99999", "not a number from 1 to 65535"),
        ] {
            let err = Server::parse(text).unwrap_err().to_string();
            assert!(err.contains(says) && err.contains(text), "{text}: {err}");
        }
    }

    #[test]
    fn values_are_fixed_by_seed_and_key_and_differ_between_keys() {
        assert_eq!(value(1, 2, 100), value(1, 2, 100));
        assert_eq!(value(1, 2, 100).len(), 100);
        assert_ne!(value(1, 2, 100), value(1, 3, 100));
        assert_ne!(value(1, 2, 100), value(2, 2, 100));
        assert_eq!(key(42), "key:00000042");
    }
}
