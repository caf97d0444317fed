/* Patching attributes of modules and classes, and putting every original
 * back by identity.
 *
 * A record keeps what the owner itself held under the name (not what
 * getattr returns, which for a class may be inherited or bound), so that
 * restoring either sets that exact object back or deletes the override
 * and lets inheritance show through again.
 */
#include "state.h"

/* ------------------------------------------------------------------------- */

/* The object `owner` itself holds under `name` (borrowed), NULL if it holds
 * none (inherited or absent).  -1 on error. */
static int
own_attribute(PyObject *owner, PyObject *name, PyObject **out)
{
    PyObject *dict = NULL;

    *out = NULL;
    if (PyType_Check(owner))
        dict = ((PyTypeObject *)owner)->tp_dict;
    else if (PyModule_Check(owner))
        dict = PyModule_GetDict(owner);
    if (dict == NULL) {
        PyErr_Format(PyExc_TypeError, "cannot patch %R: not a module or a class", owner);
        return -1;
    }
    *out = PyDict_GetItemWithError(dict, name);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
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
    if (PyObject_SetAttr(owner, name, replacement) < 0)
        goto exit;
    if (PyList_Append(st->patches, record) < 0) {
        /* Undo now: a patch that is not recorded could never be undone. */
        PyObject *type, *value, *tb;

        PyErr_Fetch(&type, &value, &tb);
        if (original != NULL)
            (void)PyObject_SetAttr(owner, name, original);
        else
            (void)PyObject_DelAttr(owner, name);
        PyErr_Restore(type, value, tb);
        goto exit;
    }
    rc = 0;

exit:
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
            r = PyObject_SetAttr(owner, name, PyTuple_GET_ITEM(record, 2));
        else
            r = PyObject_DelAttr(owner, name);
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
