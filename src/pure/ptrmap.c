/* A map from object addresses to pointers (uthash). */
#include "ttn/ptrmap.h"

#include <stdint.h>

/* Addresses are already spread out: a multiplicative mix of the pointer is
 * enough, and much cheaper than uthash's byte-wise default. */
#undef HASH_FUNCTION
#define HASH_FUNCTION(keyptr, keylen, hashv)                                     \
    do {                                                                           \
        uint64_t k_ = (uint64_t)(uintptr_t)(*(const void *const *)(keyptr)) >> 4;  \
        (hashv) = (unsigned)((k_ * UINT64_C(0x9E3779B97F4A7C15)) >> 32);           \
    } while (0)

void
ttn_ptrmap_init(ttn_ptrmap *m)
{
    m->items = NULL;
}

int
ttn_ptrmap_put(ttn_ptrmap *m, const void *key, void *value)
{
    ttn_ptrmap_item *item = NULL;

    HASH_FIND_PTR(m->items, &key, item);
    if (item != NULL) {
        item->value = value;
        return 0;
    }
    item = malloc(sizeof(*item));
    if (item == NULL)
        return -1;
    item->key = key;
    item->value = value;
    ttn_uthash_oom = 0;
    HASH_ADD_PTR(m->items, key, item);
    if (ttn_uthash_oom) {
        free(item);
        return -1;
    }
    return 0;
}

void *
ttn_ptrmap_get(const ttn_ptrmap *m, const void *key)
{
    ttn_ptrmap_item *item = NULL;

    HASH_FIND_PTR(m->items, &key, item);
    return item != NULL ? item->value : NULL;
}

size_t
ttn_ptrmap_count(const ttn_ptrmap *m)
{
    return HASH_COUNT(m->items);
}

void
ttn_ptrmap_clear(ttn_ptrmap *m, void (*release)(void *value))
{
    ttn_ptrmap_item *item, *tmp;

    HASH_ITER(hh, m->items, item, tmp) {
        HASH_DEL(m->items, item);
        if (release != NULL)
            release(item->value);
        free(item);
    }
}
