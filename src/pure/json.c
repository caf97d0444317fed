/* A strict JSON (RFC 8259) reader: recursive descent over a byte buffer. */
#include "ttn/json.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *end;
    int line;
    const char *line_start;
    char *err;
    size_t errcap;
    int failed;
} reader;

/* ------------------------------------------------------------------------- */

static int
column(const reader *r, const char *at)
{
    return (int)(at - r->line_start) + 1;
}

static void
fail(reader *r, const char *at, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (r->failed)
        return;
    r->failed = 1;
    if (r->errcap == 0)
        return;
    n = snprintf(r->err, r->errcap, "line %d, column %d: ", r->line, column(r, at));
    if (n < 0 || (size_t)n >= r->errcap)
        return;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->errcap - (size_t)n, fmt, ap);
    va_end(ap);
}

/* What is at p, quoted for a message. */
static const char *
describe(const reader *r, char *buf, size_t cap)
{
    unsigned char c;

    if (r->p >= r->end)
        return "the end of the file";
    c = (unsigned char)*r->p;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, cap, "'%c'", c);
    else
        snprintf(buf, cap, "byte 0x%02x", c);
    return buf;
}

static void
skip_space(reader *r)
{
    while (r->p < r->end) {
        char c = *r->p;

        if (c == '\n') {
            r->line++;
            r->line_start = r->p + 1;
        }
        else if (c != ' ' && c != '\t' && c != '\r')
            break;
        r->p++;
    }
}

static ttn_json *
new_value(reader *r, ttn_json_type type)
{
    ttn_json *v = calloc(1, sizeof(*v));

    if (v == NULL) {
        fail(r, r->p, "out of memory");
        return NULL;
    }
    v->type = type;
    v->line = r->line;
    v->column = column(r, r->p);
    return v;
}

/* ------------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} buffer;

static int
buf_put(buffer *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 32;
        char *d;

        while (cap < b->len + n + 1)
            cap *= 2;
        d = realloc(b->data, cap);
        if (d == NULL)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int
hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        char c = p[i];

        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static int
put_utf8(buffer *b, unsigned cp)
{
    char s[4];
    size_t n;

    if (cp < 0x80) {
        s[0] = (char)cp;
        n = 1;
    }
    else if (cp < 0x800) {
        s[0] = (char)(0xc0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    }
    else if (cp < 0x10000) {
        s[0] = (char)(0xe0 | (cp >> 12));
        s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        s[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    }
    else {
        s[0] = (char)(0xf0 | (cp >> 18));
        s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        s[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return buf_put(b, s, n);
}

/* Length of the valid UTF-8 sequence at p (at most end - p), or 0. */
static size_t
utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    size_t n, i;
    unsigned cp;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2, cp = p[0] & 0x1f;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3, cp = p[0] & 0x0f;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4, cp = p[0] & 0x07;
    else
        return 0;
    if ((size_t)(end - p) < n)
        return 0;
    for (i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    /* No overlong forms, surrogates or values past U+10FFFF. */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A string at r->p (the opening quote): its UTF-8 bytes in a new buffer. */
static char *
read_string(reader *r, size_t *length)
{
    buffer b = {NULL, 0, 0};
    const char *start = r->p;
    char tmp[16];

    r->p++; /* the quote */
    if (buf_put(&b, "", 0) < 0)
        goto oom;
    while (1) {
        const char *run = r->p;
        unsigned char c;

        while (r->p < r->end && *r->p != '"' && *r->p != '\\' &&
               (unsigned char)*r->p >= 0x20 && (unsigned char)*r->p < 0x80)
            r->p++;
        if (r->p > run && buf_put(&b, run, (size_t)(r->p - run)) < 0)
            goto oom;
        if (r->p >= r->end) {
            fail(r, start, "unterminated string");
            goto error;
        }
        c = (unsigned char)*r->p;
        if (c == '"') {
            r->p++;
            break;
        }
        if (c < 0x20) {
            fail(r, r->p, "control character %s in a string (write it as an escape)",
                 describe(r, tmp, sizeof(tmp)));
            goto error;
        }
        if (c >= 0x80) {
            size_t n = utf8_sequence((const unsigned char *)r->p, (const unsigned char *)r->end);

            if (n == 0) {
                fail(r, r->p, "invalid UTF-8 in a string");
                goto error;
            }
            if (buf_put(&b, r->p, n) < 0)
                goto oom;
            r->p += n;
            continue;
        }
        /* an escape */
        if (r->end - r->p < 2) {
            fail(r, start, "unterminated string");
            goto error;
        }
        r->p++;
        switch (*r->p) {
        case '"': if (buf_put(&b, "\"", 1) < 0) goto oom; r->p++; break;
        case '\\': if (buf_put(&b, "\\", 1) < 0) goto oom; r->p++; break;
        case '/': if (buf_put(&b, "/", 1) < 0) goto oom; r->p++; break;
        case 'b': if (buf_put(&b, "\b", 1) < 0) goto oom; r->p++; break;
        case 'f': if (buf_put(&b, "\f", 1) < 0) goto oom; r->p++; break;
        case 'n': if (buf_put(&b, "\n", 1) < 0) goto oom; r->p++; break;
        case 'r': if (buf_put(&b, "\r", 1) < 0) goto oom; r->p++; break;
        case 't': if (buf_put(&b, "\t", 1) < 0) goto oom; r->p++; break;
        case 'u': {
            unsigned cp, low;
            const char *esc = r->p - 1;

            if (r->end - r->p < 5 || hex4(r->p + 1, &cp) < 0) {
                fail(r, esc, "\\u must be followed by four hex digits");
                goto error;
            }
            r->p += 5;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                fail(r, esc, "unpaired surrogate \\u%04x", cp);
                goto error;
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
                    hex4(r->p + 2, &low) < 0 || low < 0xdc00 || low > 0xdfff) {
                    fail(r, esc, "unpaired surrogate \\u%04x", cp);
                    goto error;
                }
                r->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            }
            if (cp == 0) {
                fail(r, esc, "\\u0000 is not allowed in a string");
                goto error;
            }
            if (put_utf8(&b, cp) < 0)
                goto oom;
            break;
        }
        default:
            fail(r, r->p - 1, "invalid escape \\%s", describe(r, tmp, sizeof(tmp)));
            goto error;
        }
    }
    *length = b.len;
    return b.data;

