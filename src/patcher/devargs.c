/* Rewriting one argument value: device specifications and process-group
 * backends.  The decisions are made by the pure-C parser (devspec.c); this
 * file turns them into Python objects, cached so that the rewriting path
 * allocates nothing. */
#include "patcher.h"

/* ------------------------------------------------------------------------- */

PyObject *
ttn_npu_string(ttn_state *st, int index)
{
    char buf[TTN_DEVSTR_MAX];
    PyObject **slot;

    if (index < -1 || index > TTN_MAX_DEVICE_INDEX) {
        PyErr_Format(PyExc_ValueError, "device index %d is out of range", index);
        return NULL;
    }
    slot = &st->npu_strings[st->target.indexed ? index + 1 : 0];
    if (*slot == NULL) {
        size_t n = ttn_devspec_format(&st->target, index, buf, sizeof(buf));

        if (n == 0) {
            PyErr_Format(PyExc_ValueError, "device index %d is out of range", index);
            return NULL;
        }
        *slot = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)n);
        if (*slot == NULL)
            return NULL;
        PyUnicode_InternInPlace(slot);
    }
    return *slot;
}

/* ------------------------------------------------------------------------- */

PyObject *
ttn_npu_device(ttn_state *st, int index)
{
    PyObject **slot;

    if (index < -1 || index > TTN_MAX_DEVICE_INDEX) {
        PyErr_Format(PyExc_ValueError, "device index %d is out of range", index);
        return NULL;
    }
    if (!st->target.indexed)
        index = -1;
    slot = &st->npu_devices[index + 1];
    if (*slot == NULL) {
        if (st->device_type == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "torch.device is not known yet");
            return NULL;
        }
        if (index < 0)
            *slot = PyObject_CallFunction((PyObject *)st->device_type, "O", st->str_target);
        else
            *slot = PyObject_CallFunction((PyObject *)st->device_type, "Oi", st->str_target,
                                          index);
    }
    return *slot;
}

/* ------------------------------------------------------------------------- */

static int
raise_invalid(ttn_state *st, PyObject *value, PyObject *argname, ttn_entry *entry)
{
    if (argname != NULL && entry != NULL)
        PyErr_Format(st->invalid_device_error,
                     "Invalid device string: %R (argument '%U' of %s)", value, argname,
                     entry->source);
    else
        PyErr_Format(st->invalid_device_error, "Invalid device string: %R", value);
    return -1;
}

/* ------------------------------------------------------------------------- */

static int
type_code(ttn_state *st, PyObject *name)
{
    if (PyUnicode_Compare(name, st->str_cuda) == 0)
        return TTN_C10_CUDA;
    if (PyUnicode_Compare(name, st->str_npu) == 0)
        return TTN_C10_PRIVATEUSE1;
    if (PyUnicode_CompareWithASCIIString(name, "cpu") == 0)
        return TTN_C10_CPU;
    return TTN_C10_OTHER;
}

/* The slow way: the device's type name and index attributes. */
static int
decode_by_attributes(ttn_state *st, PyObject *dev, int *type, int *index)
{
    PyObject *name = NULL, *idx = NULL;
    int rc = -1;

    name = PyObject_GetAttr(dev, st->str_type);
    if (name == NULL)
        goto exit;
    *type = type_code(st, name);
    idx = PyObject_GetAttr(dev, st->str_index);
    if (idx == NULL)
        goto exit;
    *index = -1;
    if (idx != Py_None) {
        long v = PyLong_AsLong(idx);

        if (v == -1 && PyErr_Occurred())
            goto exit;
        *index = (int)v;
    }
    rc = 0;

exit:
    Py_XDECREF(name);
    Py_XDECREF(idx);
    return rc;
}

/* A torch.device object is PyObject_HEAD followed by c10::Device, two
 * int8s: type and index.  Reading them costs a few instructions, where
 * hashing goes through torch's error-handling wrapper (over a hundred).
 * Like the hash, the layout is trusted only once it has agreed with the
 * attributes; the check of size keeps the read inside the object. */
