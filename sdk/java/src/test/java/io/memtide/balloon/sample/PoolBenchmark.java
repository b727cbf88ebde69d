/*
 * PoolBenchmark: how fast the sample pool shrinks to 0 and grows back, a program (not a test:
 * nothing here asserts a time). First in-process, calling the resize callback the agent calls;
 * then end to end, with a test memtide (Player) on a socket in a temporary directory sending
 * targets to a real agent and timing each from the target's send to its "progress done". It
 * prints every run, VmRSS after it, and the median of the runs each way.
 *
 *   mvn -q -f sdk/java/pom.xml test-compile
 *   MALLOC_MMAP_THRESHOLD_=131072 java -cp sdk/java/target/classes:sdk/java/target/test-classes \
 *       io.memtide.balloon.sample.PoolBenchmark [SIZE [GRANULE [RUNS]]]     (default 2G 1M 3)
 */
package io.memtide.balloon.sample;

import io.memtide.balloon.BalloonAgent;
import io.memtide.balloon.Player;
import io.memtide.balloon.PoolKind;
import io.memtide.balloon.ResizeRequest;
import io.memtide.balloon.Result;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;

public final class PoolBenchmark {
    private static final Duration LIMIT = Duration.ofSeconds(60);

    private PoolBenchmark() {}

    public static void main(String[] args) throws IOException {
        long size = PoolSample.size("SIZE", args.length > 0 ? args[0] : "2G");
        int granule = (int) PoolSample.size("GRANULE", args.length > 1 ? args[1] : "1M");
        int runs = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        System.out.printf("pool %d MiB in %d KiB granules, %d runs; MALLOC_MMAP_THRESHOLD_=%s; VmRSS %s%n",
                size >> 20, granule >> 10, runs, System.getenv("MALLOC_MMAP_THRESHOLD_"), Rss.mib());

        GranulePool pool = new GranulePool(granule);
        check(pool.resize(new ResizeRequest(size, LIMIT)));
        System.out.println("filled: VmRSS " + Rss.mib());

        double[] shrink = new double[runs];
        double[] grow = new double[runs];
        for (int i = 0; i < runs; i++) {
            shrink[i] = timed(() -> check(pool.resize(new ResizeRequest(0, LIMIT))));
            String empty = Rss.mib();
            grow[i] = timed(() -> check(pool.resize(new ResizeRequest(size, LIMIT))));
            System.out.printf("in-process run %d: shrink %.3f s (VmRSS %s), grow %.3f s (VmRSS %s)%n",
                    i + 1, shrink[i], empty, grow[i], Rss.mib());
        }
        System.out.printf("in-process median: shrink %.3f s, grow %.3f s%n", median(shrink), median(grow));

        endToEnd(pool, size, granule, runs);
    }

    private static void endToEnd(GranulePool pool, long size, int granule, int runs) throws IOException {
        Path dir = Files.createTempDirectory("memtide-bench");
        Path socket = dir.resolve("balloon.sock");
        double[] shrink = new double[runs];
        double[] grow = new double[runs];
        try (Player player = new Player(socket);
                BalloonAgent agent = BalloonAgent.builder()
                        .app("pool-benchmark").kind(PoolKind.CACHE)
                        .minBytes(0).maxBytes(size).granuleBytes(granule)
                        .stats(pool::stats).shrink(pool::resize).grow(pool::resize)
                        .socket(socket)
                        .start();
                Player.Peer peer = player.accept(Duration.ofSeconds(5))) {
            System.out.println("end to end through " + agent.socket());
            awaitLine(peer, "\"type\":\"hello\"");
            peer.send("{\"type\":\"welcome\",\"version\":1,\"tenant\":\"bench\",\"stats_interval_ms\":1000,"
                    + "\"dead_after_ms\":5000}");
            long seq = 0;
            for (int i = 0; i < runs; i++) {
                shrink[i] = target(peer, ++seq, 0);
                String empty = Rss.mib();
                grow[i] = target(peer, ++seq, size);
                System.out.printf("end-to-end run %d: shrink %.3f s (VmRSS %s), grow %.3f s (VmRSS %s)%n",
                        i + 1, shrink[i], empty, grow[i], Rss.mib());
            }
        } finally {
            Files.deleteIfExists(socket);
            Files.delete(dir);
        }
        System.out.printf("end-to-end median: shrink %.3f s, grow %.3f s%n", median(shrink), median(grow));
    }

    /** Sends target {@code seq} and waits for its done: the seconds between. */
    private static double target(Player.Peer peer, long seq, long bytes) throws IOException {
        long begin = System.nanoTime();
        peer.send("{\"type\":\"target\",\"seq\":" + seq + ",\"pool_bytes\":" + bytes + ",\"deadline_ms\":60000}");
        String line = awaitLine(peer, "\"type\":\"progress\",\"seq\":" + seq + ",");
        double seconds = (System.nanoTime() - begin) / 1e9;
        if (!line.contains("\"status\":\"done\"")) {
            throw new IllegalStateException("target " + seq + " not done: " + line);
        }
        return seconds;
    }

    /** The next line holding {@code part}, skipping stats and working progress. */
    private static String awaitLine(Player.Peer peer, String part) throws IOException {
        while (true) {
            String line = peer.readLine(LIMIT);
            if (line == null) {
                throw new IllegalStateException("the agent closed the connection");
            }
            if (line.contains(part) && !line.contains("\"status\":\"working\"")) {
                return line;
            }
        }
    }

    private static void check(Result result) {
        if (result instanceof Result.Failure failure) {
            throw new IllegalStateException("resize failed: " + failure.reason());
        }
    }

    private static double timed(Runnable run) {
        long begin = System.nanoTime();
        run.run();
        return (System.nanoTime() - begin) / 1e9;
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
