//! The agent's thread: connect, register, answer memtide's lines, send stats and progress on time, and wait out a back-off between connections; every input (a line, a closed connection, a finished resize, the application's stop) arrives as one [`Event`] on one channel.

use std::io::{self, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::resize::{Job, Resizer};
use super::{AgentError, AgentState, PoolStats, Refusal, ResizeFn, Shared, StatsFn};
use crate::line::{Line, LineReader, MAX_LINE_BYTES};
use crate::protocol::{
    check_curve, check_durability, truncate_to, AgentMessage, Bye, ErrorCode, ErrorMessage, Hello,
    MemtideMessage, PoolInfo, Progress, ProgressStatus, ProtocolError, Stats, Target, MAX_INTEGER,
    MAX_REASON_BYTES,
};

/// How often a target still being worked on is answered `progress working`.
const WORKING_EVERY: Duration = Duration::from_secs(1);

/// How long a write to memtide may block before the connection counts as failed.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many events may wait for the agent's thread; a reader that gets ahead waits, and so
/// does memtide's writing.
const EVENT_QUEUE: usize = 256;

/// What wakes the agent's thread.
pub(super) enum Event {
    /// A line (or an over-long one) read on connection `connection`.
    Line { connection: u64, line: Line },
    /// Connection `connection` reached its end or failed.
    Closed {
        connection: u64,
        error: Option<io::Error>,
    },
    /// The resize thread finished a job.
    Resized {
        job: Job,
        outcome: Result<(), Refusal>,
    },
    /// The application stops the agent.
    Stop,
}

pub(super) struct Setup {
    pub pool: PoolInfo,
    pub socket: PathBuf,
    pub shared: Arc<Shared>,
    pub shrink: ResizeFn,
    pub grow: ResizeFn,
    pub stats: StatsFn,
    pub backoff: Backoff,
    pub welcome_timeout: Duration,
}

/// Starts the agent's thread; the sender is how the application stops it.
pub(super) fn spawn(setup: Setup) -> io::Result<(SyncSender<Event>, JoinHandle<()>)> {
    let (sender, events) = mpsc::sync_channel(EVENT_QUEUE);
    let resizer = Resizer::spawn(setup.shrink, setup.grow, sender.clone())?;
    let runner = Runner {
        pool_bytes: setup.pool.pool_bytes,
        pool: setup.pool,
        socket: setup.socket,
        shared: setup.shared,
        stats: setup.stats,
        backoff: setup.backoff,
        welcome_timeout: setup.welcome_timeout,
        events,
        sender: sender.clone(),
        resizer,
        running: None,
        sent: PoolStats::default(),
        connections: 0,
    };
    // When this fails the runner is dropped, and with it the resize thread's job sender:
    // that thread ends on its own.
    let thread = thread::Builder::new()
        .name("memtide-balloon".into())
        .spawn(move || runner.run())?;
    Ok((sender, thread))
}

/// How a connection ended.
enum End {
    /// The application stopped the agent.
    Stop,
    /// The connection is gone; connect again after the back-off.
    Lost,
}

struct Runner {
    pool: PoolInfo,
    socket: PathBuf,
    shared: Arc<Shared>,
    stats: StatsFn,
    backoff: Backoff,
    /// How long to wait for the `welcome` after the `hello`.
    welcome_timeout: Duration,
    events: Receiver<Event>,
    /// Cloned into each connection's reader thread.
    sender: SyncSender<Event>,
    resizer: Resizer,
    /// The pool's size as the agent knows it.
    pool_bytes: u64,
    /// The job at the resize thread, if any.
    running: Option<Job>,
    /// The counters last sent, which the next stats never go below.
    sent: PoolStats,
    /// Connections made so far; each connection's events carry its number.
    connections: u64,
}

/// One connection to memtide.
struct Session {
    id: u64,
    stream: UnixStream,
    /// Set by the `welcome`.
    stats_every: Option<Duration>,
    next_stats: Option<Instant>,
    /// When the connection is given up if no `welcome` came; `None` once it came.
    welcome_by: Option<Instant>,
    /// The `seq` of the last valid target.
    last_seq: u64,
    /// The newest valid target not answered yet.
    wanted: Option<Target>,
    next_working: Option<Instant>,
}

impl Runner {
    fn run(mut self) {
        loop {
            self.shared.set_state(AgentState::Connecting);
            let end = match UnixStream::connect(&self.socket) {
                Ok(stream) => self.session(stream),
                Err(e) => {
                    self.shared.record(AgentError::Connect {
                        socket: self.socket.clone(),
                        source: Arc::new(e),
                    });
                    End::Lost
                }
            };
            if let End::Stop = end {
                break;
            }
            self.shared.set_state(AgentState::WaitingToReconnect);
            let wait = self.backoff.wait();
            if let End::Stop = self.wait_between_connections(wait) {
                break;
            }
        }
        self.shut_down();
    }

    /// Waits `wait`, taking finished resizes meanwhile; ends early on a stop.
    fn wait_between_connections(&mut self, wait: Duration) -> End {
        let until = Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(Event::Stop) => return End::Stop,
                Ok(Event::Resized { job, outcome }) => self.finished(job, &outcome),
                Ok(Event::Line { .. } | Event::Closed { .. }) => {}
                Err(RecvTimeoutError::Timeout) => return End::Lost,
                // The runner holds a sender itself, so the channel cannot disconnect.
                Err(RecvTimeoutError::Disconnected) => return End::Stop,
            }
        }
    }

    /// Lets a running callback return, then ends the resize thread.
    fn shut_down(mut self) {
        while self.running.is_some() {
            match self.events.recv() {
                Ok(Event::Resized { job, outcome }) => self.finished(job, &outcome),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.resizer.finish();
        self.shared.set_state(AgentState::Stopped);
    }

    fn session(&mut self, stream: UnixStream) -> End {
        self.connections += 1;
        let mut session = Session {
            id: self.connections,
            stream,
            stats_every: None,
            next_stats: None,
            welcome_by: Instant::now().checked_add(self.welcome_timeout),
            last_seq: 0,
            wanted: None,
            next_working: None,
        };
        let end = match self.open(&session) {
            Ok(()) => {
                self.shared.set_state(AgentState::Registering);
                self.serve(&mut session)
            }
            Err(e) => {
                self.lost(e);
                End::Lost
            }
        };
        // Ends the reader thread: its read sees the end of the stream. Shutting down a socket
        // that memtide already closed fails harmlessly.
        let _ = session.stream.shutdown(Shutdown::Both);
        end
    }

    /// Starts the connection's reader thread and says hello.
    fn open(&mut self, session: &Session) -> io::Result<()> {
        session.stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let reading = session.stream.try_clone()?;
        let sender = self.sender.clone();
        let connection = session.id;
        // The reader is not joined: it ends once the stream is shut down and its last event
        // is taken (or the agent's thread has gone).
        thread::Builder::new()
            .name("memtide-balloon-read".into())
            .spawn(move || read_lines(reading, connection, sender))?;
        let mut pool = self.pool.clone();
        pool.pool_bytes = self.pool_bytes;
        let hello = AgentMessage::Hello(Hello {
            pid: std::process::id(),
            pool,
        });
        write_line(&session.stream, &hello)
    }

    /// Answers events until the connection ends or the application stops the agent.
    fn serve(&mut self, session: &mut Session) -> End {
        loop {
            let due = [session.welcome_by, session.next_stats, session.next_working]
                .into_iter()
                .flatten()
                .min();
            let event = match due {
                Some(due) => {
                    let left = due.saturating_duration_since(Instant::now());
                    match self.events.recv_timeout(left) {
                        Ok(event) => Some(event),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => Some(Event::Stop),
                    }
                }
                None => Some(self.events.recv().unwrap_or(Event::Stop)),
            };
            let step = match event {
                Some(Event::Line { connection, line }) if connection == session.id => {
                    self.line(session, line)
                }
                Some(Event::Closed { connection, error }) if connection == session.id => {
                    match error {
                        Some(e) => Err(Ending::Failed(e)),
                        None => Err(Ending::Closed),
                    }
                }
                Some(Event::Line { .. } | Event::Closed { .. }) => Ok(()),
                Some(Event::Resized { job, outcome }) => {
                    self.finished(job, &outcome);
                    self.answer_finished(session, job, outcome)
                }
                Some(Event::Stop) => {
                    let bye = AgentMessage::Bye(Bye {
                        reason: Some("the application stopped its agent".into()),
                    });
                    // The agent stops whether or not memtide hears the bye.
                    let _ = write_line(&session.stream, &bye);
                    return End::Stop;
                }
                None => Ok(()),
            };
            if let Err(ending) = step.and_then(|()| self.timers(session)) {
                match ending {
                    Ending::Failed(e) => self.lost(e),
                    Ending::Closed => self.shared.record(AgentError::Closed {
                        socket: self.socket.clone(),
                    }),
                    Ending::Recorded => {}
                }
                return End::Lost;
            }
        }
    }

    fn lost(&self, error: io::Error) {
        self.shared.record(AgentError::Connection {
            socket: self.socket.clone(),
            source: Arc::new(error),
        });
    }

    /// Sends what is due (stats, and `progress working` for a target still being worked on),
    /// or gives the connection up when the `welcome` is late.
    fn timers(&mut self, session: &mut Session) -> Result<(), Ending> {
        let now = Instant::now();
        if session.welcome_by.is_some_and(|due| now >= due) {
            self.shared.record(AgentError::NoWelcome {
                socket: self.socket.clone(),
                within: self.welcome_timeout,
            });
            return Err(Ending::Recorded);
        }
        if let (Some(due), Some(every)) = (session.next_stats, session.stats_every) {
            if now >= due {
                self.send_stats(session)?;
                // On the grid of the first stats, unless a whole interval was missed.
                let next = due.checked_add(every).filter(|next| *next > now);
                session.next_stats = next.or_else(|| now.checked_add(every));
            }
        }
        if let (Some(due), Some(target)) = (session.next_working, &session.wanted) {
            if now >= due {
                let working = AgentMessage::Progress(Progress {
                    seq: target.seq,
                    pool_bytes: self.pool_bytes,
                    status: ProgressStatus::Working,
                    reason: None,
                });
                send(session, &working)?;
                session.next_working = now.checked_add(WORKING_EVERY);
            }
        }
        Ok(())
    }

    fn line(&mut self, session: &mut Session, line: Line) -> Result<(), Ending> {
        let bytes = match line {
            Line::Complete(bytes) => bytes,
            Line::TooLong => {
                let error = ProtocolError::new(
                    ErrorCode::TooLong,
                    format!("a line from memtide is over {MAX_LINE_BYTES} bytes"),
                );
                return self.unreadable(session, error);
            }
        };
        match MemtideMessage::decode(&bytes) {
            Ok(message) => self.message(session, message),
            Err(error) => self.unreadable(session, error),
        }
    }

    /// Answers a line that cannot be read with an error: fatal (and the connection closed) for
    /// a version the agent does not speak, else non-fatal.
    fn unreadable(&mut self, session: &mut Session, error: ProtocolError) -> Result<(), Ending> {
        let fatal = error.code == ErrorCode::Version;
        send(session, &AgentMessage::Error(error.to_message(fatal)))?;
        self.shared.record(AgentError::Unreadable(error));
        if fatal {
            Err(Ending::Recorded)
        } else {
            Ok(())
        }
    }

    fn message(&mut self, session: &mut Session, message: MemtideMessage) -> Result<(), Ending> {
        match message {
            MemtideMessage::Welcome(welcome) => {
                if session.stats_every.is_some() {
                    return refuse(
                        session,
                        ErrorCode::AlreadyRegistered,
                        "a second welcome on this connection".into(),
                    );
                }
                let every = Duration::from_millis(welcome.stats_interval_ms);
                session.stats_every = Some(every);
                session.welcome_by = None;
                self.backoff.reset();
                self.shared.set_state(AgentState::Registered {
                    tenant: welcome.tenant,
                });
                self.send_stats(session)?;
                session.next_stats = Instant::now().checked_add(every);
                Ok(())
            }
            MemtideMessage::Target(target) => self.target(session, target),
            MemtideMessage::Bye(bye) => {
                self.shared.record(AgentError::Bye { reason: bye.reason });
                Err(Ending::Recorded)
            }
            MemtideMessage::Error(error) => {
                let fatal = error.fatal || error.code.always_fatal();
                self.shared.record(AgentError::Memtide(error));
                if fatal {
                    Err(Ending::Recorded)
                } else {
                    Ok(())
                }
            }
        }
    }

    fn target(&mut self, session: &mut Session, target: Target) -> Result<(), Ending> {
        if session.stats_every.is_none() {
            return refuse(
                session,
                ErrorCode::NotRegistered,
                format!("target {} before the welcome", target.seq),
            );
        }
        // A target that breaks a rule is answered and otherwise ignored: a resize in progress
        // goes on, and the next target's seq need only be above the last valid one's.
        if target.seq <= session.last_seq {
            return refuse(
                session,
                ErrorCode::BadField,
                format!(
                    "target.seq = {} is not above the last target's seq {}",
                    target.seq, session.last_seq
                ),
            );
        }
        if let Err(error) = self.pool.check_target(target.pool_bytes) {
            return refuse(session, error.code, error.message);
        }
        session.last_seq = target.seq;
        session.wanted = Some(target);
        session.next_working = Instant::now().checked_add(WORKING_EVERY);
        self.start_wanted(session)
    }

    /// Hands the wanted target to the resize thread when it is free, or answers it `done` at
    /// once when the pool is already there.
    fn start_wanted(&mut self, session: &mut Session) -> Result<(), Ending> {
        let Some(target) = session.wanted.clone() else {
            return Ok(());
        };
        if self.running.is_some() {
            return Ok(());
        }
        if target.pool_bytes == self.pool_bytes {
            return self.answer(session, target.seq, Ok(()));
        }
        let job = Job {
            connection: session.id,
            seq: target.seq,
            from: self.pool_bytes,
            target: target.pool_bytes,
        };
        self.resizer.start(job);
        self.running = Some(job);
        Ok(())
    }

    /// Takes a finished resize: the resize thread is free, and the pool has a new size.
    fn finished(&mut self, job: Job, outcome: &Result<(), Refusal>) {
        self.running = None;
        match outcome {
            Ok(()) => self.set_pool_bytes(job.target),
            Err(refusal) => {
                if let Some(at) = refusal.pool_bytes {
                    self.set_pool_bytes(at.clamp(self.pool.min_bytes, self.pool.max_bytes));
                }
                self.shared.record(AgentError::Refused {
                    seq: job.seq,
                    target: job.target,
                    reason: refusal.reason.clone(),
                });
            }
        }
    }

    /// Answers a finished resize if its target is still the wanted one, then starts the next
    /// wanted target.
    fn answer_finished(
        &mut self,
        session: &mut Session,
        job: Job,
        outcome: Result<(), Refusal>,
    ) -> Result<(), Ending> {
        let answers = session.id == job.connection
            && session
                .wanted
                .as_ref()
                .is_some_and(|wanted| wanted.seq == job.seq);
        if answers {
            self.answer(session, job.seq, outcome)?;
        }
        self.start_wanted(session)
    }

    /// Answers target `seq` `done` or `failed`; it is no longer wanted.
    fn answer(
        &mut self,
        session: &mut Session,
        seq: u64,
        outcome: Result<(), Refusal>,
    ) -> Result<(), Ending> {
        session.wanted = None;
        session.next_working = None;
        let (status, reason) = match outcome {
            Ok(()) => (ProgressStatus::Done, None),
            Err(refusal) => (
                ProgressStatus::Failed,
                Some(truncate_to(&refusal.reason, MAX_REASON_BYTES).to_string()),
            ),
        };
        let progress = AgentMessage::Progress(Progress {
            seq,
            pool_bytes: self.pool_bytes,
            status,
            reason,
        });
        send(session, &progress)
    }

    fn set_pool_bytes(&mut self, pool_bytes: u64) {
        self.pool_bytes = pool_bytes;
        self.shared.pool_bytes.store(pool_bytes, Ordering::Relaxed);
    }

    /// Sends the application's statistics, kept valid (see [`PoolStats`]).
    fn send_stats(&mut self, session: &mut Session) -> Result<(), Ending> {
        let Ok(app) = panic::catch_unwind(AssertUnwindSafe(|| (self.stats)())) else {
            self.shared.record(AgentError::Panicked("stats"));
            return Ok(());
        };
        let pool = self.pool_bytes;
        let counter = |now: u64, sent: u64| now.min(MAX_INTEGER).max(sent);
        self.sent = PoolStats {
            used_bytes: app.used_bytes.min(pool),
            hits: counter(app.hits, self.sent.hits),
            misses: counter(app.misses, self.sent.misses),
            evictions: counter(app.evictions, self.sent.evictions),
            dirty_bytes: app.dirty_bytes.min(pool),
            curve: None,
            durability: None,
        };
        let curve = app.curve.filter(|curve| match check_curve(curve) {
            Ok(()) => true,
            Err(e) => {
                self.shared.record(AgentError::Curve(e));
                false
            }
        });
        // The server's own counters: they may fall back (a restart), so they are not held up
        // as the pool's are.
        let durability = app.durability.filter(|d| match check_durability(d) {
            Ok(()) => true,
            Err(e) => {
                self.shared.record(AgentError::Durability(e));
                false
            }
        });
        let stats = AgentMessage::Stats(Stats {
            pool_bytes: pool,
            used_bytes: self.sent.used_bytes,
            hits: self.sent.hits,
            misses: self.sent.misses,
            evictions: self.sent.evictions,
            dirty_bytes: self.sent.dirty_bytes,
            durability,
            curve,
        });
        send(session, &stats)
    }
}

/// Why a connection ends, besides a stop.
enum Ending {
    /// Writing or reading failed.
    Failed(io::Error),
    /// memtide closed it.
    Closed,
    /// The agent closes it for a reason already recorded (a bye, a fatal error).
    Recorded,
}

impl From<io::Error> for Ending {
    fn from(error: io::Error) -> Ending {
        Ending::Failed(error)
    }
}

/// Answers a message the agent will not act on with a non-fatal error.
fn refuse(session: &mut Session, code: ErrorCode, message: String) -> Result<(), Ending> {
    let error = ErrorMessage {
        code,
        message,
        fatal: false,
    };
    send(session, &AgentMessage::Error(error))
}

fn send(session: &mut Session, message: &AgentMessage) -> Result<(), Ending> {
    write_line(&session.stream, message).map_err(Ending::Failed)
}

fn write_line(mut stream: &UnixStream, message: &AgentMessage) -> io::Result<()> {
    let mut line = message.encode();
    line.push('\n');
    stream.write_all(line.as_bytes())
}

/// The reader thread of one connection: every line becomes an event, then the end.
fn read_lines(stream: UnixStream, connection: u64, events: SyncSender<Event>) {
    let mut lines = LineReader::new(stream);
    loop {
        let event = match lines.read_line() {
            Ok(Some(line)) => Event::Line { connection, line },
            Ok(None) => Event::Closed {
                connection,
                error: None,
            },
            Err(e) => Event::Closed {
                connection,
                error: Some(e),
            },
        };
        let last = matches!(event, Event::Closed { .. });
        if events.send(event).is_err() || last {
            return;
        }
    }
}