static int
layout_agrees(PyObject *dev, int type, int index)
{
    const int8_t *p = (const int8_t *)((const char *)dev + sizeof(PyObject));

    if (Py_TYPE(dev)->tp_basicsize < (Py_ssize_t)(sizeof(PyObject) + 2))
        return 0;
    return (int)(uint8_t)p[0] == type && (int)p[1] == index;
}

/* The type and index read quickly, when a quick way has been verified;
 * 0 when it has not (or hashing failed: the error is set then, -1). */
static inline int
quick_decode(ttn_state *st, PyObject *dev, int *type, int *index)
{
    if (ttn_device_read(st, dev, type, index))
        return 1;
    if (st->device_hash_ok > 1) {
        /* torch hashes a device as (type << 16) | (uint8_t)index. */
        Py_hash_t h = PyObject_Hash(dev);

        if (h == -1)
            return -1;
        *type = (int)((h >> 16) & 0xff);
        *index = (int)(int8_t)(h & 0xff);
        return 1;
    }
    return 0;
}

int
ttn_device_decode(ttn_state *st, PyObject *dev, int *type, int *index)
{
    Py_hash_t h;
    int quick = quick_decode(st, dev, type, index);

    if (quick < 0)
        return -1;
    if (quick == 0) {
        if (decode_by_attributes(st, dev, type, index) < 0)
            return -1;
        if (*type == TTN_C10_OTHER)
            return 0;
        if (st->device_hash_ok >= 0) {
            h = PyObject_Hash(dev);
            if (h == -1)
                return -1;
            if (h == (((Py_hash_t)*type << 16) | (Py_hash_t)(uint8_t)*index))
                st->device_hash_ok++;
            else
                st->device_hash_ok = -1; /* not the formula above: stay with attributes */
        }
        if (st->device_layout_ok >= 0) {
            if (layout_agrees(dev, *type, *index))
                st->device_layout_ok++;
            else
                st->device_layout_ok = -1;
        }
        return 0;
    }
    if (*type != TTN_C10_CUDA && *type != TTN_C10_PRIVATEUSE1 && *type != TTN_C10_CPU)
        *type = TTN_C10_OTHER;
    return 0;
}

/* Rewrite a torch.device whose type is "cuda" (one made before enable(),
 * one torch made, or one unpickled). */
static int
map_device_object(ttn_state *st, PyObject *value, PyObject **out)
{
    PyObject *result;
    int type, idx;

    if (ttn_device_decode(st, value, &type, &idx) < 0)
        return -1;
    if (type != TTN_C10_CUDA)
        return 0;
    if (idx > TTN_MAX_DEVICE_INDEX || idx < -1) {
        PyErr_Format(st->invalid_device_error, "Invalid device: %R", value);
        return -1;
    }
    result = ttn_npu_device(st, idx);
    if (result == NULL)
        return -1;
    *out = Py_NewRef(result);
    return 1;
}

/* Torch fills in a missing index through the device guard, and the guard a
 * device defined in Python gets from torch answers device 0 whatever is
 * current; so for the callables that ask it, the index goes in here. */
int
ttn_current_index_slow(ttn_state *st, PyObject *v, PyObject **string, PyObject **as_device)
{
    int current = ttn_current_device(st), type, index;

    if (current == 0)
        return 0;
    if (PyUnicode_Check(v)) {
        if (v != st->str_npu &&
            (PyUnicode_GET_LENGTH(v) != 3 || PyUnicode_Compare(v, st->str_npu) != 0))
            return 0;
        *string = ttn_npu_string(st, current);
        if (*string == NULL)
            return -1;
        *as_device = NULL;
        if (st->device_type != NULL && (*as_device = ttn_npu_device(st, current)) == NULL)
            return -1;
        return 1;
    }
    if (st->device_type == NULL || !Py_IS_TYPE(v, st->device_type))
        return 0;
    if (ttn_device_decode(st, v, &type, &index) < 0)
        return -1;
    if (type != TTN_C10_PRIVATEUSE1 || index != -1)
        return 0;
    *string = *as_device = ttn_npu_device(st, current);
    return *as_device == NULL ? -1 : 1;
}

