/* The address map: put, get, replace, clear. */
#include "suites.h"
#include "ttn/ptrmap.h"

static int released;

static void
count_release(void *value)
{
    (void)value;
    released++;
}

START_TEST(test_ptrmap_put_get)
{
    ttn_ptrmap m;
    int a, b, c;

    ttn_ptrmap_init(&m);
    ck_assert_ptr_null(ttn_ptrmap_get(&m, &a));
    ck_assert_int_eq(ttn_ptrmap_put(&m, &a, &b), 0);
    ck_assert_int_eq(ttn_ptrmap_put(&m, &b, &c), 0);
    ck_assert_ptr_eq(ttn_ptrmap_get(&m, &a), &b);
    ck_assert_ptr_eq(ttn_ptrmap_get(&m, &b), &c);
    ck_assert_ptr_null(ttn_ptrmap_get(&m, &c));
    ck_assert_uint_eq(ttn_ptrmap_count(&m), 2);
    ttn_ptrmap_clear(&m, NULL);
    ck_assert_uint_eq(ttn_ptrmap_count(&m), 0);
}
END_TEST

START_TEST(test_ptrmap_put_replaces)
{
    ttn_ptrmap m;
    int a, b, c;

    ttn_ptrmap_init(&m);
    ttn_ptrmap_put(&m, &a, &b);
    ttn_ptrmap_put(&m, &a, &c);
    ck_assert_ptr_eq(ttn_ptrmap_get(&m, &a), &c);
    ck_assert_uint_eq(ttn_ptrmap_count(&m), 1);
    ttn_ptrmap_clear(&m, NULL);
}
END_TEST

START_TEST(test_ptrmap_many_and_release)
{
    ttn_ptrmap m;
    static char keys[1000];
    int i;

    ttn_ptrmap_init(&m);
    for (i = 0; i < 1000; i++)
        ck_assert_int_eq(ttn_ptrmap_put(&m, &keys[i], &keys[999 - i]), 0);
    for (i = 0; i < 1000; i++)
        ck_assert_ptr_eq(ttn_ptrmap_get(&m, &keys[i]), &keys[999 - i]);
    released = 0;
    ttn_ptrmap_clear(&m, count_release);
    ck_assert_int_eq(released, 1000);
    ck_assert_ptr_null(ttn_ptrmap_get(&m, &keys[5]));
}
END_TEST

Suite *
ptrmap_suite(void)
{
    Suite *s = suite_create("ptrmap");
    TCase *tc = tcase_create("ptrmap");

    tcase_add_test(tc, test_ptrmap_put_get);
    tcase_add_test(tc, test_ptrmap_put_replaces);
    tcase_add_test(tc, test_ptrmap_many_and_release);
    suite_add_tcase(s, tc);
    return s;
}
