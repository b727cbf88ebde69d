/*
 * Message: the protocol's messages as types (docs/balloon-protocol.md, "Messages"), each
 * checking its field rules when made and writing itself as one line of JSON. The messages memtide
 * sends are ToAgent (read by Codec), the ones the agent sends ToMemtide; bye and error go both
 * ways.
 */
package io.memtide.balloon;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

sealed interface Message {
    /** The protocol version this SDK speaks. */
    long VERSION = 1;
    /** The longest app name, in bytes of UTF-8. */
    int MAX_APP_BYTES = 128;
    /** The longest bye or progress reason, in bytes of UTF-8. */
    int MAX_REASON_BYTES = 1024;

    /** The message's "type". */
    String type();

    /** The fields after "type", in the order the protocol's examples write them. */
    void putFields(Map<String, Object> fields);

    /** The message as one line of JSON, without its newline. */
    default String toJson() {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("type", type());
        putFields(fields);
        return Json.write(fields);
    }

    /** A message memtide sends. */
    sealed interface ToAgent extends Message permits Welcome, Target, Bye, ErrorMessage {}

    /** A message the agent sends. */
    sealed interface ToMemtide extends Message permits Hello, Progress, Stats, Bye, ErrorMessage {}

    /** The agent registers its pool. */
    record Hello(
            String app,
            PoolKind kind,
            long pid,
            long poolBytes,
            long minBytes,
            long maxBytes,
            long granuleBytes)
            implements ToMemtide {
        public Hello {
            checkText("hello.app", app, 1, MAX_APP_BYTES, false);
            Objects.requireNonNull(kind, "hello.kind");
            if (pid < 1 || pid > PoolStats.MAX_INTEGER) {
                throw new IllegalArgumentException(
                        "hello.pid = " + pid + ": must be from 1 to " + PoolStats.MAX_INTEGER);
            }
            PoolStats.checkInteger("hello.pool_bytes", poolBytes);
            PoolStats.checkInteger("hello.min_bytes", minBytes);
            PoolStats.checkInteger("hello.max_bytes", maxBytes);
            PoolStats.checkInteger("hello.granule_bytes", granuleBytes);
            if (minBytes > maxBytes) {
                throw new IllegalArgumentException(
                        "hello.min_bytes = " + minBytes + " > max_bytes = " + maxBytes);
            }
            if (poolBytes < minBytes || poolBytes > maxBytes) {
                throw new IllegalArgumentException("hello.pool_bytes = " + poolBytes
                        + " is outside [min_bytes, max_bytes] = [" + minBytes + ", " + maxBytes + "]");
            }
            if (granuleBytes < 1) {
                throw new IllegalArgumentException("hello.granule_bytes = 0: must be at least 1");
            }
            if (maxBytes > 0 && granuleBytes > maxBytes) {
                throw new IllegalArgumentException(
                        "hello.granule_bytes = " + granuleBytes + " > max_bytes = " + maxBytes);
            }
        }

        @Override
        public String type() {
            return "hello";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            fields.put("version", VERSION);
            fields.put("app", app);
            fields.put("kind", kind.wireName());
            fields.put("pid", pid);
            fields.put("pool_bytes", poolBytes);
            fields.put("min_bytes", minBytes);
            fields.put("max_bytes", maxBytes);
            fields.put("granule_bytes", granuleBytes);
        }
    }

    /** memtide registers the agent for a tenant; the version is always {@link #VERSION}. */
    record Welcome(String tenant, long statsIntervalMs, long deadAfterMs) implements ToAgent {
        public Welcome {
            Objects.requireNonNull(tenant, "welcome.tenant");
            if (tenant.isEmpty()) {
                throw new IllegalArgumentException("welcome.tenant is empty");
            }
            if (statsIntervalMs < 1 || statsIntervalMs > PoolStats.MAX_INTEGER) {
                throw new IllegalArgumentException("welcome.stats_interval_ms = " + statsIntervalMs
                        + ": must be from 1 to " + PoolStats.MAX_INTEGER);
            }
            if (deadAfterMs < statsIntervalMs || deadAfterMs > PoolStats.MAX_INTEGER) {
                throw new IllegalArgumentException("welcome.dead_after_ms = " + deadAfterMs
                        + ": must be from stats_interval_ms = " + statsIntervalMs + " to "
                        + PoolStats.MAX_INTEGER);
            }
        }

        @Override
        public String type() {
            return "welcome";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            fields.put("version", VERSION);
            fields.put("tenant", tenant);
            fields.put("stats_interval_ms", statsIntervalMs);
            fields.put("dead_after_ms", deadAfterMs);
        }
    }

    /** memtide asks for the pool at {@code poolBytes} within {@code deadlineMs}. */
    record Target(long seq, long poolBytes, long deadlineMs) implements ToAgent {
        public Target {
            checkSeq("target.seq", seq);
            PoolStats.checkInteger("target.pool_bytes", poolBytes);
            if (deadlineMs < 1 || deadlineMs > PoolStats.MAX_INTEGER) {
                throw new IllegalArgumentException("target.deadline_ms = " + deadlineMs
                        + ": must be from 1 to " + PoolStats.MAX_INTEGER);
            }
        }

