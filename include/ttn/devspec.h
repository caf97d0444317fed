/* Device and process-group backend strings: exact parsing and rewriting.
 *
 * Pure C (no Python.h) so that the rules every wrapper relies on can be unit
 * tested and fuzzed on their own.  A string is rewritten only when it is, in
 * full, a CUDA device specification ("cuda", "cuda:N") or a backend
 * specification naming NCCL; anything that merely contains "cuda" is left
 * alone.
 */
#ifndef TTN_DEVSPEC_H
#define TTN_DEVSPEC_H

#include <stddef.h>

/* torch keeps device indices in an int8_t (c10::DeviceIndex). */
#define TTN_MAX_DEVICE_INDEX 127

/* Longest device string the formatter produces: "npu:127". */
#define TTN_DEVSTR_MAX 8

typedef enum {
    TTN_DEV_INVALID = -1, /* the type is "cuda" but the index is malformed */
    TTN_DEV_OTHER = 0,    /* not a CUDA device string: leave it as it is */
    TTN_DEV_CUDA = 1      /* "cuda" (index -1) or "cuda:N" (index N) */
} ttn_dev_kind;

/* Classify s[0..len).  Follows torch's own device-string grammar
 * (type[:index], index decimal without sign, leading zeros or blanks) and
 * additionally rejects indices above TTN_MAX_DEVICE_INDEX, which torch
 * would silently wrap.  *index receives -1 for a bare "cuda". */
ttn_dev_kind ttn_devspec_parse(const char *s, size_t len, int *index);

/* Write the NPU spelling of device `index` ("npu" when index < 0) into buf
 * (NUL terminated).  Returns the length, or 0 when cap is too small. */
size_t ttn_devspec_format_npu(int index, char *buf, size_t cap);

typedef enum {
    TTN_BACKEND_TOO_LONG = -1, /* out is too small for the rewrite */
    TTN_BACKEND_UNCHANGED = 0, /* nothing to rewrite */
    TTN_BACKEND_REWRITTEN = 1  /* out holds the rewritten string */
} ttn_backend_result;

/* Rewrite a torch.distributed backend string for HCCL.
 *   "nccl" (any case)             -> "hccl"
 *   "cpu:gloo,cuda:nccl"          -> "cpu:gloo,npu:hccl"
 * Device types "cuda" become "npu" and backends "nccl" become "hccl" in a
 * well-formed "device:backend[,device:backend...]" list; anything else
 * (another backend, a malformed list, an init_method URL) is unchanged.
 * On TTN_BACKEND_REWRITTEN, out is NUL terminated and *outlen is set. */
ttn_backend_result ttn_backend_rewrite(const char *s, size_t len, char *out,
                                       size_t cap, size_t *outlen);

#endif
