#ifndef TTN_TEST_SUITES_H
#define TTN_TEST_SUITES_H

#include <check.h>

Suite *devspec_suite(void);
Suite *backend_suite(void);
Suite *table_suite(void);
Suite *ptrmap_suite(void);
Suite *json_suite(void);
Suite *rules_suite(void);
Suite *stats_suite(void);

#endif
