/*
 * test_json.c: unit tests of the library's strict JSON reader and writer (src/json.c) and of
 * the rules of memtide's lines the vectors leave out (src/protocol.c).
 */
#include "check.h"
#include "json.h"
#include "protocol.h"

#include <stdio.h>
#include <string.h>

static const char *const keys[] = {"type", "seq"};

/* Reads text (copied, since the reader decodes in place) into values; returns the result
 * and leaves the reason in why. */
static int parse(const char *text, mtb_json_value values[2], char *why, size_t why_size)
{
    static char line[4096];
    snprintf(line, sizeof line, "%s", text);
    return mtb_json_read_object(line, strlen(line), keys, values, 2, why, why_size);
}

static void rejects(const char *text, const char *why_part)
{
    mtb_json_value values[2];
    char why[256] = "";
    CHECK(parse(text, values, why, sizeof why) < 0, "accepted %s", text);
    CHECK(strstr(why, why_part) != NULL, "%s: the reason \"%s\" does not say \"%s\"", text, why,
          why_part);
}

static void reads_the_wanted_keys_and_skips_the_others(void)
{
    mtb_json_value v[2];
    char why[256];
    REQUIRE(parse("{\"x\":[1,{\"y\":null}],\"seq\":12,\"type\":\"target\",\"z\":true}", v, why,
                 sizeof why) == 0,
            "%s", why);
    CHECK(v[0].kind == MTB_JSON_STRING && v[0].len == 6 && memcmp(v[0].text, "target", 6) == 0,
          "type not read");
    CHECK(v[1].kind == MTB_JSON_NUMBER && v[1].len == 2 && memcmp(v[1].text, "12", 2) == 0,
          "seq not read");
}

static void marks_missing_keys_absent(void)
{
    mtb_json_value v[2];
    char why[256];
    REQUIRE(parse("{}", v, why, sizeof why) == 0, "%s", why);
    CHECK(v[0].kind == MTB_JSON_ABSENT && v[1].kind == MTB_JSON_ABSENT, "keys not absent");
}

static void decodes_escapes_and_surrogate_pairs_in_place(void)
{
    mtb_json_value v[2];
    char why[256];
    REQUIRE(parse("{\"type\":\"a\\\"\\\\\\/\\n\\u00e9\\ud83d\\ude00\"}", v, why, sizeof why) == 0,
            "%s", why);
    CHECK(v[0].len == 11 && memcmp(v[0].text, "a\"\\/\n\xC3\xA9\xF0\x9F\x98\x80", 11) == 0,
          "decoded to %.*s", (int)v[0].len, v[0].text);
}

static void matches_keys_written_with_escapes(void)
{
    mtb_json_value v[2];
    char why[256];
    REQUIRE(parse("{\"\\u0074ype\":\"bye\"}", v, why, sizeof why) == 0, "%s", why);
    CHECK(v[0].kind == MTB_JSON_STRING, "the escaped key did not match");
}

static void rejects_a_key_given_twice(void)
{
    rejects("{\"seq\":1,\"seq\":2}", "key \"seq\" appears twice");
}

static void rejects_lone_surrogates(void)
{
    rejects("{\"type\":\"\\ud800\"}", "lone surrogate");
    rejects("{\"type\":\"\\udc00x\"}", "lone surrogate");
    rejects("{\"type\":\"\\ud800\\u0041\"}", "lone surrogate");
}

static void rejects_bytes_that_are_not_utf8(void)
{
    rejects("{\"type\":\"\xC0\xAF\"}", "not UTF-8");         /* overlong '/' */
    rejects("{\"type\":\"\xED\xA0\x80\"}", "not UTF-8");     /* an encoded surrogate */
    rejects("{\"type\":\"\xF4\x90\x80\x80\"}", "not UTF-8"); /* past U+10FFFF */
    rejects("{\"type\":\"\xE2\x82\"}", "not UTF-8");         /* cut short */
    rejects("{\"type\":\xFF}", "not UTF-8");
}

static void rejects_raw_control_characters_in_strings(void)
{
    rejects("{\"type\":\"a\tb\"}", "control character 0x09");
}

