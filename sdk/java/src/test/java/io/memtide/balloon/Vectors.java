/*
 * Vectors: where the shared test vectors are (protocol/vectors at the repository's root, passed
 * by the build as the memtide.vectors property) and reading them with org.json.
 */
package io.memtide.balloon;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.json.JSONObject;

final class Vectors {
    private Vectors() {}

    /** The vectors' directory; the build sets it, and a run from sdk/java finds it without. */
    static Path dir() {
        Path dir = Path.of(System.getProperty("memtide.vectors", "../../protocol/vectors"));
        if (!Files.isDirectory(dir)) {
            throw new IllegalStateException("no test vectors at " + dir.toAbsolutePath()
                    + ": set -Dmemtide.vectors to the repository's protocol/vectors");
        }
        return dir;
    }

    static JSONObject read(Path file) throws IOException {
        return new JSONObject(Files.readString(file));
    }
}
