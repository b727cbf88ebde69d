/*
 * ErrorCode: the codes of the protocol's error message (docs/balloon-protocol.md, "error"), by
 * their names on the wire: an error of any other code is a bad_field.
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
    ALREADY_REGISTERED,
    IDENTITY,
    BUSY,
    UNKNOWN_SEQ,
    VIOLATIONS,
    DEAD,
    DEADLINE,
    DISHONEST;

    /** The code as written on the wire, e.g. {@code bad_field}. */
    String wireName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
