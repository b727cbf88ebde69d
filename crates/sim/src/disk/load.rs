//! What a tenant does on the shared disk: a closed-loop n-tier application over a database with InnoDB's commit path (RUBBoS-like), or Filebench-like writer threads that write and fsync.
//!
//! **n-tier (Lai et al.'s RUBBoS systems).** `users` users each think (exponential, mean
//! `think_ms`), then send a request through the web and application tiers and the database
//! (`cpu_ms` in all, as a delay: the paper pins each server to its own cores, so the CPU is not
//! what they contend for). The database reads what misses its buffer pool (on average
//! `reads_per_request` random reads, one after the other). A write request (`write_share` of
//! them; RUBBoS's read/write mix is 10%) then runs InnoDB's commit path as MySQL 5.5 has it:
//! - its redo record (`redo_bytes`) goes into the **log buffer**; the log writer writes and
//!   fsyncs what the buffer holds once a second and whenever it is half full, one flush at a
//!   time; a record that does not fit waits for the flush under way (a *log wait*). A larger
//!   buffer means fewer, larger flushes: more commit records per fsync;
//! - it commits under the commit mutex (5.5's `prepare_commit_mutex`: no binlog group commit),
//!   writing its binlog event; every `sync_binlog`-th commit fsyncs the binlog while holding the
//!   mutex, so every commit behind it waits for that fsync;
//! - it dirties `pages_dirtied` buffer-pool pages, which the page cleaner hands once a second
//!   (at most `io_capacity` of them) to `write_io_threads` writer threads, each with one random
//!   page write outstanding at a time: more threads, a deeper queue ahead of every fsync.
//!
//! The response time is from the request leaving the user to the answer (think time excluded),
//! the figure the paper plots. With `growth`, `add` users join every `every` until `until`: the
//! paper's Sys_Inc, from 1,000 to 2,600 users in steps of 200.
//!
//! **fsync writers (the paper's Filebench runs).** `threads` threads each append `write_bytes`
//! to a file of their own and fsync it, then pause `gap_us`: the fsync latency is the figure.
//! Thread `k` starts `k * stagger_us` in, so one run shows 1, 2, 3 and 4 threads in turn.
//!
//! Deterministic: each tenant draws from its own stream. Cost O(1) per event.

use super::device::{IoKind, Request, Us};
use crate::rng::SimRng;
use std::collections::VecDeque;

/// Users added over time.
#[derive(Clone, Debug, PartialEq)]
pub struct Growth {
    pub add: u32,
    pub every: Us,
    pub until: u32,
}

/// The database's settings that shape its I/O (MySQL 5.5 / InnoDB names).
#[derive(Clone, Debug, PartialEq)]
pub struct DbSettings {
    /// `innodb_log_buffer_size`, bytes.
    pub log_buffer: u64,
    /// Redo bytes one write transaction logs.
    pub redo_bytes: u64,
    /// `sync_binlog`: fsync the binlog every this many commits (at least 1).
    pub sync_binlog: u32,
    /// Binlog bytes one commit writes.
    pub binlog_bytes: u64,
    /// Pages one write transaction dirties.
    pub pages_dirtied: f64,
    /// `innodb_page_size`, bytes.
    pub page_bytes: u64,
    /// `innodb_io_capacity`: most pages the cleaner flushes a second.
    pub io_capacity: u32,
    /// `innodb_write_io_threads` (at least 1).
    pub write_io_threads: u16,
}

/// A RUBBoS-like application (web, application and database tiers) with closed-loop users.
#[derive(Clone, Debug, PartialEq)]
pub struct NtierConfig {
    pub users: u32,
    pub growth: Option<Growth>,
    pub think_ms: f64,
    pub cpu_ms: f64,
    pub reads_per_request: f64,
    pub read_bytes: u64,
    pub write_share: f64,
    pub db: DbSettings,
}

/// Filebench-like writers: write, fsync, pause.
#[derive(Clone, Debug, PartialEq)]
pub struct FsyncConfig {
    pub threads: u16,
    pub write_bytes: u64,
    pub gap_us: Us,
    /// Thread `k` starts `k * stagger_us` after the workload (the paper's 1 -> 4 threads).
    pub stagger_us: Us,
}

