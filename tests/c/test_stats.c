/* A tensor's statistics in one pass: every element type, strides, NaN
 * and infinities, float64's largest values. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "suites.h"
#include "ttn/stats.h"

START_TEST(test_stats_contiguous_float)
{
    float data[] = {1.0f, -2.0f, 3.0f, 4.0f};
    int64_t shape[] = {4}, strides[] = {1};
    ttn_stats_result r;

    ck_assert_int_eq(ttn_stats(data, TTN_F32, 1, shape, strides, &r), 0);
    ck_assert(r.max == 4.0 && r.min == -2.0 && r.mean == 1.5);
    ck_assert(fabs(r.norm - sqrt(30.0)) < 1e-12);
    ck_assert(r.nan == 0 && r.inf == 0);
}
END_TEST

START_TEST(test_stats_strided_views)
{
    /* A 2x3 view of a 3x4 array: every other column, the rows in reverse. */
    double data[12];
    int64_t shape[] = {2, 2}, strides[] = {-4, 2};
    ttn_stats_result r;
    int i;

    for (i = 0; i < 12; i++)
        data[i] = i;
    ck_assert_int_eq(ttn_stats(data + 8, TTN_F64, 2, shape, strides, &r), 0);
    /* rows 2 then 1, columns 0 and 2: 8, 10, 4, 6 */
    ck_assert(r.max == 10.0 && r.min == 4.0 && r.mean == 7.0);
    ck_assert(fabs(r.norm - sqrt(64.0 + 100.0 + 16.0 + 36.0)) < 1e-12);
}
END_TEST

START_TEST(test_stats_nan_and_inf)
{
    float data[] = {1.0f, NAN, INFINITY, -1.0f};
    int64_t shape[] = {4}, strides[] = {1};
    ttn_stats_result r;

    ck_assert_int_eq(ttn_stats(data, TTN_F32, 1, shape, strides, &r), 0);
    ck_assert(isnan(r.max) && isnan(r.min) && isnan(r.mean) && isnan(r.norm));
    ck_assert(r.nan == 1 && r.inf == 1);
    data[1] = 2.0f;
    ck_assert_int_eq(ttn_stats(data, TTN_F32, 1, shape, strides, &r), 0);
    ck_assert(isinf(r.max) && r.min == -1.0 && isinf(r.mean) && isinf(r.norm));
    ck_assert(r.nan == 0 && r.inf == 1);
}
END_TEST

/* A long contiguous float32 row (read in vector registers) gives what the
 * same elements read one by one give (a stride of 2 over a copy spread
 * out), NaN and infinities counted wherever they are. */
START_TEST(test_stats_long_float_rows)
{
    enum { N = 1003 };
    static float dense[N], spread[2 * N];
    int64_t shape[] = {N}, one[] = {1}, two[] = {2};
    ttn_stats_result a, b;
    int i, k;

    for (k = 0; k < 4; k++) {
        for (i = 0; i < N; i++)
            dense[i] = (float)((i * 37) % 101) - 50.5f;
        if (k == 1)
            dense[517] = NAN;
        if (k == 2)
            dense[N - 1] = -INFINITY;
        if (k == 3)
            dense[3] = INFINITY, dense[900] = -INFINITY;
        for (i = 0; i < N; i++)
            spread[2 * i] = dense[i];
        ck_assert_int_eq(ttn_stats(dense, TTN_F32, 1, shape, one, &a), 0);
        ck_assert_int_eq(ttn_stats(spread, TTN_F32, 1, shape, two, &b), 0);
        ck_assert_int_eq(a.nan, b.nan);
        ck_assert_int_eq(a.inf, b.inf);
        ck_assert(a.nan == (k == 1) && a.inf == (k == 2) + 2 * (k == 3));
        if (k == 0) {
            ck_assert(a.max == 49.5 && a.min == -50.5);
            ck_assert(fabs(a.mean - b.mean) < 1e-12 && fabs(a.norm - b.norm) < 1e-9);
        } else if (k == 1) {
            ck_assert(isnan(a.max) && isnan(a.min) && isnan(a.mean) && isnan(a.norm));
        } else {
            ck_assert(a.max == b.max && a.min == b.min && isinf(a.norm));
            ck_assert((isnan(a.mean) && isnan(b.mean)) || a.mean == b.mean);
        }
    }
}
END_TEST

START_TEST(test_stats_half_types_and_integers)
{
    uint16_t half[] = {0x3c00, 0xc000, 0x0001, 0x7c00};  /* 1, -2, 2^-24, inf */
    uint16_t bf16[] = {0x3f80, 0xc040};                  /* 1, -3 */
    int64_t ints[] = {-5, 7};
    uint8_t flags[] = {1, 0, 1};
    int64_t two[] = {2}, three[] = {3}, four[] = {4}, one[] = {1};
    ttn_stats_result r;

    ck_assert(ttn_half_to_float(0x0001) == 5.9604644775390625e-8f);
    ck_assert_int_eq(ttn_stats(half, TTN_F16, 1, four, one, &r), 0);
    ck_assert(isinf(r.max) && r.min == -2.0 && r.inf == 1);
    ck_assert_int_eq(ttn_stats(bf16, TTN_BF16, 1, two, one, &r), 0);
    ck_assert(r.max == 1.0 && r.min == -3.0 && r.mean == -1.0);
    ck_assert_int_eq(ttn_stats(ints, TTN_I64, 1, two, one, &r), 0);
    ck_assert(r.max == 7.0 && r.min == -5.0 && r.mean == 1.0);
    ck_assert_int_eq(ttn_stats(flags, TTN_BOOL, 1, three, one, &r), 0);
    ck_assert(r.max == 1.0 && r.min == 0.0 && fabs(r.mean - 2.0 / 3.0) < 1e-15);
}
END_TEST

START_TEST(test_stats_large_float64_and_scalars)
{
    double big[] = {1e300, 1e300}, scalar = -3.0;
    int64_t two[] = {2}, one[] = {1};
    ttn_stats_result r;

    ck_assert_int_eq(ttn_stats(big, TTN_F64, 1, two, one, &r), 0);
    ck_assert(fabs(r.norm / (sqrt(2.0) * 1e300) - 1.0) < 1e-12);
    ck_assert_int_eq(ttn_stats(&scalar, TTN_F64, 0, NULL, NULL, &r), 0);
    ck_assert(r.max == -3.0 && r.min == -3.0 && r.norm == 3.0);
}
END_TEST

START_TEST(test_stats_refuses)
{
    float x = 0;
    int64_t zero[] = {0}, one[] = {1};
    ttn_stats_result r;

    ck_assert_int_eq(ttn_stats(&x, TTN_F32, 1, zero, one, &r), -1);
    ck_assert_int_eq(ttn_stats(&x, TTN_DTYPES, 1, one, one, &r), -1);
    ck_assert_int_eq(ttn_stats(&x, TTN_F32, TTN_STATS_MAX_DIMS + 1, one, one, &r), -1);
}
END_TEST

Suite *
stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_stats_contiguous_float);
    tcase_add_test(tc, test_stats_strided_views);
    tcase_add_test(tc, test_stats_nan_and_inf);
    tcase_add_test(tc, test_stats_long_float_rows);
    tcase_add_test(tc, test_stats_half_types_and_integers);
    tcase_add_test(tc, test_stats_large_float64_and_scalars);
    tcase_add_test(tc, test_stats_refuses);
    suite_add_tcase(s, tc);
    return s;
}
