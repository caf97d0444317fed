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

/* Longest target name: "cuda" and "nccl" are rewritten in place, so a
 * target is never longer than they are. */
#define TTN_TARGET_MAX 4

/* Longest device string the formatter produces: "xxxx:127". */
#define TTN_DEVSTR_MAX (TTN_TARGET_MAX + 5)

/* Where CUDA's spellings go: the device type that stands for "cuda" and the
 * process-group backend that stands for "nccl" (each 1 to TTN_TARGET_MAX
 * lower-case letters), and whether the device type takes an index
 * ("npu:1"; the host is one device: "cuda:1" becomes "cpu"). */
typedef struct {
    char device[TTN_TARGET_MAX + 1];
    char backend[TTN_TARGET_MAX + 1];
    int indexed;
} ttn_target;

/* The NPU's: "npu", "hccl", indexed. */
extern const ttn_target ttn_target_npu;

/* Fill *t from two names; 0 when a name is not 1 to TTN_TARGET_MAX
 * lower-case ASCII letters (t is then unchanged). */
int ttn_target_set(ttn_target *t, const char *device, const char *backend, int indexed);

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

/* Write the target's spelling of device `index` into buf (NUL terminated):
 * the bare type when index < 0 or the type takes no index, else
 * "type:index".  Returns the length, or 0 when cap is too small or the
 * index is out of range. */
size_t ttn_devspec_format(const ttn_target *t, int index, char *buf, size_t cap);

typedef enum {
    TTN_BACKEND_TOO_LONG = -1, /* out is too small for the rewrite */
    TTN_BACKEND_UNCHANGED = 0, /* nothing to rewrite */
    TTN_BACKEND_REWRITTEN = 1  /* out holds the rewritten string */
} ttn_backend_result;

/* Rewrite a torch.distributed backend string for the target (the NPU's:)
 *   "nccl" (any case)             -> "hccl"
 *   "cpu:gloo,cuda:nccl"          -> "cpu:gloo,npu:hccl"
 * Device types "cuda" become the target's device and backends "nccl" its
 * backend in a well-formed "device:backend[,device:backend...]" list;
 * anything else (another backend, a malformed list, an init_method URL) is
 * unchanged.  The result is never longer than s.  On
 * TTN_BACKEND_REWRITTEN, out is NUL terminated and *outlen is set. */
ttn_backend_result ttn_backend_rewrite(const ttn_target *t, const char *s, size_t len,
                                       char *out, size_t cap, size_t *outlen);

#endif
