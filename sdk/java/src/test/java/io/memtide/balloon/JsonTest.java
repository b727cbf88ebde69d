/*
 * JsonTest: the strict JSON reader refuses what the protocol refuses and reads what JSON allows;
 * the writer escapes what JSON requires and its output reads back the same.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

class JsonTest {
    @Test
    void readsEveryKindOfValueWithNumbersAsWritten() throws Json.SyntaxException {
        Map<String, Object> object = Json.parseObject(
                " {\"s\":\"a\\\"b\\\\c\\/\\n\\u00e9\\ud83d\\ude00\",\"i\":-0,\"f\":1.50,\"e\":1E+3,"
                        + "\"t\":true,\"n\":null,\"a\":[1,{\"x\":[]}],\"o\":{}} ");
        assertEquals("a\"b\\c/\n\u00e9\ud83d\ude00", object.get("s"));
        assertEquals(new Json.Number("-0"), object.get("i"));
        assertEquals(new Json.Number("1.50"), object.get("f"));
        assertEquals(new Json.Number("1E+3"), object.get("e"));
        assertEquals(Boolean.TRUE, object.get("t"));
        assertEquals(Json.Null.NULL, object.get("n"));
        assertEquals(List.of(new Json.Number("1"), Map.of("x", List.of())), object.get("a"));
        assertEquals(Map.of(), object.get("o"));
        assertEquals(List.of("s", "i", "f", "e", "t", "n", "a", "o"), List.copyOf(object.keySet()));
    }

    @Test
    void tellsIntegersFromFractionsAndExponents() {
        assertTrue(new Json.Number("9007199254740991").isInteger());
        assertTrue(new Json.Number("-5").isInteger());
        assertFalse(new Json.Number("1.0").isInteger());
        assertFalse(new Json.Number("1e3").isInteger());
        assertFalse(new Json.Number("1E3").isInteger());
    }

    @ParameterizedTest
    @ValueSource(strings = {
        "", "[1]", "\"s\"", "{", "{\"a\":1", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":01}",
        "{\"a\":1.}", "{\"a\":.5}", "{\"a\":1e}", "{\"a\":-}", "{\"a\":+1}", "{\"a\":tru}",
        "{\"a\":NaN}", "{\"a\":\"\u0001\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\\ud800\"}",
        "{\"a\":\"\\udc00\"}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u0\u0663\u0663\u0663\"}", "{\"a\":1}x",
        "{\"a\":1}{\"a\":1}", "{\"a\":1,\"a\":2}", "{\"a\":\"open}"
    })
    void refusesWhatIsNotOneStrictJsonObject(String text) {
        assertThrows(Json.SyntaxException.class, () -> Json.parseObject(text));
    }

    @Test
    void refusesNestingDeeperThanTheLimit() throws Json.SyntaxException {
        String ok = "{\"a\":" + "[".repeat(Json.MAX_DEPTH - 1) + "]".repeat(Json.MAX_DEPTH - 1) + "}";
        Json.parseObject(ok);
        String deep = "{\"a\":" + "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH) + "}";
        Json.SyntaxException e = assertThrows(Json.SyntaxException.class, () -> Json.parseObject(deep));
        assertTrue(e.getMessage().contains("nested deeper than " + Json.MAX_DEPTH), e.getMessage());
    }

    @Test
    void namesWhereTheLineBreaks() {
        Json.SyntaxException e = assertThrows(Json.SyntaxException.class,
                () -> Json.parseObject("{\"type\":\"target\","));
        assertEquals("line ends where a key was expected at character 17", e.getMessage());
    }

    @Test
    void writesEscapesForQuotesBackslashesAndControlCharacters() {
        Map<String, Object> object = new LinkedHashMap<>();
        object.put("s", "q\"b\\n\nr\rt\tb\bf\f\u0001\u007f\u00e9");
        object.put("l", 9007199254740991L);
        object.put("b", false);
        assertEquals("{\"s\":\"q\\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0001\\u007f\u00e9\","
                + "\"l\":9007199254740991,\"b\":false}", Json.write(object));
    }

    @Test
    void writtenTextReadsBackTheSame() throws Json.SyntaxException {
        Map<String, Object> object = new LinkedHashMap<>();
        object.put("s", "all \u0000 \u001f \" \\ / \ud83d\ude00 kinds");
        object.put("n", new Json.Number("42"));
        assertEquals(object, Json.parseObject(Json.write(object)));
    }
}
