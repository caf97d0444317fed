/* The user rules file: structure and field checks over the JSON reader. */
#include "ttn/rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    ttn_rule_kind kind;
    const char *fields[4];
} kinds[] = {
    {"ArgsModifyRule", TTN_RULE_ARGS, {"func_name", "arg_idx", "arg_new", NULL}},
    {"FuncNameModifyRule", TTN_RULE_FUNC_NAME, {"old_name", "new_name", NULL, NULL}},
    {"ModuleNameModifyRule", TTN_RULE_MODULE_NAME, {"old_name", "new_name", "parent_module", NULL}},
};

#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* ------------------------------------------------------------------------- */

const char *
ttn_rule_kind_name(ttn_rule_kind kind)
{
    size_t i;

    for (i = 0; i < NKINDS; i++)
        if (kinds[i].kind == kind)
            return kinds[i].name;
    return "rule";
}

static int
error(char *err, size_t errcap, const char *fmt, ...)
{
    va_list ap;

    if (errcap > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A Python dotted name: identifiers (ASCII letters, digits, '_', not
 * starting with a digit) joined by single dots. */
static int
is_dotted_name(const char *s, int need_dot)
{
    int dots = 0, at_start = 1;

    if (*s == '\0')
        return 0;
    for (; *s; s++) {
        char c = *s;

        if (c == '.') {
            if (at_start)
                return 0;
            dots++;
            at_start = 1;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (!at_start && c >= '0' && c <= '9')))
            return 0;
        at_start = 0;
    }
    return !at_start && (!need_dot || dots > 0);
}

/* A name field: a string that is a dotted name (with a dot when need_dot;
 * empty allowed when may_be_empty). */
static int
name_field(const ttn_json *rule, const char *kind, size_t index, const char *field, int need_dot,
           int may_be_empty, const char **out, char *err, size_t errcap)
{
    const ttn_json *v = ttn_json_member(rule, field);

    if (v == NULL) {
        if (may_be_empty) {
            *out = "";
            return 0;
        }
        return error(err, errcap, "%s[%zu]: missing field '%s'", kind, index, field);
    }
    if (v->type != TTN_JSON_STRING)
        return error(err, errcap, "%s[%zu]: field '%s' must be a string, got %s (line %d)", kind,
                     index, field, ttn_json_type_name(v->type), v->line);
    if (v->length == 0 && may_be_empty) {
        *out = v->string;
        return 0;
    }
    if (!is_dotted_name(v->string, need_dot))
        return error(err, errcap, "%s[%zu]: field '%s' must be a %s, got '%.200s' (line %d)",
                     kind, index, field,
                     need_dot ? "dotted name (module.function)" : "module name", v->string,
                     v->line);
    *out = v->string;
    return 0;
}

/* The first number in v that does not fit what it would become (a 64-bit
 * integer, a double), or NULL: better an error naming the field than a
 * silent float or infinity.  The reader bounds the depth. */
static const ttn_json *
out_of_range(const ttn_json *v)
{
    size_t i;

    if (v->type == TTN_JSON_NUMBER)
        return v->out_of_range ? v : NULL;
    if (v->type == TTN_JSON_ARRAY || v->type == TTN_JSON_OBJECT) {
        for (i = 0; i < v->count; i++) {
            const ttn_json *bad = out_of_range(v->items[i]);

            if (bad != NULL)
                return bad;
        }
    }
    return NULL;
}

static int
check_rule(const ttn_json *rule, size_t k, size_t index, ttn_rule *out, char *err, size_t errcap)
{
    const char *kind = kinds[k].name;
    size_t i, j;

    if (rule->type != TTN_JSON_OBJECT)
        return error(err, errcap, "%s[%zu]: a rule must be an object, got %s (line %d)", kind,
                     index, ttn_json_type_name(rule->type), rule->line);
    for (i = 0; i < rule->count; i++) {
        int known = 0;

        for (j = 0; kinds[k].fields[j] != NULL; j++)
            known |= strcmp(rule->keys[i], kinds[k].fields[j]) == 0;
        if (!known)
            return error(err, errcap, "%s[%zu]: unknown field '%.200s' (line %d)", kind, index,
                         rule->keys[i], rule->items[i]->line);
    }
    memset(out, 0, sizeof(*out));
    out->kind = kinds[k].kind;
    out->index = index;
    switch (out->kind) {
    case TTN_RULE_ARGS: {
        const ttn_json *idx = ttn_json_member(rule, "arg_idx"), *bad;

        if (name_field(rule, kind, index, "func_name", 1, 0, &out->func_name, err, errcap) < 0)
            return -1;
        if (idx == NULL)
            return error(err, errcap, "%s[%zu]: missing field 'arg_idx'", kind, index);
        if (idx->type != TTN_JSON_NUMBER || !idx->is_integer || idx->integer < 0 ||
            idx->integer > 255)
            return error(err, errcap,
                         "%s[%zu]: field 'arg_idx' must be an integer from 0 to 255 (line %d)",
                         kind, index, idx->line);
        out->arg_idx = idx->integer;
        out->arg_new = ttn_json_member(rule, "arg_new");
        if (out->arg_new == NULL)
            return error(err, errcap, "%s[%zu]: missing field 'arg_new'", kind, index);
        bad = out_of_range(out->arg_new);
        if (bad != NULL)
            return error(err, errcap,
                         "%s[%zu]: field 'arg_new' holds a number out of range (integers must "
                         "fit in 64 bits, other numbers in a double) (line %d)",
                         kind, index, bad->line);
        return 0;
    }
    case TTN_RULE_FUNC_NAME:
        if (name_field(rule, kind, index, "old_name", 1, 0, &out->old_name, err, errcap) < 0 ||
            name_field(rule, kind, index, "new_name", 1, 0, &out->new_name, err, errcap) < 0)
            return -1;
        return 0;
    case TTN_RULE_MODULE_NAME:
        if (name_field(rule, kind, index, "old_name", 0, 0, &out->old_name, err, errcap) < 0 ||
            name_field(rule, kind, index, "new_name", 0, 0, &out->new_name, err, errcap) < 0 ||
            name_field(rule, kind, index, "parent_module", 0, 1, &out->parent_module, err,
                       errcap) < 0)
            return -1;
        if (strchr(out->old_name, '.') != NULL)
            return error(err, errcap,
                         "%s[%zu]: field 'old_name' must be one name; its package goes in "
                         "'parent_module'",
                         kind, index);
        return 0;
    }
    return error(err, errcap, "%s[%zu]: unknown rule", kind, index);
}

/* ------------------------------------------------------------------------- */

int
ttn_rules_parse(const char *text, size_t len, ttn_rules *out, char *err, size_t errcap)
{
    ttn_json *doc;
    const ttn_json *rules;
    size_t i, j, k, total = 0;
    char jerr[256];

    out->doc = NULL;
    out->rules = NULL;
    out->count = 0;
    doc = ttn_json_parse(text, len, jerr, sizeof(jerr));
    if (doc == NULL)
        return error(err, errcap, "%s", jerr);
    if (doc->type != TTN_JSON_OBJECT)
        goto top_level;
    for (i = 0; i < doc->count; i++)
        if (strcmp(doc->keys[i], "rules") != 0) {
            error(err, errcap, "unknown top-level member '%.200s' (only \"rules\" is read)",
                  doc->keys[i]);
            goto fail;
        }
    rules = ttn_json_member(doc, "rules");
    if (rules == NULL || rules->type != TTN_JSON_OBJECT)
        goto top_level;
    for (i = 0; i < rules->count; i++) {
        for (k = 0; k < NKINDS && strcmp(rules->keys[i], kinds[k].name) != 0; k++)
            ;
        if (k == NKINDS) {
            error(err, errcap,
                  "unknown rule type '%.200s' (line %d; expected ArgsModifyRule, "
                  "FuncNameModifyRule or ModuleNameModifyRule)",
                  rules->keys[i], rules->items[i]->line);
            goto fail;
        }
        if (rules->items[i]->type != TTN_JSON_ARRAY) {
            error(err, errcap, "%s must be an array of rules, got %s (line %d)", kinds[k].name,
                  ttn_json_type_name(rules->items[i]->type), rules->items[i]->line);
            goto fail;
        }
        total += rules->items[i]->count;
    }
    out->rules = calloc(total ? total : 1, sizeof(*out->rules));
    if (out->rules == NULL) {
        error(err, errcap, "out of memory");
        goto fail;
    }
    for (i = 0; i < rules->count; i++) {
        const ttn_json *list = rules->items[i];

        for (k = 0; strcmp(rules->keys[i], kinds[k].name) != 0; k++)
            ;
        for (j = 0; j < list->count; j++)
            if (check_rule(list->items[j], k, j, &out->rules[out->count++], err, errcap) < 0)
                goto fail;
    }
    out->doc = doc;
    return 0;

top_level:
    error(err, errcap, "the file must be an object with a \"rules\" object: "
                       "{\"rules\": {\"FuncNameModifyRule\": [...], ...}}");
fail:
    free(out->rules);
    out->rules = NULL;
    out->count = 0;
    ttn_json_free(doc);
    return -1;
}

void
ttn_rules_free(ttn_rules *rules)
{
    free(rules->rules);
    ttn_json_free(rules->doc);
    rules->rules = NULL;
    rules->doc = NULL;
    rules->count = 0;
}
