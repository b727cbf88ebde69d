/*
 * BalloonAgent: the SDK's entry point. An application builds one with its pool's facts and
 * callbacks and starts it; the agent then lives on its own daemon thread, connecting to memtide's
 * Unix socket, running a session (Session) and reconnecting with jittered exponential back-off
 * whenever the connection ends, until the application closes it, which says bye.
 */
package io.memtide.balloon;

import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.random.RandomGenerator;

/**
 * An agent of memtide's application balloon protocol: it registers the application's pool with
 * memtide and shrinks or grows it, through the application's callbacks, when memtide asks.
 *
 * <pre>{@code
 * BalloonAgent agent = BalloonAgent.builder()
 *         .app("mycache").kind(PoolKind.CACHE)
 *         .minBytes(64L << 20).maxBytes(8L << 30).granuleBytes(1 << 20)
 *         .stats(cache::stats)
 *         .shrink(request -> cache.shrinkTo(request.targetBytes()))
 *         .grow(request -> cache.growTo(request.targetBytes()))
 *         .start();
 * // ... and at shutdown: agent.close();
 * }</pre>
 *
 * <p>The agent runs on a daemon thread ({@code memtide-balloon-agent}); the callbacks run one at
 * a time on another ({@code memtide-balloon-resize}), and the stats supplier is called from both,
 * so it must be thread-safe and quick. Problems are logged through {@link System.Logger} under
 * this class's name; none reaches the application as an exception after {@link Builder#start()}.
 */
public final class BalloonAgent implements AutoCloseable {
    /** The environment variable naming memtide's socket. */
    public static final String SOCKET_ENV = "MEMTIDE_BALLOON_SOCKET";
    /** The socket's path when the environment does not name one. */
    public static final Path DEFAULT_SOCKET = Path.of("/run/memtide/balloon.sock");

    private static final System.Logger LOG = System.getLogger(BalloonAgent.class.getName());
    /** How long {@link #close()} waits for the bye to go out before closing the socket anyway. */
    private static final Duration CLOSE_GRACE = Duration.ofSeconds(2);

    private final Path socket;
    private final Pool pool;
    private final Backoff backoff;
    private final ExecutorService resizer;
    private final Thread thread;
    private final CountDownLatch stopping = new CountDownLatch(1);
    private volatile Session session;
    private volatile SocketChannel channel;
    /** Whether "cannot connect" was logged at INFO since the last connection. */
    private boolean unreachableReported;

    private BalloonAgent(Path socket, Pool pool, Backoff backoff) {
        this.socket = socket;
        this.pool = pool;
        this.backoff = backoff;
        this.resizer = Executors.newSingleThreadExecutor(task -> daemon(task, "memtide-balloon-resize"));
        this.thread = daemon(this::run, "memtide-balloon-agent");
    }

    /** A builder for an agent. */
    public static Builder builder() {
        return new Builder();
    }

    /** The socket the agent connects to. */
    public Path socket() {
        return socket;
    }

