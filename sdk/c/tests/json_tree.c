/*
 * json_tree.c: the tests' general JSON reader and comparisons (see json_tree.h). It trusts
 * its input more than the library's reader does: it reads the repository's vector files and
 * the lines the library itself wrote.
 */
#include "json_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *start;
    const char *p;
    const char *end;
    char *why;
    size_t why_size;
} parser;

static void *must(void *p)
{
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static jt *fail(parser *ps, const char *what)
{
    snprintf(ps->why, ps->why_size, "%s at offset %td", what, ps->p - ps->start);
    return NULL;
}

static void space(parser *ps)
{
    while (ps->p < ps->end && strchr(" \t\r\n", *ps->p) != NULL && *ps->p != '\0')
        ps->p++;
}

static jt *node(jt_kind kind)
{
    jt *v = must(calloc(1, sizeof *v));
    v->kind = kind;
    return v;
}

static void put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static bool hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v *= 16;
        if (c >= '0' && c <= '9')
            v += (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v += (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v += (unsigned)(c - 'A' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

/* Reads a string at ps->p (its quote) into a new NUL-terminated buffer. */
static char *string(parser *ps, size_t *len)
{
    size_t cap = (size_t)(ps->end - ps->p) + 1, n = 0;
    char *out = must(malloc(cap));
    ps->p++;
    while (ps->p < ps->end && *ps->p != '"') {
        if (*ps->p != '\\') {
            out[n++] = *ps->p++;
            continue;
        }
        if (ps->end - ps->p < 2)
            break;
        char e = ps->p[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple != NULL && e != '\0') {
            out[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            ps->p += 2;
            continue;
        }
        unsigned cp, low;
        if (e != 'u' || ps->end - ps->p < 6 || !hex4(ps->p + 2, &cp))
            break;
        ps->p += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
            ps->p[1] == 'u' && hex4(ps->p + 2, &low) && low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            ps->p += 6;
        }
        put_utf8(out, &n, cp);
    }
    if (ps->p >= ps->end || *ps->p != '"') {
        free(out);
        return NULL;
    }
    ps->p++;
    out[n] = '\0';
    *len = n;
    return out;
}

static jt *value(parser *ps, int depth);

static jt *container(parser *ps, int depth)
{
    bool object = *ps->p == '{';
    char close = object ? '}' : ']';
    jt *v = node(object ? JT_OBJECT : JT_ARRAY);
    size_t cap = 0;
    ps->p++;
    space(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len;
        if (object) {
            space(ps);
            if (ps->p >= ps->end || *ps->p != '"' || (key = string(ps, &key_len)) == NULL)
                break;
            space(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                break;
            }
            ps->p++;
        }
        jt *item = value(ps, depth + 1);
        if (item == NULL) {
            free(key);
            break;
        }
        if (v->count == cap) {
            cap = cap ? cap * 2 : 8;
            v->items = must(realloc(v->items, cap * sizeof *v->items));
            v->keys = must(realloc(v->keys, cap * sizeof *v->keys));
        }
        v->keys[v->count] = key;
        v->items[v->count++] = item;
        space(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return v;
        }
        break;
    }
    jt_free(v);
    return fail(ps, object ? "a bad object" : "a bad array");
}

static jt *value(parser *ps, int depth)
{
    space(ps);
    if (ps->p >= ps->end || depth > 64)
        return fail(ps, "no value");
    char c = *ps->p;
    if (c == '{' || c == '[')
        return container(ps, depth);
    if (c == '"') {
        jt *v = node(JT_STRING);
        v->text = string(ps, &v->len);
        if (v->text == NULL) {
            free(v);
            return fail(ps, "a bad string");
        }
        return v;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, words[i], n) == 0) {
            jt *v = node(i == 2 ? JT_NULL : JT_BOOL);
            v->boolean = i == 0;
            ps->p += n;
            return v;
        }
    }
    const char *start = ps->p;
    while (ps->p < ps->end && strchr("+-.0123456789eE", *ps->p) != NULL && *ps->p != '\0')
        ps->p++;
    if (ps->p == start)
        return fail(ps, "an unexpected character");
    jt *v = node(JT_NUMBER);
    v->len = (size_t)(ps->p - start);
    v->text = must(malloc(v->len + 1));
    memcpy(v->text, start, v->len);
    v->text[v->len] = '\0';
    return v;
}

jt *jt_parse(const char *text, size_t len, char *why, size_t why_size)
{
    parser ps = {text, text, text + len, why, why_size};
    jt *v = value(&ps, 0);
    if (v == NULL)
        return NULL;
    space(&ps);
    if (ps.p != ps.end) {
        jt_free(v);
        return fail(&ps, "text after the value");
    }
    return v;
}

jt *jt_parse_file(const char *path, char *why, size_t why_size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, why_size, "cannot open %s", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *text = must(malloc(cap));
    size_t got;
    while ((got = fread(text + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            text = must(realloc(text, cap *= 2));
    }
    fclose(f);
    jt *v = jt_parse(text, n, why, why_size);
    free(text);
    return v;
}

void jt_free(jt *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < v->count; i++) {
        if (v->keys != NULL)
            free(v->keys[i]);
        jt_free(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->text);
    free(v);
}

const jt *jt_get(const jt *object, const char *key)
{
    if (object == NULL || object->kind != JT_OBJECT)
        return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0)
            return object->items[i];
    return NULL;
}

const char *jt_string(const jt *object, const char *key)
{
    const jt *v = jt_get(object, key);
    return v != NULL && v->kind == JT_STRING ? v->text : NULL;
}

uint64_t jt_uint(const jt *object, const char *key)
{
    const jt *v = jt_get(object, key);
    return v != NULL && v->kind == JT_NUMBER ? strtoull(v->text, NULL, 10) : 0;
}

bool jt_bool(const jt *object, const char *key)
{
    const jt *v = jt_get(object, key);
    return v != NULL && v->kind == JT_BOOL && v->boolean;
}

/* A number without fraction or exponent, as sign and digits without leading zeros. */
static bool integer_form(const char *s, bool *negative, const char **digits)
{
    if (strpbrk(s, ".eE") != NULL)
        return false;
    *negative = *s == '-';
    if (*negative)
        s++;
    while (*s == '0' && s[1] != '\0')
        s++;
    *digits = s;
    if (strcmp(s, "0") == 0)
        *negative = false;
    return true;
}

static bool numbers_equal(const char *a, const char *b)
{
    bool na, nb;
    const char *da, *db;
    if (integer_form(a, &na, &da) && integer_form(b, &nb, &db))
        return na == nb && strcmp(da, db) == 0;
    return strtod(a, NULL) == strtod(b, NULL);
}

bool jt_holds(const jt *have, const jt *want)
{
    if (have->kind != JT_OBJECT || want->kind != JT_OBJECT)
        return false;
    for (size_t i = 0; i < want->count; i++) {
        const jt *v = jt_get(have, want->keys[i]);
        if (v == NULL || !jt_equal(v, want->items[i]))
            return false;
    }
    return true;
}

bool jt_equal(const jt *a, const jt *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case JT_NULL:
        return true;
    case JT_BOOL:
        return a->boolean == b->boolean;
    case JT_NUMBER:
        return numbers_equal(a->text, b->text);
    case JT_STRING:
        return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
    case JT_ARRAY:
        if (a->count != b->count)
            return false;
        for (size_t i = 0; i < a->count; i++)
            if (!jt_equal(a->items[i], b->items[i]))
                return false;
        return true;
    case JT_OBJECT:
        return a->count == b->count && jt_holds(a, b) && jt_holds(b, a);
    }
    return false;
}
