/*
 * ErrorCode: the codes of the protocol's error message (docs/balloon-protocol.md, "error") that
 * an agent sends, by their names on the wire. The codes memtide sends are read as written
 * (Message.ErrorMessage), so that codes of later versions are read too.
 */
package io.memtide.balloon;

import java.util.Locale;

enum ErrorCode {
    MALFORMED,
    TOO_LONG,
    UNKNOWN_TYPE,
    BAD_FIELD,
    VERSION,
    NOT_REGISTERED,
    ALREADY_REGISTERED;

    /** The code as written on the wire, e.g. {@code bad_field}. */
    String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
