/* libFuzzer target: device and backend strings.  Every input is parsed as
 * both; results must be consistent with the grammar, never a crash or a
 * read past the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ttn/devspec.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so AddressSanitizer sees any read past it. */
    char *s = malloc(size ? size : 1);
    char out[256], npu[TTN_DEVSTR_MAX];
    size_t outlen = 0;
    int index = -7;
    ttn_dev_kind kind;
    ttn_backend_result r;

    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    kind = ttn_devspec_parse(s, size, &index);
    if (kind == TTN_DEV_CUDA) {
        if (index < -1 || index > TTN_MAX_DEVICE_INDEX)
            abort();
        if (ttn_devspec_format(&ttn_target_npu, index, npu, sizeof(npu)) == 0)
            abort();
    }
    else if (index != -1)
        abort();
    r = ttn_backend_rewrite(&ttn_target_npu, s, size, out, sizeof(out), &outlen);
    if (r == TTN_BACKEND_REWRITTEN && (outlen >= sizeof(out) || out[outlen] != '\0' ||
                                       outlen > size))
        abort();
    free(s);
    return 0;
}
