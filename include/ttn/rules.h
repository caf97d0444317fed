/* The user rules file (TRANSFER_TO_NPU_RULES), in the format of the offline
 * migration tool's -r file:
 *
 *   {"rules": {
 *     "ArgsModifyRule":       [{"func_name": "m.f", "arg_idx": 0, "arg_new": <value>}],
 *     "FuncNameModifyRule":   [{"old_name": "m.f", "new_name": "m2.g"}],
 *     "ModuleNameModifyRule": [{"old_name": "amp", "new_name": "npu_amp",
 *                               "parent_module": "torch.cuda"}]}}
 *
 * Pure C: parsing and validation only; every error names the rule and the
 * field ("FuncNameModifyRule[1]: field 'new_name' must be a string").
 */
#ifndef TTN_RULES_H
#define TTN_RULES_H

#include <stddef.h>

#include "ttn/json.h"

typedef enum {
    TTN_RULE_ARGS = 1,     /* ArgsModifyRule: a positional argument replaced */
    TTN_RULE_FUNC_NAME,    /* FuncNameModifyRule: a function renamed */
    TTN_RULE_MODULE_NAME   /* ModuleNameModifyRule: a module renamed */
} ttn_rule_kind;

typedef struct {
    ttn_rule_kind kind;
    size_t index;             /* position in its list, for messages */
    const char *func_name;    /* ARGS */
    long long arg_idx;        /* ARGS */
    const ttn_json *arg_new;  /* ARGS: any JSON value */
    const char *old_name;     /* FUNC_NAME, MODULE_NAME */
    const char *new_name;     /* FUNC_NAME, MODULE_NAME */
    const char *parent_module;/* MODULE_NAME: "" for a top-level module */
} ttn_rule;

typedef struct {
    ttn_json *doc; /* owns the strings the rules point at */
    ttn_rule *rules;
    size_t count;
} ttn_rules;

/* Parse and check a rules file.  0, or -1 with a message in err. */
int ttn_rules_parse(const char *text, size_t len, ttn_rules *out, char *err, size_t errcap);

void ttn_rules_free(ttn_rules *rules);

const char *ttn_rule_kind_name(ttn_rule_kind kind);

#endif
