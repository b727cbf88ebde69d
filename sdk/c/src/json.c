/*
 * json.c: the strict JSON reader and writer for the protocol's flat objects (see json.h for
 * why the library carries its own). The reader follows RFC 8259 to the letter and accepts
 * only UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF, no lone surrogate
 * escapes); the writer always produces valid UTF-8.
 */
#include "json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at p (1 to 4), or 0 when there is none. */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

size_t mtb_utf8_valid_prefix(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = utf8_sequence((const unsigned char *)s + i, n - i);
        if (k == 0)
            break;
        i += k;
    }
    return i;
}

/* ---- reader ---- */

typedef struct reader {
    char *start;
    char *p;
    char *end;
    char *why;
    size_t why_size;
} reader;

static int fail(reader *r, const char *format, ...) __attribute__((format(printf, 2, 3)));

static int fail(reader *r, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(r->why, r->why_size, format, args);
    va_end(args);
    return -1;
}

static size_t offset(const reader *r)
{
    return (size_t)(r->p - r->start);
}

/* Fails on what stands at r->p, where `wanted` should have. */
static int unexpected(reader *r, const char *wanted)
{
    if (r->p >= r->end)
        return fail(r, "not a JSON object: the line ends where %s should be", wanted);
    unsigned char c = (unsigned char)*r->p;
    if (c >= 0x80 && utf8_sequence((const unsigned char *)r->p, (size_t)(r->end - r->p)) == 0)
        return fail(r, "not UTF-8: byte 0x%02X at offset %zu", c, offset(r));
    if (c > 0x20 && c < 0x7F)
        return fail(r, "not a JSON object: '%c' at offset %zu where %s should be", c, offset(r),
                    wanted);
    return fail(r, "not a JSON object: byte 0x%02X at offset %zu where %s should be", c,
                offset(r), wanted);
}

static void skip_space(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Reads the 4 hex digits after "\u" at r->p (which points at the backslash). */
static int read_escape_unit(reader *r, unsigned *unit)
{
    if (r->end - r->p < 6)
        return fail(r, "not a JSON object: a \\u escape cut short at offset %zu", offset(r));
    unsigned value = 0;
    for (int i = 2; i < 6; i++) {
        int d = hex_digit(r->p[i]);
        if (d < 0)
            return fail(r, "not a JSON object: a \\u escape with a non-hex digit at offset %zu",
                        offset(r));
        value = value * 16 + (unsigned)d;
    }
    *unit = value;
    return 0;
}

static char *put_code_point(char *w, unsigned cp)
{
    if (cp < 0x80) {
        *w++ = (char)cp;
    } else if (cp < 0x800) {
        *w++ = (char)(0xC0 | (cp >> 6));
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *w++ = (char)(0xE0 | (cp >> 12));
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *w++ = (char)(0xF0 | (cp >> 18));
        *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    }
    return w;
}

/* Reads a \uXXXX escape (or a surrogate pair of them) at r->p and writes its UTF-8 at *w. */
static int read_unicode_escape(reader *r, char **w)
{
    unsigned unit;
    if (read_escape_unit(r, &unit) < 0)
        return -1;
    if (unit >= 0xDC00 && unit <= 0xDFFF)
        return fail(r, "not UTF-8: a lone surrogate \\u%04X at offset %zu", unit, offset(r));
    if (unit >= 0xD800 && unit <= 0xDBFF) {
        unsigned low;
        char *high_at = r->p;
        r->p += 6;
        if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u' ||
            read_escape_unit(r, &low) < 0 || low < 0xDC00 || low > 0xDFFF) {
            r->p = high_at;
            return fail(r, "not UTF-8: a lone surrogate \\u%04X at offset %zu", unit, offset(r));
        }
        unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
    }
    r->p += 6;
    *w = put_code_point(*w, unit);
    return 0;
}

