/* Runs every check suite of the pure-C parts; exits non-zero on failure. */
#include <stdlib.h>

#include "suites.h"

int
main(void)
{
    SRunner *sr = srunner_create(devspec_suite());
    int failed;

    srunner_add_suite(sr, backend_suite());
    srunner_add_suite(sr, table_suite());
    srunner_add_suite(sr, ptrmap_suite());
    srunner_add_suite(sr, json_suite());
    srunner_add_suite(sr, rules_suite());
    srunner_add_suite(sr, stats_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
