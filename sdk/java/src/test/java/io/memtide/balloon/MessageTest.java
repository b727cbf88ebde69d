/*
 * MessageTest: the agent's own messages keep the protocol's rules when made (one-line errors
 * naming the field), and what the agent sends on an application's behalf is made to fit: a
 * failure reason cut to 1,024 bytes of UTF-8 without splitting a character, unpaired surrogates
 * replaced.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class MessageTest {
    @Test
    void helloRefusesAPoolOutsideMinMaxNamingTheBounds() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> new Message.Hello("db", PoolKind.HEAP, 42, 10, 20, 30, 1));
        assertEquals("hello.pool_bytes = 10 is outside [min_bytes, max_bytes] = [20, 30]", e.getMessage());
    }

    @Test
    void helloRefusesAnAppWithAControlCharacterOrAnUnpairedSurrogate() {
        assertEquals("hello.app has a control character (U+0007)", assertThrows(IllegalArgumentException.class,
                () -> new Message.Hello("my\u0007db", PoolKind.HEAP, 42, 0, 0, 0, 1)).getMessage());
        assertEquals("hello.app has an unpaired surrogate", assertThrows(IllegalArgumentException.class,
                () -> new Message.Hello("db\ud800", PoolKind.HEAP, 42, 0, 0, 0, 1)).getMessage());
        new Message.Hello("db \ud83d\ude00", PoolKind.HEAP, 42, 0, 0, 0, 1);
    }

    @Test
    void helloAcceptsAnAppOf128BytesOfUtf8AndNotMore() {
        String e128 = "\u00e9".repeat(64);
        new Message.Hello(e128, PoolKind.OTHER, 1, 0, 0, 0, 1);
        assertEquals("hello.app is 130 bytes: must be 1 to 128", assertThrows(IllegalArgumentException.class,
                () -> new Message.Hello(e128 + "\u00e9", PoolKind.OTHER, 1, 0, 0, 0, 1)).getMessage());
    }

    @Test
    void aFailureReasonIsCutToFitWithoutSplittingACharacter() {
        String reason = "x".repeat(1022) + "\u20ac" + "tail";
        Message.Progress progress = Message.Progress.failed(7, 0, reason);
        String sent = progress.reason().orElseThrow();
        assertEquals("x".repeat(1022), sent);
        assertEquals(1022, sent.getBytes(StandardCharsets.UTF_8).length);
    }

    @Test
    void aFailureReasonWithAnUnpairedSurrogateIsRepaired() {
        Message.Progress progress = Message.Progress.failed(7, 0, "bad\udc00 \ud83d\ude00");
        assertEquals(Optional.of("bad\ufffd \ud83d\ude00"), progress.reason());
    }

    @Test
    void progressEncodesItsReasonOnlyWhenItHasOne() {
        assertEquals("{\"type\":\"progress\",\"seq\":2,\"pool_bytes\":4096,\"status\":\"done\"}",
                new Message.Progress(2, 4096, Message.Status.DONE, Optional.empty()).toJson());
    }
}