/* Reads the string at r->p (its opening quote), decoding it in place. */
static int read_string(reader *r, const char **text, size_t *len)
{
    char *out = ++r->p;
    char *w = out;
    for (;;) {
        if (r->p >= r->end)
            return fail(r, "not a JSON object: a string is not closed by the end of the line");
        unsigned char c = (unsigned char)*r->p;
        if (c == '"') {
            r->p++;
            break;
        }
        if (c == '\\') {
            char e = r->p + 1 < r->end ? r->p[1] : '\0';
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e != '\0' && simple != NULL) {
                static const char decoded[] = "\"\\/\b\f\n\r\t";
                *w++ = decoded[simple - "\"\\/bfnrt"];
                r->p += 2;
            } else if (e == 'u') {
                if (read_unicode_escape(r, &w) < 0)
                    return -1;
            } else {
                return fail(r, "not a JSON object: an unknown escape at offset %zu", offset(r));
            }
            continue;
        }
        if (c < 0x20)
            return fail(r, "not a JSON object: control character 0x%02X in a string at offset %zu",
                        c, offset(r));
        size_t k = utf8_sequence((const unsigned char *)r->p, (size_t)(r->end - r->p));
        if (k == 0)
            return fail(r, "not UTF-8: byte 0x%02X at offset %zu", c, offset(r));
        memmove(w, r->p, k);
        w += k;
        r->p += k;
    }
    *text = out;
    *len = (size_t)(w - out);
    return 0;
}

static bool is_digit(const reader *r)
{
    return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

static int read_digits(reader *r)
{
    if (!is_digit(r))
        return unexpected(r, "a digit");
    while (is_digit(r))
        r->p++;
    return 0;
}

static int read_number(reader *r, mtb_json_value *v)
{
    char *start = r->p;
    if (*r->p == '-')
        r->p++;
    if (r->p < r->end && *r->p == '0')
        r->p++;
    else if (read_digits(r) < 0)
        return -1;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (read_digits(r) < 0)
            return -1;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (read_digits(r) < 0)
            return -1;
    }
    v->kind = MTB_JSON_NUMBER;
    v->text = start;
    v->len = (size_t)(r->p - start);
    return 0;
}

static int read_literal(reader *r, mtb_json_value *v)
{
    static const struct {
        const char *word;
        mtb_json_kind kind;
        bool boolean;
    } literals[] = {{"true", MTB_JSON_BOOL, true},
                    {"false", MTB_JSON_BOOL, false},
                    {"null", MTB_JSON_NULL, false}};
    for (size_t i = 0; i < sizeof literals / sizeof literals[0]; i++) {
        size_t n = strlen(literals[i].word);
        if ((size_t)(r->end - r->p) >= n && memcmp(r->p, literals[i].word, n) == 0) {
            v->kind = literals[i].kind;
            v->text = r->p;
            v->len = n;
            v->boolean = literals[i].boolean;
            r->p += n;
            return 0;
        }
    }
    return unexpected(r, "a value");
}

static int read_value(reader *r, mtb_json_value *v, int depth);

/* Reads the object or array at r->p, which sits `depth` levels deep. */
static int read_container(reader *r, int depth)
{
    bool object = *r->p == '{';
    char close = object ? '}' : ']';
    if (depth > MTB_JSON_MAX_DEPTH)
        return fail(r, "not a JSON object: values nested over %d deep at offset %zu",
                    MTB_JSON_MAX_DEPTH, offset(r));
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        mtb_json_value v;
        if (object) {
            if (r->p >= r->end || *r->p != '"')
                return unexpected(r, "a key");
            if (read_string(r, &v.text, &v.len) < 0)
                return -1;
            skip_space(r);
            if (r->p >= r->end || *r->p != ':')
                return unexpected(r, "':'");
            r->p++;
            skip_space(r);
        }
        if (read_value(r, &v, depth) < 0)
            return -1;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_space(r);
        } else if (r->p < r->end && *r->p == close) {
            r->p++;
            return 0;
        } else {
            return unexpected(r, object ? "',' or '}'" : "',' or ']'");
        }
    }
}

static int read_value(reader *r, mtb_json_value *v, int depth)
{
    if (r->p >= r->end)
        return unexpected(r, "a value");
    v->boolean = false;
    switch (*r->p) {
    case '"':
        v->kind = MTB_JSON_STRING;
        return read_string(r, &v->text, &v->len);
    case '{':
    case '[':
        v->kind = *r->p == '{' ? MTB_JSON_OBJECT : MTB_JSON_ARRAY;
        v->text = r->p;
        if (read_container(r, depth + 1) < 0)
            return -1;
        v->len = (size_t)(r->p - v->text);
        return 0;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return read_number(r, v);
    default:
        return read_literal(r, v);
    }
}

