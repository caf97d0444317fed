/* The one place uthash is included: allocation failures become a flag that
 * the caller turns into MemoryError instead of uthash's default exit(). */
#ifndef TTN_UTHASH_CFG_H
#define TTN_UTHASH_CFG_H

#include <stdlib.h>

#define uthash_malloc(sz) malloc(sz)
#define uthash_free(ptr, sz) free(ptr)
#define HASH_NONFATAL_OOM 1
extern int ttn_uthash_oom;
#define uthash_nonfatal_oom(elt) (ttn_uthash_oom = 1)

#include <uthash.h>

#endif