static void rejects_what_rfc_8259_does_not_allow(void)
{
    rejects("{\"seq\":01}", "'1' at offset 8");
    rejects("{\"seq\":+1}", "'+'");
    rejects("{\"seq\":1.}", "a digit");
    rejects("{\"seq\":.5}", "'.'");
    rejects("{\"seq\":1e}", "a digit");
    rejects("{\"seq\":NaN}", "'N'");
    rejects("{\"seq\":1,}", "a key");
    rejects("{'seq':1}", "'''");
    rejects("{\"type\":\"\\x41\"}", "unknown escape");
    rejects("{\"type\":\"\\u00G0\"}", "non-hex digit");
    rejects("{\"type\":tru}", "'t'");
    rejects("{\"type\":\"open", "not closed");
    rejects("{\"type\":[1,2}", "',' or ']'");
    rejects("", "the line is empty");
    rejects("  ", "the line is empty");
    rejects("{\"seq\":1} x", "more text after it");
}

/* {"x":[[...]]} with `arrays` arrays, the deepest at level arrays + 1. */
static void nest(char *text, int arrays)
{
    char *p = text + sprintf(text, "{\"x\":");
    for (int i = 0; i < arrays; i++)
        *p++ = '[';
    for (int i = 0; i < arrays; i++)
        *p++ = ']';
    strcpy(p, "}");
}

static void rejects_values_nested_too_deep(void)
{
    char text[256];
    mtb_json_value v[2];
    char why[256];
    nest(text, MTB_JSON_MAX_DEPTH);
    rejects(text, "nested over 32 deep");
    nest(text, MTB_JSON_MAX_DEPTH - 1);
    CHECK(parse(text, v, why, sizeof why) == 0, "32 levels not read: %s", why);
}

static void writer_escapes_control_characters_and_quotes(void)
{
    char buf[128];
    mtb_json_writer w;
    mtb_json_open(&w, buf, sizeof buf);
    mtb_json_put_string(&w, "s", "a\"b\\c\n\x01", 7, SIZE_MAX);
    size_t n = mtb_json_close(&w);
    CHECK(n > 0 && strcmp(buf, "{\"s\":\"a\\\"b\\\\c\\u000A\\u0001\"}\n") == 0, "wrote %s", buf);
}

static void writer_replaces_bytes_that_are_not_utf8(void)
{
    char buf[128];
    mtb_json_writer w;
    mtb_json_open(&w, buf, sizeof buf);
    mtb_json_put_string(&w, "s", "a\xFF" "b", 3, SIZE_MAX);
    mtb_json_close(&w);
    CHECK(strcmp(buf, "{\"s\":\"a\xEF\xBF\xBD" "b\"}\n") == 0, "wrote %s", buf);
}

static void writer_cuts_strings_on_a_character_boundary(void)
{
    char buf[128];
    mtb_json_writer w;
    mtb_json_open(&w, buf, sizeof buf);
    mtb_json_put_string(&w, "s", "ab\xC3\xA9", 4, 3); /* "abé": é does not fit in 3 bytes */
    mtb_json_close(&w);
    CHECK(strcmp(buf, "{\"s\":\"ab\"}\n") == 0, "wrote %s", buf);
}

static void writer_reports_a_line_that_does_not_fit(void)
{
    char buf[16];
    mtb_json_writer w;
    mtb_json_open(&w, buf, sizeof buf);
    mtb_json_put_string(&w, "s", "0123456789", 10, SIZE_MAX);
    CHECK(mtb_json_close(&w) == 0, "an overflowing line was given a length");
}

static void quote_cuts_long_values_with_an_ellipsis(void)
{
    char out[64];
    mtb_json_quote(out, sizeof out, "abcdefghij", 10, 4);
    CHECK(strcmp(out, "\"abcd\"...") == 0, "quoted %s", out);
}

static void decoder_drops_one_carriage_return_before_the_newline(void)
{
    char line[] = "{\"type\":\"bye\"}\r";
    mtb_incoming msg;
    mtb_decode_error error;
    CHECK(mtb_decode(line, strlen(line), &msg, &error) == 0 && msg.type == MTB_IN_BYE,
          "a CR before the newline was not dropped: %s", error.message);
}

static void decoder_names_the_field_and_value_it_refuses(void)
{
    char line[] = "{\"type\":\"target\",\"seq\":1,\"pool_bytes\":4096.5,\"deadline_ms\":30000}";
    mtb_incoming msg;
    mtb_decode_error error;
    REQUIRE(mtb_decode(line, strlen(line), &msg, &error) < 0, "a fractional pool was read");
    CHECK(error.code == MTB_CODE_BAD_FIELD, "code %s", mtb_code_name(error.code));
    CHECK(strcmp(error.message, "target.pool_bytes = 4096.5 is not an integer") == 0,
          "message: %s", error.message);
}