/// A tenant's disk workload.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadConfig {
    Ntier(NtierConfig),
    Fsync(FsyncConfig),
}

/// What a tenant's disk work did over one tick.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct DiskTick {
    /// Requests answered (n-tier).
    pub requests: u64,
    /// Their response times summed, µs.
    pub response_us: u64,
    /// I/O requests the disk served for the tenant.
    pub ios: u64,
    pub bytes: u64,
    /// fsyncs completed (log, binlog, writer threads) and their latencies summed, µs.
    pub syncs: u64,
    pub sync_us: u64,
    /// Redo records that waited for room in the log buffer.
    pub log_waits: u64,
    /// Time the tenant's requests spent queued and served, µs (for the mean I/O latency).
    pub io_us: u64,
}

/// Who waits for an I/O.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Waiter {
    User(u32),
    Log,
    Binlog,
    Page(u16),
    Writer(u16),
}

/// A tenant's own timers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// A user's think time is over.
    Think(u32),
    /// A request's CPU work is done.
    Cpu(u32),
    /// The log writer's once-a-second flush.
    LogFlush,
    /// The page cleaner's once-a-second batch.
    Cleaner,
    /// A writer thread's pause is over.
    Gap(u16),
    /// Users join.
    Grow,
}

/// What a step of the workload asks for.
#[derive(Debug, Default)]
pub struct Out {
    pub ios: Vec<(Request, Waiter)>,
    pub timers: Vec<(Us, Timer)>,
}

const SECOND: Us = 1_000_000;
const LOG_STREAM: u64 = 1;
const BINLOG_STREAM: u64 = 2;
const FILE_STREAM: u64 = 16;

#[derive(Copy, Clone, Debug, Default)]
struct User {
    started: Us,
    reads_left: u32,
    write: bool,
}

/// A running workload.
#[derive(Clone, Debug)]
pub enum Load {
    Ntier(Box<Ntier>),
    Fsync(Fsync),
}

#[derive(Clone, Debug)]
pub struct Ntier {
    config: NtierConfig,
    base: u64,
    users: Vec<User>,
    /// Redo bytes in the buffer not yet being flushed, and those being flushed.
    log_used: u64,
    log_flushing: u64,
    log_waiters: VecDeque<u32>,
    mutex_queue: VecDeque<u32>,
    mutex_held: bool,
    commits_since_sync: u32,
    binlog_unsynced: u64,
    dirty: f64,
    pages_left: u64,
    idle_writers: Vec<u16>,
}

#[derive(Clone, Debug)]
pub struct Fsync {
    config: FsyncConfig,
    base: u64,
}

fn exp(rng: &mut SimRng, mean_us: f64) -> Us {
    (-(1.0 - rng.next_f64()).ln() * mean_us).round() as Us
}

impl Load {
    /// Starts a workload at `now`; `base` makes its streams its own.
    pub fn start(config: &LoadConfig, base: u64, now: Us, rng: &mut SimRng, out: &mut Out) -> Load {
        match config {
            LoadConfig::Ntier(c) => {
                let mut n = Ntier {
                    config: c.clone(),
                    base,
                    users: Vec::new(),
                    log_used: 0,
                    log_flushing: 0,
                    log_waiters: VecDeque::new(),
                    mutex_queue: VecDeque::new(),
                    mutex_held: false,
                    commits_since_sync: 0,
                    binlog_unsynced: 0,
                    dirty: 0.0,
                    pages_left: 0,
                    idle_writers: (0..c.db.write_io_threads.max(1)).rev().collect(),
                };
                n.add_users(c.users, now, rng, out);
                out.timers.push((now + SECOND, Timer::LogFlush));
                out.timers.push((now + SECOND, Timer::Cleaner));
                if let Some(g) = &c.growth {
                    out.timers.push((now + g.every, Timer::Grow));
                }
                Load::Ntier(Box::new(n))
            }
            LoadConfig::Fsync(c) => {
                let f = Fsync {
                    config: c.clone(),
                    base,
                };
                for k in 0..c.threads {
                    out.timers
                        .push((now + u64::from(k) * c.stagger_us, Timer::Gap(k)));
                }
                Load::Fsync(f)
            }
        }
    }

