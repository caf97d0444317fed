/* Process-group backend strings: NCCL becomes the target's backend (HCCL
 * for the NPU) by exact match only. */
#include <string.h>

#include "suites.h"
#include "ttn/devspec.h"

static ttn_backend_result
rewrite_for(const ttn_target *t, const char *s, char *out, size_t cap)
{
    size_t len = 0;
    ttn_backend_result r = ttn_backend_rewrite(t, s, strlen(s), out, cap, &len);

    if (r == TTN_BACKEND_REWRITTEN) {
        ck_assert_uint_eq(len, strlen(out));
        ck_assert_uint_le(len, strlen(s));
    }
    return r;
}

static ttn_backend_result
rewrite(const char *s, char *out, size_t cap)
{
    return rewrite_for(&ttn_target_npu, s, out, cap);
}

START_TEST(test_backend_single_name)
{
    char out[64];

    ck_assert_int_eq(rewrite("nccl", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "hccl");
    ck_assert_int_eq(rewrite("NCCL", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "hccl");
}
END_TEST

START_TEST(test_backend_device_pairs)
{
    char out[64];

    ck_assert_int_eq(rewrite("cpu:gloo,cuda:nccl", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "cpu:gloo,npu:hccl");
    ck_assert_int_eq(rewrite("cuda:nccl,cpu:gloo", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "npu:hccl,cpu:gloo");
    ck_assert_int_eq(rewrite("cuda:nccl", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "npu:hccl");
    ck_assert_int_eq(rewrite("CPU:GLOO,CUDA:NCCL", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "CPU:GLOO,npu:hccl");
}
END_TEST

START_TEST(test_backend_others_unchanged)
{
    static const char *same[] = {
        "gloo", "hccl", "mpi", "ucc", "nccl2", "xnccl", "", "cpu:gloo",
        "npu:hccl", "tcp://nccl-host:23456", "file:///tmp/nccl_init",
        "env://", "cuda:nccl,", ",cuda:nccl", "cuda:nccl:1", "cuda:",
        ":nccl", "cpu:gloo,,cuda:nccl", "/shared/cuda/nccl",
    };
    size_t i;
    char out[64];

    for (i = 0; i < sizeof(same) / sizeof(same[0]); i++)
        ck_assert_msg(rewrite(same[i], out, sizeof(out)) == TTN_BACKEND_UNCHANGED,
                      "%s", same[i]);
}
END_TEST

START_TEST(test_backend_host_target)
{
    char out[64];
    ttn_target t;

    ck_assert_int_eq(ttn_target_set(&t, "cpu", "gloo", 0), 1);
    ck_assert_int_eq(rewrite_for(&t, "nccl", out, sizeof(out)), TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "gloo");
    ck_assert_int_eq(rewrite_for(&t, "cpu:gloo,cuda:nccl", out, sizeof(out)),
                     TTN_BACKEND_REWRITTEN);
    ck_assert_str_eq(out, "cpu:gloo,cpu:gloo");
    ck_assert_int_eq(rewrite_for(&t, "gloo", out, sizeof(out)), TTN_BACKEND_UNCHANGED);
    ck_assert_int_eq(rewrite_for(&t, "tcp://nccl-host:1", out, sizeof(out)),
                     TTN_BACKEND_UNCHANGED);
}
END_TEST

START_TEST(test_backend_output_too_small)
{
    char out[8];

    ck_assert_int_eq(rewrite("cpu:gloo,cuda:nccl", out, sizeof(out)), TTN_BACKEND_TOO_LONG);
    ck_assert_int_eq(rewrite("nccl", out, 4), TTN_BACKEND_TOO_LONG);
    ck_assert_int_eq(rewrite("nccl", out, 5), TTN_BACKEND_REWRITTEN);
}
END_TEST

Suite *
backend_suite(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("rewrite");

    tcase_add_test(tc, test_backend_single_name);
    tcase_add_test(tc, test_backend_device_pairs);
    tcase_add_test(tc, test_backend_others_unchanged);
    tcase_add_test(tc, test_backend_host_target);
    tcase_add_test(tc, test_backend_output_too_small);
    suite_add_tcase(s, tc);
    return s;
}