static void decoder_refuses_an_error_of_an_unknown_code(void)
{
    char line[] = "{\"type\":\"error\",\"code\":\"oops\",\"message\":\"x\",\"fatal\":false}";
    mtb_incoming msg;
    mtb_decode_error error;
    REQUIRE(mtb_decode(line, strlen(line), &msg, &error) < 0, "an unknown code was read");
    CHECK(error.code == MTB_CODE_BAD_FIELD && strstr(error.message, "\"oops\"") != NULL,
          "%s: %s", mtb_code_name(error.code), error.message);
}

static void decoder_takes_a_line_of_exactly_65536_bytes_with_its_newline(void)
{
    static char line[MTB_LINE_MAX];
    const char *head = "{\"type\":\"bye\",\"reason\":\"r\",\"pad\":\"";
    size_t n = MTB_LINE_MAX - 1; /* the '\n' makes 65,536 */
    memset(line, 'x', n);
    memcpy(line, head, strlen(head));
    line[n - 2] = '"';
    line[n - 1] = '}';
    mtb_incoming msg;
    mtb_decode_error error;
    CHECK(mtb_decode(line, n, &msg, &error) == 0, "refused: %s", error.message);
    memset(line, 'x', n);
    memcpy(line, head, strlen(head));
    line[n - 2] = '"';
    line[n - 1] = '}';
    CHECK(mtb_decode(line, n + 1, &msg, &error) < 0 && error.code == MTB_CODE_TOO_LONG,
          "a line of 65,537 bytes was not too_long");
}

static void pool_check_names_the_field_and_value(void)
{
    char why[256];
    mtb_pool pool = {.app = "db", .pool_bytes = 8, .min_bytes = 9, .max_bytes = 16, .granule_bytes = 1};
    CHECK(mtb_check_pool(&pool, why, sizeof why) < 0 &&
              strcmp(why, "pool.pool_bytes = 8 is outside [min_bytes, max_bytes] = [9, 16]") == 0,
          "%s", why);
    pool.min_bytes = 0;
    pool.app = "my\x7F" "db";
    CHECK(mtb_check_pool(&pool, why, sizeof why) < 0 && strstr(why, "control character"), "%s", why);
    pool.app = "caf\xC3\xA9";
    CHECK(mtb_check_pool(&pool, why, sizeof why) == 0, "%s", why);
    pool.app = "caf\xC3";
    CHECK(mtb_check_pool(&pool, why, sizeof why) < 0 && strstr(why, "not UTF-8"), "%s", why);
    pool.app = "db";
    pool.kind = (mtb_kind)7;
    CHECK(mtb_check_pool(&pool, why, sizeof why) < 0 && strstr(why, "pool.kind = 7"), "%s", why);
}

static void kinds_read_and_write_their_wire_names(void)
{
    mtb_kind kind;
    CHECK(mtb_kind_parse("cache", &kind) == 0 && kind == MTB_KIND_CACHE, "cache not read");
    CHECK(mtb_kind_parse("disk", &kind) < 0, "disk was read as a kind");
    CHECK(strcmp(mtb_kind_name(MTB_KIND_HEAP), "heap") == 0, "heap not written");
    CHECK(mtb_kind_name((mtb_kind)9) == NULL, "kind 9 has a name");
}

void json_tests(void)
{
    RUN(reads_the_wanted_keys_and_skips_the_others);
    RUN(marks_missing_keys_absent);
    RUN(decodes_escapes_and_surrogate_pairs_in_place);
    RUN(matches_keys_written_with_escapes);
    RUN(rejects_a_key_given_twice);
    RUN(rejects_lone_surrogates);
    RUN(rejects_bytes_that_are_not_utf8);
    RUN(rejects_raw_control_characters_in_strings);
    RUN(rejects_what_rfc_8259_does_not_allow);
    RUN(rejects_values_nested_too_deep);
    RUN(writer_escapes_control_characters_and_quotes);
    RUN(writer_replaces_bytes_that_are_not_utf8);
    RUN(writer_cuts_strings_on_a_character_boundary);
    RUN(writer_reports_a_line_that_does_not_fit);
    RUN(quote_cuts_long_values_with_an_ellipsis);
    RUN(decoder_drops_one_carriage_return_before_the_newline);
    RUN(decoder_names_the_field_and_value_it_refuses);
    RUN(decoder_refuses_an_error_of_an_unknown_code);
    RUN(decoder_takes_a_line_of_exactly_65536_bytes_with_its_newline);
    RUN(pool_check_names_the_field_and_value);
    RUN(kinds_read_and_write_their_wire_names);
}
