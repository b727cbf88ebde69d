/*
 * LineReader: the protocol's framing (docs/balloon-protocol.md, "Transport"): lines ended by
 * '\n', a '\r' before it dropped, at most 65,536 bytes including the '\n'. A longer line is
 * reported once as too long as soon as it passes the limit, and the rest of it up to the next
 * '\n' is dropped.
 */
package io.memtide.balloon;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.util.Arrays;

final class LineReader {
    /** The longest line, including its '\n'. */
    static final int MAX_LINE_BYTES = 65_536;

    /** What {@link #next()} read. */
    sealed interface Read permits Line, TooLong, End {}

    /** A whole line, without its '\n' or the '\r' before it. */
    record Line(byte[] bytes) implements Read {}

    /** A line over the limit (its rest is being dropped). */
    record TooLong() implements Read {}

    /** The peer closed the connection (a last line without '\n' is dropped). */
    record End() implements Read {}

    private final ReadableByteChannel channel;
    private final ByteBuffer in = ByteBuffer.allocate(8192).flip();
    private final byte[] line = new byte[MAX_LINE_BYTES - 1];
    private int length;
    private boolean dropping;

    LineReader(ReadableByteChannel channel) {
        this.channel = channel;
    }

    /** The next line, a too-long report, or the end; blocks as the channel does. */
    Read next() throws IOException {
        while (true) {
            while (in.hasRemaining()) {
                byte b = in.get();
                if (b == '\n') {
                    if (dropping) {
                        dropping = false;
                        continue;
                    }
                    int n = length;
                    length = 0;
                    if (n > 0 && line[n - 1] == '\r') {
                        n--;
                    }
                    return new Line(Arrays.copyOf(line, n));
                }
                if (dropping) {
                    continue;
                }
                if (length == line.length) {
                    dropping = true;
                    length = 0;
                    return new TooLong();
                }
                line[length++] = b;
            }
            in.clear();
            int read = channel.read(in);
            in.flip();
            if (read < 0) {
                return new End();
            }
        }
    }
}
