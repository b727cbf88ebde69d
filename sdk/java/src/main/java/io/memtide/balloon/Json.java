/*
 * Json: the strict JSON reader and the writer of the balloon protocol's one-line messages.
 *
 * The SDK has no runtime dependencies (it is linked into applications that bring their own JSON
 * library, of whatever version), and the protocol needs little: one flat object per line. So it
 * carries this small codec instead. It is strict where general-purpose libraries are lenient and
 * the protocol is not: numbers are kept as written (an integer field never sees 1.0 or 1e3, and
 * nothing is rounded through double), a key given twice, raw control characters in strings,
 * unpaired surrogates, leading zeros and anything after the object are refused. Values of
 * fields a later version may add are read whatever they are (nested up to MAX_DEPTH) and ignored
 * by the codec.
 */
package io.memtide.balloon;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class Json {
    /** How deeply arrays and objects may nest inside a message (the message itself is depth 1). */
    static final int MAX_DEPTH = 16;

    private Json() {}

    /** A JSON number as written, so that integer fields can refuse fractions and exponents. */
    record Number(String literal) {
        /** Whether the literal is an integer: no fraction and no exponent. */
        boolean isInteger() {
            return literal.indexOf('.') < 0 && literal.indexOf('e') < 0 && literal.indexOf('E') < 0;
        }

        @Override
        public String toString() {
            return literal;
        }
    }

    /** JSON's null. */
    enum Null {
        NULL;

        @Override
        public String toString() {
            return "null";
        }
    }

    /** A text that is not one JSON object. */
    static final class SyntaxException extends Exception {
        private static final long serialVersionUID = 1L;

        SyntaxException(String message) {
            super(message);
        }
    }

    /**
     * Reads {@code text} as exactly one JSON object. Values are String, Boolean, {@link Number},
     * {@link Null}, List and Map (keys in the order written).
     */
    static Map<String, Object> parseObject(String text) throws SyntaxException {
        Reader reader = new Reader(text);
        reader.skipSpace();
        if (reader.peek() != '{') {
            throw new SyntaxException("not a JSON object");
        }
        Map<String, Object> object = reader.object(1);
        reader.skipSpace();
        if (!reader.atEnd()) {
            throw new SyntaxException("text after the object at character " + reader.pos);
        }
        return object;
    }

    /** Writes {@code value} (one of the types {@link #parseObject} yields, or a long) as JSON. */
    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        writeValue(out, value);
        return out.toString();
    }

    private static void writeValue(StringBuilder out, Object value) {
        if (value instanceof String s) {
            writeString(out, s);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeString(out, (String) entry.getKey());
                out.append(':');
                writeValue(out, entry.getValue());
            }
            out.append('}');
        } else if (value instanceof List<?> list) {
            out.append('[');
            for (int i = 0; i < list.size(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                writeValue(out, list.get(i));
            }
            out.append(']');
        } else if (value instanceof Long || value instanceof Boolean || value instanceof Number
                || value instanceof Null) {
            out.append(value);
        } else {
            throw new IllegalArgumentException("no JSON form for " + value.getClass().getName());
        }
    }

    /** Writes {@code s} as a JSON string: quotes, backslashes and control characters escaped. */
    static void writeString(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    if (c < 0x20 || c == 0x7f) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }

    /** A recursive-descent reader over one line of text. */
    private static final class Reader {
        private final String text;
        private int pos;

        Reader(String text) {
            this.text = text;
        }

        boolean atEnd() {
            return pos >= text.length();
        }

        char peek() {
            return atEnd() ? '\0' : text.charAt(pos);
        }

        void skipSpace() {
            while (!atEnd()) {
                char c = text.charAt(pos);
                if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                    return;
                }
                pos++;
            }
        }

        SyntaxException error(String what) {
            return new SyntaxException(what + " at character " + pos);
        }

        void expect(char c) throws SyntaxException {
            if (peek() != c || atEnd()) {
                throw error(atEnd() ? "line ends where '" + c + "' was expected" : "expected '" + c + "'");
            }
            pos++;
        }

        Object value(int depth) throws SyntaxException {
            skipSpace();
            if (atEnd()) {
                throw error("line ends where a value was expected");
            }
            char c = peek();
            return switch (c) {
                case '{' -> object(depth + 1);
                case '[' -> array(depth + 1);
                case '"' -> string();
                case 't' -> literal("true", Boolean.TRUE);
                case 'f' -> literal("false", Boolean.FALSE);
                case 'n' -> literal("null", Null.NULL);
                default -> {
                    if (c == '-' || (c >= '0' && c <= '9')) {
                        yield number();
                    }
                    throw error("unexpected '" + c + "'");
                }
            };
        }

        Map<String, Object> object(int depth) throws SyntaxException {
            if (depth > MAX_DEPTH) {
                throw error("nested deeper than " + MAX_DEPTH);
            }
            expect('{');
            Map<String, Object> object = new LinkedHashMap<>();
            skipSpace();
            if (peek() == '}') {
                pos++;
                return object;
            }
            while (true) {
                skipSpace();
                if (atEnd()) {
                    throw error("line ends where a key was expected");
                }
                if (peek() != '"') {
                    throw error("expected a key");
                }
                String key = string();
                skipSpace();
                expect(':');
                Object value = value(depth);
                if (object.putIfAbsent(key, value) != null) {
                    throw error("key \"" + key + "\" given twice");
                }
                skipSpace();
                if (peek() == ',') {
                    pos++;
                } else {
                    expect('}');
                    return object;
                }
            }
        }

        List<Object> array(int depth) throws SyntaxException {
            if (depth > MAX_DEPTH) {
                throw error("nested deeper than " + MAX_DEPTH);
            }
            expect('[');
            List<Object> array = new ArrayList<>();
            skipSpace();
            if (peek() == ']') {
                pos++;
                return array;
            }
            while (true) {
                array.add(value(depth));
                skipSpace();
                if (peek() == ',') {
                    pos++;
                } else {
                    expect(']');
                    return array;
                }
            }
        }

        Object literal(String word, Object value) throws SyntaxException {
            if (!text.startsWith(word, pos)) {
                throw error("unexpected '" + peek() + "'");
            }
            pos += word.length();
            return value;
        }

        /** A number by JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
        Number number() throws SyntaxException {
            int start = pos;
            if (peek() == '-') {
                pos++;
            }
            if (peek() == '0') {
                pos++;
                if (isDigit(peek())) {
                    throw error("number with a leading zero");
                }
            } else if (isDigit(peek())) {
                digits();
            } else {
                throw error("'-' without digits");
            }
            if (peek() == '.') {
                pos++;
                if (!isDigit(peek())) {
                    throw error("fraction without digits");
                }
                digits();
            }
            if (peek() == 'e' || peek() == 'E') {
                pos++;
                if (peek() == '+' || peek() == '-') {
                    pos++;
                }
                if (!isDigit(peek())) {
                    throw error("exponent without digits");
                }
                digits();
            }
            return new Number(text.substring(start, pos));
        }

        private void digits() {
            while (isDigit(peek())) {
                pos++;
            }
        }

        private static boolean isDigit(char c) {
            return c >= '0' && c <= '9';
        }

        String string() throws SyntaxException {
            expect('"');
            StringBuilder out = new StringBuilder();
            while (true) {
                if (atEnd()) {
                    throw error("line ends inside a string");
                }
                char c = text.charAt(pos++);
                if (c == '"') {
                    return out.toString();
                }
                if (c < 0x20) {
                    pos--;
                    throw error("unescaped control character in a string");
                }
                if (c != '\\') {
                    out.append(c);
                    continue;
                }
                if (atEnd()) {
                    throw error("line ends inside an escape");
                }
                char e = text.charAt(pos++);
                switch (e) {
                    case '"', '\\', '/' -> out.append(e);
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> out.append(unicodeEscape());
                    default -> {
                        pos--;
                        throw error("unknown escape '\\" + e + "'");
                    }
                }
            }
        }

        /** The character(s) of a \\u escape whose 'u' was just read: a surrogate must be paired. */
        private String unicodeEscape() throws SyntaxException {
            char c = hex4();
            if (Character.isHighSurrogate(c)) {
                if (text.startsWith("\\u", pos)) {
                    pos += 2;
                    char low = hex4();
                    if (Character.isLowSurrogate(low)) {
                        return new String(new char[] {c, low});
                    }
                }
                throw error("unpaired surrogate \\u" + Integer.toHexString(c));
            }
            if (Character.isLowSurrogate(c)) {
                throw error("unpaired surrogate \\u" + Integer.toHexString(c));
            }
            return String.valueOf(c);
        }

        private char hex4() throws SyntaxException {
            if (pos + 4 > text.length()) {
                throw error("line ends inside a \\u escape");
            }
            int value = 0;
            for (int i = 0; i < 4; i++) {
                char h = text.charAt(pos + i);
                int digit = h < 0x80 ? Character.digit(h, 16) : -1;
                if (digit < 0) {
                    throw error("bad hex digit in a \\u escape");
                }
                value = value * 16 + digit;
            }
            pos += 4;
            return (char) value;
        }
    }
}
