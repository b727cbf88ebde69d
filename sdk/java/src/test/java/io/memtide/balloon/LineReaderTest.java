/*
 * LineReaderTest: the protocol's framing: lines split on '\n' whatever the reads, a '\r' before
 * it dropped, 65,536 bytes with the '\n' the most a line may be, a longer line reported once and
 * the rest of it dropped, and a last line without '\n' dropped at the end.
 */
package io.memtide.balloon;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class LineReaderTest {
    /** A channel that hands out its bytes at most {@code chunk} at a time. */
    private static ReadableByteChannel channel(byte[] bytes, int chunk) {
        ByteBuffer source = ByteBuffer.wrap(bytes);
        return new ReadableByteChannel() {
            @Override
            public int read(ByteBuffer dst) {
                if (!source.hasRemaining()) {
                    return -1;
                }
                int n = Math.min(chunk, Math.min(dst.remaining(), source.remaining()));
                dst.put(source.slice(source.position(), n));
                source.position(source.position() + n);
                return n;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {}
        };
    }

    private static String line(LineReader reader) throws IOException {
        return new String(assertInstanceOf(LineReader.Line.class, reader.next()).bytes(), StandardCharsets.UTF_8);
    }

    @Test
    void splitsLinesWhateverTheReadsAndDropsTheCarriageReturn() throws IOException {
        byte[] bytes = "one\r\ntwo\n\nthree\r\r\n".getBytes(StandardCharsets.UTF_8);
        for (int chunk : new int[] {1, 3, 8192}) {
            LineReader reader = new LineReader(channel(bytes, chunk));
            assertEquals("one", line(reader));
            assertEquals("two", line(reader));
            assertEquals("", line(reader));
            assertEquals("three\r", line(reader));
            assertInstanceOf(LineReader.End.class, reader.next());
        }
    }

    @Test
    void readsALineOfExactlyTheLimitWithItsNewline() throws IOException {
        byte[] longest = "x".repeat(LineReader.MAX_LINE_BYTES - 1).getBytes(StandardCharsets.UTF_8);
        byte[] bytes = ByteBuffer.allocate(longest.length + 1).put(longest).put((byte) '\n').array();
        LineReader reader = new LineReader(channel(bytes, 8192));
        assertArrayEquals(longest, assertInstanceOf(LineReader.Line.class, reader.next()).bytes());
    }

    @Test
    void reportsALineOverTheLimitOnceAndReadsTheNextLine() throws IOException {
        String tooLong = "y".repeat(LineReader.MAX_LINE_BYTES) + "\n";
        String tooLongWithReturn = "z".repeat(LineReader.MAX_LINE_BYTES - 1) + "\r\n";
        byte[] bytes = (tooLong + tooLongWithReturn + "next\n").getBytes(StandardCharsets.UTF_8);
        LineReader reader = new LineReader(channel(bytes, 5000));
        assertInstanceOf(LineReader.TooLong.class, reader.next());
        assertInstanceOf(LineReader.TooLong.class, reader.next());
        assertEquals("next", line(reader));
        assertInstanceOf(LineReader.End.class, reader.next());
    }

    @Test
    void dropsALastLineWithoutNewline() throws IOException {
        LineReader reader = new LineReader(channel("whole\npart".getBytes(StandardCharsets.UTF_8), 8192));
        assertEquals("whole", line(reader));
        assertInstanceOf(LineReader.End.class, reader.next());
    }
}
