/* A map from object addresses to pointers (uthash).
 *
 * Pure C.  The patcher keeps one from each original object it replaced to
 * its replacement, to find names bound to an original anywhere (in a
 * module's globals, say) without allocating while it looks.
 */
#ifndef TTN_PTRMAP_H
#define TTN_PTRMAP_H

#include <stddef.h>

#include "ttn/uthash_cfg.h"

typedef struct ttn_ptrmap_item {
    const void *key;
    void *value;
    UT_hash_handle hh;
} ttn_ptrmap_item;

typedef struct ttn_ptrmap {
    ttn_ptrmap_item *items;
} ttn_ptrmap;

void ttn_ptrmap_init(ttn_ptrmap *m);

/* Set key -> value (replacing an old value).  0, or -1 when out of memory. */
int ttn_ptrmap_put(ttn_ptrmap *m, const void *key, void *value);

/* The value for key, or NULL. */
void *ttn_ptrmap_get(const ttn_ptrmap *m, const void *key);

size_t ttn_ptrmap_count(const ttn_ptrmap *m);

/* Remove every item, calling release(value) on each first (if not NULL). */
void ttn_ptrmap_clear(ttn_ptrmap *m, void (*release)(void *value));

#endif
