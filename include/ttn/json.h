/* A strict JSON (RFC 8259) reader for the user rules file.
 *
 * Pure C (no Python.h), so that it can be unit tested and fuzzed alone.
 * Errors say where ("line 3, column 7: expected ',' or '}'"); nesting is
 * bounded; duplicate keys are an error; strings are returned as UTF-8.
 */
#ifndef TTN_JSON_H
#define TTN_JSON_H

#include <stddef.h>

#define TTN_JSON_MAX_DEPTH 64

typedef enum {
    TTN_JSON_NULL,
    TTN_JSON_FALSE,
    TTN_JSON_TRUE,
    TTN_JSON_NUMBER,
    TTN_JSON_STRING,
    TTN_JSON_ARRAY,
    TTN_JSON_OBJECT
} ttn_json_type;

typedef struct ttn_json {
    ttn_json_type type;
    int line, column; /* where the value starts */
    /* NUMBER */
    double number;
    int is_integer;   /* written without fraction or exponent, and fits */
    int out_of_range; /* an integer beyond 64 bits, or a number beyond a double's range */
    long long integer;
    /* STRING: UTF-8, NUL terminated; length excludes the NUL */
    char *string;
    size_t length;
    /* ARRAY and OBJECT */
    size_t count;
    struct ttn_json **items; /* elements, or member values */
    char **keys;             /* OBJECT: member names (UTF-8, NUL terminated) */
} ttn_json;

/* Parse text[0..len).  Returns the document, or NULL with a message in err
 * (always NUL terminated when errcap > 0). */
ttn_json *ttn_json_parse(const char *text, size_t len, char *err, size_t errcap);

void ttn_json_free(ttn_json *value);

/* The member `key` of an object, or NULL. */
const ttn_json *ttn_json_member(const ttn_json *object, const char *key);

/* "null", "a string", "an object", ... for messages. */
const char *ttn_json_type_name(ttn_json_type type);

#endif