int mtb_json_read_object(char *line, size_t len, const char *const keys[], mtb_json_value values[],
                         size_t count, char *why, size_t why_size)
{
    reader r = {line, line, line + len, why, why_size};
    for (size_t i = 0; i < count; i++)
        values[i].kind = MTB_JSON_ABSENT;
    skip_space(&r);
    if (r.p >= r.end)
        return fail(&r, "not a JSON object: the line is empty");
    if (*r.p != '{')
        return unexpected(&r, "'{'");
    r.p++;
    skip_space(&r);
    if (r.p < r.end && *r.p == '}') {
        r.p++;
    } else {
        for (;;) {
            const char *key;
            size_t key_len;
            mtb_json_value v;
            if (r.p >= r.end || *r.p != '"')
                return unexpected(&r, "a key");
            if (read_string(&r, &key, &key_len) < 0)
                return -1;
            skip_space(&r);
            if (r.p >= r.end || *r.p != ':')
                return unexpected(&r, "':'");
            r.p++;
            skip_space(&r);
            if (read_value(&r, &v, 1) < 0)
                return -1;
            for (size_t i = 0; i < count; i++) {
                if (strlen(keys[i]) == key_len && memcmp(keys[i], key, key_len) == 0) {
                    if (values[i].kind != MTB_JSON_ABSENT)
                        return fail(&r, "not a JSON object: key \"%s\" appears twice", keys[i]);
                    values[i] = v;
                }
            }
            skip_space(&r);
            if (r.p < r.end && *r.p == ',') {
                r.p++;
                skip_space(&r);
            } else if (r.p < r.end && *r.p == '}') {
                r.p++;
                break;
            } else {
                return unexpected(&r, "',' or '}'");
            }
        }
    }
    skip_space(&r);
    if (r.p < r.end)
        return fail(&r, "not one JSON object: more text after it at offset %zu", offset(&r));
    return 0;
}

/* ---- writer ---- */

static void append(mtb_json_writer *w, const char *s, size_t n)
{
    if (w->full || w->len + n >= w->cap) {
        w->full = true;
        return;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void mtb_json_open(mtb_json_writer *w, char *buf, size_t cap)
{
    w->buf = buf;
    w->cap = cap;
    w->len = 0;
    w->full = false;
    w->first = true;
    append(w, "{", 1);
}

static void put_key(mtb_json_writer *w, const char *key)
{
    if (!w->first)
        append(w, ",", 1);
    w->first = false;
    append(w, "\"", 1);
    append(w, key, strlen(key));
    append(w, "\":", 2);
}

/* Writes s[0, n) escaped, at most max_bytes of it; returns true when it had to cut. */
static bool put_escaped(mtb_json_writer *w, const char *s, size_t n, size_t max_bytes)
{
    static const char replacement[] = "\xEF\xBF\xBD";
    size_t used = 0;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_sequence((const unsigned char *)s + i, n - i);
        char escaped[8];
        const char *chunk = s + i;
        size_t chunk_len = k;
        size_t bytes = k;
        if (k == 0) {
            chunk = replacement;
            chunk_len = bytes = 3;
            k = 1;
        } else if (c == '"' || c == '\\') {
            escaped[0] = '\\';
            escaped[1] = (char)c;
            chunk = escaped;
            chunk_len = 2;
        } else if (c < 0x20) {
            snprintf(escaped, sizeof escaped, "\\u%04X", c);
            chunk = escaped;
            chunk_len = 6;
        }
        if (used + bytes > max_bytes)
            return true;
        append(w, chunk, chunk_len);
        used += bytes;
        i += k;
    }
    return false;
}

void mtb_json_put_string(mtb_json_writer *w, const char *key, const char *s, size_t n,
                         size_t max_bytes)
{
    put_key(w, key);
    append(w, "\"", 1);
    put_escaped(w, s, n, max_bytes);
    append(w, "\"", 1);
}

void mtb_json_put_uint(mtb_json_writer *w, const char *key, uint64_t value)
{
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%" PRIu64, value);
    put_key(w, key);
    append(w, digits, (size_t)n);
}

void mtb_json_put_bool(mtb_json_writer *w, const char *key, bool value)
{
    put_key(w, key);
    if (value)
        append(w, "true", 4);
    else
        append(w, "false", 5);
}

size_t mtb_json_close(mtb_json_writer *w)
{
    append(w, "}\n", 2);
    return w->full ? 0 : w->len;
}

void mtb_json_quote(char *out, size_t out_size, const char *s, size_t n, size_t max_bytes)
{
    for (;;) {
        mtb_json_writer w = {out, out_size, 0, false, true};
        append(&w, "\"", 1);
        bool cut = put_escaped(&w, s, n, max_bytes);
        append(&w, "\"", 1);
        if (cut)
            append(&w, "...", 3);
        if (!w.full || max_bytes == 0) {
            if (w.full && out_size > 0)
                out[0] = '\0';
            return;
        }
        max_bytes /= 2;
    }
}
