/* The rules file: the three rule kinds, and errors naming rule and field. */
#include <string.h>

#include "suites.h"
#include "ttn/rules.h"

static int
parse(const char *s, ttn_rules *out, char *err)
{
    return ttn_rules_parse(s, strlen(s), out, err, 256);
}

START_TEST(test_rules_all_kinds)
{
    const char *text =
        "{\"rules\": {"
        " \"ArgsModifyRule\": [{\"func_name\": \"m.f\", \"arg_idx\": 1, \"arg_new\": \"hccl\"}],"
        " \"FuncNameModifyRule\": [{\"old_name\": \"apex.amp.initialize\","
        "                           \"new_name\": \"npu_amp.initialize\"}],"
        " \"ModuleNameModifyRule\": [{\"old_name\": \"amp\", \"new_name\": \"npu_amp\","
        "                             \"parent_module\": \"torch.cuda\"},"
        "                            {\"old_name\": \"apex\", \"new_name\": \"apex_npu\"}]}}";
    ttn_rules r;
    char err[256];

    ck_assert_int_eq(parse(text, &r, err), 0);
    ck_assert_uint_eq(r.count, 4);
    ck_assert_int_eq(r.rules[0].kind, TTN_RULE_ARGS);
    ck_assert_str_eq(r.rules[0].func_name, "m.f");
    ck_assert_int_eq(r.rules[0].arg_idx, 1);
    ck_assert_str_eq(r.rules[0].arg_new->string, "hccl");
    ck_assert_int_eq(r.rules[1].kind, TTN_RULE_FUNC_NAME);
    ck_assert_str_eq(r.rules[1].old_name, "apex.amp.initialize");
    ck_assert_str_eq(r.rules[1].new_name, "npu_amp.initialize");
    ck_assert_int_eq(r.rules[2].kind, TTN_RULE_MODULE_NAME);
    ck_assert_str_eq(r.rules[2].parent_module, "torch.cuda");
    ck_assert_str_eq(r.rules[3].parent_module, "");
    ck_assert_uint_eq(r.rules[3].index, 1);
    ttn_rules_free(&r);
}
END_TEST

START_TEST(test_rules_empty_lists)
{
    ttn_rules r;
    char err[256];

    ck_assert_int_eq(parse("{\"rules\": {}}", &r, err), 0);
    ck_assert_uint_eq(r.count, 0);
    ttn_rules_free(&r);
    ck_assert_int_eq(parse("{\"rules\": {\"ArgsModifyRule\": []}}", &r, err), 0);
    ttn_rules_free(&r);
}
END_TEST

static void
expect_error(const char *text, const char *message)
{
    ttn_rules r;
    char err[256];

    ck_assert_int_eq(parse(text, &r, err), -1);
    ck_assert_msg(strstr(err, message) != NULL, "%s: got '%s', want '%s'", text, err, message);
    ck_assert_ptr_null(r.rules);
}

START_TEST(test_rules_errors_name_rule_and_field)
{
    expect_error("[]", "must be an object with a \"rules\" object");
    expect_error("{\"rule\": {}}", "unknown top-level member 'rule'");
    expect_error("{\"rules\": []}", "must be an object with a \"rules\" object");
    expect_error("{\"rules\": {\"FuncRule\": []}}", "unknown rule type 'FuncRule'");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": {}}}",
                 "FuncNameModifyRule must be an array of rules");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": [3]}}",
                 "FuncNameModifyRule[0]: a rule must be an object");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": [{\"old_name\": \"a.b\"}]}}",
                 "FuncNameModifyRule[0]: missing field 'new_name'");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": [{\"old_name\": \"a.b\", \"new_name\": 5}]}}",
                 "FuncNameModifyRule[0]: field 'new_name' must be a string, got a number");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": [{\"old_name\": \"a.b\", \"new_name\": \"c.d\"},"
                 "{\"old_name\": \"func\", \"new_name\": \"c.d\"}]}}",
                 "FuncNameModifyRule[1]: field 'old_name' must be a dotted name (module.function), got 'func'");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": [{\"old_name\": \"a.b\", \"new_name\": \"c..d\"}]}}",
                 "field 'new_name' must be a dotted name");
    expect_error("{\"rules\": {\"FuncNameModifyRule\": [{\"old_name\": \"a.b\", \"new_name\": \"c.d\","
                 " \"extra\": 1}]}}",
                 "FuncNameModifyRule[0]: unknown field 'extra'");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [{\"func_name\": \"a.f\", \"arg_idx\": -1,"
                 " \"arg_new\": 0}]}}",
                 "ArgsModifyRule[0]: field 'arg_idx' must be an integer from 0 to 255");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [{\"func_name\": \"a.f\", \"arg_idx\": 1.5,"
                 " \"arg_new\": 0}]}}",
                 "field 'arg_idx' must be an integer");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [{\"func_name\": \"a.f\", \"arg_idx\": 0}]}}",
                 "ArgsModifyRule[0]: missing field 'arg_new'");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [{\"func_name\": \"a.f\", \"arg_idx\": 0,"
                 " \"arg_new\": 18446744073709551616}]}}",
                 "ArgsModifyRule[0]: field 'arg_new' holds a number out of range");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [{\"func_name\": \"a.f\", \"arg_idx\": 0,"
                 " \"arg_new\": {\"x\": [1, 1e999]}}]}}",
                 "ArgsModifyRule[0]: field 'arg_new' holds a number out of range");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [{\"func_name\": \"a.f\","
                 " \"arg_idx\": 99999999999999999999, \"arg_new\": 0}]}}",
                 "field 'arg_idx' must be an integer from 0 to 255");
    expect_error("{\"rules\": {\"ModuleNameModifyRule\": [{\"old_name\": \"a.b\", \"new_name\": \"c\"}]}}",
                 "ModuleNameModifyRule[0]: field 'old_name' must be one name");
    expect_error("{\"rules\": {\"ModuleNameModifyRule\": [{\"old_name\": \"1a\", \"new_name\": \"c\"}]}}",
                 "field 'old_name' must be a module name, got '1a'");
    expect_error("{\"rules\": {\"ArgsModifyRule\": [", "line 1, column 31: expected a value");
}
END_TEST

Suite *
rules_suite(void)
{
    Suite *s = suite_create("rules");
    TCase *tc = tcase_create("rules");

    tcase_add_test(tc, test_rules_all_kinds);
    tcase_add_test(tc, test_rules_empty_lists);
    tcase_add_test(tc, test_rules_errors_name_rule_and_field);
    suite_add_tcase(s, tc);
    return s;
}
