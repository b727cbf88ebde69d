/*
 * json.h: the strict JSON reader and writer for the protocol's flat objects (internal).
 *
 * The library has no third-party dependency, so that any C application can link it as is;
 * the protocol needs only one-line objects whose fields are strings, integers and booleans,
 * which a few hundred lines read and write exactly as docs/balloon-protocol.md asks (RFC 8259
 * syntax, UTF-8 only, one object and nothing after it). Values of unknown fields may be of
 * any JSON type: they are checked and skipped, nested at most MTB_JSON_MAX_DEPTH deep.
 */
#ifndef MTB_JSON_H
#define MTB_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MTB_JSON_MAX_DEPTH 32

typedef enum mtb_json_kind {
    MTB_JSON_ABSENT, /* the key is not in the object */
    MTB_JSON_NULL,
    MTB_JSON_BOOL,
    MTB_JSON_NUMBER,
    MTB_JSON_STRING,
    MTB_JSON_ARRAY,
    MTB_JSON_OBJECT
} mtb_json_kind;

/* A member's value. text/len: a string's decoded bytes (valid UTF-8, may hold U+0000) or a
 * number's token as written; boolean: a bool's value. Pointers point into the line read. */
typedef struct mtb_json_value {
    mtb_json_kind kind;
    const char *text;
    size_t len;
    bool boolean;
} mtb_json_value;

/*
 * Reads the JSON object that is the whole of line[0, len), decoding its strings in place
 * (so line is changed). For each keys[i] stores the member's value in values[i], or
 * MTB_JSON_ABSENT; members with other keys are checked and dropped. Returns 0, or -1 with a
 * one-line reason in why (the line is not UTF-8, not one JSON object, or has one of the keys
 * twice).
 */
int mtb_json_read_object(char *line, size_t len, const char *const keys[], mtb_json_value values[],
                         size_t count, char *why, size_t why_size);

/* Writes one object as a line: open, put the members, close. Keys must be plain ASCII. */
typedef struct mtb_json_writer {
    char *buf;
    size_t cap;
    size_t len;
    bool full;
    bool first;
} mtb_json_writer;

void mtb_json_open(mtb_json_writer *w, char *buf, size_t cap);
/* Puts a string member: at most max_bytes bytes of s[0, n) cut on a character boundary,
 * bytes that are not UTF-8 written as U+FFFD, control characters escaped. */
void mtb_json_put_string(mtb_json_writer *w, const char *key, const char *s, size_t n,
                         size_t max_bytes);
void mtb_json_put_uint(mtb_json_writer *w, const char *key, uint64_t value);
void mtb_json_put_bool(mtb_json_writer *w, const char *key, bool value);
/* Ends the object and its line ("}\n", then a NUL not counted). Returns the line's length,
 * or 0 when it did not fit in cap. */
size_t mtb_json_close(mtb_json_writer *w);

/* Writes s[0, n) as a JSON string literal into out (NUL-terminated, fitting out_size), cut
 * to at most max_bytes of s with "..." after the closing quote when cut: for error messages
 * that quote a value. */
void mtb_json_quote(char *out, size_t out_size, const char *s, size_t n, size_t max_bytes);

/* The length of the longest prefix of s[0, n) that is valid UTF-8 (n when all of it is). */
size_t mtb_utf8_valid_prefix(const char *s, size_t n);

#endif