        @Override
        public String type() {
            return "target";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            fields.put("seq", seq);
            fields.put("pool_bytes", poolBytes);
            fields.put("deadline_ms", deadlineMs);
        }
    }

    /** Where a resize stands. */
    enum Status {
        WORKING,
        DONE,
        FAILED;

        String wireName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** The agent's answer to target {@code seq}; a reason only says why a resize failed. */
    record Progress(long seq, long poolBytes, Status status, Optional<String> reason)
            implements ToMemtide {
        public Progress {
            checkSeq("progress.seq", seq);
            PoolStats.checkInteger("progress.pool_bytes", poolBytes);
            Objects.requireNonNull(status, "progress.status");
            Objects.requireNonNull(reason, "progress.reason");
            if (reason.isPresent()) {
                checkText("progress.reason", reason.get(), 0, MAX_REASON_BYTES, true);
            }
        }

        /** A failed progress whose reason is cut to fit and has any unpaired surrogate replaced. */
        static Progress failed(long seq, long poolBytes, String reason) {
            return new Progress(seq, poolBytes, Status.FAILED,
                    Optional.of(fitUtf8(reason, MAX_REASON_BYTES)));
        }

        @Override
        public String type() {
            return "progress";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            fields.put("seq", seq);
            fields.put("pool_bytes", poolBytes);
            fields.put("status", status.wireName());
            reason.ifPresent(r -> fields.put("reason", r));
        }
    }

    /** The pool's statistics. */
    record Stats(PoolStats pool) implements ToMemtide {
        public Stats {
            Objects.requireNonNull(pool, "stats");
        }

        @Override
        public String type() {
            return "stats";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            fields.put("pool_bytes", pool.poolBytes());
            fields.put("used_bytes", pool.usedBytes());
            fields.put("hits", pool.hits());
            fields.put("misses", pool.misses());
            fields.put("evictions", pool.evictions());
            fields.put("dirty_bytes", pool.dirtyBytes());
        }
    }

    /** The sender closes the connection after it. */
    record Bye(Optional<String> reason) implements ToAgent, ToMemtide {
        public Bye {
            Objects.requireNonNull(reason, "bye.reason");
            if (reason.isPresent()) {
                checkText("bye.reason", reason.get(), 0, MAX_REASON_BYTES, true);
            }
        }

        @Override
        public String type() {
            return "bye";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            reason.ifPresent(r -> fields.put("reason", r));
        }
    }

    /** An error; {@code code} is one of version 1's codes, kept as its wire name. */
    record ErrorMessage(String code, String message, boolean fatal) implements ToAgent, ToMemtide {
        public ErrorMessage {
            Objects.requireNonNull(code, "error.code");
            Objects.requireNonNull(message, "error.message");
            boolean known = false;
            for (ErrorCode c : ErrorCode.values()) {
                known |= c.wireName().equals(code);
            }
            if (!known) {
                throw new IllegalArgumentException(
                        "error.code = " + Codec.quote(code) + " is not a code of version " + VERSION);
            }
        }

        ErrorMessage(ErrorCode code, String message, boolean fatal) {
            this(code.wireName(), fitUtf8(message, MAX_REASON_BYTES), fatal);
        }

        @Override
        public String type() {
            return "error";
        }

        @Override
        public void putFields(Map<String, Object> fields) {
            fields.put("code", code);
            fields.put("message", message);
            fields.put("fatal", fatal);
        }
    }

    private static void checkSeq(String name, long seq) {
        if (seq < 1 || seq > PoolStats.MAX_INTEGER) {
            throw new IllegalArgumentException(
                    name + " = " + seq + ": must be from 1 to " + PoolStats.MAX_INTEGER);
        }
    }

    /** Checks a text field: its UTF-8 length, no unpaired surrogates, control characters. */
    private static void checkText(
            String name, String value, int minBytes, int maxBytes, boolean controlsAllowed) {
        Objects.requireNonNull(value, name);
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (!controlsAllowed && Character.isISOControl(c)) {
                throw new IllegalArgumentException(
                        name + " has a control character (U+" + String.format("%04X", (int) c) + ")");
            }
            if (Character.isSurrogate(c)
                    && !(Character.isHighSurrogate(c) && i + 1 < value.length()
                            && Character.isLowSurrogate(value.charAt(++i)))) {
                throw new IllegalArgumentException(name + " has an unpaired surrogate");
            }
        }
        int bytes = value.getBytes(StandardCharsets.UTF_8).length;
        if (bytes < minBytes || bytes > maxBytes) {
            throw new IllegalArgumentException(
                    name + " is " + bytes + " bytes: must be " + minBytes + " to " + maxBytes);
        }
    }

    /**
     * {@code text} with unpaired surrogates replaced by U+FFFD and cut to at most
     * {@code maxBytes} bytes of UTF-8, never inside a character.
     */
    static String fitUtf8(String text, int maxBytes) {
        StringBuilder out = new StringBuilder();
        int bytes = 0;
        for (int i = 0; i < text.length(); ) {
            int cp = text.codePointAt(i);
            int width = Character.charCount(cp);
            if (width == 1 && Character.isSurrogate(text.charAt(i))) {
                cp = 0xFFFD;
            }
            int size = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (bytes + size > maxBytes) {
                break;
            }
            out.appendCodePoint(cp);
            bytes += size;
            i += width;
        }
        return out.toString();
    }
}
