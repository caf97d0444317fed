/* The symbol table: entries, counts, call sites, insertion order. */
#include <stdio.h>
#include <string.h>

#include "suites.h"
#include "ttn/table.h"

START_TEST(test_table_add_and_find)
{
    ttn_table t;
    ttn_entry *e;
    int created = 0;

    ttn_table_init(&t);
    e = ttn_table_add(&t, "torch.cuda.synchronize", "torch.npu.synchronize", "function", &created);
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(created, 1);
    ck_assert_str_eq(e->source, "torch.cuda.synchronize");
    ck_assert_str_eq(e->target, "torch.npu.synchronize");
    ck_assert_str_eq(e->kind, "function");
    ck_assert_uint_eq(e->calls, 0);
    ck_assert_ptr_eq(ttn_table_find(&t, "torch.cuda.synchronize"), e);
    ck_assert_ptr_null(ttn_table_find(&t, "torch.cuda.nothing"));
    ck_assert_uint_eq(ttn_table_count(&t), 1);
    ttn_table_clear(&t);
    ck_assert_uint_eq(ttn_table_count(&t), 0);
}
END_TEST

START_TEST(test_table_add_twice_keeps_entry_and_counts)
{
    ttn_table t;
    ttn_entry *a, *b;
    int created = 1;

    ttn_table_init(&t);
    a = ttn_table_add(&t, "torch.zeros", "torch.zeros", "device_arg", NULL);
    a->calls = 7;
    b = ttn_table_add(&t, "torch.zeros", "torch.zeros(device=npu)", "device_arg", &created);
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(created, 0);
    ck_assert_uint_eq(b->calls, 7);
    ck_assert_str_eq(b->target, "torch.zeros(device=npu)");
    ck_assert_uint_eq(ttn_table_count(&t), 1);
    ttn_table_clear(&t);
}
END_TEST

/* A target and kind start in the entry's block; replaced, they are
 * allocated apart, and replaced again, freed (make valgrind: no leak, no
 * invalid free). */
START_TEST(test_table_replacing_target_and_kind_again)
{
    ttn_table t;
    ttn_entry *e;

    ttn_table_init(&t);
    e = ttn_table_add(&t, "torch.cuda.Stream", "torch.npu.Stream", "class", NULL);
    ck_assert_ptr_eq(ttn_table_add(&t, "torch.cuda.Stream", "torch.npu.Stream", "class", NULL), e);
    ck_assert_str_eq(e->target, "torch.npu.Stream");
    ck_assert_ptr_eq(ttn_table_add(&t, "torch.cuda.Stream", "a", "function", NULL), e);
    ck_assert_str_eq(e->target, "a");
    ck_assert_str_eq(e->kind, "function");
    ck_assert_ptr_eq(ttn_table_add(&t, "torch.cuda.Stream", "b", "function", NULL), e);
    ck_assert_str_eq(e->target, "b");
    ck_assert_str_eq(e->kind, "function");
    ck_assert_ptr_eq(ttn_table_add(&t, "torch.cuda.Stream", "b", "class", NULL), e);
    ck_assert_str_eq(e->kind, "class");
    ck_assert_str_eq(e->source, "torch.cuda.Stream");
    ttn_table_clear(&t);
}
END_TEST

START_TEST(test_table_keeps_insertion_order)
{
    ttn_table t;
    ttn_entry *e;
    char name[32];
    int i;

    ttn_table_init(&t);
    for (i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "torch.cuda.f%03d", 499 - i);
        ck_assert_ptr_nonnull(ttn_table_add(&t, name, "x", "function", NULL));
    }
    ck_assert_uint_eq(ttn_table_count(&t), 500);
    i = 0;
    for (e = t.entries; e != NULL; e = e->hh.next, i++) {
        snprintf(name, sizeof(name), "torch.cuda.f%03d", 499 - i);
        ck_assert_str_eq(e->source, name);
    }
    ck_assert_int_eq(i, 500);
    ttn_table_clear(&t);
}
END_TEST

START_TEST(test_table_sites)
{
    ttn_table t;
    ttn_entry *e;
    ttn_site *s;
    int created = 0;

    ttn_table_init(&t);
    e = ttn_table_add(&t, "torch.Tensor.cuda", "torch.Tensor.npu", "method", NULL);
    s = ttn_entry_hit_site(e, "train.py:10", &created);
    ck_assert_int_eq(created, 1);
    ck_assert_uint_eq(s->count, 1);
    s = ttn_entry_hit_site(e, "train.py:10", &created);
    ck_assert_int_eq(created, 0);
    ck_assert_uint_eq(s->count, 2);
    ttn_entry_hit_site(e, "train.py:12", &created);
    ck_assert_int_eq(created, 1);
    ck_assert_uint_eq(ttn_entry_site_count(e), 2);
    ck_assert_str_eq(e->sites->where, "train.py:10");
    ck_assert_str_eq(((ttn_site *)e->sites->hh.next)->where, "train.py:12");
    ttn_table_clear(&t);
}
END_TEST

START_TEST(test_table_reset_counts)
{
    ttn_table t;
    ttn_entry *e;

    ttn_table_init(&t);
    e = ttn_table_add(&t, "torch.device", "torch.device", "constructor", NULL);
    e->calls = 3;
    ttn_entry_hit_site(e, "a.py:1", NULL);
    ttn_table_reset_counts(&t);
    ck_assert_uint_eq(e->calls, 0);
    ck_assert_uint_eq(ttn_entry_site_count(e), 0);
    ck_assert_ptr_eq(ttn_table_find(&t, "torch.device"), e);
    ttn_table_clear(&t);
}
END_TEST

Suite *
table_suite(void)
{
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("table");

    tcase_add_test(tc, test_table_add_and_find);
    tcase_add_test(tc, test_table_add_twice_keeps_entry_and_counts);
    tcase_add_test(tc, test_table_replacing_target_and_kind_again);
    tcase_add_test(tc, test_table_keeps_insertion_order);
    tcase_add_test(tc, test_table_sites);
    tcase_add_test(tc, test_table_reset_counts);
    suite_add_tcase(s, tc);
    return s;
}
