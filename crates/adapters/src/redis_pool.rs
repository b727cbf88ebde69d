//! Redis as a balloon pool: its `maxmemory` is the pool, moved with `CONFIG SET maxmemory` (Redis evicts down to it in the background, by the server's own `maxmemory-policy`) and followed by `MEMORY PURGE`, so that the allocator hands freed pages back to the kernel.
//!
//! What a resize confirms, before it answers done: `used_memory` at or under the new limit
//! (within `wait`), the eviction having really happened. Resident memory (`used_memory_rss`)
//! falls less than `used_memory` because of fragmentation; it is reported, not hidden: the
//! agent's `used_bytes` is `used_memory`, and memtide measures the cgroup itself. A server
//! under `maxmemory-policy noeviction` cannot give memory back: a shrink is refused, naming
//! the policy, and memtide's limit takes over.

use crate::server::Pool;
use memtide_balloon::agent::{PoolStats, Refusal};
use redis::{Commands, Connection};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A connected Redis and what a resize may wait for.
pub struct RedisPool {
    conn: Connection,
    /// How long a shrink waits for `used_memory` to fall under the new limit.
    pub wait: Duration,
}

/// Redis's `INFO` fields, as text.
type Info = BTreeMap<String, String>;

impl RedisPool {
    /// Connects to `url` (`redis://127.0.0.1:6379`, `unix:///run/redis.sock`), with a password
    /// when given.
    pub fn connect(url: &str, password: Option<String>) -> Result<RedisPool, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(5))?;
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        conn.set_write_timeout(Some(Duration::from_secs(5)))?;
        if let Some(p) = password {
            let _: () = redis::cmd("AUTH").arg(p).query(&mut conn)?;
        }
        Ok(RedisPool {
            conn,
            wait: Duration::from_secs(20),
        })
    }

    fn info(&mut self, section: &str) -> Result<Info, redis::RedisError> {
        let text: String = redis::cmd("INFO").arg(section).query(&mut self.conn)?;
        Ok(text
            .lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect())
    }

    /// A counter Redis reports; one it does not is a refusal naming it, never 0.
    fn number(info: &Info, key: &str) -> Result<u64, Refusal> {
        info.get(key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Refusal::new(format!("redis: INFO has no number for {key}")))
    }

    fn policy(&mut self) -> Result<String, redis::RedisError> {
        let (_, v): (String, String) = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query(&mut self.conn)?;
        Ok(v)
    }
}

impl Pool for RedisPool {
    /// The `maxmemory` in force (0: none).
    fn size(&mut self) -> Result<u64, Refusal> {
        let (_, v): (String, u64) = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query(&mut self.conn)
            .map_err(|e| Refusal::new(format!("redis: CONFIG GET maxmemory: {e}")))?;
        Ok(v)
    }

    /// Sets `maxmemory` to `bytes`; a shrink then waits for `used_memory` to fall under it
    /// and purges the allocator.
    fn resize(&mut self, bytes: u64) -> Result<(), Refusal> {
        let fail = |what: &str, e: redis::RedisError| Refusal::new(format!("redis: {what}: {e}"));
        let was = self.size()?;
        // 0 is no limit: only the give-back at exit asks it, of a Redis that had none.
        let shrinking = bytes != 0 && (was == 0 || bytes < was);
        if shrinking {
            // Only a limit under what Redis holds needs eviction; under noeviction Redis would
            // refuse writes instead of giving memory back.
            let info = self.info("memory").map_err(|e| fail("INFO memory", e))?;
            let used = Self::number(&info, "used_memory")?;
            let policy = self
                .policy()
                .map_err(|e| fail("CONFIG GET maxmemory-policy", e))?;
            if used > bytes && policy == "noeviction" {
                return Err(Refusal::new(format!(
                    "redis: maxmemory-policy is noeviction, so Redis cannot give memory back \
                     (used_memory {used} > {bytes})"
                )));
            }
        }
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(bytes)
            .query(&mut self.conn)
            .map_err(|e| fail("CONFIG SET maxmemory", e))?;
        if !shrinking {
            return Ok(());
        }
        let until = Instant::now() + self.wait;
        loop {
            let info = self.info("memory").map_err(|e| fail("INFO memory", e))?;
            let used = Self::number(&info, "used_memory")?;
            if used <= bytes {
                break;
            }
            if Instant::now() >= until {
                return Err(Refusal::new(format!(
                    "redis: used_memory {used} still above maxmemory {bytes} after {:?}",
                    self.wait
                ))
                .at(bytes));
            }
            // A write makes Redis evict at once, besides its background eviction.
            let _: Result<(), _> = self.conn.set("memtide:evict", 0);
            std::thread::sleep(Duration::from_millis(20));
        }
        let _: Result<(), _> = self.conn.del("memtide:evict");
        let _: () = redis::cmd("MEMORY")
            .arg("PURGE")
            .query(&mut self.conn)
            .map_err(|e| fail("MEMORY PURGE", e))?;
        Ok(())
    }

    /// The pool's statistics: `used_memory`, keyspace hits and misses, evicted keys.
    fn stats(&mut self) -> Result<PoolStats, Refusal> {
        let fail = |e: redis::RedisError| Refusal::new(format!("redis: INFO: {e}"));
        let memory = self.info("memory").map_err(fail)?;
        let stats = self.info("stats").map_err(fail)?;
        Ok(PoolStats {
            used_bytes: Self::number(&memory, "used_memory")?,
            hits: Self::number(&stats, "keyspace_hits")?,
            misses: Self::number(&stats, "keyspace_misses")?,
            evictions: Self::number(&stats, "evicted_keys")?,
            dirty_bytes: 0,
            curve: None,
            durability: None,
        })
    }
}
