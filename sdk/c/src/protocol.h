/*
 * protocol.h: the balloon protocol's messages (version 1, docs/balloon-protocol.md) as C
 * types, with the decoder of the lines memtide sends an agent and the encoders of the lines
 * an agent sends memtide (internal to the library; the tests use it too).
 */
#ifndef MTB_PROTOCOL_H
#define MTB_PROTOCOL_H

#include "memtide_balloon.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A line's most bytes, its '\n' included. */
#define MTB_LINE_MAX 65536

/* The error codes of the protocol's `error` message. */
typedef enum mtb_code {
    MTB_CODE_MALFORMED,
    MTB_CODE_TOO_LONG,
    MTB_CODE_UNKNOWN_TYPE,
    MTB_CODE_BAD_FIELD,
    MTB_CODE_VERSION,
    MTB_CODE_NOT_REGISTERED,
    MTB_CODE_ALREADY_REGISTERED,
    MTB_CODE_IDENTITY,
    MTB_CODE_BUSY,
    MTB_CODE_UNKNOWN_SEQ,
    MTB_CODE_VIOLATIONS,
    MTB_CODE_DEAD,
    MTB_CODE_DEADLINE,
    MTB_CODE_DISHONEST
} mtb_code;

/* The wire name of a code ("bad_field", ...). */
const char *mtb_code_name(mtb_code code);
/* Reads a code from its wire name s[0, n). Returns 0, or -1 when it names none. */
int mtb_code_parse(const char *s, size_t n, mtb_code *code);
/* True for the codes whose error always closes the connection. */
bool mtb_code_always_fatal(mtb_code code);

/* Bytes of a decoded line: valid UTF-8, not NUL-terminated, may hold U+0000. */
typedef struct mtb_text {
    const char *ptr;
    size_t len;
} mtb_text;

typedef struct mtb_welcome {
    mtb_text tenant;
    uint64_t stats_interval_ms;
    uint64_t dead_after_ms;
} mtb_welcome;

typedef struct mtb_target {
    uint64_t seq;
    uint64_t pool_bytes;
    uint64_t deadline_ms;
} mtb_target;

typedef struct mtb_bye {
    bool has_reason;
    mtb_text reason;
} mtb_bye;

typedef struct mtb_error_message {
    mtb_code code;
    mtb_text message;
    bool fatal;
} mtb_error_message;

/* A message memtide sends an agent. */
typedef enum mtb_incoming_type {
    MTB_IN_WELCOME,
    MTB_IN_TARGET,
    MTB_IN_BYE,
    MTB_IN_ERROR
} mtb_incoming_type;

typedef struct mtb_incoming {
    mtb_incoming_type type;
    union {
        mtb_welcome welcome;
        mtb_target target;
        mtb_bye bye;
        mtb_error_message error;
    } as;
} mtb_incoming;

/* Why a line could not be read: the code to answer with, and one line naming what. */
typedef struct mtb_decode_error {
    mtb_code code;
    char message[256];
} mtb_decode_error;

/*
 * Decodes one line memtide sent, line[0, len) without its '\n' (a final '\r' is dropped).
 * Strings are decoded in place, so line is changed and msg points into it. Returns 0, or -1
 * with error filled in: too_long, malformed, unknown_type, bad_field or version.
 */
int mtb_decode(char *line, size_t len, mtb_incoming *msg, mtb_decode_error *error);

/* Messages an agent sends. */
typedef struct mtb_hello {
    const char *app;
    mtb_kind kind;
    uint64_t pid;
    uint64_t pool_bytes;
    uint64_t min_bytes;
    uint64_t max_bytes;
    uint64_t granule_bytes;
} mtb_hello;

typedef enum mtb_progress_status {
    MTB_PROGRESS_WORKING,
    MTB_PROGRESS_DONE,
    MTB_PROGRESS_FAILED
} mtb_progress_status;

typedef struct mtb_progress {
    uint64_t seq;
    uint64_t pool_bytes;
    mtb_progress_status status;
    const char *reason; /* NULL: none */
} mtb_progress;

typedef struct mtb_stats_message {
    uint64_t pool_bytes;
    mtb_stats stats;
} mtb_stats_message;

/* Each encoder writes one line with its '\n' (and a NUL after it) into buf and returns its
 * length, or 0 if it does not fit in cap. Strings are cut to the protocol's limits. */
size_t mtb_encode_hello(const mtb_hello *hello, char *buf, size_t cap);
size_t mtb_encode_progress(const mtb_progress *progress, char *buf, size_t cap);
size_t mtb_encode_stats(const mtb_stats_message *stats, char *buf, size_t cap);
size_t mtb_encode_bye(const char *reason, char *buf, size_t cap); /* reason NULL: none */
size_t mtb_encode_error(mtb_code code, const char *message, bool fatal, char *buf, size_t cap);

/* Checks a pool's facts against the hello's rules. Returns 0, or -1 with why filled in. */
int mtb_check_pool(const mtb_pool *pool, char *why, size_t why_size);

#endif