    /**
     * Stops the agent: says bye to memtide if connected, closes the connection and stops
     * reconnecting. A resize in progress is marked superseded; its callback is not interrupted.
     * Waits at most about two seconds; calling it again does nothing.
     */
    @Override
    public void close() {
        if (stopping.getCount() == 0) {
            return;
        }
        stopping.countDown();
        Session current = session;
        if (current != null) {
            current.stop();
        }
        resizer.shutdown();
        boolean interrupted = false;
        try {
            thread.join(CLOSE_GRACE.toMillis());
        } catch (InterruptedException e) {
            interrupted = true;
        }
        if (thread.isAlive()) {
            // Stuck writing to a memtide that does not read: closing the socket frees it.
            SocketChannel open = channel;
            if (open != null) {
                closeQuietly(open);
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    private boolean stopped() {
        return stopping.getCount() == 0;
    }

    /** The agent's thread: a session per connection, back-off between them, until stopped. */
    private void run() {
        while (!stopped()) {
            connectOnce();
            if (stopped()) {
                return;
            }
            Duration delay = backoff.next();
            LOG.log(Level.DEBUG, "reconnecting in {0} ms", delay.toMillis());
            try {
                if (stopping.await(delay.toNanos(), TimeUnit.NANOSECONDS)) {
                    return;
                }
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** One attempt: hello, connect, and the session until it ends; every problem is logged. */
    private void connectOnce() {
        Message.Hello hello;
        try {
            hello = pool.hello(ProcessHandle.current().pid());
        } catch (RuntimeException e) {
            // The stats supplier failed, or its size is outside [min, max]: retry later.
            LOG.log(Level.WARNING, "cannot say hello: " + Pool.describe(e));
            return;
        }
        SocketChannel open;
        try {
            open = SocketChannel.open(StandardProtocolFamily.UNIX);
        } catch (IOException e) {
            LOG.log(Level.WARNING, "cannot open a Unix socket: " + e.getMessage());
            return;
        }
        channel = open;
        try {
            open.connect(UnixDomainSocketAddress.of(socket));
        } catch (IOException e) {
            // Said once until a connection succeeds: memtide may be down for long.
            LOG.log(unreachableReported ? Level.DEBUG : Level.INFO,
                    "cannot connect to memtide at {0}: {1}", socket, e.getMessage());
            unreachableReported = true;
            closeQuietly(open);
            return;
        }
        unreachableReported = false;
        LOG.log(Level.DEBUG, "connected to memtide at {0}", socket);
        Session current = new Session(open, pool, resizer);
        session = current;
        if (stopped()) {
            current.stop();
        }
        try {
            Session.Ending ending = current.run(hello);
            if (ending.welcomed()) {
                backoff.reset();
            }
            LOG.log(stopped() ? Level.DEBUG : Level.INFO, "session with memtide ended: {0}", ending.why());
        } catch (RuntimeException e) {
            // A bug, not the peer's doing (its lines are checked): logged, and the agent goes on.
            LOG.log(Level.ERROR, "the session with memtide failed", e);
            closeQuietly(open);
        } finally {
            session = null;
        }
    }

    private static void closeQuietly(SocketChannel channel) {
        try {
            channel.close();
        } catch (IOException e) {
            LOG.log(Level.DEBUG, "closing the socket: " + e.getMessage());
        }
    }

    private static Thread daemon(Runnable task, String name) {
        Thread thread = new Thread(task, name);
        thread.setDaemon(true);
        return thread;
    }

    /**
     * The pool's facts and callbacks; {@link #start()} checks them and starts the agent. Every
     * setter but {@link #socket}, {@link #reconnectBackoff} and {@link #kind} must be called.
     */
    public static final class Builder {
        private String app;
        private PoolKind kind = PoolKind.OTHER;
        private Long minBytes;
        private Long maxBytes;
        private Long granuleBytes;
        private Supplier<PoolStats> stats;
        private Resizer shrink;
        private Resizer grow;
        private Path socket;
        private Duration initialBackoff = Duration.ofMillis(100);
        private Duration maxBackoff = Duration.ofSeconds(30);

        private Builder() {}

        /** What the application is, 1 to 128 bytes of UTF-8 without control characters. */
        public Builder app(String app) {
            this.app = Objects.requireNonNull(app, "app");
            return this;
        }

        /** What kind of pool it is; {@link PoolKind#OTHER} unless set. */
        public Builder kind(PoolKind kind) {
            this.kind = Objects.requireNonNull(kind, "kind");
            return this;
        }

        /** The smallest size the application accepts, in bytes. */
        public Builder minBytes(long minBytes) {
            this.minBytes = minBytes;
            return this;
        }

        /** The largest size the pool can grow to, in bytes. */
        public Builder maxBytes(long maxBytes) {
            this.maxBytes = maxBytes;
            return this;
        }

        /** The unit the pool moves in, in bytes (at least 1); targets are multiples of it. */
        public Builder granuleBytes(long granuleBytes) {
            this.granuleBytes = granuleBytes;
            return this;
        }

        /**
         * The pool's statistics now; its size goes into every hello, so it must be within
         * [min, max]. Called from the agent's threads: it must be thread-safe and quick.
         */
        public Builder stats(Supplier<PoolStats> stats) {
            this.stats = Objects.requireNonNull(stats, "stats");
            return this;
        }

        /** Shrinks the pool to a target below its size, giving the memory back to the OS. */
        public Builder shrink(Resizer shrink) {
            this.shrink = Objects.requireNonNull(shrink, "shrink");
            return this;
        }

        /** Grows the pool to a target above its size. */
        public Builder grow(Resizer grow) {
            this.grow = Objects.requireNonNull(grow, "grow");
            return this;
        }

        /**
         * memtide's socket; unless set, the path in {@value #SOCKET_ENV} when that is set and not
         * empty, else {@code /run/memtide/balloon.sock}.
         */
        public Builder socket(Path socket) {
            this.socket = Objects.requireNonNull(socket, "socket");
            return this;
        }

        /**
         * The delays between connection attempts: from {@code initial}, doubling up to
         * {@code max} (at most a day), each drawn from its upper half; 100 ms to 30 s unless set.
         */
        public Builder reconnectBackoff(Duration initial, Duration max) {
            this.initialBackoff = Objects.requireNonNull(initial, "initial");
            this.maxBackoff = Objects.requireNonNull(max, "max");
            return this;
        }

        /**
         * Checks the facts and starts the agent on its own thread.
         *
         * @throws IllegalStateException when a required setter was not called
         * @throws IllegalArgumentException when the facts break the protocol's rules (min above
         *     max, a granule of 0 or above max, an app name that is empty or too long)
         */
        public BalloonAgent start() {
            Pool pool = new Pool(
                    required(app, "app"), kind,
                    required(minBytes, "minBytes"), required(maxBytes, "maxBytes"),
                    required(granuleBytes, "granuleBytes"),
                    required(stats, "stats"), required(shrink, "shrink"), required(grow, "grow"));
            Backoff backoff = new Backoff(initialBackoff, maxBackoff, RandomGenerator.getDefault());
            BalloonAgent agent = new BalloonAgent(socketPath(socket, System.getenv(SOCKET_ENV)), pool, backoff);
            agent.thread.start();
            return agent;
        }

        /** The socket set, else the environment's when set and not empty, else the default. */
        static Path socketPath(Path set, String fromEnv) {
            if (set != null) {
                return set;
            }
            return fromEnv == null || fromEnv.isEmpty() ? DEFAULT_SOCKET : Path.of(fromEnv);
        }

        private static <T> T required(T value, String name) {
            if (value == null) {
                throw new IllegalStateException("memtide-balloon: " + name + " was not set");
            }
            return value;
        }
    }
}
