/*
 * json_tree.h: a general JSON reader for the tests, which read the vector files (nested
 * objects and arrays the library's flat reader is not meant for) and compare messages as
 * JSON values.
 */
#ifndef JSON_TREE_H
#define JSON_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum jt_kind { JT_NULL, JT_BOOL, JT_NUMBER, JT_STRING, JT_ARRAY, JT_OBJECT } jt_kind;

typedef struct jt {
    jt_kind kind;
    bool boolean;
    char *text;        /* a number as written, or a string's bytes (NUL-terminated) */
    size_t len;        /* their length */
    size_t count;      /* an array's items or an object's members */
    char **keys;       /* an object's keys */
    struct jt **items; /* the items, or the members' values */
} jt;

/* Reads text[0, len) as one JSON value; NULL with why filled in when it is not one. */
jt *jt_parse(const char *text, size_t len, char *why, size_t why_size);
/* Reads a whole file as one JSON value; NULL with why filled in when it cannot. */
jt *jt_parse_file(const char *path, char *why, size_t why_size);
void jt_free(jt *value);

/* An object's member, or NULL. */
const jt *jt_get(const jt *object, const char *key);
/* A member's string (NULL when absent or not a string), integer (0 when not one), bool. */
const char *jt_string(const jt *object, const char *key);
uint64_t jt_uint(const jt *object, const char *key);
bool jt_bool(const jt *object, const char *key);

/* True when a and b are equal JSON values: objects regardless of member order, numbers by
 * value. */
bool jt_equal(const jt *a, const jt *b);
/* True when every member of want is in have with an equal value. */
bool jt_holds(const jt *have, const jt *want);

#endif
