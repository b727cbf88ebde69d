/*
 * PoolSample: a small program that holds a real in-process pool (GranulePool: direct ByteBuffers,
 * every page resident) and lets memtide size it through a BalloonAgent, printing VmRSS after
 * every resize. Its pool, bounds, granule, name and socket come from command-line flags; it runs
 * until interrupted, and its shutdown hook says bye to memtide.
 */
package io.memtide.balloon.sample;

import io.memtide.balloon.BalloonAgent;
import io.memtide.balloon.PoolKind;
import io.memtide.balloon.ResizeRequest;
import io.memtide.balloon.Resizer;
import io.memtide.balloon.Result;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;

public final class PoolSample {
    private static final String USAGE = String.join("\n",
            "usage: PoolSample [--pool SIZE] [--min SIZE] [--max SIZE] [--granule SIZE]",
            "                  [--app NAME] [--kind buffer_pool|heap|cache|other] [--socket PATH]",
            "SIZE is bytes, or a number with K, M, G or T (powers of 1024): 512M, 2G.",
            "Defaults: --pool 256M --min 0 --max 1G --granule 1M --app pool-sample --kind cache;",
            "the socket is $MEMTIDE_BALLOON_SOCKET, else /run/memtide/balloon.sock.",
            "For freed granules to leave the process, run with MALLOC_MMAP_THRESHOLD_ set to at",
            "most the granule (e.g. MALLOC_MMAP_THRESHOLD_=131072): see sdk/java/README.md.");

    /** The most glibc raises its mmap threshold to: larger granules are always their own mapping. */
    private static final long GLIBC_DYNAMIC_MMAP_MAX = 32L << 20;

    private PoolSample() {}

    /** The flags, checked. */
    record Options(long pool, long min, long max, int granule, String app, PoolKind kind, Path socket) {}

    public static void main(String[] args) throws InterruptedException {
        Options options;
        try {
            options = parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("pool-sample: " + e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        if (options == null) {
            System.out.println(USAGE);
            return;
        }
        run(options);
    }

    private static void run(Options options) throws InterruptedException {
        GranulePool pool = new GranulePool(options.granule());
        Result initial = pool.resize(new ResizeRequest(options.pool(), Duration.ofDays(1)));
        if (initial instanceof Result.Failure failure) {
            System.err.println("pool-sample: cannot allocate the initial pool: " + failure.reason());
            System.exit(1);
            return;
        }
        retentionWarning(options.granule(), System.getenv("MALLOC_MMAP_THRESHOLD_"))
                .ifPresent(warning -> System.err.println("pool-sample: warning: " + warning));
        BalloonAgent.Builder builder = BalloonAgent.builder()
                .app(options.app()).kind(options.kind())
                .minBytes(options.min()).maxBytes(options.max()).granuleBytes(options.granule())
                .stats(pool::stats)
                .shrink(logged("shrink", pool::resize))
                .grow(logged("grow", pool::resize));
        if (options.socket() != null) {
            builder.socket(options.socket());
        }
        BalloonAgent agent;
        try {
            agent = builder.start();
        } catch (IllegalArgumentException e) {
            System.err.println("pool-sample: " + e.getMessage());
            System.exit(2);
            return;
        }
        System.out.printf("pool-sample: %d MiB pool in %d KiB granules, VmRSS %s; agent for memtide at %s%n",
                options.pool() >> 20, options.granule() >> 10, Rss.mib(), agent.socket());
        Runtime.getRuntime().addShutdownHook(new Thread(agent::close, "pool-sample-shutdown"));
        new CountDownLatch(1).await();
    }

    /**
     * Why glibc may keep freed granules in the process, unless each is its own mapping: of
     * 32 MiB or more, or with the mmap threshold fixed at most at the granule.
     */
    static Optional<String> retentionWarning(int granule, String threshold) {
        if (granule >= GLIBC_DYNAMIC_MMAP_MAX) {
            return Optional.empty();
        }
        try {
            if (threshold != null && Long.parseLong(threshold.trim()) <= granule) {
                return Optional.empty();
            }
        } catch (NumberFormatException e) {
            // Not a number: glibc ignores it too.
        }
        return Optional.of("MALLOC_MMAP_THRESHOLD_ = " + threshold + " is not a size of at most the granule ("
                + granule + "): glibc may keep freed granules in its arenas, so a shrink would not give"
                + " their memory back (see sdk/java/README.md)");
    }

    /** {@code resizer}, printing what it did, how long it took and VmRSS after. */
    private static Resizer logged(String what, Resizer resizer) {
        return request -> {
            long begin = System.nanoTime();
            Result result = resizer.resize(request);
            long ms = (System.nanoTime() - begin) / 1_000_000;
            System.out.printf("pool-sample: %s to %d MiB: %s in %d ms, VmRSS %s%n", what,
                    request.targetBytes() >> 20, result, ms, Rss.mib());
            return result;
        };
    }

    /** The options in {@code args}, or null for --help. */
    static Options parse(String[] args) {
        long pool = 256L << 20;
        long min = 0;
        long max = 1L << 30;
        long granule = 1L << 20;
        String app = "pool-sample";
        PoolKind kind = PoolKind.CACHE;
        Path socket = null;
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("--help") || flag.equals("-h")) {
                return null;
            }
            if (i + 1 == args.length) {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            String value = args[++i];
            switch (flag) {
                case "--pool" -> pool = size(flag, value);
                case "--min" -> min = size(flag, value);
                case "--max" -> max = size(flag, value);
                case "--granule" -> granule = size(flag, value);
                case "--app" -> app = value;
                case "--kind" -> kind = kind(value);
                case "--socket" -> socket = Path.of(value);
                default -> throw new IllegalArgumentException("unknown flag " + flag);
            }
        }
        if (granule > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("--granule = " + granule
                    + ": a granule is one direct ByteBuffer, at most " + Integer.MAX_VALUE + " bytes");
        }
        if (granule % GranulePool.PAGE != 0) {
            throw new IllegalArgumentException("--granule = " + granule + ": must be a multiple of 4K");
        }
        if (pool % granule != 0) {
            throw new IllegalArgumentException("--pool = " + pool + ": must be a multiple of --granule = " + granule);
        }
        if (pool < min || pool > max) {
            throw new IllegalArgumentException(
                    "--pool = " + pool + ": must be within --min = " + min + " and --max = " + max);
        }
        return new Options(pool, min, max, (int) granule, app, kind, socket);
    }

    /** A size: bytes, or a number with K, M, G or T (powers of 1024). */
    static long size(String flag, String value) {
        String digits = value;
        int shift = 0;
        if (!value.isEmpty()) {
            int unit = "KMGT".indexOf(Character.toUpperCase(value.charAt(value.length() - 1)));
            if (unit >= 0) {
                digits = value.substring(0, value.length() - 1);
                shift = 10 * (unit + 1);
            }
        }
        try {
            long number = Long.parseLong(digits);
            if (number < 0 || number > (Long.MAX_VALUE >> shift)) {
                throw new NumberFormatException();
            }
            return number << shift;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    flag + " = " + value + ": not a size (bytes, or a number with K, M, G or T)");
        }
    }

    private static PoolKind kind(String value) {
        for (PoolKind kind : PoolKind.values()) {
            if (kind.wireName().equals(value.toLowerCase(Locale.ROOT))) {
                return kind;
            }
        }
        throw new IllegalArgumentException("--kind = " + value + ": must be buffer_pool, heap, cache or other");
    }
}
