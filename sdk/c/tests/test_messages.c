/*
 * test_messages.c: every vector of protocol/vectors/messages.json. A to_agent line decodes
 * to the vector's message (compared as JSON after encoding what was decoded) or fails with
 * the vector's error code; a valid to_memtide message is built with the library's types and
 * encodes to JSON equal to it. Invalid to_memtide lines are the daemon's to refuse: an agent
 * never reads them, and this library's decoder reads only what memtide sends.
 */
#include "check.h"
#include "json.h"
#include "json_tree.h"
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static jt *vectors;

static void put_text(mtb_json_writer *w, const char *key, mtb_text text)
{
    mtb_json_put_string(w, key, text.ptr, text.len, SIZE_MAX);
}

/* Writes a decoded message back as JSON, field by field, as memtide would have sent it. */
static size_t encode_incoming(const mtb_incoming *msg, char *buf, size_t cap)
{
    mtb_json_writer w;
    mtb_json_open(&w, buf, cap);
    switch (msg->type) {
    case MTB_IN_WELCOME:
        mtb_json_put_string(&w, "type", "welcome", 7, SIZE_MAX);
        mtb_json_put_uint(&w, "version", MTB_PROTOCOL_VERSION);
        put_text(&w, "tenant", msg->as.welcome.tenant);
        mtb_json_put_uint(&w, "stats_interval_ms", msg->as.welcome.stats_interval_ms);
        mtb_json_put_uint(&w, "dead_after_ms", msg->as.welcome.dead_after_ms);
        break;
    case MTB_IN_TARGET:
        mtb_json_put_string(&w, "type", "target", 6, SIZE_MAX);
        mtb_json_put_uint(&w, "seq", msg->as.target.seq);
        mtb_json_put_uint(&w, "pool_bytes", msg->as.target.pool_bytes);
        mtb_json_put_uint(&w, "deadline_ms", msg->as.target.deadline_ms);
        break;
    case MTB_IN_BYE:
        mtb_json_put_string(&w, "type", "bye", 3, SIZE_MAX);
        if (msg->as.bye.has_reason)
            put_text(&w, "reason", msg->as.bye.reason);
        break;
    case MTB_IN_ERROR: {
        const char *code = mtb_code_name(msg->as.error.code);
        mtb_json_put_string(&w, "type", "error", 5, SIZE_MAX);
        mtb_json_put_string(&w, "code", code, strlen(code), SIZE_MAX);
        put_text(&w, "message", msg->as.error.message);
        mtb_json_put_bool(&w, "fatal", msg->as.error.fatal);
        break;
    }
    }
    return mtb_json_close(&w);
}

/* Checks that a line written by the library equals want as JSON. */
static void check_encoded(const char *line, size_t len, const jt *want)
{
    char why[128];
    REQUIRE(len > 0, "the message did not fit in a line");
    REQUIRE(line[len - 1] == '\n' && memchr(line, '\n', len - 1) == NULL,
            "not one line ended by a newline: %s", line);
    jt *got = jt_parse(line, len - 1, why, sizeof why);
    REQUIRE(got != NULL, "wrote a line that is not JSON (%s): %s", why, line);
    CHECK(jt_equal(got, want), "wrote %s", line);
    jt_free(got);
}

static void to_agent(const jt *vector)
{
    const char *line = jt_string(vector, "line");
    size_t len = jt_get(vector, "line")->len;
    char *copy = malloc(len + 1);
    REQUIRE(copy != NULL, "out of memory");
    memcpy(copy, line, len + 1);
    mtb_incoming msg;
    mtb_decode_error error;
    int rc = mtb_decode(copy, len, &msg, &error);
    if (jt_bool(vector, "valid")) {
        static char out[MTB_LINE_MAX * 2];
        CHECK(rc == 0, "refused with %s: %s", mtb_code_name(error.code), error.message);
        if (rc == 0)
            check_encoded(out, encode_incoming(&msg, out, sizeof out), jt_get(vector, "message"));
    } else {
        const char *want = jt_string(vector, "error");
        CHECK(rc < 0, "decoded a line the vector refuses with %s", want);
        if (rc < 0)
            CHECK(strcmp(mtb_code_name(error.code), want) == 0, "refused with %s (%s), not %s",
                  mtb_code_name(error.code), error.message, want);
    }
    free(copy);
}

static int progress_status(const char *name, mtb_progress_status *status)
{
    static const char *const names[] = {"working", "done", "failed"};
    for (int i = 0; i < 3; i++) {
        if (name != NULL && strcmp(name, names[i]) == 0) {
            *status = (mtb_progress_status)i;
            return 0;
        }
    }
    return -1;
}

