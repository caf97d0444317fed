/* The symbol table: one entry per mapped symbol ("torch.cuda.synchronize"
 * -> "torch.npu.synchronize"), with its kind, call count and call sites.
 *
 * Pure C (no Python.h).  It is the single source of truth that the
 * wrappers count into and that mappings(), --list, the log and the report
 * read.  Entries live as long as the table: wrappers keep raw pointers to
 * them, so entries are never removed one by one.  All calls are made with
 * the interpreter lock held, which serialises them.
 */
#ifndef TTN_TABLE_H
#define TTN_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "ttn/uthash_cfg.h"

typedef struct ttn_site {
    char *where; /* "file:line", owned */
    uint64_t count;
    UT_hash_handle hh;
} ttn_site;

/* ttn_entry.own: which of target and kind were allocated apart (replaced
 * after the entry was made); else they are in the entry's own block. */
#define TTN_OWN_TARGET 1u
#define TTN_OWN_KIND 2u

typedef struct ttn_entry {
    char *source; /* key, in the entry's own block */
    char *target; /* in the block, or owned (own) */
    char *kind;   /* in the block, or owned (own) */
    unsigned own;
    uint64_t calls;
    ttn_site *sites; /* in first-hit order */
    UT_hash_handle hh;
} ttn_entry;

typedef struct ttn_table {
    ttn_entry *entries; /* in insertion order */
} ttn_table;

void ttn_table_init(ttn_table *t);

/* Find the entry for source, or add it.  An existing entry keeps its
 * counts; its target and kind are updated.  Returns NULL when out of
 * memory.  *created (if not NULL) tells whether the entry is new. */
ttn_entry *ttn_table_add(ttn_table *t, const char *source, const char *target,
                         const char *kind, int *created);

ttn_entry *ttn_table_find(const ttn_table *t, const char *source);

size_t ttn_table_count(const ttn_table *t);

/* Zero every count and forget every call site; entries stay. */
void ttn_table_reset_counts(ttn_table *t);

/* Free every entry.  Only for teardown: wrappers point into the table. */
void ttn_table_clear(ttn_table *t);

/* Count one call of e at the call site `where`, adding the site on its
 * first hit.  Returns the site, or NULL when out of memory.  *created (if
 * not NULL) tells whether this is the site's first hit. */
ttn_site *ttn_entry_hit_site(ttn_entry *e, const char *where, int *created);

size_t ttn_entry_site_count(const ttn_entry *e);

#endif
