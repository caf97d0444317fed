/* The JSON reader: values, strictness, error positions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "suites.h"
#include "ttn/json.h"

static ttn_json *
parse(const char *s, char *err)
{
    return ttn_json_parse(s, strlen(s), err, 256);
}

START_TEST(test_json_values)
{
    char err[256];
    ttn_json *v = parse(" {\"a\": [1, -2.5, 3e2, true, false, null], \"b\": \"x\\ty\\u00e9\\ud83d\\ude00\"} ", err);
    const ttn_json *a, *b;

    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, TTN_JSON_OBJECT);
    ck_assert_uint_eq(v->count, 2);
    a = ttn_json_member(v, "a");
    ck_assert_int_eq(a->type, TTN_JSON_ARRAY);
    ck_assert_uint_eq(a->count, 6);
    ck_assert(a->items[0]->is_integer && a->items[0]->integer == 1);
    ck_assert(!a->items[1]->is_integer && a->items[1]->number == -2.5);
    ck_assert(!a->items[2]->is_integer && a->items[2]->number == 300.0);
    ck_assert_int_eq(a->items[3]->type, TTN_JSON_TRUE);
    ck_assert_int_eq(a->items[4]->type, TTN_JSON_FALSE);
    ck_assert_int_eq(a->items[5]->type, TTN_JSON_NULL);
    b = ttn_json_member(v, "b");
    ck_assert_str_eq(b->string, "x\ty\xc3\xa9\xf0\x9f\x98\x80");
    ck_assert_uint_eq(b->length, strlen("x\ty\xc3\xa9\xf0\x9f\x98\x80"));
    ck_assert_ptr_null(ttn_json_member(v, "c"));
    ttn_json_free(v);
}
END_TEST

START_TEST(test_json_errors_name_line_and_column)
{
    char err[256];

    ck_assert_ptr_null(parse("{\n  \"a\": 1\n  \"b\": 2}", err));
    ck_assert_str_eq(err, "line 3, column 3: expected ',' or '}' in an object, found '\"'");
    ck_assert_ptr_null(parse("[1, 2", err));
    ck_assert_str_eq(err, "line 1, column 6: expected ',' or ']' in an array, found the end of the file");
    ck_assert_ptr_null(parse("{\"a\": 1, \"a\": 2}", err));
    ck_assert_str_eq(err, "line 1, column 10: duplicate member name 'a'");
}
END_TEST

START_TEST(test_json_rejects_what_json_does_not_allow)
{
    static const char *bad[] = {
        "", "   ", "{", "}", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "-", "1e", "+1",
        "'a'", "\"a", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\u0000\"",
        "tru", "nul", "[1] 2", "{a: 1}", "\"\x01\"", "\"\xff\"", "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"", "NaN", "Infinity",
    };
    char err[256];
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ttn_json *v = parse(bad[i], err);

        ck_assert_msg(v == NULL, "accepted: %s", bad[i]);
        ck_assert_msg(strncmp(err, "line ", 5) == 0, "%s: %s", bad[i], err);
    }
}
END_TEST

START_TEST(test_json_depth_is_bounded)
{
    char deep[2 * (TTN_JSON_MAX_DEPTH + 10) + 1];
    char err[256];
    size_t n = TTN_JSON_MAX_DEPTH + 10, i;

    for (i = 0; i < n; i++) {
        deep[i] = '[';
        deep[n + i] = ']';
    }
    deep[2 * n] = '\0';
    ck_assert_ptr_null(parse(deep, err));
    ck_assert_ptr_nonnull(strstr(err, "nested deeper"));
}
END_TEST

START_TEST(test_json_big_integers_are_not_integers)
{
    char err[256];
    ttn_json *v = parse("[9223372036854775807, 99999999999999999999]", err);

    ck_assert_ptr_nonnull(v);
    ck_assert(v->items[0]->is_integer);
    ck_assert(!v->items[1]->is_integer);
    ttn_json_free(v);
}
END_TEST

START_TEST(test_json_numbers_beyond_their_range_are_marked)
{
    char err[256];
    ttn_json *v = parse("[9223372036854775807, 9223372036854775808, -9223372036854775809, "
                        "1e999, -1e999, 1e-999, 1.5]", err);
    int expected[] = {0, 1, 1, 1, 1, 0, 0};
    size_t i;

    ck_assert_ptr_nonnull(v);
    for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
        ck_assert_int_eq(v->items[i]->out_of_range, expected[i]);
    ttn_json_free(v);
}
END_TEST

/* An object of n members "k0" .. "k<n-1>", with "k<dup>" again at the end
 * when dup >= 0. */
static char *
big_object(size_t n, long dup)
{
    char *text = malloc(n * 24 + 64), *p = text;
    size_t i;

    *p++ = '{';
    for (i = 0; i < n; i++)
        p += sprintf(p, "%s\"k%zu\": %zu", i ? ", " : "", i, i);
    if (dup >= 0)
        p += sprintf(p, ", \"k%ld\": 0", dup);
    strcpy(p, "}");
    return text;
}

START_TEST(test_json_large_objects_parse_in_linear_time)
{
    /* Half a million members: comparing each name with those before it
     * would take minutes; a set of the names, well under a second. */
    char err[256], *text = big_object(500000, -1);
    clock_t start = clock();
    ttn_json *v = parse(text, err);

    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->count, 500000);
    ck_assert_int_eq(ttn_json_member(v, "k499999")->integer, 499999);
    ck_assert_msg((double)(clock() - start) / CLOCKS_PER_SEC < 10.0, "parsing took too long");
    ttn_json_free(v);
    free(text);
    /* A duplicate is still found, far from its twin. */
    text = big_object(1000, 3);
    ck_assert_ptr_null(parse(text, err));
    ck_assert_ptr_nonnull(strstr(err, "duplicate member name 'k3'"));
    free(text);
}
END_TEST

Suite *
json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");

    tcase_add_test(tc, test_json_values);
    tcase_add_test(tc, test_json_errors_name_line_and_column);
    tcase_add_test(tc, test_json_rejects_what_json_does_not_allow);
    tcase_add_test(tc, test_json_depth_is_bounded);
    tcase_add_test(tc, test_json_big_integers_are_not_integers);
    tcase_add_test(tc, test_json_numbers_beyond_their_range_are_marked);
    tcase_add_test(tc, test_json_large_objects_parse_in_linear_time);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}
