/*
 * Session: one connection to memtide, from hello to its end (docs/balloon-protocol.md, "A
 * session"). Its thread is the only one that writes to the socket: it takes events in order from
 * one queue (lines from the reader thread, resizes finished on the resize thread, the agent's
 * stop) and keeps two clocks, stats every stats_interval_ms after the welcome and "progress
 * working" about once a second while a resize runs. It answers lines it cannot read with
 * non-fatal errors, and ends on memtide's bye, a fatal error either way, the connection's end or
 * the agent's stop.
 */
package io.memtide.balloon;

import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

final class Session {
    /** How often "progress working" goes out while a resize runs. */
    static final Duration WORKING_INTERVAL = Duration.ofSeconds(1);

    private static final System.Logger LOG = System.getLogger(BalloonAgent.class.getName());

    /** How a session ended; {@code welcomed} says whether memtide had registered the agent. */
    record Ending(boolean welcomed, String why) {}

    private sealed interface Event permits LineRead, Resized, Stop {}

    private record LineRead(LineReader.Read read) implements Event {}

    private record Resized(ResizeRequest request, long seq, Result result) implements Event {}

    private record Stop() implements Event {}

    private final SocketChannel channel;
    private final Pool pool;
    private final Executor resizer;
    private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();

    private Message.Welcome welcome;
    private long lastSeq;
    private ResizeRequest current;
    private long currentSeq;
    private long nextStatsAt;
    private long nextWorkingAt;

    Session(SocketChannel channel, Pool pool, Executor resizer) {
        this.channel = channel;
        this.pool = pool;
        this.resizer = resizer;
    }

    /** Asks the session to say bye and end; callable from any thread. */
    void stop() {
        events.add(new Stop());
    }

