/*
 * Rss: the process's resident memory (VmRSS in /proc/self/status), what the sample reports
 * after every resize to show whether freed memory really went back to the OS.
 */
package io.memtide.balloon.sample;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;

public final class Rss {
    private Rss() {}

    /** VmRSS in bytes, or empty where /proc/self/status has none (not Linux). */
    public static OptionalLong bytes() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) {
                    // "VmRSS:     123456 kB"
                    String kib = line.substring("VmRSS:".length()).replace("kB", "").trim();
                    return OptionalLong.of(Long.parseLong(kib) * 1024);
                }
            }
        } catch (IOException | NumberFormatException e) {
            return OptionalLong.empty();
        }
        return OptionalLong.empty();
    }

    /** VmRSS in MiB for a log line, or "unknown". */
    public static String mib() {
        OptionalLong bytes = bytes();
        return bytes.isPresent() ? (bytes.getAsLong() >> 20) + " MiB" : "unknown";
    }
}
