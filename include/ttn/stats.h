/* The statistics of a tensor's elements in one pass: largest, smallest,
 * mean, L2 norm, and how many are NaN or infinite.
 *
 * Pure C.  The accuracy dump describes every tensor a recorded call reads
 * or writes by these; computed by torch's ops, four small ops cost some
 * 30 microseconds a tensor, more than most calls of a small model.  Here
 * a tensor in host memory is read once, in place, whatever its strides.
 */
#ifndef TTN_STATS_H
#define TTN_STATS_H

#include <stdint.h>

/* Element types, as the caller names them. */
enum {
    TTN_F32, TTN_F64, TTN_F16, TTN_BF16, TTN_I64, TTN_I32, TTN_I16, TTN_I8, TTN_U8,
    TTN_BOOL, TTN_DTYPES
};

/* The most dimensions a tensor has (torch's limit). */
#define TTN_STATS_MAX_DIMS 64

typedef struct {
    double max, min, mean, norm;  /* NaN, all four, where an element is NaN */
    int64_t nan, inf;
} ttn_stats_result;

/* The statistics of the count = prod(shape) elements at data (strides in
 * elements, any sign).  0, or -1 for an unknown type, too many dimensions
 * or no elements. */
int ttn_stats(const void *data, int dtype, int ndim, const int64_t *shape,
              const int64_t *strides, ttn_stats_result *out);

/* float16 and bfloat16 bits as a float (exact). */
float ttn_half_to_float(uint16_t bits);
float ttn_bfloat16_to_float(uint16_t bits);

#endif