    /** Runs the session on the calling thread until it ends; the channel is closed after. */
    Ending run(Message.Hello hello) {
        Thread reader = new Thread(this::readLines, "memtide-balloon-reader");
        reader.setDaemon(true);
        try (channel) {
            reader.start();
            send(hello);
            while (true) {
                Event event = nextEvent();
                Ending ending = event == null ? null : handle(event);
                if (ending != null) {
                    return ending;
                }
                tick();
            }
        } catch (IOException e) {
            return new Ending(welcome != null, "the connection failed: " + e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Ending(welcome != null, "the agent's thread was interrupted");
        } finally {
            if (current != null) {
                current.supersede();
            }
        }
    }

    /** The next event, or null when a clock is due first. */
    private Event nextEvent() throws InterruptedException {
        long due = Long.MAX_VALUE;
        if (welcome != null) {
            due = nextStatsAt;
        }
        if (current != null) {
            due = Math.min(due, nextWorkingAt);
        }
        if (due == Long.MAX_VALUE) {
            return events.take();
        }
        return events.poll(Math.max(0, due - System.nanoTime()), TimeUnit.NANOSECONDS);
    }

    /** Sends what the clocks say is due. */
    private void tick() throws IOException {
        long now = System.nanoTime();
        if (welcome != null && now - nextStatsAt >= 0) {
            sendStats();
            nextStatsAt = following(nextStatsAt, TimeUnit.MILLISECONDS.toNanos(welcome.statsIntervalMs()), now);
        }
        if (current != null && now - nextWorkingAt >= 0) {
            send(new Message.Progress(currentSeq, pool.poolBytes(), Message.Status.WORKING, Optional.empty()));
            nextWorkingAt = following(nextWorkingAt, WORKING_INTERVAL.toNanos(), now);
        }
    }

    /** The time after {@code due} on a clock of {@code period}: no drift, and no burst when late. */
    private static long following(long due, long period, long now) {
        long next = due + period;
        return next - now > 0 ? next : now + period;
    }

    private Ending handle(Event event) throws IOException {
        if (event instanceof Stop) {
            send(new Message.Bye(Optional.of("the application stopped its agent")));
            return new Ending(welcome != null, "the application stopped the agent");
        }
        if (event instanceof Resized resized) {
            if (resized.request() == current) {
                current = null;
                long poolBytes = pool.poolBytes();
                if (resized.result() instanceof Result.Failure failure) {
                    send(Message.Progress.failed(resized.seq(), poolBytes, failure.reason()));
                } else {
                    send(new Message.Progress(resized.seq(), poolBytes, Message.Status.DONE, Optional.empty()));
                }
            }
            return null;
        }
        LineReader.Read read = ((LineRead) event).read();
        if (read instanceof LineReader.End) {
            return new Ending(welcome != null, "memtide closed the connection");
        }
        if (read instanceof LineReader.TooLong) {
            sendError(ErrorCode.TOO_LONG, "a line over " + LineReader.MAX_LINE_BYTES + " bytes was dropped");
            return null;
        }
        Message.ToAgent message;
        try {
            message = Codec.decodeToAgent(((LineReader.Line) read).bytes());
        } catch (ProtocolException e) {
            if (e.code() == ErrorCode.VERSION) {
                send(new Message.ErrorMessage(ErrorCode.VERSION, e.getMessage(), true));
                return new Ending(false, e.getMessage());
            }
            sendError(e.code(), e.getMessage());
            return null;
        }
        return receive(message);
    }

    private Ending receive(Message.ToAgent message) throws IOException {
        if (message instanceof Message.Welcome w) {
            if (welcome != null) {
                sendError(ErrorCode.ALREADY_REGISTERED, "a second welcome on the same connection");
                return null;
            }
            welcome = w;
            LOG.log(Level.INFO, "memtide registered the pool for tenant {0}", w.tenant());
            sendStats();
            nextStatsAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(w.statsIntervalMs());
        } else if (message instanceof Message.Target target) {
            receiveTarget(target);
        } else if (message instanceof Message.Bye bye) {
            return new Ending(welcome != null, "memtide said bye" + bye.reason().map(r -> ": " + r).orElse(""));
        } else if (message instanceof Message.ErrorMessage error) {
            String what = "memtide's error " + error.code() + ": " + error.message();
            if (error.fatal()) {
                return new Ending(welcome != null, what);
            }
            LOG.log(Level.WARNING, what);
        }
        return null;
    }

    private void receiveTarget(Message.Target target) throws IOException {
        if (welcome == null) {
            sendError(ErrorCode.NOT_REGISTERED, "a target before the welcome");
            return;
        }
        if (target.seq() <= lastSeq) {
            sendError(ErrorCode.BAD_FIELD,
                    "target.seq = " + target.seq() + " is not above the last target's " + lastSeq);
            return;
        }
        lastSeq = target.seq();
        Optional<String> problem = pool.check(target.poolBytes());
        if (problem.isPresent()) {
            sendError(ErrorCode.BAD_FIELD, problem.get());
            return;
        }
        if (current != null) {
            current.supersede();
        }
        ResizeRequest request = new ResizeRequest(target.poolBytes(), Duration.ofMillis(target.deadlineMs()));
        long seq = target.seq();
        current = request;
        currentSeq = seq;
        nextWorkingAt = System.nanoTime() + WORKING_INTERVAL.toNanos();
        try {
            // One resize thread: a newer target's request waits behind the one it superseded.
            resizer.execute(() -> {
                if (!request.isSuperseded()) {
                    events.add(new Resized(request, seq, pool.resize(request)));
                }
            });
        } catch (RejectedExecutionException e) {
            // The agent is stopping; its Stop event follows.
            current = null;
        }
    }

    private void sendStats() throws IOException {
        PoolStats stats;
        try {
            stats = pool.stats();
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "no stats sent: the stats supplier failed: " + Pool.describe(e));
            return;
        }
        send(new Message.Stats(stats));
    }

    private void sendError(ErrorCode code, String message) throws IOException {
        LOG.log(Level.WARNING, "answered memtide with {0}: {1}", code.wireName(), message);
        send(new Message.ErrorMessage(code, message, false));
    }

    private void send(Message.ToMemtide message) throws IOException {
        ByteBuffer bytes = ByteBuffer.wrap((message.toJson() + "\n").getBytes(StandardCharsets.UTF_8));
        while (bytes.hasRemaining()) {
            channel.write(bytes);
        }
    }

    /** The reader thread: every line, then the end, into the event queue. */
    private void readLines() {
        LineReader reader = new LineReader(channel);
        try {
            while (true) {
                LineReader.Read read = reader.next();
                events.add(new LineRead(read));
                if (read instanceof LineReader.End) {
                    return;
                }
            }
        } catch (IOException e) {
            // Closed by the session's end, or failed: either way the session is over.
            events.add(new LineRead(new LineReader.End()));
        }
    }
}