/* Builds the vector's message with the library's types and encodes it. */
static void to_memtide(const jt *vector)
{
    const jt *m = jt_get(vector, "message");
    const char *type = jt_string(m, "type");
    char line[4096];
    size_t len = 0;
    REQUIRE(type != NULL, "the vector's message has no type");
    if (strcmp(type, "hello") == 0) {
        mtb_hello hello = {.app = jt_string(m, "app"),
                           .pid = jt_uint(m, "pid"),
                           .pool_bytes = jt_uint(m, "pool_bytes"),
                           .min_bytes = jt_uint(m, "min_bytes"),
                           .max_bytes = jt_uint(m, "max_bytes"),
                           .granule_bytes = jt_uint(m, "granule_bytes")};
        REQUIRE(jt_uint(m, "version") == MTB_PROTOCOL_VERSION, "a hello of another version");
        REQUIRE(mtb_kind_parse(jt_string(m, "kind"), &hello.kind) == 0, "an unknown kind");
        len = mtb_encode_hello(&hello, line, sizeof line);
    } else if (strcmp(type, "progress") == 0) {
        mtb_progress progress = {.seq = jt_uint(m, "seq"),
                                 .pool_bytes = jt_uint(m, "pool_bytes"),
                                 .reason = jt_string(m, "reason")};
        REQUIRE(progress_status(jt_string(m, "status"), &progress.status) == 0,
                "an unknown status");
        len = mtb_encode_progress(&progress, line, sizeof line);
    } else if (strcmp(type, "stats") == 0) {
        mtb_stats_message stats = {.pool_bytes = jt_uint(m, "pool_bytes"),
                                   .stats = {.used_bytes = jt_uint(m, "used_bytes"),
                                             .hits = jt_uint(m, "hits"),
                                             .misses = jt_uint(m, "misses"),
                                             .evictions = jt_uint(m, "evictions"),
                                             .dirty_bytes = jt_uint(m, "dirty_bytes")}};
        len = mtb_encode_stats(&stats, line, sizeof line);
    } else if (strcmp(type, "bye") == 0) {
        len = mtb_encode_bye(jt_string(m, "reason"), line, sizeof line);
    } else if (strcmp(type, "error") == 0) {
        const char *code_name = jt_string(m, "code");
        mtb_code code;
        REQUIRE(code_name != NULL && mtb_code_parse(code_name, strlen(code_name), &code) == 0,
                "an unknown code");
        len = mtb_encode_error(code, jt_string(m, "message"), jt_bool(m, "fatal"), line,
                               sizeof line);
    } else {
        REQUIRE(false, "an agent sends no %s", type);
    }
    check_encoded(line, len, m);
}

static void run_vector(const void *arg)
{
    const jt *vector = arg;
    const char *direction = jt_string(vector, "direction");
    REQUIRE(direction != NULL && jt_string(vector, "line") != NULL, "a vector without a line");
    if (strcmp(direction, "to_agent") == 0)
        to_agent(vector);
    else
        to_memtide(vector);
}

static void the_vectors_are_there(void)
{
    const jt *list = jt_get(vectors, "vectors");
    REQUIRE(list != NULL && list->kind == JT_ARRAY && list->count > 0,
            "messages.json holds no vectors");
}

void message_vector_tests(void)
{
    char path[1024], why[256], name[512];
    snprintf(path, sizeof path, "%s/messages.json", vectors_dir);
    vectors = jt_parse_file(path, why, sizeof why);
    if (vectors == NULL)
        printf("    %s: %s\n", path, why);
    RUN(the_vectors_are_there);
    const jt *list = jt_get(vectors, "vectors");
    for (size_t i = 0; list != NULL && i < list->count; i++) {
        const jt *vector = list->items[i];
        const char *direction = jt_string(vector, "direction");
        if (direction != NULL && strcmp(direction, "to_memtide") == 0 && !jt_bool(vector, "valid"))
            continue;
        /* The library sends no miss-ratio curve (stats.curve is optional): it cannot build one.
         * Nor durability figures (stats.durability is optional): only a database has them, and
         * memtide-adapter sends a MariaDB's. */
        if (direction != NULL && strcmp(direction, "to_memtide") == 0 &&
            (jt_get(jt_get(vector, "message"), "curve") != NULL ||
             jt_get(jt_get(vector, "message"), "durability") != NULL))
            continue;
        snprintf(name, sizeof name, "messages.json %s: %s", direction ? direction : "?",
                 jt_string(vector, "name") ? jt_string(vector, "name") : "?");
        run_case_with(name, run_vector, vector);
    }
    jt_free(vectors);
    vectors = NULL;
}