    pub fn timer(
        &mut self,
        now: Us,
        t: Timer,
        rng: &mut SimRng,
        out: &mut Out,
        tick: &mut DiskTick,
    ) {
        match self {
            Load::Ntier(n) => n.timer(now, t, rng, out, tick),
            Load::Fsync(f) => {
                if let Timer::Gap(k) = t {
                    out.ios.push((
                        Request {
                            kind: IoKind::Sync,
                            stream: f.base | (FILE_STREAM + u64::from(k)),
                            bytes: f.config.write_bytes,
                        },
                        Waiter::Writer(k),
                    ));
                }
            }
        }
    }

    /// `w`'s I/O is done.
    pub fn done(
        &mut self,
        now: Us,
        w: Waiter,
        rng: &mut SimRng,
        out: &mut Out,
        tick: &mut DiskTick,
    ) {
        match self {
            Load::Ntier(n) => n.done(now, w, rng, out, tick),
            Load::Fsync(f) => {
                if let Waiter::Writer(k) = w {
                    out.timers.push((now + f.config.gap_us, Timer::Gap(k)));
                }
            }
        }
    }
}

impl Ntier {
    fn add_users(&mut self, n: u32, now: Us, rng: &mut SimRng, out: &mut Out) {
        let think = self.config.think_ms * 1000.0;
        for _ in 0..n {
            let u = self.users.len() as u32;
            self.users.push(User::default());
            out.timers.push((now + exp(rng, think), Timer::Think(u)));
        }
    }

    fn timer(&mut self, now: Us, t: Timer, rng: &mut SimRng, out: &mut Out, tick: &mut DiskTick) {
        match t {
            Timer::Think(u) => {
                let reads = self.config.reads_per_request;
                let whole = reads.floor();
                let extra = u32::from(rng.chance(reads - whole));
                self.users[u as usize] = User {
                    started: now,
                    reads_left: whole as u32 + extra,
                    write: rng.chance(self.config.write_share),
                };
                let cpu = (self.config.cpu_ms * 1000.0).round() as Us;
                out.timers.push((now + cpu, Timer::Cpu(u)));
            }
            Timer::Cpu(u) => self.next(now, u, rng, out, tick),
            Timer::LogFlush => {
                self.start_flush(out);
                out.timers.push((now + SECOND, Timer::LogFlush));
            }
            Timer::Cleaner => {
                let batch = (self.dirty.floor() as u64).min(u64::from(self.config.db.io_capacity));
                self.dirty -= batch as f64;
                self.pages_left += batch;
                while self.pages_left > 0 {
                    let Some(k) = self.idle_writers.pop() else {
                        break;
                    };
                    self.write_page(k, out);
                }
                out.timers.push((now + SECOND, Timer::Cleaner));
            }
            Timer::Grow => {
                if let Some(g) = self.config.growth.clone() {
                    let room = g.until.saturating_sub(self.users.len() as u32);
                    self.add_users(g.add.min(room), now, rng, out);
                    if (self.users.len() as u32) < g.until {
                        out.timers.push((now + g.every, Timer::Grow));
                    }
                }
            }
            Timer::Gap(_) => {}
        }
    }

    fn done(&mut self, now: Us, w: Waiter, rng: &mut SimRng, out: &mut Out, tick: &mut DiskTick) {
        match w {
            Waiter::User(u) => self.next(now, u, rng, out, tick),
            Waiter::Log => {
                self.log_flushing = 0;
                while let Some(&u) = self.log_waiters.front() {
                    if !self.fits() {
                        break;
                    }
                    self.log_waiters.pop_front();
                    self.append(now, u, rng, out, tick);
                }
                if self.log_used >= self.config.db.log_buffer / 2 {
                    self.start_flush(out);
                }
            }
            Waiter::Binlog => {
                let holder = self.mutex_queue.pop_front();
                self.mutex_held = false;
                if let Some(u) = holder {
                    self.complete(now, u, rng, out, tick);
                }
                self.take_mutex(now, rng, out, tick);
            }
            Waiter::Page(k) => {
                if self.pages_left > 0 {
                    self.write_page(k, out);
                } else {
                    self.idle_writers.push(k);
                }
            }
            Waiter::Writer(_) => {}
        }
    }