oom:
    fail(r, r->p, "out of memory");
error:
    free(b.data);
    return NULL;
}

/* ------------------------------------------------------------------------- */

static ttn_json *parse_value(reader *r, int depth);

static ttn_json *
parse_number(reader *r)
{
    const char *start = r->p;
    int integral = 1;
    char *copy, *endp;
    ttn_json *v;

    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') {
        fail(r, start, "invalid number");
        return NULL;
    }
    if (*r->p == '0')
        r->p++;
    else
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    if (r->p < r->end && *r->p == '.') {
        integral = 0;
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') {
            fail(r, start, "invalid number: digits must follow '.'");
            return NULL;
        }
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        integral = 0;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') {
            fail(r, start, "invalid number: digits must follow the exponent");
            return NULL;
        }
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (r->p < r->end && ((*r->p >= '0' && *r->p <= '9') || *r->p == '.')) {
        fail(r, start, "invalid number: leading zeros are not allowed");
        return NULL;
    }
    copy = malloc((size_t)(r->p - start) + 1);
    if (copy == NULL) {
        fail(r, start, "out of memory");
        return NULL;
    }
    memcpy(copy, start, (size_t)(r->p - start));
    copy[r->p - start] = '\0';
    v = new_value(r, TTN_JSON_NUMBER);
    if (v == NULL) {
        free(copy);
        return NULL;
    }
    v->column = column(r, start);
    errno = 0;
    v->number = strtod(copy, NULL);
    v->out_of_range = errno == ERANGE && (v->number > 1.0 || v->number < -1.0);
    if (integral) {
        errno = 0;
        v->integer = strtoll(copy, &endp, 10);
        v->is_integer = errno == 0 && *endp == '\0';
        v->out_of_range |= !v->is_integer;
    }
    free(copy);
    return v;
}