int
ttn_quick_device(ttn_state *st, PyObject *v, PyObject **replacement, PyObject **as_device)
{
    PyTypeObject *t = Py_TYPE(v);
    int i;

    if (t == &PyUnicode_Type) {
        if (!ttn_may_be_cuda(v))
            return TTN_QUICK_KEEP;
        for (i = 0; i < TTN_STR_CACHE; i++) {
            if (st->str_cache_key[i] == v) {
                *replacement = st->str_cache_value[i];
                *as_device = st->str_cache_device[i];
                return TTN_QUICK_REWRITE;
            }
        }
        return TTN_QUICK_SLOW;
    }
    if (t == st->device_type) {
        int type, index, slot, quick = quick_decode(st, v, &type, &index);

        if (quick <= 0) {
            PyErr_Clear(); /* the general path meets the same error and reports it */
            return TTN_QUICK_SLOW;
        }
        if (type != TTN_C10_CUDA)
            return TTN_QUICK_KEEP;
        if (index < -1)
            return TTN_QUICK_SLOW;
        slot = st->target.indexed ? index + 1 : 0;
        if (st->npu_devices[slot] == NULL)
            return TTN_QUICK_SLOW;
        *replacement = *as_device = st->npu_devices[slot];
        return TTN_QUICK_REWRITE;
    }
    if (t == &PyDict_Type || PyUnicode_Check(v))
        return TTN_QUICK_SLOW;
    if (PyBytes_Check(v) && ttn_bytes_may_be_cuda(v))
        return TTN_QUICK_SLOW;
    return TTN_QUICK_KEEP;
}

/* A device specification given as bytes, which torch's builtins and
 * torch.device take as they take a str (and torch's Python functions as
 * they do): its npu spelling, as bytes, for the callee to take or refuse as
 * it would the npu's.  A malformed one is an error where torch parses the
 * argument (parsed), and left to the callee elsewhere (torch.load refuses
 * any bytes). */
static int
map_device_bytes(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
                 ttn_entry *entry, int parsed)
{
    PyObject *npu;
    Py_ssize_t len;
    const char *s;
    int index;

    if (!ttn_bytes_may_be_cuda(value))
        return 0;
    switch (ttn_devspec_parse(PyBytes_AS_STRING(value), (size_t)PyBytes_GET_SIZE(value),
                              &index)) {
    case TTN_DEV_CUDA:
        npu = ttn_npu_string(st, index);
        if (npu == NULL || (s = PyUnicode_AsUTF8AndSize(npu, &len)) == NULL)
            return -1;
        *out = PyBytes_FromStringAndSize(s, len);
        return *out == NULL ? -1 : 1;
    case TTN_DEV_INVALID:
        return parsed ? raise_invalid(st, value, argname, entry) : 0;
    default:
        return 0;
    }
}

/* One device specification: a str, bytes or a torch.device. */
static int
map_device_scalar(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
                  ttn_entry *entry, int parsed)
{
    if (PyUnicode_Check(value)) {
        Py_ssize_t len;
        const char *s;
        int index, i;
        PyObject *npu;

        if (!ttn_may_be_cuda(value))
            return 0;
        /* The same string objects come back call after call (constants in
         * the user's code): remembered by identity, no parsing. */
        for (i = 0; i < TTN_STR_CACHE; i++) {
            if (st->str_cache_key[i] == value) {
                *out = Py_NewRef(st->str_cache_value[i]);
                return 1;
            }
        }
        s = PyUnicode_AsUTF8AndSize(value, &len);
        if (s == NULL)
            return -1;
        switch (ttn_devspec_parse(s, (size_t)len, &index)) {
        case TTN_DEV_CUDA:
            npu = ttn_npu_string(st, index);
            if (npu == NULL)
                return -1;
            if (PyUnicode_CheckExact(value)) {
                PyObject *device = NULL;

                if (st->device_type != NULL && (device = ttn_npu_device(st, index)) == NULL)
                    return -1;
                /* Keys are held, so an address is never reused while cached. */
                i = st->str_cache_next;
                st->str_cache_next = (i + 1) % TTN_STR_CACHE;
                Py_XSETREF(st->str_cache_key[i], Py_NewRef(value));
                st->str_cache_value[i] = npu;
                st->str_cache_device[i] = device;
            }
            *out = Py_NewRef(npu);
            return 1;
        case TTN_DEV_INVALID:
            return raise_invalid(st, value, argname, entry);
        default:
            return 0;
        }
    }
    if (st->device_type != NULL && Py_IS_TYPE(value, st->device_type))
        return map_device_object(st, value, out);
    if (PyBytes_Check(value))
        return map_device_bytes(st, value, out, argname, entry, parsed);
    return 0;
}

