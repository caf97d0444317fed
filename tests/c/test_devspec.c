/* Device-string parsing: what is a CUDA device, what is an error, and what
 * must be left alone. */
#include <string.h>

#include "suites.h"
#include "ttn/devspec.h"

static ttn_dev_kind
parse(const char *s, int *index)
{
    return ttn_devspec_parse(s, strlen(s), index);
}

START_TEST(test_devspec_bare_cuda)
{
    int index = 99;

    ck_assert_int_eq(parse("cuda", &index), TTN_DEV_CUDA);
    ck_assert_int_eq(index, -1);
}
END_TEST

START_TEST(test_devspec_indexed_cuda)
{
    int index = -5;

    ck_assert_int_eq(parse("cuda:0", &index), TTN_DEV_CUDA);
    ck_assert_int_eq(index, 0);
    ck_assert_int_eq(parse("cuda:1", &index), TTN_DEV_CUDA);
    ck_assert_int_eq(index, 1);
    ck_assert_int_eq(parse("cuda:15", &index), TTN_DEV_CUDA);
    ck_assert_int_eq(index, 15);
    ck_assert_int_eq(parse("cuda:127", &index), TTN_DEV_CUDA);
    ck_assert_int_eq(index, 127);
}
END_TEST

START_TEST(test_devspec_malformed_index_is_invalid)
{
    static const char *bad[] = {
        "cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:1:2", "cuda:01",
        "cuda:00", "cuda: 1", "cuda:1 ", "cuda:1a", "cuda:128",
        "cuda:99999999999999999999", "cuda::",
    };
    size_t i;
    int index;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(parse(bad[i], &index) == TTN_DEV_INVALID, "%s", bad[i]);
}
END_TEST

START_TEST(test_devspec_other_strings_left_alone)
{
    static const char *other[] = {
        "", "cpu", "npu", "npu:0", "cud", "CUDA", "Cuda:0", " cuda",
        "cudax", "cuda_graph", "cuda0", "/ckpt/cuda_run/model.pt",
        "cuda/model.pt", "my_cuda", "meta", "mps:0",
    };
    size_t i;
    int index;

    for (i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        ck_assert_msg(parse(other[i], &index) == TTN_DEV_OTHER, "%s", other[i]);
}
END_TEST

START_TEST(test_devspec_length_is_respected)
{
    int index;

    /* Only the first len bytes count: no reading past them. */
    ck_assert_int_eq(ttn_devspec_parse("cuda:1xyz", 6, &index), TTN_DEV_CUDA);
    ck_assert_int_eq(index, 1);
    ck_assert_int_eq(ttn_devspec_parse("cuda", 3, &index), TTN_DEV_OTHER);
    ck_assert_int_eq(ttn_devspec_parse(NULL, 0, &index), TTN_DEV_OTHER);
}
END_TEST

START_TEST(test_devspec_format_npu)
{
    char buf[TTN_DEVSTR_MAX];
    const ttn_target *t = &ttn_target_npu;

    ck_assert_uint_eq(ttn_devspec_format(t, -1, buf, sizeof(buf)), 3);
    ck_assert_str_eq(buf, "npu");
    ck_assert_uint_eq(ttn_devspec_format(t, 0, buf, sizeof(buf)), 5);
    ck_assert_str_eq(buf, "npu:0");
    ck_assert_uint_eq(ttn_devspec_format(t, 42, buf, sizeof(buf)), 6);
    ck_assert_str_eq(buf, "npu:42");
    ck_assert_uint_eq(ttn_devspec_format(t, 127, buf, sizeof(buf)), 7);
    ck_assert_str_eq(buf, "npu:127");
    ck_assert_uint_eq(ttn_devspec_format(t, 128, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(ttn_devspec_format(t, 10, buf, 6), 0);
}
END_TEST

START_TEST(test_devspec_format_host)
{
    char buf[TTN_DEVSTR_MAX];
    ttn_target t;

    /* The host is one device: every CUDA index becomes the bare "cpu". */
    ck_assert_int_eq(ttn_target_set(&t, "cpu", "gloo", 0), 1);
    ck_assert_uint_eq(ttn_devspec_format(&t, -1, buf, sizeof(buf)), 3);
    ck_assert_str_eq(buf, "cpu");
    ck_assert_uint_eq(ttn_devspec_format(&t, 5, buf, sizeof(buf)), 3);
    ck_assert_str_eq(buf, "cpu");
    ck_assert_uint_eq(ttn_devspec_format(&t, 128, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(ttn_devspec_format(&t, 0, buf, 3), 0);
    /* An indexed target of the longest name fits TTN_DEVSTR_MAX. */
    ck_assert_int_eq(ttn_target_set(&t, "abcd", "gloo", 1), 1);
    ck_assert_uint_eq(ttn_devspec_format(&t, 127, buf, sizeof(buf)), 8);
    ck_assert_str_eq(buf, "abcd:127");
}
END_TEST

START_TEST(test_devspec_target_names_checked)
{
    ttn_target t = ttn_target_npu;

    /* A target longer than "cuda"/"nccl" would lengthen rewritten strings. */
    ck_assert_int_eq(ttn_target_set(&t, "cpuxx", "gloo", 0), 0);
    ck_assert_int_eq(ttn_target_set(&t, "cpu", "glooo", 0), 0);
    ck_assert_int_eq(ttn_target_set(&t, "", "gloo", 0), 0);
    ck_assert_int_eq(ttn_target_set(&t, "cpu", NULL, 0), 0);
    ck_assert_int_eq(ttn_target_set(&t, "CPU", "gloo", 0), 0);
    ck_assert_int_eq(ttn_target_set(&t, "c:u", "gloo", 0), 0);
    ck_assert_str_eq(t.device, "npu"); /* unchanged by a refusal */
    ck_assert_str_eq(t.backend, "hccl");
}
END_TEST

Suite *
devspec_suite(void)
{
    Suite *s = suite_create("devspec");
    TCase *tc = tcase_create("parse");

    tcase_add_test(tc, test_devspec_bare_cuda);
    tcase_add_test(tc, test_devspec_indexed_cuda);
    tcase_add_test(tc, test_devspec_malformed_index_is_invalid);
    tcase_add_test(tc, test_devspec_other_strings_left_alone);
    tcase_add_test(tc, test_devspec_length_is_respected);
    tcase_add_test(tc, test_devspec_format_npu);
    tcase_add_test(tc, test_devspec_format_host);
    tcase_add_test(tc, test_devspec_target_names_checked);
    suite_add_tcase(s, tc);
    return s;
}
