/*
 * CodecTest: what the decoder says about lines the vectors do not cover: each error names the
 * field and the value, later versions' fields are read (error codes are not), and bytes that are not
 * UTF-8 are malformed.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class CodecTest {
    private static Message.ToAgent decode(String line) throws ProtocolException {
        return Codec.decodeToAgent(line.getBytes(StandardCharsets.UTF_8));
    }

    private static ProtocolException refused(String line) {
        return assertThrows(ProtocolException.class, () -> decode(line));
    }

    @Test
    void aBadIntegerNamesTheFieldTheValueAndTheRule() {
        ProtocolException e = refused("{\"type\":\"target\",\"seq\":1,\"pool_bytes\":-1,\"deadline_ms\":30000}");
        assertEquals(ErrorCode.BAD_FIELD, e.code());
        assertEquals("target.pool_bytes = -1: must be an integer from 0 to 9007199254740991", e.getMessage());
        assertEquals("target.seq = 1.0: must be an integer from 0 to 9007199254740991",
                refused("{\"type\":\"target\",\"seq\":1.0,\"pool_bytes\":1,\"deadline_ms\":1}").getMessage());
        assertEquals("target.seq = 12345678901234567890: must be an integer from 0 to 9007199254740991",
                refused("{\"type\":\"target\",\"seq\":12345678901234567890,\"pool_bytes\":1,\"deadline_ms\":1}")
                        .getMessage());
    }

    @Test
    void aMissingFieldIsNamed() {
        assertEquals("target.deadline_ms is missing",
                refused("{\"type\":\"target\",\"seq\":1,\"pool_bytes\":0}").getMessage());
    }

    @Test
    void aRuleBetweenFieldsNamesBoth() {
        assertEquals("welcome.dead_after_ms = 500: must be from stats_interval_ms = 1000 to 9007199254740991",
                refused("{\"type\":\"welcome\",\"version\":1,\"tenant\":\"db\",\"stats_interval_ms\":1000,"
                        + "\"dead_after_ms\":500}").getMessage());
    }

    @Test
    void aNullWhereAStringGoesIsABadField() {
        ProtocolException e = refused("{\"type\":\"bye\",\"reason\":null}");
        assertEquals(ErrorCode.BAD_FIELD, e.code());
        assertEquals("bye.reason = null: must be a string", e.getMessage());
    }

    @Test
    void aLongBadValueIsQuotedCut() {
        ProtocolException e = refused("{\"type\":\"error\",\"code\":\"x\",\"message\":\"m\",\"fatal\":\""
                + "y".repeat(200) + "\"}");
        assertEquals("error.fatal = \"" + "y".repeat(63) + "...: must be true or false", e.getMessage());
    }

    @Test
    void fieldsOfALaterVersionAreIgnoredWhateverTheirShape() throws ProtocolException {
        Message.ToAgent message = decode("{\"type\":\"target\",\"seq\":3,\"pool_bytes\":4096,\"deadline_ms\":10,"
                + "\"hints\":{\"priority\":[1,2.5,null]}}");
        assertEquals(new Message.Target(3, 4096, 10), message);
    }

    @Test
    void anErrorCodeOfNoVersion1IsABadField() {
        ProtocolException e = assertThrows(ProtocolException.class,
                () -> decode("{\"type\":\"error\",\"code\":\"overheated\",\"message\":\"too hot\",\"fatal\":true}"));
        assertEquals(ErrorCode.BAD_FIELD, e.code());
    }

    @Test
    void aByeWithoutReasonHasNone() throws ProtocolException {
        assertEquals(new Message.Bye(Optional.empty()), decode("{\"type\":\"bye\"}"));
    }

    @Test
    void bytesThatAreNotUtf8AreMalformed() {
        byte[] line = {'{', '"', 't', 'y', 'p', 'e', '"', ':', '"', (byte) 0xc3, (byte) 0x28, '"', '}'};
        ProtocolException e = assertThrows(ProtocolException.class, () -> Codec.decodeToAgent(line));
        assertEquals(ErrorCode.MALFORMED, e.code());
        assertEquals("the line is not UTF-8", e.getMessage());
    }

    @Test
    void aKeyGivenTwiceIsMalformed() {
        assertEquals(ErrorCode.MALFORMED,
                refused("{\"type\":\"bye\",\"type\":\"welcome\"}").code());
    }

    @Test
    void aTypeThatIsNotAStringIsNamed() {
        ProtocolException e = refused("{\"type\":[\"target\"]}");
        assertEquals(ErrorCode.UNKNOWN_TYPE, e.code());
        assertEquals("type = [\"target\"] is not a string", e.getMessage());
    }
}
