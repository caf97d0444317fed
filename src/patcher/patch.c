/* Patching attributes of modules and classes (and entries of mappings such
 * as sys.modules and os.environ), and putting every original back by
 * identity.
 *
 * A record keeps what the owner itself held under the name (not what
 * getattr returns, which for a class may be inherited or bound), so that
 * restoring either sets that exact object back or deletes the override
 * and lets inheritance show through again.  It also keeps what the patch
 * put there: what the script has changed since (an attribute it bound, an
 * environment variable it set or unset) is the script's, and stays.
 */
#include "patcher.h"

/* ------------------------------------------------------------------------- */

/* Whether owner's entries are patched rather than its attributes: a
 * mapping that is not a dict (os.environ), whose assignments may do more
 * than store (putenv). */
static int
is_mapping(PyObject *owner)
{
    return !PyDict_Check(owner) && !PyType_Check(owner) && !PyModule_Check(owner) &&
           !PyFunction_Check(owner) && PyMapping_Check(owner);
}

/* The object `owner` itself holds under `name` (new reference), NULL if it
 * holds none (inherited or absent).  A function's attribute (its
 * __defaults__, say) is its own.  -1 on error. */
static int
own_attribute(PyObject *owner, PyObject *name, PyObject **out)
{
    PyObject *dict = NULL;

    if (is_mapping(owner)) {
        *out = PyObject_GetItem(owner, name);
        if (*out != NULL || !PyErr_ExceptionMatches(PyExc_KeyError))
            return *out == NULL ? -1 : 0;
        PyErr_Clear();
        return 0;
    }
    *out = NULL;
    if (PyType_Check(owner))
        dict = ((PyTypeObject *)owner)->tp_dict;
    else if (PyModule_Check(owner))
        dict = PyModule_GetDict(owner);
    else if (PyDict_Check(owner))
        dict = owner;
    else if (PyFunction_Check(owner)) {
        *out = PyObject_GetAttr(owner, name);
        return *out == NULL ? -1 : 0;
    }
    if (dict == NULL) {
        PyErr_Format(PyExc_TypeError, "cannot patch %R: not a module, class, dict or function",
                     owner);
        return -1;
    }
    *out = PyDict_GetItemWithError(dict, name);
    if (*out == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(*out);
    return 0;
}

static int
set_slot(PyObject *owner, PyObject *name, PyObject *value)
{
    if (PyDict_Check(owner))
        return PyDict_SetItem(owner, name, value);
    if (is_mapping(owner))
        return PyObject_SetItem(owner, name, value);
    return PyObject_SetAttr(owner, name, value);
}

static int
del_slot(PyObject *owner, PyObject *name)
{
    if (PyDict_Check(owner))
        return PyDict_DelItem(owner, name);
    if (is_mapping(owner))
        return PyObject_DelItem(owner, name);
    return PyObject_DelAttr(owner, name);
}

/* ------------------------------------------------------------------------- */

/* Records are kept in a C array rather than as tuples in a list: an
 * import makes some three hundred, and each tuple was an object for the
 * collector to track and, now and then, to scan. */
static int
record(ttn_state *st, PyObject *owner, PyObject *name, PyObject *original,
       PyObject *replacement)
{
    ttn_patch *r;

    if (st->npatches == st->patches_cap) {
        Py_ssize_t cap = st->patches_cap ? st->patches_cap * 2 : 512;
        ttn_patch *grown = PyMem_Realloc(st->patches, sizeof(ttn_patch) * (size_t)cap);

        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        st->patches = grown;
        st->patches_cap = cap;
    }
    r = &st->patches[st->npatches++];
    r->owner = Py_NewRef(owner);
    r->name = Py_NewRef(name);
    r->original = Py_XNewRef(original);
    r->replacement = Py_NewRef(replacement);
    return 0;
}

static void
record_clear(ttn_patch *r)
{
    Py_CLEAR(r->owner);
    Py_CLEAR(r->name);
    Py_CLEAR(r->original);
    Py_CLEAR(r->replacement);
}

int
ttn_patch_apply(ttn_state *st, PyObject *owner, PyObject *name, PyObject *replacement)
{
    PyObject *original = NULL;
    int rc = -1;

    if (own_attribute(owner, name, &original) < 0)
        goto exit;
    /* Recorded first: a patch that is not recorded could never be undone.
     * When the owner held nothing of its own (original NULL), restoring
     * deletes the override instead of setting a value. */
    if (record(st, owner, name, original, replacement) < 0)
        goto exit;
    if (set_slot(owner, name, replacement) < 0) {
        /* The record just made (enable() and disable() refuse to run
         * meanwhile, so it is still the last). */
        record_clear(&st->patches[--st->npatches]);
        goto exit;
    }
    rc = 0;

exit:
    Py_XDECREF(original);
    return rc;
}

/* ------------------------------------------------------------------------- */

/* Whether the owner still holds what the patch put there: the same object,
 * or for a mapping's entry an equal value (os.environ makes a new str at
 * each read).  0 when the script has changed or removed it since. */
static int
still_patched(ttn_patch *r)
{
    PyObject *current = NULL;
    int rc;

    if (own_attribute(r->owner, r->name, &current) < 0)
        return -1;
    if (current == NULL)
        return 0;
    rc = current == r->replacement ? 1
         : is_mapping(r->owner) ? PyObject_RichCompareBool(current, r->replacement, Py_EQ)
                                : 0;
    Py_DECREF(current);
    return rc;
}

int
ttn_patch_restore_all(ttn_state *st)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    ttn_patch *records = st->patches;
    Py_ssize_t i;
    int failed = 0;

    /* Taken from the state first: restoring runs code (a class's
     * __setattr__) that may patch again. */
    i = st->npatches;
    st->patches = NULL;
    st->npatches = st->patches_cap = 0;
    /* Newest first, so that an attribute patched twice ends as it began. */
    while (--i >= 0) {
        ttn_patch *r = &records[i];
        int rc = still_patched(r);

        if (rc > 0)
            rc = r->original != NULL ? set_slot(r->owner, r->name, r->original)
                                     : del_slot(r->owner, r->name);
        if (rc < 0) {
            /* Keep restoring the rest; report the first failure. */
            if (!failed)
                PyErr_Fetch(&type, &value, &tb);
            else
                PyErr_Clear();
            failed = 1;
        }
        record_clear(r);
    }
    PyMem_Free(records);
    if (failed)
        PyErr_Restore(type, value, tb);
    return failed ? -1 : 0;
}

