/* Device and process-group backend strings: exact parsing and rewriting. */
#include "ttn/devspec.h"

#include <string.h>

/* ------------------------------------------------------------------------- */

ttn_dev_kind
ttn_devspec_parse(const char *s, size_t len, int *index)
{
    size_t i;
    int value = 0;

    *index = -1;
    if (s == NULL || len < 4 || memcmp(s, "cuda", 4) != 0)
        return TTN_DEV_OTHER;
    if (len == 4)
        return TTN_DEV_CUDA;
    /* "cudax", "cuda_graph.pt", ...: the type is not "cuda". */
    if (s[4] != ':')
        return TTN_DEV_OTHER;
    /* From here the type is "cuda", so a bad index is an error, never a
     * reason to leave the string alone: torch would reject it too. */
    if (len == 5)
        return TTN_DEV_INVALID;
    if (s[5] == '0' && len > 6)
        return TTN_DEV_INVALID; /* leading zero, as torch rejects */
    for (i = 5; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return TTN_DEV_INVALID;
        value = value * 10 + (s[i] - '0');
        if (value > TTN_MAX_DEVICE_INDEX)
            return TTN_DEV_INVALID;
    }
    *index = value;
    return TTN_DEV_CUDA;
}

/* ------------------------------------------------------------------------- */

const ttn_target ttn_target_npu = {"npu", "hccl", 1};

static int
is_name(const char *s)
{
    size_t i, n = s == NULL ? 0 : strlen(s);

    if (n == 0 || n > TTN_TARGET_MAX)
        return 0;
    for (i = 0; i < n; i++)
        if (s[i] < 'a' || s[i] > 'z')
            return 0;
    return 1;
}

int
ttn_target_set(ttn_target *t, const char *device, const char *backend, int indexed)
{
    if (!is_name(device) || !is_name(backend))
        return 0;
    memset(t, 0, sizeof(*t));
    memcpy(t->device, device, strlen(device));
    memcpy(t->backend, backend, strlen(backend));
    t->indexed = indexed != 0;
    return 1;
}

/* ------------------------------------------------------------------------- */

size_t
ttn_devspec_format(const ttn_target *t, int index, char *buf, size_t cap)
{
    char digits[4];
    size_t n = 0, len, i, tlen = strlen(t->device);

    if (index > TTN_MAX_DEVICE_INDEX)
        return 0;
    if (index < 0 || !t->indexed) {
        if (cap < tlen + 1)
            return 0;
        memcpy(buf, t->device, tlen + 1);
        return tlen;
    }
    do {
        digits[n++] = (char)('0' + index % 10);
        index /= 10;
    } while (index > 0);
    len = tlen + 1 + n;
    if (cap < len + 1)
        return 0;
    memcpy(buf, t->device, tlen);
    buf[tlen] = ':';
    for (i = 0; i < n; i++)
        buf[tlen + 1 + i] = digits[n - 1 - i]; /* digits were produced backwards */
    buf[len] = '\0';
    return len;
}

/* ------------------------------------------------------------------------- */

static int
equals_ci(const char *s, size_t len, const char *lower)
{
    size_t i;

    if (strlen(lower) != len)
        return 0;
    for (i = 0; i < len; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != lower[i])
            return 0;
    }
    return 1;
}

/* Append n bytes to out[*pos..cap); 0 when it does not fit (leaving room
 * for the terminating NUL). */
static int
append(char *out, size_t cap, size_t *pos, const char *src, size_t n)
{
    if (*pos + n + 1 > cap)
        return 0;
    memcpy(out + *pos, src, n);
    *pos += n;
    return 1;
}

ttn_backend_result
ttn_backend_rewrite(const ttn_target *t, const char *s, size_t len, char *out, size_t cap,
                    size_t *outlen)
{
    size_t start = 0, pos = 0, dev_len = strlen(t->device), be_len = strlen(t->backend);
    int changed = 0;

    if (s == NULL)
        return TTN_BACKEND_UNCHANGED;
    if (memchr(s, ':', len) == NULL) {
        /* A single backend name: torch lower-cases it before use. */
        if (!equals_ci(s, len, "nccl"))
            return TTN_BACKEND_UNCHANGED;
        if (!append(out, cap, &pos, t->backend, be_len))
            return TTN_BACKEND_TOO_LONG;
        out[pos] = '\0';
        *outlen = pos;
        return TTN_BACKEND_REWRITTEN;
    }
    /* "device:backend[,device:backend...]", each pair with exactly one
     * colon and no empty side; a malformed list is left for torch to
     * reject in its own words. */
    while (start <= len) {
        const char *pair = s + start;
        const char *comma = memchr(pair, ',', len - start);
        size_t plen = comma ? (size_t)(comma - pair) : len - start;
        const char *colon = memchr(pair, ':', plen);
        size_t dlen, blen;
        const char *dev, *be;

        if (colon == NULL || memchr(colon + 1, ':', plen - (size_t)(colon - pair) - 1))
            return TTN_BACKEND_UNCHANGED;
        dev = pair;
        dlen = (size_t)(colon - pair);
        be = colon + 1;
        blen = plen - dlen - 1;
        if (dlen == 0 || blen == 0)
            return TTN_BACKEND_UNCHANGED;
        if (start > 0 && !append(out, cap, &pos, ",", 1))
            return TTN_BACKEND_TOO_LONG;
        if (equals_ci(dev, dlen, "cuda")) {
            changed = 1;
            if (!append(out, cap, &pos, t->device, dev_len))
                return TTN_BACKEND_TOO_LONG;
        }
        else if (!append(out, cap, &pos, dev, dlen))
            return TTN_BACKEND_TOO_LONG;
        if (!append(out, cap, &pos, ":", 1))
            return TTN_BACKEND_TOO_LONG;
        if (equals_ci(be, blen, "nccl")) {
            changed = 1;
            if (!append(out, cap, &pos, t->backend, be_len))
                return TTN_BACKEND_TOO_LONG;
        }
        else if (!append(out, cap, &pos, be, blen))
            return TTN_BACKEND_TOO_LONG;
        if (comma == NULL)
            break;
        start += plen + 1;
    }
    if (!changed)
        return TTN_BACKEND_UNCHANGED;
    out[pos] = '\0';
    *outlen = pos;
    return TTN_BACKEND_REWRITTEN;
}
