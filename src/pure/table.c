/* The symbol table (uthash). */
#include "ttn/table.h"

#include <string.h>

int ttn_uthash_oom = 0;

/* ------------------------------------------------------------------------- */

static char *
dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* A target or kind replaced after the entry was made is allocated apart
 * from the entry's block (own: which of them). */
static int
replace_str(ttn_entry *e, char **slot, unsigned own, const char *value)
{
    char *d;

    if (strcmp(*slot, value) == 0)
        return 0;
    d = dup_str(value);
    if (d == NULL)
        return -1;
    if (e->own & own)
        free(*slot);
    *slot = d;
    e->own |= own;
    return 0;
}

static void
free_entry(ttn_entry *e)
{
    ttn_site *s, *tmp;

    HASH_ITER(hh, e->sites, s, tmp) {
        HASH_DEL(e->sites, s);
        free(s->where);
        free(s);
    }
    if (e->own & TTN_OWN_TARGET)
        free(e->target);
    if (e->own & TTN_OWN_KIND)
        free(e->kind);
    free(e);
}

/* ------------------------------------------------------------------------- */

void
ttn_table_init(ttn_table *t)
{
    t->entries = NULL;
}

/* ------------------------------------------------------------------------- */

ttn_entry *
ttn_table_add(ttn_table *t, const char *source, const char *target,
              const char *kind, int *created)
{
    size_t n = strlen(source), n_target, n_kind;
    unsigned hash;
    ttn_entry *e = NULL;
    char *p;

    if (created != NULL)
        *created = 0;
    /* Hashed once for the look-up and the insertion. */
    HASH_VALUE(source, n, hash);
    HASH_FIND_BYHASHVALUE(hh, t->entries, source, n, hash, e);
    if (e != NULL) {
        if (replace_str(e, &e->target, TTN_OWN_TARGET, target) < 0 ||
            replace_str(e, &e->kind, TTN_OWN_KIND, kind) < 0)
            return NULL;
        return e;
    }
    /* The strings in the entry's own block: one allocation per entry (a
     * table is made of some 240 at import). */
    n_target = strlen(target) + 1;
    n_kind = strlen(kind) + 1;
    e = calloc(1, sizeof(*e) + n + 1 + n_target + n_kind);
    if (e == NULL)
        return NULL;
    p = (char *)(e + 1);
    e->source = memcpy(p, source, n + 1);
    e->target = memcpy(p + n + 1, target, n_target);
    e->kind = memcpy(p + n + 1 + n_target, kind, n_kind);
    ttn_uthash_oom = 0;
    HASH_ADD_KEYPTR_BYHASHVALUE(hh, t->entries, e->source, n, hash, e);
    if (ttn_uthash_oom) {
        free(e);
        return NULL;
    }
    if (created != NULL)
        *created = 1;
    return e;
}

/* ------------------------------------------------------------------------- */

ttn_entry *
ttn_table_find(const ttn_table *t, const char *source)
{
    ttn_entry *e = NULL;

    HASH_FIND_STR(t->entries, source, e);
    return e;
}

/* ------------------------------------------------------------------------- */

size_t
ttn_table_count(const ttn_table *t)
{
    return HASH_COUNT(t->entries);
}

/* ------------------------------------------------------------------------- */

void
ttn_table_reset_counts(ttn_table *t)
{
    ttn_entry *e;
    ttn_site *s, *tmp;

    for (e = t->entries; e != NULL; e = e->hh.next) {
        e->calls = 0;
        HASH_ITER(hh, e->sites, s, tmp) {
            HASH_DEL(e->sites, s);
            free(s->where);
            free(s);
        }
    }
}

/* ------------------------------------------------------------------------- */

void
ttn_table_clear(ttn_table *t)
{
    ttn_entry *e, *tmp;

    HASH_ITER(hh, t->entries, e, tmp) {
        HASH_DEL(t->entries, e);
        free_entry(e);
    }
}

/* ------------------------------------------------------------------------- */

ttn_site *
ttn_entry_hit_site(ttn_entry *e, const char *where, int *created)
{
    ttn_site *s = NULL;

    if (created != NULL)
        *created = 0;
    HASH_FIND_STR(e->sites, where, s);
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL)
            return NULL;
        s->where = dup_str(where);
        if (s->where == NULL) {
            free(s);
            return NULL;
        }
        ttn_uthash_oom = 0;
        HASH_ADD_KEYPTR(hh, e->sites, s->where, strlen(s->where), s);
        if (ttn_uthash_oom) {
            free(s->where);
            free(s);
            return NULL;
        }
        if (created != NULL)
            *created = 1;
    }
    s->count++;
    return s;
}

/* ------------------------------------------------------------------------- */

size_t
ttn_entry_site_count(const ttn_entry *e)
{
    return HASH_COUNT(e->sites);
}