static ttn_json *
parse_literal(reader *r, const char *word, ttn_json_type type)
{
    size_t n = strlen(word);

    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) {
        fail(r, r->p, "invalid literal (expected %s)", word);
        return NULL;
    }
    {
        ttn_json *v = new_value(r, type);

        r->p += n;
        return v;
    }
}

static int
grow(reader *r, ttn_json *v, size_t *cap, int with_keys)
{
    size_t ncap = *cap ? *cap * 2 : 4;
    ttn_json **items = realloc(v->items, ncap * sizeof(*items));

    if (items == NULL) {
        fail(r, r->p, "out of memory");
        return -1;
    }
    v->items = items;
    if (with_keys) {
        char **keys = realloc(v->keys, ncap * sizeof(*keys));

        if (keys == NULL) {
            fail(r, r->p, "out of memory");
            return -1;
        }
        v->keys = keys;
    }
    *cap = ncap;
    return 0;
}

static ttn_json *
parse_array(reader *r, int depth)
{
    ttn_json *v = new_value(r, TTN_JSON_ARRAY);
    size_t cap = 0;
    char tmp[16];

    if (v == NULL)
        return NULL;
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return v;
    }
    while (1) {
        ttn_json *item;

        skip_space(r);
        item = parse_value(r, depth + 1);
        if (item == NULL)
            goto error;
        if (v->count == cap && grow(r, v, &cap, 0) < 0) {
            ttn_json_free(item);
            goto error;
        }
        v->items[v->count++] = item;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            return v;
        }
        fail(r, r->p, "expected ',' or ']' in an array, found %s", describe(r, tmp, sizeof(tmp)));
        goto error;
    }

error:
    ttn_json_free(v);
    return NULL;
}

/* The member names of one object, for finding a duplicate in constant
 * time (a list searched for each would make a large object quadratic):
 * open addressing over indices into the object's keys, plus one. */
typedef struct {
    size_t *slots;
    size_t mask; /* slots - 1, a power of two minus one; 0 before the first */
} name_set;

static size_t
name_hash(const char *s)
{
    size_t h = 1469598103934665603u; /* FNV-1a */

    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211u;
    return h;
}

static void
names_put(name_set *set, char *const *keys, size_t index)
{
    size_t h = name_hash(keys[index]) & set->mask;

    while (set->slots[h] != 0)
        h = (h + 1) & set->mask;
    set->slots[h] = index + 1;
}

/* Add key, which will be keys[count]: 0, 1 when it is there already, -1
 * out of memory. */
static int
names_add(name_set *set, char *const *keys, size_t count, const char *key)
{
    size_t h, i;

    if (2 * (count + 1) > set->mask) {
        size_t size = set->mask ? 2 * (set->mask + 1) : 16;
        size_t *old = set->slots;

        set->slots = calloc(size, sizeof(size_t));
        if (set->slots == NULL) {
            set->slots = old;
            return -1;
        }
        free(old);
        set->mask = size - 1;
        for (i = 0; i < count; i++)
            names_put(set, keys, i);
    }
    for (h = name_hash(key) & set->mask; set->slots[h] != 0; h = (h + 1) & set->mask)
        if (strcmp(keys[set->slots[h] - 1], key) == 0)
            return 1;
    set->slots[h] = count + 1;
    return 0;
}

