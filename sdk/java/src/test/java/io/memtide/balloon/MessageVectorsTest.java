/*
 * MessageVectorsTest: every line of protocol/vectors/messages.json. A to_agent line goes through
 * the SDK's framing and decoder and must decode to the vector's message (compared as JSON values
 * after re-encoding) or fail with the vector's error code. A valid to_memtide message must be
 * buildable with the SDK's types and encode to the vector's message; an invalid one with a
 * bad_field error must be impossible to build (its fields have no Java form, or the type's
 * constructor refuses them), so the SDK can never send it.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.stream.Stream;
import org.json.JSONArray;
import org.json.JSONObject;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

class MessageVectorsTest {
    private static List<JSONObject> vectors(String direction) throws IOException {
        JSONArray all = Vectors.read(Vectors.dir().resolve("messages.json")).getJSONArray("vectors");
        List<JSONObject> chosen = new ArrayList<>();
        for (int i = 0; i < all.length(); i++) {
            JSONObject vector = all.getJSONObject(i);
            if (vector.getString("direction").equals(direction)) {
                chosen.add(vector);
            }
        }
        return chosen;
    }

    @Test
    void theVectorsHoldLinesInBothDirections() throws IOException {
        // Guards the factories below against a moved or emptied file: they would run nothing.
        assertTrue(vectors("to_agent").size() >= 10, "to_agent vectors");
        assertTrue(vectors("to_memtide").size() >= 40, "to_memtide vectors");
    }

    @TestFactory
    Stream<DynamicTest> everyToAgentLineDecodesAsTheVectorSays() throws IOException {
        return vectors("to_agent").stream().map(vector -> DynamicTest.dynamicTest(vector.getString("name"), () -> {
            LineReader.Read read = frame(vector.getString("line"));
            if (vector.getBoolean("valid")) {
                byte[] line = assertInstanceOf(LineReader.Line.class, read).bytes();
                Message.ToAgent message = Codec.decodeToAgent(line);
                assertSameJson(vector.getJSONObject("message"), message.toJson());
                return;
            }
            String code = vector.getString("error");
            if (code.equals("too_long")) {
                assertInstanceOf(LineReader.TooLong.class, read);
                return;
            }
            byte[] line = assertInstanceOf(LineReader.Line.class, read).bytes();
            ProtocolException e = assertThrows(ProtocolException.class, () -> Codec.decodeToAgent(line));
            assertEquals(code, e.code().wireName(), e.getMessage());
        }));
    }

    @TestFactory
    Stream<DynamicTest> everyValidToMemtideMessageIsBuiltAndEncodedAsTheVectorSays() throws IOException {
        // The SDK sends no miss-ratio curve (stats.curve is optional): it cannot build one. Nor
        // durability figures (stats.durability is optional): only a database has them, and
        // memtide-adapter sends a MariaDB's.
        return vectors("to_memtide").stream()
                .filter(vector -> vector.getBoolean("valid") && !vector.getJSONObject("message").has("curve")
                        && !vector.getJSONObject("message").has("durability"))
                .map(vector -> DynamicTest.dynamicTest(vector.getString("name"), () -> {
                    JSONObject expected = vector.getJSONObject("message");
                    Message.ToMemtide built = build(expected);
                    assertSameJson(expected, built.toJson());
                }));
    }

    @TestFactory
    Stream<DynamicTest> noInvalidToMemtideMessageCanBeBuilt() throws IOException {
        return vectors("to_memtide").stream()
                .filter(vector -> !vector.getBoolean("valid") && vector.getString("error").equals("bad_field"))
                .map(vector -> DynamicTest.dynamicTest(vector.getString("name"), () -> {
                    JSONObject fields = new JSONObject(vector.getString("line"));
                    try {
                        Message.ToMemtide built = build(fields);
                        fail("built " + built.toJson() + " from an invalid vector");
                    } catch (NoJavaForm | IllegalArgumentException expected) {
                        // Refused: the SDK cannot send this.
                    }
                }));
    }

    /** The line and its newline through the SDK's framing. */
    private static LineReader.Read frame(String line) throws IOException {
        byte[] bytes = (line + "\n").getBytes(StandardCharsets.UTF_8);
        return new LineReader(Channels.newChannel(new ByteArrayInputStream(bytes))).next();
    }

    private static void assertSameJson(JSONObject expected, String json) {
        JSONObject got = new JSONObject(json);
        assertTrue(expected.similar(got), () -> "expected " + expected + ", encoded " + json);
    }

    /** A vector's fields have no form in the SDK's types (missing, or of another JSON type). */
    private static final class NoJavaForm extends Exception {
        private static final long serialVersionUID = 1L;

        NoJavaForm(String what) {
            super(what);
        }
    }

    /** The SDK's message with {@code fields}, made through its types' constructors. */
    private static Message.ToMemtide build(JSONObject fields) throws NoJavaForm {
        switch (string(fields, "type")) {
            case "hello":
                if (integer(fields, "version") != Message.VERSION) {
                    throw new NoJavaForm("hello.version other than " + Message.VERSION);
                }
                return new Message.Hello(string(fields, "app"), kind(string(fields, "kind")),
                        integer(fields, "pid"), integer(fields, "pool_bytes"), integer(fields, "min_bytes"),
                        integer(fields, "max_bytes"), integer(fields, "granule_bytes"));
            case "progress":
                return new Message.Progress(integer(fields, "seq"), integer(fields, "pool_bytes"),
                        status(string(fields, "status")),
                        fields.has("reason") ? Optional.of(string(fields, "reason")) : Optional.empty());
            case "stats":
                if (fields.has("curve")) {
                    throw new NoJavaForm("stats.curve: the SDK sends no miss-ratio curve");
                }
                if (fields.has("durability")) {
                    throw new NoJavaForm("stats.durability: the SDK sends no durability figures");
                }
                return new Message.Stats(new PoolStats(integer(fields, "pool_bytes"), integer(fields, "used_bytes"),
                        integer(fields, "hits"), integer(fields, "misses"), integer(fields, "evictions"),
                        integer(fields, "dirty_bytes")));
            case "bye":
                return new Message.Bye(fields.has("reason") ? Optional.of(string(fields, "reason")) : Optional.empty());
            case "error":
                if (!(fields.opt("fatal") instanceof Boolean fatal)) {
                    throw new NoJavaForm("error.fatal is not a boolean");
                }
                return new Message.ErrorMessage(string(fields, "code"), string(fields, "message"), fatal);
            default:
                throw new NoJavaForm("no message of type " + fields.opt("type"));
        }
    }

    private static String string(JSONObject fields, String name) throws NoJavaForm {
        if (!(fields.opt(name) instanceof String s)) {
            throw new NoJavaForm(name + " is not a string");
        }
        return s;
    }

    private static long integer(JSONObject fields, String name) throws NoJavaForm {
        Object value = fields.opt(name);
        if (value instanceof Integer || value instanceof Long) {
            return ((Number) value).longValue();
        }
        if (value instanceof BigInteger big && big.bitLength() < 64) {
            return big.longValue();
        }
        throw new NoJavaForm(name + " is not a Java long");
    }

    private static PoolKind kind(String wire) throws NoJavaForm {
        for (PoolKind kind : PoolKind.values()) {
            if (kind.wireName().equals(wire)) {
                return kind;
            }
        }
        throw new NoJavaForm("no pool kind " + wire);
    }

    private static Message.Status status(String wire) throws NoJavaForm {
        try {
            return Message.Status.valueOf(wire.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new NoJavaForm("no progress status " + wire);
        }
    }
}
