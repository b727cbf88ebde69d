/*
 * Result: what a shrink or grow callback answers: success, or failure with a reason that the
 * agent sends memtide in "progress failed".
 */
package io.memtide.balloon;

import java.util.Objects;

/** The outcome of a {@link Resizer} call. */
public sealed interface Result permits Result.Success, Result.Failure {
    /** The pool is at the target and, when shrinking, its memory is back with the OS. */
    static Result success() {
        return Success.INSTANCE;
    }

    /**
     * The pool could not reach the target; it is left at whatever size the callback got it to.
     *
     * @param reason why, for memtide's logs (sent cut to 1,024 bytes of UTF-8)
     */
    static Result failure(String reason) {
        return new Failure(reason);
    }

    /** Success: the only instance is {@link Result#success()}. */
    final class Success implements Result {
        private static final Success INSTANCE = new Success();

        private Success() {}

        @Override
        public String toString() {
            return "success";
        }
    }

    /** Failure with a reason. */
    record Failure(String reason) implements Result {
        public Failure {
            Objects.requireNonNull(reason, "reason");
        }
    }
}
