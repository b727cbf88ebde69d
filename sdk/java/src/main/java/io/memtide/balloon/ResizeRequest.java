/*
 * ResizeRequest: one target handed to a shrink or grow callback, with the flag the agent sets
 * when a newer target replaces it.
 */
package io.memtide.balloon;

import java.time.Duration;
import java.util.Objects;

/** A target for the pool, as a {@link Resizer} sees it. */
public final class ResizeRequest {
    private final long targetBytes;
    private final Duration timeLimit;
    private volatile boolean superseded;

    /**
     * A request to resize to {@code targetBytes} within {@code timeLimit}. The agent makes these;
     * applications make them to test their callbacks.
     */
    public ResizeRequest(long targetBytes, Duration timeLimit) {
        if (targetBytes < 0) {
            throw new IllegalArgumentException("targetBytes = " + targetBytes + " < 0");
        }
        this.targetBytes = targetBytes;
        this.timeLimit = Objects.requireNonNull(timeLimit, "timeLimit");
    }

    /** The size the pool should reach, in bytes. */
    public long targetBytes() {
        return targetBytes;
    }

    /** How long memtide gives the resize, from when the agent received the target. */
    public Duration timeLimit() {
        return timeLimit;
    }

    /**
     * Whether a newer target, or the end of the session, has replaced this one: the callback may
     * stop, and what it returns is not sent.
     */
    public boolean isSuperseded() {
        return superseded;
    }

    void supersede() {
        superseded = true;
    }

    @Override
    public String toString() {
        return "resize to " + targetBytes + " bytes within " + timeLimit.toMillis() + " ms"
                + (superseded ? " (superseded)" : "");
    }
}
