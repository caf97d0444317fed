/* libFuzzer target: the rules file (JSON reader and rule checks).  Every
 * input either parses into rules whose fields are what the checks promise,
 * or fails with a message; never a crash, leak or read past the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ttn/rules.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    char err[256];
    ttn_rules rules;
    size_t i;

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    if (ttn_rules_parse(text, size, &rules, err, sizeof(err)) == 0) {
        for (i = 0; i < rules.count; i++) {
            const ttn_rule *r = &rules.rules[i];

            switch (r->kind) {
            case TTN_RULE_ARGS:
                if (r->func_name == NULL || r->arg_new == NULL || r->arg_idx < 0)
                    abort();
                break;
            case TTN_RULE_FUNC_NAME:
                if (strchr(r->old_name, '.') == NULL || strchr(r->new_name, '.') == NULL)
                    abort();
                break;
            case TTN_RULE_MODULE_NAME:
                if (r->old_name[0] == '\0' || r->parent_module == NULL)
                    abort();
                break;
            default:
                abort();
            }
        }
        ttn_rules_free(&rules);
    }
    else if (err[0] == '\0')
        abort(); /* a failure always says why */
    free(text);
    return 0;
}
