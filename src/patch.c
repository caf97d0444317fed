/* Patching attributes of modules and classes (and entries of dicts such as
 * sys.modules), and putting every original back by identity.
 *
 * A record keeps what the owner itself held under the name (not what
 * getattr returns, which for a class may be inherited or bound), so that
 * restoring either sets that exact object back or deletes the override
 * and lets inheritance show through again.
 */
#include "state.h"

/* ------------------------------------------------------------------------- */

/* The object `owner` itself holds under `name` (new reference), NULL if it
 * holds none (inherited or absent).  A function's attribute (its
 * __defaults__, say) is its own.  -1 on error. */
static int
own_attribute(PyObject *owner, PyObject *name, PyObject **out)
{
    PyObject *dict = NULL;

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
    return PyObject_SetAttr(owner, name, value);
}

static int
del_slot(PyObject *owner, PyObject *name)
{
    if (PyDict_Check(owner))
        return PyDict_DelItem(owner, name);
    return PyObject_DelAttr(owner, name);
}

/* ------------------------------------------------------------------------- */

int
ttn_patch_apply(ttn_state *st, PyObject *owner, PyObject *name, PyObject *replacement)
{
    PyObject *original = NULL, *record = NULL;
    int rc = -1;

    if (own_attribute(owner, name, &original) < 0)
        goto exit;
    /* (owner, name, original, held): when the owner held nothing of its
     * own, restoring deletes the override instead of setting a value. */
    record = PyTuple_Pack(4, owner, name, original != NULL ? original : Py_None,
                          original != NULL ? Py_True : Py_False);
    if (record == NULL)
        goto exit;
    if (set_slot(owner, name, replacement) < 0)
        goto exit;
    if (PyList_Append(st->patches, record) < 0) {
        /* Undo now: a patch that is not recorded could never be undone. */
        PyObject *type, *value, *tb;

        PyErr_Fetch(&type, &value, &tb);
        if (original != NULL)
            (void)set_slot(owner, name, original);
        else
            (void)del_slot(owner, name);
        PyErr_Restore(type, value, tb);
        goto exit;
    }
    rc = 0;

exit:
    Py_XDECREF(original);
    Py_XDECREF(record);
    return rc;
}

/* ------------------------------------------------------------------------- */

int
ttn_patch_restore_all(ttn_state *st)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    Py_ssize_t i;
    int failed = 0;

    /* Newest first, so that an attribute patched twice ends as it began. */
    for (i = PyList_GET_SIZE(st->patches) - 1; i >= 0; i--) {
        PyObject *record = PyList_GET_ITEM(st->patches, i);
        PyObject *owner = PyTuple_GET_ITEM(record, 0);
        PyObject *name = PyTuple_GET_ITEM(record, 1);
        int r;

        if (PyTuple_GET_ITEM(record, 3) == Py_True)
            r = set_slot(owner, name, PyTuple_GET_ITEM(record, 2));
        else
            r = del_slot(owner, name);
        if (r < 0) {
            /* Keep restoring the rest; report the first failure. */
            if (!failed)
                PyErr_Fetch(&type, &value, &tb);
            else
                PyErr_Clear();
            failed = 1;
        }
    }
    if (PyList_SetSlice(st->patches, 0, PyList_GET_SIZE(st->patches), NULL) < 0 && !failed) {
        PyErr_Fetch(&type, &value, &tb);
        failed = 1;
    }
    if (failed)
        PyErr_Restore(type, value, tb);
    return failed ? -1 : 0;
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
    /* Collect first, patch after: the dict must not change while walked. */
    while (PyDict_Next(dict, &pos, &key, &value)) {
        /* Only callables are ever replaced: skip the rest without a lookup. */
        if (!(PyCFunction_Check(value) || PyFunction_Check(value) || PyType_Check(value) ||
              Py_IS_TYPE(value, &PyMethodDescr_Type)))
            continue;
        if (!PyUnicode_Check(key) || ttn_ptrmap_get(&st->replacements, value) == NULL)
            continue;
        if (found == NULL && (found = PyList_New(0)) == NULL)
            goto exit;
        if (PyList_Append(found, key) < 0)
            goto exit;
    }
    count = 0;
    for (i = 0; found != NULL && i < PyList_GET_SIZE(found); i++) {
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
            count = -1;
            goto exit;
        }
        count++;
    }

exit:
    Py_XDECREF(found);
    return count;
}
