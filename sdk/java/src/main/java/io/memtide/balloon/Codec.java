/*
 * Codec: reads one line from memtide into a Message.ToAgent, or says which error code answers it
 * and why in one line (docs/balloon-protocol.md, "error"): malformed for a line that is not UTF-8
 * or not one JSON object, unknown_type for a missing or foreign type, version for a welcome of
 * another version, bad_field for a field that is missing, of the wrong type or against its rule.
 * Fields a later version may add are ignored.
 */
package io.memtide.balloon;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;

final class Codec {
    /** How much of a bad value an error message quotes. */
    private static final int QUOTED_CHARS = 64;

    private Codec() {}

    /** Reads {@code line} (without its newline or carriage return) as a message memtide sends. */
    static Message.ToAgent decodeToAgent(byte[] line) throws ProtocolException {
        String text;
        try {
            text = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(line))
                    .toString();
        } catch (CharacterCodingException e) {
            throw new ProtocolException(ErrorCode.MALFORMED, "the line is not UTF-8");
        }
        Map<String, Object> object;
        try {
            object = Json.parseObject(text);
        } catch (Json.SyntaxException e) {
            throw new ProtocolException(ErrorCode.MALFORMED, "the line is not one JSON object: " + e.getMessage());
        }
        Object type = object.get("type");
        if (type == null) {
            throw new ProtocolException(ErrorCode.UNKNOWN_TYPE, "the message has no type");
        }
        if (!(type instanceof String name)) {
            throw new ProtocolException(ErrorCode.UNKNOWN_TYPE, "type = " + quote(type) + " is not a string");
        }
        Fields fields = new Fields(name, object);
        try {
            return switch (name) {
                case "welcome" -> {
                    long version = fields.integer("version");
                    if (version != Message.VERSION) {
                        throw new ProtocolException(ErrorCode.VERSION, "welcome.version = " + version
                                + ": this agent speaks version " + Message.VERSION);
                    }
                    yield new Message.Welcome(fields.string("tenant"),
                            fields.integer("stats_interval_ms"), fields.integer("dead_after_ms"));
                }
                case "target" -> new Message.Target(fields.integer("seq"), fields.integer("pool_bytes"),
                        fields.integer("deadline_ms"));
                case "bye" -> new Message.Bye(fields.optionalString("reason"));
                case "error" -> new Message.ErrorMessage(fields.string("code"), fields.string("message"),
                        fields.bool("fatal"));
                default -> throw new ProtocolException(ErrorCode.UNKNOWN_TYPE,
                        "type = " + quote(name) + " is no message memtide sends in version " + Message.VERSION);
            };
        } catch (IllegalArgumentException e) {
            // A field rule checked by the message's own constructor.
            throw new ProtocolException(ErrorCode.BAD_FIELD, e.getMessage());
        }
    }

    /** A value as JSON, cut for an error message. */
    static String quote(Object value) {
        String json = Json.write(value);
        return json.length() <= QUOTED_CHARS ? json : json.substring(0, QUOTED_CHARS) + "...";
    }

    /** The fields of one message, read by type; every problem is a bad_field naming the field. */
    private record Fields(String type, Map<String, Object> object) {
        private Object required(String name) throws ProtocolException {
            Object value = object.get(name);
            if (value == null) {
                throw new ProtocolException(ErrorCode.BAD_FIELD, type + "." + name + " is missing");
            }
            return value;
        }

        private ProtocolException wrong(String name, Object value, String what) {
            return new ProtocolException(ErrorCode.BAD_FIELD, type + "." + name + " = " + quote(value) + ": " + what);
        }

        /** An integer in [0, 2^53 − 1], written without fraction or exponent. */
        long integer(String name) throws ProtocolException {
            Object value = required(name);
            String rule = "must be an integer from 0 to " + PoolStats.MAX_INTEGER;
            if (!(value instanceof Json.Number number) || !number.isInteger()) {
                throw wrong(name, value, rule);
            }
            String digits = number.literal();
            // More than 16 digits is past 2^53 − 1 (16 digits), so parseLong never overflows.
            if (digits.startsWith("-") ? !digits.equals("-0") : digits.length() > 16) {
                throw wrong(name, value, rule);
            }
            long parsed = Long.parseLong(digits);
            if (parsed > PoolStats.MAX_INTEGER) {
                throw wrong(name, value, rule);
            }
            return parsed;
        }

        String string(String name) throws ProtocolException {
            Object value = required(name);
            if (!(value instanceof String s)) {
                throw wrong(name, value, "must be a string");
            }
            return s;
        }

        Optional<String> optionalString(String name) throws ProtocolException {
            return object.containsKey(name) ? Optional.of(string(name)) : Optional.empty();
        }

        boolean bool(String name) throws ProtocolException {
            Object value = required(name);
            if (!(value instanceof Boolean b)) {
                throw wrong(name, value, "must be true or false");
            }
            return b;
        }
    }
}
