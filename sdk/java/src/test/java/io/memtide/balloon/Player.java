/*
 * Player: a test memtide. It listens on a Unix socket (in a test's temporary directory), accepts
 * an agent's connections and reads and writes lines on them with timeouts, so that a test can
 * play the protocol's exchanges against a real agent. It knows framing only, not messages.
 */
package io.memtide.balloon;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;

public final class Player implements AutoCloseable {
    private final Path socket;
    private final ServerSocketChannel server;
    private final Selector selector;

    /** Listens at {@code socket}. */
    public Player(Path socket) throws IOException {
        this.socket = socket;
        this.server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        server.configureBlocking(false);
        this.selector = Selector.open();
        server.register(selector, SelectionKey.OP_ACCEPT);
    }

    /** The next connection, or an AssertionError when none comes within {@code timeout}. */
    public Peer accept(Duration timeout) throws IOException {
        Peer peer = tryAccept(timeout);
        if (peer == null) {
            throw new AssertionError("no agent connected to " + socket + " within " + timeout.toMillis() + " ms");
        }
        return peer;
    }

    /** The next connection, or null when none comes within {@code timeout}. */
    public Peer tryAccept(Duration timeout) throws IOException {
        long end = System.nanoTime() + timeout.toNanos();
        while (true) {
            SocketChannel channel = server.accept();
            if (channel != null) {
                return new Peer(channel);
            }
            long left = end - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            selector.select(Math.max(1, left / 1_000_000));
            selector.selectedKeys().clear();
        }
    }

    @Override
    public void close() throws IOException {
        selector.close();
        server.close();
        Files.deleteIfExists(socket);
    }

    /** One accepted connection. */
    public static final class Peer implements AutoCloseable {
        private final SocketChannel channel;
        private final Selector selector;
        private final ByteBuffer in = ByteBuffer.allocate(65_536);
        private final ByteArrayOutputStream pending = new ByteArrayOutputStream();
        private boolean ended;

        private Peer(SocketChannel channel) throws IOException {
            this.channel = channel;
            channel.configureBlocking(false);
            this.selector = Selector.open();
        }

        /** Writes {@code line} and a newline. */
        public void send(String line) throws IOException {
            ByteBuffer out = ByteBuffer.wrap((line + "\n").getBytes(StandardCharsets.UTF_8));
            SelectionKey key = channel.register(selector, SelectionKey.OP_WRITE);
            try {
                while (out.hasRemaining()) {
                    if (channel.write(out) == 0) {
                        selector.select(1000);
                        selector.selectedKeys().clear();
                    }
                }
            } finally {
                key.interestOps(0);
            }
        }

        /**
         * The next line without its newline, null when the agent closed the connection, or an
         * AssertionError when nothing comes within {@code timeout}.
         */
        public String readLine(Duration timeout) throws IOException {
            long end = System.nanoTime() + timeout.toNanos();
            SelectionKey key = channel.register(selector, SelectionKey.OP_READ);
            try {
                while (true) {
                    byte[] bytes = pending.toByteArray();
                    for (int i = 0; i < bytes.length; i++) {
                        if (bytes[i] == '\n') {
                            pending.reset();
                            pending.write(bytes, i + 1, bytes.length - i - 1);
                            return new String(Arrays.copyOf(bytes, i), StandardCharsets.UTF_8);
                        }
                    }
                    if (ended) {
                        return null;
                    }
                    long left = end - System.nanoTime();
                    if (left <= 0) {
                        throw new AssertionError("no line from the agent within " + timeout.toMillis() + " ms");
                    }
                    selector.select(Math.max(1, left / 1_000_000));
                    selector.selectedKeys().clear();
                    in.clear();
                    int read = channel.read(in);
                    if (read < 0) {
                        ended = true;
                    } else {
                        pending.write(in.array(), 0, read);
                    }
                }
            } finally {
                key.interestOps(0);
            }
        }

        @Override
        public void close() throws IOException {
            selector.close();
            channel.close();
        }
    }
}
