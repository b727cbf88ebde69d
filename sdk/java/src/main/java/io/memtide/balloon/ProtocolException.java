/*
 * ProtocolException: a line from memtide that the agent cannot read, with the error code the
 * agent answers it with and a one-line message naming what is wrong.
 */
package io.memtide.balloon;

final class ProtocolException extends Exception {
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;

    ProtocolException(ErrorCode code, String message) {
        super(message);
        this.code = code;
    }

    ErrorCode code() {
        return code;
    }
}
