//! A JVM workload for the JVM adapter's test and scripts/jvm-resize-times.sh: a live set of byte[] chunks kept reachable, and a churn of garbage (and of a fraction of the live chunks) so that the collector keeps running.
//
// java Heap LIVE_MIB CHURN_MIB_PER_S
// stdin:  `live N`  makes the live set N MiB (chunks dropped or added), answers `ok live N`
//         `quit`    exits
// stdout: `ready` once the first live set is allocated.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;

public class Heap {
    /** 64 KiB: well under any collector's humongous or large-object threshold. */
    static final int CHUNK = 64 * 1024;

    static final ArrayList<byte[]> live = new ArrayList<>();
    static volatile long sink;

    static byte[] chunk(long seed) {
        byte[] b = new byte[CHUNK];
        // Touch every page, so the heap's pages are resident.
        for (int i = 0; i < CHUNK; i += 4096) {
            b[i] = (byte) (seed + i);
        }
        return b;
    }

    static void setLive(long mib) {
        long want = mib * 1024 * 1024 / CHUNK;
        synchronized (live) {
            while (live.size() > want) {
                live.remove(live.size() - 1);
            }
            while (live.size() < want) {
                live.add(chunk(live.size()));
            }
            live.trimToSize();
        }
    }

    public static void main(String[] args) throws Exception {
        long liveMib = args.length > 0 ? Long.parseLong(args[0]) : 600;
        long churnMib = args.length > 1 ? Long.parseLong(args[1]) : 100;
        setLive(liveMib);
        System.out.println("ready");
        System.out.flush();

        Thread churn = new Thread(() -> {
            long n = 0;
            long perSlice = Math.max(1, churnMib * 1024 * 1024 / CHUNK / 20);
            while (true) {
                long start = System.nanoTime();
                for (long i = 0; i < perSlice; i++, n++) {
                    byte[] g = chunk(n);
                    sink += g[0];
                    // One chunk in eight replaces a live one: old data dies too.
                    if (n % 8 == 0) {
                        synchronized (live) {
                            if (!live.isEmpty()) {
                                live.set((int) (n / 8 % live.size()), g);
                            }
                        }
                    }
                }
                long left = 50_000_000L - (System.nanoTime() - start);
                if (left > 0) {
                    try {
                        Thread.sleep(left / 1_000_000L, (int) (left % 1_000_000L));
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        });
        churn.setDaemon(true);
        churn.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 2 && w[0].equals("live")) {
                long mib = Long.parseLong(w[1]);
                setLive(mib);
                System.out.println("ok live " + mib);
                System.out.flush();
            } else if (w[0].equals("quit")) {
                break;
            }
        }
        System.exit(0);
    }
}