/* A device map ({'cuda:0': 'cuda:1'}, as map_location takes): every key
 * and value that is a CUDA device is mapped; anything else in it, another
 * dict included, is kept as it is (not a device specification).  A
 * rewritten key is added beside the original, so that storages tagged
 * 'cuda:0' (a CUDA checkpoint) and 'npu:0' (an npu one) both find their
 * entry.  The dict is read through a list of its items: adding to the
 * result hashes keys, which may run code (a str subclass's __hash__) that
 * changes the dict. */
static int
map_device_dict(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
                ttn_entry *entry, int parsed)
{
    PyObject *result = NULL, *items = NULL, *new_key = NULL, *new_item = NULL;
    Py_ssize_t i;
    int changed = 0, rc = -1;

    items = PyDict_Items(value);
    result = items == NULL ? NULL : PyDict_New();
    if (result == NULL)
        goto exit;
    for (i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *pair = PyList_GET_ITEM(items, i), *key, *item;
        int rk, ri;

        Py_INCREF(pair); /* the list may change under code run below */
        key = PyTuple_GET_ITEM(pair, 0);
        item = PyTuple_GET_ITEM(pair, 1);
        rk = map_device_scalar(st, key, &new_key, argname, entry, parsed);
        ri = rk < 0 ? -1 : map_device_scalar(st, item, &new_item, argname, entry, parsed);
        if (ri >= 0) {
            changed |= rk | ri;
            if (PyDict_SetItem(result, key, ri ? new_item : item) < 0 ||
                (rk && PyDict_SetItem(result, new_key, ri ? new_item : item) < 0))
                ri = -1;
        }
        Py_DECREF(pair);
        Py_CLEAR(new_key);
        Py_CLEAR(new_item);
        if (ri < 0)
            goto exit;
    }
    if (changed) {
        *out = result;
        result = NULL;
    }
    rc = changed;

exit:
    Py_XDECREF(items);
    Py_XDECREF(result);
    return rc;
}

int
ttn_map_device_arg(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
                   ttn_entry *entry, int parsed)
{
    if (PyDict_CheckExact(value))
        return map_device_dict(st, value, out, argname, entry, parsed);
    return map_device_scalar(st, value, out, argname, entry, parsed);
}

int
ttn_map_device(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
               ttn_entry *entry)
{
    return ttn_map_device_arg(st, value, out, argname, entry, 1);
}

/* ------------------------------------------------------------------------- */

int
ttn_map_backend(ttn_state *st, PyObject *value, PyObject **out)
{
    char small[128];
    char *buf = small;
    Py_ssize_t len;
    size_t outlen = 0;
    const char *s;
    int rc = -1;

    if (!PyUnicode_Check(value))
        return 0;
    s = PyUnicode_AsUTF8AndSize(value, &len);
    if (s == NULL)
        goto exit;
    /* The rewrite never lengthens the string ("cuda" -> "npu",
     * "nccl" -> "hccl": a target is never longer). */
    if ((size_t)len + 1 > sizeof(small)) {
        buf = PyMem_Malloc((size_t)len + 1);
        if (buf == NULL) {
            PyErr_NoMemory();
            goto exit;
        }
    }
    switch (ttn_backend_rewrite(&st->target, s, (size_t)len, buf, (size_t)len + 1, &outlen)) {
    case TTN_BACKEND_REWRITTEN:
        *out = PyUnicode_FromStringAndSize(buf, (Py_ssize_t)outlen);
        rc = *out == NULL ? -1 : 1;
        break;
    case TTN_BACKEND_UNCHANGED:
        rc = 0;
        break;
    default:
        PyErr_Format(PyExc_SystemError, "backend rewrite overflow for %R", value);
        break;
    }

exit:
    if (buf != small)
        PyMem_Free(buf);
    return rc;
}
