/*
 * Pool: the application's pool as the agent sees it: the facts it registers (app, kind, min, max,
 * granule), its statistics, the check of a target against them, and one resize through the
 * application's callbacks, with every way a callback can go wrong turned into a failure reason.
 */
package io.memtide.balloon;

import java.util.Objects;
import java.util.Optional;
import java.util.function.Supplier;

final class Pool {
    private final String app;
    private final PoolKind kind;
    private final long minBytes;
    private final long maxBytes;
    private final long granuleBytes;
    private final Supplier<PoolStats> stats;
    private final Resizer shrink;
    private final Resizer grow;
    private volatile long lastPoolBytes = -1;

    Pool(String app, PoolKind kind, long minBytes, long maxBytes, long granuleBytes,
            Supplier<PoolStats> stats, Resizer shrink, Resizer grow) {
        this.app = app;
        this.kind = kind;
        this.minBytes = minBytes;
        this.maxBytes = maxBytes;
        this.granuleBytes = granuleBytes;
        this.stats = stats;
        this.shrink = shrink;
        this.grow = grow;
        // The same rules as hello's, with a pool at min: a mistake shows when the agent is built.
        new Message.Hello(app, kind, 1, minBytes, minBytes, maxBytes, granuleBytes);
    }

    /** The hello for this pool at its size now; throws when the size is outside [min, max]. */
    Message.Hello hello(long pid) {
        return new Message.Hello(app, kind, pid, stats().poolBytes(), minBytes, maxBytes, granuleBytes);
    }

    /** The application's statistics; throws what the supplier throws. */
    PoolStats stats() {
        PoolStats now = Objects.requireNonNull(stats.get(), "the stats supplier returned null");
        lastPoolBytes = now.poolBytes();
        return now;
    }

    /** The pool's size now, or the last one read when the supplier fails (0 before any). */
    long poolBytes() {
        try {
            return stats().poolBytes();
        } catch (RuntimeException e) {
            return Math.max(0, lastPoolBytes);
        }
    }

    /** Why {@code targetBytes} is no target for this pool, if it is not one. */
    Optional<String> check(long targetBytes) {
        if (targetBytes % granuleBytes != 0) {
            return Optional.of("target.pool_bytes = " + targetBytes
                    + " is not a multiple of granule_bytes = " + granuleBytes);
        }
        if (targetBytes < minBytes) {
            return Optional.of("target.pool_bytes = " + targetBytes + " < min_bytes = " + minBytes);
        }
        if (targetBytes > maxBytes) {
            return Optional.of("target.pool_bytes = " + targetBytes + " > max_bytes = " + maxBytes);
        }
        return Optional.empty();
    }

    /**
     * Resizes through the shrink or the grow callback (neither when the pool is at the target);
     * a success that leaves the pool elsewhere is a failure.
     */
    Result resize(ResizeRequest request) {
        long target = request.targetBytes();
        long before;
        try {
            before = stats().poolBytes();
        } catch (RuntimeException e) {
            return Result.failure("cannot read the pool's size: " + describe(e));
        }
        if (before == target) {
            return Result.success();
        }
        String which = target < before ? "shrink" : "grow";
        Result result;
        try {
            result = (target < before ? shrink : grow).resize(request);
        } catch (RuntimeException | Error e) {
            // The callback's failure is the resize's, and the agent must still answer it.
            return Result.failure("the " + which + " callback threw " + describe(e));
        }
        if (result == null) {
            return Result.failure("the " + which + " callback returned null");
        }
        if (result instanceof Result.Failure) {
            return result;
        }
        long after;
        try {
            after = stats().poolBytes();
        } catch (RuntimeException e) {
            return Result.failure("cannot read the pool's size after the " + which + ": " + describe(e));
        }
        if (after != target) {
            return Result.failure("the " + which + " callback succeeded but the pool is " + after
                    + " bytes, not the target " + target);
        }
        return result;
    }

    static String describe(Throwable e) {
        String message = e.getMessage();
        return e.getClass().getName() + (message == null ? "" : ": " + message);
    }
}