int
ttn_patches_traverse(ttn_state *st, visitproc visit, void *arg)
{
    Py_ssize_t i;

    for (i = 0; i < st->npatches; i++) {
        Py_VISIT(st->patches[i].owner);
        Py_VISIT(st->patches[i].name);
        Py_VISIT(st->patches[i].original);
        Py_VISIT(st->patches[i].replacement);
    }
    return 0;
}

void
ttn_patches_clear(ttn_state *st)
{
    ttn_patch *records = st->patches;
    Py_ssize_t i = st->npatches;

    st->patches = NULL;
    st->npatches = st->patches_cap = 0;
    while (--i >= 0)
        record_clear(&records[i]);
    PyMem_Free(records);
}

/* ------------------------------------------------------------------------- */

Py_ssize_t
ttn_rebind(ttn_state *st, PyObject *module)
{
    PyObject *dict, *key, *value, *found = NULL;
    Py_ssize_t pos = 0, i, count = -1;

    /* A module that is not a plain module has nothing of ours to rebind. */
    if (!PyModule_Check(module))
        return 0;
    dict = PyModule_GetDict(module);
    /* Collect first, patch after: the dict must not change while walked,
     * so nothing the collector tracks is made during the walk (a
     * collection may run finalisers, which may change the dict). */
    found = PyList_New(0);
    if (found == NULL)
        goto exit;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        /* Only callables are ever replaced: skip the rest without a lookup. */
        if (!(PyCFunction_Check(value) || PyFunction_Check(value) || PyType_Check(value) ||
              Py_IS_TYPE(value, &PyMethodDescr_Type)))
            continue;
        if (!PyUnicode_Check(key) || ttn_ptrmap_get(&st->replacements, value) == NULL)
            continue;
        if (PyList_Append(found, key) < 0)
            goto exit;
    }
    count = 0;
    for (i = 0; i < PyList_GET_SIZE(found); i++) {
        PyObject *name = PyList_GET_ITEM(found, i);
        PyObject *current = PyDict_GetItemWithError(dict, name), *replacement;

        if (current == NULL) {
            if (PyErr_Occurred()) {
                count = -1;
                goto exit;
            }
            continue;
        }
        replacement = ttn_ptrmap_get(&st->replacements, current);
        if (replacement == NULL)
            continue;
        if (ttn_patch_apply(st, module, name, replacement) < 0) {
            /* A module that refuses the attribute (its own __setattr__)
             * keeps the name it bound: rebinding is a courtesy. */
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                count = -1;
                goto exit;
            }
            PyErr_Clear();
            continue;
        }
        count++;
    }

exit:
    Py_XDECREF(found);
    return count;
}