    /// The request's next step after its CPU work or a read.
    fn next(&mut self, now: Us, u: u32, rng: &mut SimRng, out: &mut Out, tick: &mut DiskTick) {
        let user = &mut self.users[u as usize];
        if user.reads_left > 0 {
            user.reads_left -= 1;
            out.ios.push((
                Request {
                    kind: IoKind::Read,
                    stream: 0,
                    bytes: self.config.read_bytes,
                },
                Waiter::User(u),
            ));
        } else if user.write {
            if self.fits() && self.log_waiters.is_empty() {
                self.append(now, u, rng, out, tick);
            } else {
                tick.log_waits += 1;
                self.log_waiters.push_back(u);
                self.start_flush(out);
            }
        } else {
            self.complete(now, u, rng, out, tick);
        }
    }

    fn fits(&self) -> bool {
        self.log_used + self.log_flushing + self.config.db.redo_bytes <= self.config.db.log_buffer
    }

    /// Logs `u`'s redo record (there is room), then commits.
    fn append(&mut self, now: Us, u: u32, rng: &mut SimRng, out: &mut Out, tick: &mut DiskTick) {
        self.log_used += self.config.db.redo_bytes;
        self.dirty += self.config.db.pages_dirtied;
        if self.log_used >= self.config.db.log_buffer / 2 {
            self.start_flush(out);
        }
        self.mutex_queue.push_back(u);
        self.take_mutex(now, rng, out, tick);
    }

    /// The log writer writes and fsyncs what the buffer holds, unless a flush is under way.
    fn start_flush(&mut self, out: &mut Out) {
        if self.log_flushing > 0 || self.log_used == 0 {
            return;
        }
        self.log_flushing = self.log_used;
        self.log_used = 0;
        out.ios.push((
            Request {
                kind: IoKind::Sync,
                stream: self.base | LOG_STREAM,
                bytes: self.log_flushing,
            },
            Waiter::Log,
        ));
    }

    /// Commits the queue's head while the mutex is free: a commit that needs no binlog fsync
    /// releases it at once.
    fn take_mutex(&mut self, now: Us, rng: &mut SimRng, out: &mut Out, tick: &mut DiskTick) {
        while !self.mutex_held {
            let Some(&u) = self.mutex_queue.front() else {
                return;
            };
            self.commits_since_sync += 1;
            self.binlog_unsynced += self.config.db.binlog_bytes;
            if self.commits_since_sync >= self.config.db.sync_binlog.max(1) {
                self.commits_since_sync = 0;
                self.mutex_held = true;
                out.ios.push((
                    Request {
                        kind: IoKind::Sync,
                        stream: self.base | BINLOG_STREAM,
                        bytes: std::mem::take(&mut self.binlog_unsynced),
                    },
                    Waiter::Binlog,
                ));
            } else {
                self.mutex_queue.pop_front();
                self.complete(now, u, rng, out, tick);
            }
        }
    }

    fn write_page(&mut self, k: u16, out: &mut Out) {
        self.pages_left -= 1;
        out.ios.push((
            Request {
                kind: IoKind::Write { sequential: false },
                stream: 0,
                bytes: self.config.db.page_bytes,
            },
            Waiter::Page(k),
        ));
    }

    fn complete(&mut self, now: Us, u: u32, rng: &mut SimRng, out: &mut Out, tick: &mut DiskTick) {
        let started = self.users[u as usize].started;
        tick.requests += 1;
        tick.response_us += now - started;
        let think = self.config.think_ms * 1000.0;
        out.timers.push((now + exp(rng, think), Timer::Think(u)));
    }
}