static ttn_json *
parse_object(reader *r, int depth)
{
    ttn_json *v = new_value(r, TTN_JSON_OBJECT);
    name_set names = {NULL, 0};
    size_t cap = 0;
    char tmp[16];

    if (v == NULL)
        return NULL;
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return v;
    }
    while (1) {
        const char *key_at;
        char *key;
        size_t key_len;
        ttn_json *value;

        skip_space(r);
        if (r->p >= r->end || *r->p != '"') {
            fail(r, r->p, "expected a member name in quotes, found %s",
                 describe(r, tmp, sizeof(tmp)));
            goto error;
        }
        key_at = r->p;
        key = read_string(r, &key_len);
        if (key == NULL)
            goto error;
        switch (names_add(&names, v->keys, v->count, key)) {
        case 0:
            break;
        case 1:
            fail(r, key_at, "duplicate member name '%s'", key);
            free(key);
            goto error;
        default:
            fail(r, key_at, "out of memory");
            free(key);
            goto error;
        }
        skip_space(r);
        if (r->p >= r->end || *r->p != ':') {
            fail(r, r->p, "expected ':' after a member name, found %s",
                 describe(r, tmp, sizeof(tmp)));
            free(key);
            goto error;
        }
        r->p++;
        skip_space(r);
        value = parse_value(r, depth + 1);
        if (value == NULL) {
            free(key);
            goto error;
        }
        if (v->count == cap && grow(r, v, &cap, 1) < 0) {
            free(key);
            ttn_json_free(value);
            goto error;
        }
        v->keys[v->count] = key;
        v->items[v->count++] = value;
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            free(names.slots);
            return v;
        }
        fail(r, r->p, "expected ',' or '}' in an object, found %s",
             describe(r, tmp, sizeof(tmp)));
        goto error;
    }

error:
    free(names.slots);
    ttn_json_free(v);
    return NULL;
}

static ttn_json *
parse_value(reader *r, int depth)
{
    char tmp[16];

    if (depth > TTN_JSON_MAX_DEPTH) {
        fail(r, r->p, "nested deeper than %d levels", TTN_JSON_MAX_DEPTH);
        return NULL;
    }
    if (r->p >= r->end) {
        fail(r, r->p, "expected a value, found the end of the file");
        return NULL;
    }
    switch (*r->p) {
    case '{':
        return parse_object(r, depth);
    case '[':
        return parse_array(r, depth);
    case '"': {
        ttn_json *v = new_value(r, TTN_JSON_STRING);

        if (v == NULL)
            return NULL;
        v->string = read_string(r, &v->length);
        if (v->string == NULL) {
            free(v);
            return NULL;
        }
        return v;
    }
    case 't':
        return parse_literal(r, "true", TTN_JSON_TRUE);
    case 'f':
        return parse_literal(r, "false", TTN_JSON_FALSE);
    case 'n':
        return parse_literal(r, "null", TTN_JSON_NULL);
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))
            return parse_number(r);
        fail(r, r->p, "expected a value, found %s", describe(r, tmp, sizeof(tmp)));
        return NULL;
    }
}

/* ------------------------------------------------------------------------- */

ttn_json *
ttn_json_parse(const char *text, size_t len, char *err, size_t errcap)
{
    reader r;
    ttn_json *v;
    char tmp[16];

    r.p = text;
    r.end = text + len;
    r.line = 1;
    r.line_start = text;
    r.err = err;
    r.errcap = errcap;
    r.failed = 0;
    if (errcap > 0)
        err[0] = '\0';
    /* A UTF-8 byte order mark is tolerated, as editors write one. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        r.p += 3, r.line_start = r.p;
    skip_space(&r);
    v = parse_value(&r, 0);
    if (v == NULL)
        return NULL;
    skip_space(&r);
    if (r.p != r.end) {
        fail(&r, r.p, "unexpected %s after the value", describe(&r, tmp, sizeof(tmp)));
        ttn_json_free(v);
        return NULL;
    }
    return v;
}

void
ttn_json_free(ttn_json *v)
{
    size_t i;

    if (v == NULL)
        return;
    for (i = 0; i < v->count; i++) {
        ttn_json_free(v->items[i]);
        if (v->keys != NULL)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const ttn_json *
ttn_json_member(const ttn_json *object, const char *key)
{
    size_t i;

    if (object == NULL || object->type != TTN_JSON_OBJECT)
        return NULL;
    for (i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0)
            return object->items[i];
    return NULL;
}

const char *
ttn_json_type_name(ttn_json_type type)
{
    switch (type) {
    case TTN_JSON_NULL: return "null";
    case TTN_JSON_FALSE:
    case TTN_JSON_TRUE: return "a boolean";
    case TTN_JSON_NUMBER: return "a number";
    case TTN_JSON_STRING: return "a string";
    case TTN_JSON_ARRAY: return "an array";
    case TTN_JSON_OBJECT: return "an object";
    }
    return "a value";
}
