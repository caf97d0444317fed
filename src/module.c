/* transfer_to_npu._C: module definition (PEP 489 multi-phase init), the
 * enable/disable entry points and the table's Python view. */
#include "state.h"
#include "patcher/patcher.h"
#include "virtual/virtual.h"
#include "accuracy/accuracy.h"

#include <structmember.h>

/* ------------------------------------------------------------------------- */

ttn_state *
ttn_get_state(PyObject *module)
{
    return (ttn_state *)PyModule_GetState(module);
}

/* ------------------------------------------------------------------------- */

/* What a row's reference names: "module:attr.path", or "module:factory()"
 * for what factory(original) makes (a rule's function around torch's).  A
 * new reference, or NULL with an error set. */
PyObject *
ttn_resolve_ref(ttn_state *st, PyObject *ref, PyObject *original)
{
    if (st->resolver == NULL) {
        PyErr_Format(PyExc_RuntimeError, "cannot resolve %R: enable() was given no resolver",
                     ref);
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(st->resolver, ref, original, NULL);
}

/* Whether a row's target, in this mode, is a reference rather than the
 * object: a str, where the object would be a callable, a class or a
 * replacing value (an attribute row's str is a name, an argument's a
 * value). */
static int
is_ref(int mode, PyObject *target_obj)
{
    switch (mode) {
    case TTN_MODE_REDIRECT:
    case TTN_MODE_HOOK:
    case TTN_MODE_UNSUPPORTED:
    case TTN_MODE_REPLACE:
    case TTN_MODE_CLASS_DEVICE:
        return PyUnicode_Check(target_obj);
    default:
        return 0;
    }
}

/* The keyword names of a row, interned so that wrappers compare them by
 * identity with the names of a call: the row's own tuple when its names are
 * interned already (rows read from the table's file share one), else a
 * tuple of the interned names. */
static PyObject *
interned_names(PyObject *names)
{
    static const char bad[] = "device keywords must be a tuple of str";
    PyObject *result = NULL, *name;
    Py_ssize_t i, n;
    int same = PyTuple_CheckExact(names);

    if (!PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, bad);
        goto exit;
    }
    n = PyTuple_GET_SIZE(names);
    for (i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, bad);
            goto exit;
        }
        name = Py_NewRef(PyTuple_GET_ITEM(names, i));
        PyUnicode_InternInPlace(&name);
        same &= name == PyTuple_GET_ITEM(names, i);
        Py_DECREF(name);
    }
    if (same) {
        result = Py_NewRef(names);
        goto exit;
    }
    result = PyTuple_New(n);
    if (result == NULL)
        goto exit;
    for (i = 0; i < n; i++) {
        name = Py_NewRef(PyTuple_GET_ITEM(names, i));
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(result, i, name);
    }

exit:
    return result;
}

static int
defer(ttn_state *st, PyObject *modname, PyObject *row)
{
    PyObject *rows = PyDict_GetItemWithError(st->deferred, modname);
    int rc = -1;

    if (rows == NULL) {
        if (PyErr_Occurred())
            return -1;
        rows = PyList_New(0);
        if (rows == NULL)
            return -1;
        if (PyDict_SetItem(st->deferred, modname, rows) < 0)
            goto exit;
    }
    else
        Py_INCREF(rows);
    rc = PyList_Append(rows, row);

exit:
    Py_DECREF(rows);
    return rc;
}

/* The owner the last row named by path: rows come grouped by owner (the
 * factories of torch, the functions of torch.cuda), whose path, interned in
 * the table, is then the same object. */
typedef struct {
    PyObject *spec;  /* strong, or NULL */
    PyObject *owner; /* strong: what spec resolved to */
} ttn_owner_memo;

static void
owner_memo_clear(ttn_owner_memo *memo)
{
    Py_CLEAR(memo->spec);
    Py_CLEAR(memo->owner);
}

static int install_row(PyObject *module, ttn_state *st, PyObject *row, ttn_owner_memo *memo);

/* Field i of a table row as UTF-8 (a str without NULs), or NULL with an
 * error naming the field.  Read in place: a row is hundreds of fields an
 * import, and PyArg_ParseTuple's generic conversion cost it more than the
 * rest of installing it. */
static const char *
row_str(PyObject *row, Py_ssize_t i)
{
    PyObject *v = PyTuple_GET_ITEM(row, i);
    const char *s;
    Py_ssize_t n;

    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "table row field %zd must be str, not %.100s", i,
                     Py_TYPE(v)->tp_name);
        return NULL;
    }
    s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s != NULL && (size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "table row field %zd holds a NUL", i);
        return NULL;
    }
    return s;
}

/* Field i of a table row as an int (mode, pos): -1 with an error set on
 * failure, which no valid field is but pos, checked by the caller. */
static int
row_int(PyObject *row, Py_ssize_t i, int *out)
{
    PyObject *v = PyTuple_GET_ITEM(row, i);
    long value;

    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "table row field %zd must be int, not %.100s", i,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    value = PyLong_AsLong(v);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < INT_MIN || value > INT_MAX) {
        PyErr_Format(PyExc_OverflowError, "table row field %zd is out of range", i);
        return -1;
    }
    *out = (int)value;
    return 0;
}

/* Field i of a table row as a truth value, 0 when the row stops before. */
static int
row_flag(PyObject *row, Py_ssize_t i)
{
    return i < PyTuple_GET_SIZE(row) ? PyObject_IsTrue(PyTuple_GET_ITEM(row, i)) : 0;
}

/* Install one row of the table:
 *   (source, target, kind, mode, owner, name, target_obj, pos, binds, kws[,
 *    device_objects[, current_index]])
 * where kws names the keyword arguments that take a device, device_objects
 * says that torch parses them as a torch.device, and current_index that an
 * index-less device gets the current device's index (see _row.py). */
/* TorchScript knows torch's builtins by identity (torch.jit._builtins: a
 * dict from id() to the op's name, and a list that keeps them alive): a
 * wrapper of one is entered there as the op its original is, before it is
 * put in place, so that code compiled meanwhile (another thread's import of
 * torch.distributed.optim) never meets a wrapper TorchScript does not know.
 * The list keeps the wrapper alive, so that its id stays its own. */
static int
alias_builtin(ttn_state *st, PyObject *original, PyObject *wrapper)
{
    PyObject *key = NULL, *own = NULL, *value, *pair = NULL;
    int rc = -1, has;

    if (st->builtin_table == NULL)
        return 0;
    key = PyLong_FromVoidPtr(original);
    if (key == NULL)
        goto exit;
    value = PyDict_GetItemWithError(st->builtin_table, key);
    if (value == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto exit;
    }
    Py_INCREF(value); /* the dict may change below */
    own = PyLong_FromVoidPtr(wrapper);
    has = own == NULL ? -1 : PyDict_Contains(st->builtin_table, own);
    if (has == 0) {
        pair = PyTuple_Pack(2, wrapper, value);
        if (pair == NULL || PyList_Append(st->builtin_pairs, pair) < 0 ||
            PyDict_SetItem(st->builtin_table, own, value) < 0)
            has = -1;
    }
    Py_DECREF(value);
    rc = has < 0 ? -1 : 0;

exit:
    Py_XDECREF(key);
    Py_XDECREF(own);
    Py_XDECREF(pair);
    return rc;
}

/* ------------------------------------------------------------------------- */

static int
install_row(PyObject *module, ttn_state *st, PyObject *row, ttn_owner_memo *memo)
{
    const char *source, *target, *kind;
    PyObject *owner, *name, *target_obj, *kws, *original = NULL, *replacement = NULL;
    PyObject *device_kws = NULL, *resolved = NULL, *modname = NULL, *target_ref = NULL;
    PyObject *found = NULL;
    PyObject *inner = NULL; /* borrowed from original */
    int mode, pos, binds, device_objects = 0, current_index = 0, rc = -1;
    ttn_entry *entry;

    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 10 || PyTuple_GET_SIZE(row) > 12) {
        PyErr_Format(PyExc_TypeError, "a table row is a tuple of 10 to 12 fields, not %R", row);
        goto exit;
    }
    source = row_str(row, 0);
    target = source == NULL ? NULL : row_str(row, 1);
    kind = target == NULL ? NULL : row_str(row, 2);
    if (kind == NULL || row_int(row, 3, &mode) < 0 || row_int(row, 7, &pos) < 0)
        goto exit;
    owner = PyTuple_GET_ITEM(row, 4);
    name = PyTuple_GET_ITEM(row, 5);
    target_obj = PyTuple_GET_ITEM(row, 6);
    kws = PyTuple_GET_ITEM(row, 9);
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "%s: the attribute name must be str, not %.100s", source,
                     Py_TYPE(name)->tp_name);
        goto exit;
    }
    if ((binds = row_flag(row, 8)) < 0 || (device_objects = row_flag(row, 10)) < 0 ||
        (current_index = row_flag(row, 11)) < 0)
        goto exit;
    if (PyUnicode_Check(owner) && memo != NULL && owner == memo->spec)
        owner = resolved = Py_NewRef(memo->owner);
    else if (PyUnicode_Check(owner)) {
        /* An owner named by path: resolved now, or when its module is
         * imported. */
        PyObject *spec = owner;
        int r = ttn_resolve_owner(st, spec, &resolved, &modname);

        if (r < 0) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                rc = 0;
            }
            goto exit;
        }
        if (r == 0) {
            /* In the table from now on, with no calls yet, so that the table
             * does not change size when the module is imported. */
            if (ttn_table_add(&st->table, source, target, kind, NULL) == NULL) {
                PyErr_NoMemory();
                goto exit;
            }
            rc = defer(st, modname, row);
            goto exit;
        }
        owner = resolved;
        if (memo != NULL) {
            Py_XSETREF(memo->spec, Py_NewRef(spec));
            Py_XSETREF(memo->owner, Py_NewRef(resolved));
        }
    }
    device_kws = interned_names(kws);
    if (device_kws == NULL)
        goto exit;
    if (mode == TTN_MODE_ENVIRON) {
        entry = ttn_table_add(&st->table, source, target, kind, NULL);
        if (entry == NULL) {
            PyErr_NoMemory();
            goto exit;
        }
        rc = ttn_environ_install(st, owner, name, target_obj, entry);
        goto exit;
    }
    if (PyDict_Check(owner)) {
        /* A dict entry (sys.modules): only ever replaced, and may be absent. */
        if (mode != TTN_MODE_REPLACE) {
            PyErr_Format(PyExc_ValueError, "%s: a dict entry can only be replaced", source);
            goto exit;
        }
        original = PyDict_GetItemWithError(owner, name);
        if (original == NULL && PyErr_Occurred())
            goto exit;
        original = Py_NewRef(original != NULL ? original : Py_None);
    }
    else
        original = PyObject_GetAttr(owner, name);
    if (original == NULL) {
        /* Rows are derived from what torch has; one this build of torch
         * lacks is skipped, and that is the only failure skipped.  A value
         * put in place (a renamed module) needs no original. */
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            if (mode != TTN_MODE_REPLACE)
                rc = 0;
            else
                original = Py_NewRef(Py_None);
        }
        if (original == NULL)
            goto exit;
    }
    if (is_ref(mode, target_obj)) {
        /* A wrapper and a constructor find their target at its first use;
         * a value put in place is needed now (before the row has an entry:
         * a row that fails leaves the table as it was). */
        target_ref = target_obj;
        if (mode == TTN_MODE_REPLACE) {
            found = ttn_resolve_ref(st, target_ref, original);
            if (found == NULL)
                goto exit;
            target_obj = found;
            target_ref = NULL;
        }
    }
    entry = ttn_table_add(&st->table, source, target, kind, NULL);
    if (entry == NULL) {
        PyErr_NoMemory();
        goto exit;
    }
    if (mode == TTN_MODE_CONSTRUCTOR) {
        if (!PyType_Check(original)) {
            PyErr_Format(PyExc_TypeError, "%s is not a class", source);
            goto exit;
        }
        Py_XSETREF(st->device_type, (PyTypeObject *)Py_NewRef(original));
        rc = ttn_device_ctor_install(module, st, (PyTypeObject *)original, entry);
        goto exit;
    }
    if (mode == TTN_MODE_CLASS_DEVICE) {
        if (!PyType_Check(original)) {
            PyErr_Format(PyExc_TypeError, "%s is not a class", source);
            goto exit;
        }
        rc = ttn_class_ctor_install(
            module, st, (PyTypeObject *)original,
            target_ref != NULL || target_obj == Py_None ? NULL : target_obj, target_ref,
            current_index, entry);
        goto exit;
    }
    /* One original, one replacement: a function bound under several names
     * (torch.distributed and its c10d module) stays one object. */
    replacement = ttn_ptrmap_get(&st->replacements, original);
    if (replacement != NULL) {
        Py_INCREF(replacement);
        rc = ttn_patch_apply(st, owner, name, replacement);
        goto exit;
    }
    /* Every mode but REPLACE wraps the original itself, never a wrapper
     * left by an earlier enable. */
    if (mode != TTN_MODE_REPLACE)
        inner = ttn_unwrap(st, original);
    switch (mode) {
    case TTN_MODE_DEVICE_ARG:
    case TTN_MODE_BACKEND:
        replacement = ttn_wrapper_new(
            st, binds, inner, inner, NULL, entry, mode, pos, device_kws, NULL,
            (device_objects ? TTN_DEVARG_OBJECTS : 0) | (current_index ? TTN_DEVARG_CURRENT : 0));
        break;
    case TTN_MODE_REDIRECT:
    case TTN_MODE_HOOK:
        replacement = ttn_wrapper_new(st, binds, inner, target_ref == NULL ? target_obj : NULL,
                                      target_ref, entry, mode, pos, device_kws, NULL, 0);
        break;
    case TTN_MODE_UNSUPPORTED:
        /* The stand-in, or the original itself (kept for isinstance) when
         * calling it must fail. */
        replacement = ttn_wrapper_new(st, binds, inner,
                                      target_ref != NULL     ? NULL
                                      : target_obj == Py_None ? inner
                                                              : target_obj,
                                      target_ref, entry, mode, -1, device_kws, NULL, 0);
        break;
    case TTN_MODE_ARG_REPLACE:
        replacement = ttn_wrapper_new(st, binds, inner, inner, NULL, entry, mode, pos,
                                      device_kws, target_obj, 0);
        break;
    case TTN_MODE_ATTRIBUTE:
        if (!PyUnicode_Check(target_obj)) {
            PyErr_Format(PyExc_TypeError, "%s: the target of an attribute row is a name",
                         source);
            goto exit;
        }
        replacement = ttn_attribute_new(st, inner, target_obj, entry);
        break;
    case TTN_MODE_REPLACE:
        replacement = Py_NewRef(target_obj);
        break;
    default:
        PyErr_Format(PyExc_ValueError, "%s: unknown mode %d", source, mode);
        goto exit;
    }
    if (replacement == NULL)
        goto exit;
    /* Callables only: a replaced value (a default, an enum member) may be
     * shared by unrelated names, which rebinding must not touch. */
    if (mode != TTN_MODE_REPLACE && mode != TTN_MODE_ATTRIBUTE) {
        if (alias_builtin(st, inner, replacement) < 0)
            goto exit;
        if (ttn_ptrmap_put(&st->replacements, original, replacement) < 0) {
            PyErr_NoMemory();
            goto exit;
        }
        Py_INCREF(replacement); /* the map's reference */
    }
    rc = ttn_patch_apply(st, owner, name, replacement);

exit:
    Py_XDECREF(found);
    Py_XDECREF(resolved);
    Py_XDECREF(modname);
    Py_XDECREF(device_kws);
    Py_XDECREF(original);
    Py_XDECREF(replacement);
    return rc;
}

/* Install a tuple of rows (its own: installing runs Python code, a
 * resolver, which must not change the rows under it), enable() and
 * disable() refused meanwhile.  -1 with an error set at the first row
 * that fails. */
static int
install_rows(PyObject *module, ttn_state *st, PyObject *rows, ttn_owner_memo *memo)
{
    Py_ssize_t i;
    int rc = 0;

    st->installing++;
    for (i = 0; i < PyTuple_GET_SIZE(rows) && rc == 0; i++)
        rc = install_row(module, st, PyTuple_GET_ITEM(rows, i), memo);
    st->installing--;
    return rc;
}

int
ttn_install_deferred(PyObject *module, ttn_state *st, PyObject *name)
{
    PyObject *rows, *snapshot = NULL;
    int rc = -1;

    rows = PyDict_GetItemWithError(st->deferred, name);
    if (rows == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(rows);
    snapshot = PyList_AsTuple(rows);
    if (snapshot == NULL || PyDict_DelItem(st->deferred, name) < 0)
        goto exit;
    if (install_rows(module, st, snapshot, NULL) < 0) {
        /* The import fails, and importlib forgets the module: the rows
         * wait for it to be imported again. */
        PyObject *type, *value, *tb;

        PyErr_Fetch(&type, &value, &tb);
        if (PyDict_SetItem(st->deferred, name, rows) < 0)
            PyErr_WriteUnraisable(name);
        PyErr_Restore(type, value, tb);
        goto exit;
    }
    rc = 0;

exit:
    Py_XDECREF(snapshot);
    Py_DECREF(rows);
    return rc;
}

static void
release_object(void *obj)
{
    Py_DECREF((PyObject *)obj);
}

static int
uninstall(ttn_state *st)
{
    int rc;

    st->enabled = 0;
    PyDict_Clear(st->deferred);
    if (ttn_import_hook_remove(st) < 0)
        PyErr_WriteUnraisable(NULL);
    ttn_device_ctor_restore(st);
    ttn_class_ctor_restore(st);
    rc = ttn_patch_restore_all(st);
    /* After the records: they hold the originals the map's keys point at. */
    ttn_ptrmap_clear(&st->replacements, release_object);
    return rc;
}

/* All or nothing: an enable() that fails leaves torch as it was, and its
 * error pending. */
static void
undo_enable(ttn_state *st)
{
    PyObject *type, *value, *tb;

    PyErr_Fetch(&type, &value, &tb);
    if (uninstall(st) < 0)
        PyErr_WriteUnraisable(NULL);
    PyErr_Restore(type, value, tb);
}

/* enable() and disable() while rows are being installed (from code a
 * resolver runs) would leave torch half patched. */
static int
refuse_while_installing(ttn_state *st, const char *what)
{
    if (st->installing == 0)
        return 0;
    PyErr_Format(PyExc_RuntimeError, "%s() called while the mapping table is being installed",
                 what);
    return -1;
}

static PyObject *
module_enable(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *rows, *resolver = Py_None, *seq = NULL, *result = NULL;
    PyObject *builtin_table = NULL, *builtin_pairs = NULL;
    ttn_owner_memo memo = {NULL, NULL};

    if (!PyArg_ParseTuple(args, "O|OO!O!:enable", &rows, &resolver, &PyDict_Type,
                          &builtin_table, &PyList_Type, &builtin_pairs))
        return NULL;
    if ((builtin_table == NULL) != (builtin_pairs == NULL)) {
        PyErr_SetString(PyExc_TypeError, "enable(): give both the builtin table and its pairs");
        return NULL;
    }
    if (refuse_while_installing(st, "enable") < 0)
        return NULL;
    if (st->enabled)
        Py_RETURN_NONE;
    if (resolver != Py_None && !PyCallable_Check(resolver)) {
        PyErr_Format(PyExc_TypeError, "enable(): resolver must be callable, not %R", resolver);
        return NULL;
    }
    Py_XSETREF(st->resolver, resolver == Py_None ? NULL : Py_NewRef(resolver));
    Py_XSETREF(st->builtin_table, Py_XNewRef(builtin_table));
    Py_XSETREF(st->builtin_pairs, Py_XNewRef(builtin_pairs));
    seq = PySequence_Tuple(rows);
    if (seq == NULL)
        goto exit;
    if (install_rows(module, st, seq, &memo) < 0) {
        undo_enable(st);
        goto exit;
    }
    /* Enabled before the hook goes in: rows for modules imported from now on
     * are installed by it. */
    st->enabled = 1;
    if (PyDict_GET_SIZE(st->deferred) > 0 && ttn_import_hook_install(module, st) < 0) {
        undo_enable(st);
        goto exit;
    }
    result = Py_NewRef(Py_None);

exit:
    owner_memo_clear(&memo);
    Py_XDECREF(seq);
    return result;
}

/* The rows of environment variables, installed before the rest (before
 * the NPU's runtime starts, which reads its own): their patches are undone
 * with the rest's by disable(), and by an enable() that fails. */
static PyObject *
module_carry(PyObject *module, PyObject *rows)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *seq = NULL, *result = NULL;
    Py_ssize_t i;
    int mode;

    if (refuse_while_installing(st, "carry") < 0)
        return NULL;
    if (st->enabled)
        Py_RETURN_NONE;
    seq = PySequence_Tuple(rows);
    if (seq == NULL)
        goto exit;
    for (i = 0; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *row = PyTuple_GET_ITEM(seq, i);

        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) < 10 || row_int(row, 3, &mode) < 0 ||
            mode != TTN_MODE_ENVIRON) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "carry() takes rows of environment variables, "
                             "not %R", row);
            goto exit;
        }
    }
    if (install_rows(module, st, seq, NULL) < 0)
        goto exit;
    result = Py_NewRef(Py_None);

exit:
    Py_XDECREF(seq);
    return result;
}

static PyObject *
module_disable(PyObject *module, PyObject *unused)
{
    ttn_state *st = ttn_get_state(module);

    (void)unused;
    if (refuse_while_installing(st, "disable") < 0 || uninstall(st) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The part of a module name before its first dot: its length, or -1 with
 * an error set.  Rebinding asks this of every name in sys.modules: an
 * ASCII name is read in place. */
static Py_ssize_t
top_length(PyObject *name)
{
    Py_ssize_t len = PyUnicode_GET_LENGTH(name), dot;

    if (PyUnicode_IS_COMPACT_ASCII(name)) {
        const char *s = (const char *)PyUnicode_DATA(name), *found = memchr(s, '.', (size_t)len);

        return found == NULL ? len : found - s;
    }
    dot = PyUnicode_FindChar(name, '.', 0, len, 1);
    return dot == -2 ? -1 : dot == -1 ? len : dot;
}

/* Whether name starts with prefix: 1, 0, or -1 with an error set. */
static int
starts_with(PyObject *name, PyObject *prefix)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(prefix);

    if (PyUnicode_IS_COMPACT_ASCII(name) && PyUnicode_IS_COMPACT_ASCII(prefix))
        return PyUnicode_GET_LENGTH(name) >= n &&
               memcmp(PyUnicode_DATA(name), PyUnicode_DATA(prefix), (size_t)n) == 0;
    return (int)PyUnicode_Tailmatch(name, prefix, 0, PyUnicode_GET_LENGTH(name), -1);
}

/* Whether two names begin with the same n characters. */
static int
same_start(PyObject *a, PyObject *b, Py_ssize_t n)
{
    int kind = PyUnicode_KIND(a);

    return kind == PyUnicode_KIND(b) && PyUnicode_GET_LENGTH(b) >= n &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

/* Which modules of sys.modules may hold names their code bound: not those
 * of the top-level packages in `skip`, unless under a prefix of `keep`.
 * Names come grouped by package, so the previous name's answer serves the
 * next one of the same package, without making its top-level name. */
typedef struct {
    PyObject *skip, *keep;
    PyObject *last; /* borrowed: the last name decided by its package */
    Py_ssize_t last_top;
    int last_answer;
} ttn_user_filter;

/* 1, 0, or -1 with an error set. */
static int
may_bind_names(ttn_user_filter *f, PyObject *name)
{
    Py_ssize_t i, top;
    PyObject *package;
    int r;

    if (PyUnicode_READY(name) < 0)
        return -1;
    for (i = 0; i < PyTuple_GET_SIZE(f->keep); i++) {
        int match = starts_with(name, PyTuple_GET_ITEM(f->keep, i));

        if (match != 0)
            return match < 0 ? -1 : 1;
    }
    top = top_length(name);
    if (top < 0)
        return -1;
    if (f->last != NULL && top == f->last_top && same_start(name, f->last, top))
        return f->last_answer;
    package = PyUnicode_Substring(name, 0, top);
    if (package == NULL)
        return -1;
    r = PySet_Contains(f->skip, package);
    Py_DECREF(package);
    if (r < 0)
        return -1;
    f->last = name;
    f->last_top = top;
    f->last_answer = !r;
    return !r;
}

static PyObject *
module_rebind(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *modules, *skip, *keep, *chosen = NULL, *result = NULL, *name, *value;
    PyObject *iter = NULL, *item;
    Py_ssize_t i, pos = 0, total = 0;
    ttn_user_filter filter = {NULL, NULL, NULL, 0, 0};

    if (!PyArg_ParseTuple(args, "O!O!O!:rebind", &PyDict_Type, &modules, &PyFrozenSet_Type,
                          &skip, &PyTuple_Type, &keep))
        goto exit;
    for (i = 0; i < PyTuple_GET_SIZE(keep); i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(keep, i))) {
            PyErr_Format(PyExc_TypeError, "rebind(): keep must hold str prefixes, not %R",
                         PyTuple_GET_ITEM(keep, i));
            goto exit;
        }
    }
    /* Exact str only: looking a name up among them then runs no code (see
     * below). */
    iter = PyObject_GetIter(skip);
    if (iter == NULL)
        goto exit;
    while ((item = PyIter_Next(iter)) != NULL) {
        int ok = PyUnicode_CheckExact(item);

        if (!ok)
            PyErr_Format(PyExc_TypeError, "rebind(): skip must hold str package names, not %R",
                         item);
        Py_DECREF(item);
        if (!ok)
            goto exit;
    }
    if (PyErr_Occurred())
        goto exit;
    if (!st->enabled) {
        PyErr_SetString(PyExc_RuntimeError, "rebind(): migration is not enabled");
        goto exit;
    }
    filter.skip = skip;
    filter.keep = keep;
    /* The modules to rebind, then rebinding: setting a module's attribute
     * may run code, which sys.modules must not change under.  Choosing runs
     * none (names are compared with exact str, and nothing the collector
     * tracks is allocated), so it reads sys.modules in place: a copy of a
     * thousand modules' dict would cost more than the few modules chosen. */
    chosen = PyList_New(0);
    if (chosen == NULL)
        goto exit;
    while (PyDict_Next(modules, &pos, &name, &value)) {
        int r;

        if (!PyUnicode_Check(name))
            continue;
        r = may_bind_names(&filter, name);
        if (r < 0 || (r > 0 && PyList_Append(chosen, value) < 0))
            goto exit;
    }
    for (i = 0; i < PyList_GET_SIZE(chosen); i++) {
        Py_ssize_t n;

        /* Setting a module's attribute may run code that must not
         * disable meanwhile. */
        st->installing++;
        n = ttn_rebind(st, PyList_GET_ITEM(chosen, i));
        st->installing--;
        if (n < 0)
            goto exit;
        total += n;
    }
    result = PyLong_FromSsize_t(total);

exit:
    Py_XDECREF(iter);
    Py_XDECREF(chosen);
    return result;
}

/* The wrappers installed: what has to know them (TorchScript's table of
 * builtins, dynamo) finds what each stands for in its __wrapped__. */
static PyObject *
module_installed(PyObject *module, PyObject *unused)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *list;
    const ttn_ptrmap_item *item;
    Py_ssize_t i = 0;

    (void)unused;
    list = PyList_New((Py_ssize_t)ttn_ptrmap_count(&st->replacements));
    if (list == NULL)
        return NULL;
    for (item = st->replacements.items; item != NULL; item = item->hh.next)
        PyList_SET_ITEM(list, i++, Py_NewRef((PyObject *)item->value));
    return list;
}

static PyObject *
module_is_enabled(PyObject *module, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(ttn_get_state(module)->enabled);
}

/* ------------------------------------------------------------------------- */

static PyObject *
entry_dict(const ttn_entry *e)
{
    PyObject *sites = NULL, *result = NULL;
    const ttn_site *s;

    sites = PyList_New(0);
    if (sites == NULL)
        goto exit;
    for (s = e->sites; s != NULL; s = s->hh.next) {
        PyObject *pair = Py_BuildValue("(sK)", s->where, (unsigned long long)s->count);

        if (pair == NULL || PyList_Append(sites, pair) < 0) {
            Py_XDECREF(pair);
            goto exit;
        }
        Py_DECREF(pair);
    }
    result = Py_BuildValue("{sssssssKsO}", "source", e->source, "target", e->target, "kind",
                           e->kind, "calls", (unsigned long long)e->calls, "sites", sites);

exit:
    Py_XDECREF(sites);
    return result;
}

static PyObject *
module_mappings(PyObject *module, PyObject *unused)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *list = NULL, *item = NULL;
    const ttn_entry *e;

    (void)unused;
    list = PyList_New(0);
    if (list == NULL)
        goto error;
    for (e = st->table.entries; e != NULL; e = e->hh.next) {
        item = entry_dict(e);
        if (item == NULL || PyList_Append(list, item) < 0)
            goto error;
        Py_CLEAR(item);
    }
    return list;

error:
    Py_XDECREF(item);
    Py_XDECREF(list);
    return NULL;
}

static PyObject *
module_reset_counts(PyObject *module, PyObject *unused)
{
    (void)unused;
    /* The cache points at sites the reset frees. */
    ttn_site_cache_clear(ttn_get_state(module));
    ttn_table_reset_counts(&ttn_get_state(module)->table);
    Py_RETURN_NONE;
}

/* Drop the target's spellings made so far, and the strings they were
 * made for. */
static void
clear_spellings(ttn_state *st)
{
    int i;

    for (i = 0; i < TTN_NPU_SLOTS; i++) {
        Py_CLEAR(st->npu_strings[i]);
        Py_CLEAR(st->npu_devices[i]);
    }
    for (i = 0; i < TTN_STR_CACHE; i++) {
        Py_CLEAR(st->str_cache_key[i]);
        st->str_cache_value[i] = NULL;
        st->str_cache_device[i] = NULL;
    }
}

/* ------------------------------------------------------------------------- */

/* The target a backend other than the NPU's asks for (the host's, for a
 * reference run): set before enable(); the cached spellings of the
 * previous target are dropped. */
static PyObject *
module_set_target(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    const char *device, *backend;
    int indexed;
    ttn_target target;
    PyObject *name;

    if (!PyArg_ParseTuple(args, "ssp:set_target", &device, &backend, &indexed))
        return NULL;
    if (st->enabled || st->installing) {
        PyErr_SetString(PyExc_RuntimeError, "set_target(): the migration is enabled; "
                                            "disable() it first");
        return NULL;
    }
    if (!ttn_target_set(&target, device, backend, indexed))
        return PyErr_Format(PyExc_ValueError,
                            "set_target(device=%R, backend=%R): each must be 1 to %d "
                            "lower-case letters", PyTuple_GET_ITEM(args, 0),
                            PyTuple_GET_ITEM(args, 1), TTN_TARGET_MAX);
    name = PyUnicode_InternFromString(target.device);
    if (name == NULL)
        return NULL;
    Py_XSETREF(st->str_target, name);
    st->target = target;
    clear_spellings(st);
    Py_RETURN_NONE;
}

/* The device and backend rules of the wrappers, for the static tools
 * (analyze, convert) that rewrite source code: one parser for both. */
static PyObject *
module_npu_device_string(PyObject *module, PyObject *spec)
{
    ttn_state *st = ttn_get_state(module);
    Py_ssize_t len;
    const char *s;
    int index;

    if (!PyUnicode_Check(spec))
        return PyErr_Format(PyExc_TypeError,
                            "npu_device_string(spec): spec must be a str, got %R", spec);
    s = PyUnicode_AsUTF8AndSize(spec, &len);
    if (s == NULL)
        return NULL;
    switch (ttn_devspec_parse(s, (size_t)len, &index)) {
    case TTN_DEV_CUDA:
        return Py_XNewRef(ttn_npu_string(st, index));
    case TTN_DEV_INVALID:
        return PyErr_Format(st->invalid_device_error, "Invalid device string: %R", spec);
    default:
        Py_RETURN_NONE;
    }
}

static PyObject *
module_hccl_backend_string(PyObject *module, PyObject *spec)
{
    PyObject *out = NULL;
    int r;

    if (!PyUnicode_Check(spec))
        return PyErr_Format(PyExc_TypeError,
                            "hccl_backend_string(spec): spec must be a str, got %R", spec);
    r = ttn_map_backend(ttn_get_state(module), spec, &out);
    if (r < 0)
        return NULL;
    return r == 0 ? Py_NewRef(Py_None) : out;
}

/* A call that a rule's function mapped: counted, and its call site
 * recorded, as a wrapper counts its calls.  For the functions of MODE_HOOK
 * rows that map only some of their calls (Tensor.type with a CUDA tensor
 * type): their wrapper counts none. */
static PyObject *
module_hit(PyObject *module, PyObject *source)
{
    ttn_state *st = ttn_get_state(module);
    const char *s;
    ttn_entry *e;

    if (!PyUnicode_Check(source))
        return PyErr_Format(PyExc_TypeError, "hit(source): source must be a str, got %R", source);
    s = PyUnicode_AsUTF8(source);
    if (s == NULL)
        return NULL;
    e = ttn_table_find(&st->table, s);
    if (e == NULL)
        return PyErr_Format(PyExc_KeyError, "hit(source): no row of the table has source %R",
                            source);
    if (st->enabled)
        ttn_hit(st, e);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"enable", module_enable, METH_VARARGS,
     "enable(rows, resolver=None, builtin_table=None, builtin_pairs=None): install every row "
     "of the mapping table (all or nothing); resolver(ref, original) finds what a row names by "
     "reference (see _row.py); wrappers of TorchScript's builtins are entered in its table"},
    {"installed", module_installed, METH_NOARGS,
     "installed() -> list of the wrappers installed"},
    {"disable", module_disable, METH_NOARGS, "disable(): put every original object back"},
    {"carry", module_carry, METH_O,
     "carry(rows): before enable(), install the rows of environment variables (MODE_ENVIRON); "
     "disable() undoes them with the rest"},
    {"is_enabled", module_is_enabled, METH_NOARGS, NULL},
    {"rebind", module_rebind, METH_VARARGS,
     "rebind(modules, skip, keep) -> n: rebind the names bound to a replaced original (bound "
     "before enable(), as `from torch.cuda import synchronize`) in the globals of the modules "
     "of the dict `modules` (sys.modules) but those of the top-level packages in the "
     "frozenset `skip` that are not under a prefix of the tuple `keep`"},
    {"mappings", module_mappings, METH_NOARGS,
     "mappings() -> list of {source, target, kind, calls, sites} in table order"},
    {"reset_counts", module_reset_counts, METH_NOARGS, NULL},
    {"hit", module_hit, METH_O,
     "hit(source): count a call of the row `source` as migrated, at the caller's site (for a "
     "MODE_HOOK row's function that maps only some of its calls)"},
    {"set_target", module_set_target, METH_VARARGS,
     "set_target(device, backend, indexed): before enable(), what CUDA's spellings become "
     "('npu', 'hccl', True by default; 'cpu', 'gloo', False for the host): a device type "
     "and a process-group backend of at most 4 lower-case letters, and whether the device "
     "takes an index"},
    {"npu_device_string", module_npu_device_string, METH_O,
     "npu_device_string(spec) -> 'npu' or 'npu:N' for a CUDA device string ('cuda', 'cuda:N'), "
     "None for any other string; InvalidDeviceError for a malformed CUDA one ('cuda:x')"},
    {"hccl_backend_string", module_hccl_backend_string, METH_O,
     "hccl_backend_string(spec) -> the backend string with NCCL made HCCL ('nccl' -> 'hccl', "
     "'cpu:gloo,cuda:nccl' -> 'cpu:gloo,npu:hccl'), None when there is nothing to rewrite"},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------------------- */

static int
intern(PyObject **slot, const char *s)
{
    *slot = PyUnicode_InternFromString(s);
    return *slot == NULL ? -1 : 0;
}

/* InvalidDeviceError from a spec, as the extension's other types: made by
 * type(), as PyErr_NewException makes a class, it cost the import more
 * than all of them together.  Weak references to it work, as to a class
 * defined in Python. */
typedef struct {
    PyBaseExceptionObject base;
    PyObject *weakreflist;
} InvalidDeviceErrorObject;

static PyMemberDef invalid_device_error_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(InvalidDeviceErrorObject, weakreflist), READONLY},
    {NULL},
};

static PyType_Slot invalid_device_error_slots[] = {
    {Py_tp_doc, (void *)"A device argument names CUDA with a malformed index."},
    {Py_tp_members, invalid_device_error_members},
    {0, NULL},
};

static PyType_Spec invalid_device_error_spec = {
    .name = "transfer_to_npu.InvalidDeviceError",
    .basicsize = sizeof(InvalidDeviceErrorObject),
    /* The collector's flag and functions are the base's, inherited. */
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = invalid_device_error_slots,
};

/* A type of the module, made from its spec (bases: NULL for object) and
 * added under its name. */
static PyTypeObject *
add_type(PyObject *module, PyType_Spec *spec, PyObject *bases)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, bases);

    if (type == NULL)
        return NULL;
    if (PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

static int
module_exec(PyObject *module)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *bases = NULL;
    int rc = -1;

    ttn_table_init(&st->table);
    st->target = ttn_target_npu;
    st->deferred = PyDict_New();
    ttn_ptrmap_init(&st->replacements);
    if (st->deferred == NULL)
        goto exit;
    if (intern(&st->str_device, "device") < 0 || intern(&st->str_backend, "backend") < 0 || intern(&st->str_type, "type") < 0 ||
        intern(&st->str_index, "index") < 0 ||
        intern(&st->str_device_type, "device_type") < 0 || intern(&st->str_cuda, "cuda") < 0 ||
        intern(&st->str_npu, "npu") < 0 || intern(&st->str_target, "npu") < 0 ||
        intern(&st->str_non_blocking, "non_blocking") < 0 ||
        intern(&st->str_memory_format, "memory_format") < 0 ||
        intern(&st->str_pin_memory, "pin_memory") < 0)
        goto exit;
    if (PyThread_tss_create(&st->current_device) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot create the per-thread current npu");
        goto exit;
    }
    st->function_type = add_type(module, &ttn_function_spec, NULL);
    st->method_type = add_type(module, &ttn_method_spec, NULL);
    st->attribute_type = add_type(module, &ttn_attribute_spec, NULL);
    st->import_hook_type = add_type(module, &ttn_import_hook_spec, NULL);
    st->post_import_type = add_type(module, &ttn_post_import_spec, NULL);
    st->npu_method_type = add_type(module, &ttn_npu_method_spec, NULL);
    st->constant_type = add_type(module, &ttn_constant_spec, NULL);
    if (st->function_type == NULL || st->method_type == NULL || st->attribute_type == NULL ||
        st->import_hook_type == NULL || st->post_import_type == NULL ||
        st->npu_method_type == NULL || st->constant_type == NULL)
        goto exit;
    /* Both: torch raises RuntimeError for a bad device string, and users
     * of a parser expect ValueError. */
    bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_RuntimeError);
    if (bases == NULL)
        goto exit;
    st->invalid_device_error = (PyObject *)add_type(module, &invalid_device_error_spec, bases);
    if (st->invalid_device_error == NULL)
        goto exit;
    st->host_ops = PyDict_New();
    st->special_ops = PyDict_New();
    st->ops_by_name = PyDict_New();
    if (st->host_ops == NULL || st->special_ops == NULL || st->ops_by_name == NULL)
        goto exit;
    st->log_fd = -1;
    if (PyModule_AddFunctions(module, ttn_host_alias_methods) < 0 ||
        PyModule_AddFunctions(module, ttn_host_call_methods) < 0 ||
        PyModule_AddFunctions(module, ttn_log_methods) < 0 ||
        PyModule_AddFunctions(module, ttn_rules_methods) < 0 ||
        PyModule_AddFunctions(module, ttn_npu_method_methods) < 0 ||
        PyModule_AddFunctions(module, ttn_callbacks_methods) < 0 ||
        PyModule_AddFunctions(module, ttn_stats_methods) < 0 ||
        ttn_stats_add_constants(module) < 0)
        goto exit;
    if (PyModule_AddIntConstant(module, "MODE_DEVICE_ARG", TTN_MODE_DEVICE_ARG) < 0 ||
        PyModule_AddIntConstant(module, "MODE_REDIRECT", TTN_MODE_REDIRECT) < 0 ||
        PyModule_AddIntConstant(module, "MODE_HOOK", TTN_MODE_HOOK) < 0 ||
        PyModule_AddIntConstant(module, "MODE_BACKEND", TTN_MODE_BACKEND) < 0 ||
        PyModule_AddIntConstant(module, "MODE_ATTRIBUTE", TTN_MODE_ATTRIBUTE) < 0 ||
        PyModule_AddIntConstant(module, "MODE_CONSTRUCTOR", TTN_MODE_CONSTRUCTOR) < 0 ||
        PyModule_AddIntConstant(module, "MODE_CLASS_DEVICE", TTN_MODE_CLASS_DEVICE) < 0 ||
        PyModule_AddIntConstant(module, "MODE_REPLACE", TTN_MODE_REPLACE) < 0 ||
        PyModule_AddIntConstant(module, "MODE_UNSUPPORTED", TTN_MODE_UNSUPPORTED) < 0 ||
        PyModule_AddIntConstant(module, "MODE_ARG_REPLACE", TTN_MODE_ARG_REPLACE) < 0 ||
        PyModule_AddIntConstant(module, "MODE_ENVIRON", TTN_MODE_ENVIRON) < 0 ||
        PyModule_AddIntConstant(module, "MAX_DEVICE_INDEX", TTN_MAX_DEVICE_INDEX) < 0)
        goto exit;
    rc = 0;

exit:
    Py_XDECREF(bases);
    return rc;
}

/* ------------------------------------------------------------------------- */

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    ttn_state *st = ttn_get_state(module);
    int i;

    Py_VISIT(st->function_type);
    Py_VISIT(st->method_type);
    Py_VISIT(st->attribute_type);
    Py_VISIT(st->import_hook_type);
    Py_VISIT(st->post_import_type);
    Py_VISIT(st->npu_method_type);
    Py_VISIT(st->constant_type);
    Py_VISIT(st->import_hook);
    Py_VISIT(st->deferred);
    Py_VISIT(st->resolver);
    Py_VISIT(st->builtin_table);
    Py_VISIT(st->builtin_pairs);
    Py_VISIT(st->invalid_device_error);
    Py_VISIT(st->internal_prefixes);
    for (i = 0; i < TTN_SITE_CACHE; i++)
        Py_VISIT(st->site_cache[i].code);
    Py_VISIT(st->log_path);
    {
        int r = ttn_patches_traverse(st, visit, arg);

        if (r)
            return r;
    }
    {
        ttn_ptrmap_item *item;

        for (item = st->replacements.items; item != NULL; item = item->hh.next)
            Py_VISIT((PyObject *)item->value);
    }
    Py_VISIT(st->device_type);
    Py_VISIT(st->str_target);
    for (i = 0; i < TTN_NPU_SLOTS; i++) {
        Py_VISIT(st->npu_strings[i]);
        Py_VISIT(st->npu_devices[i]);
    }
    for (i = 0; i < TTN_STR_CACHE; i++)
        Py_VISIT(st->str_cache_key[i]);
    Py_VISIT(st->dlpack_capsule);
    Py_VISIT(st->tensor_type);
    Py_VISIT(st->cpu_device);
    Py_VISIT(st->host_ops);
    Py_VISIT(st->special_ops);
    Py_VISIT(st->ops_by_name);
    Py_VISIT(st->resolve);
    Py_VISIT(st->classify);
    Py_VISIT(st->retry);
    Py_VISIT(st->complete);
    Py_VISIT(st->lock_codes);
    Py_VISIT(st->recount);
    Py_VISIT(st->pin_made);
    Py_VISIT(st->pinned);
    return 0;
}

static int
module_clear(PyObject *module)
{
    ttn_state *st = ttn_get_state(module);

    Py_CLEAR(st->function_type);
    Py_CLEAR(st->method_type);
    Py_CLEAR(st->attribute_type);
    Py_CLEAR(st->import_hook_type);
    Py_CLEAR(st->post_import_type);
    Py_CLEAR(st->npu_method_type);
    Py_CLEAR(st->constant_type);
    Py_CLEAR(st->import_hook);
    Py_CLEAR(st->deferred);
    Py_CLEAR(st->resolver);
    Py_CLEAR(st->builtin_table);
    Py_CLEAR(st->builtin_pairs);
    Py_CLEAR(st->invalid_device_error);
    Py_CLEAR(st->str_device);
    Py_CLEAR(st->str_backend);
    Py_CLEAR(st->str_type);
    Py_CLEAR(st->str_index);
    Py_CLEAR(st->str_device_type);
    Py_CLEAR(st->str_cuda);
    Py_CLEAR(st->str_npu);
    Py_CLEAR(st->str_target);
    Py_CLEAR(st->str_non_blocking);
    Py_CLEAR(st->str_memory_format);
    Py_CLEAR(st->str_pin_memory);
    ttn_log_close(st);
    ttn_site_cache_clear(st);
    Py_CLEAR(st->internal_prefixes);
    ttn_ptrmap_clear(&st->replacements, release_object);
    ttn_patches_clear(st);
    Py_CLEAR(st->device_type);
    clear_spellings(st);
    st->dlpack = NULL;
    Py_CLEAR(st->dlpack_capsule);
    Py_CLEAR(st->tensor_type);
    Py_CLEAR(st->cpu_device);
    Py_CLEAR(st->host_ops);
    Py_CLEAR(st->special_ops);
    Py_CLEAR(st->ops_by_name);
    Py_CLEAR(st->resolve);
    Py_CLEAR(st->classify);
    Py_CLEAR(st->retry);
    Py_CLEAR(st->complete);
    Py_CLEAR(st->lock_codes);
    Py_CLEAR(st->recount);
    Py_CLEAR(st->pin_made);
    Py_CLEAR(st->pinned);
    return 0;
}

static void
module_free(void *module)
{
    ttn_state *st = ttn_get_state((PyObject *)module);

    module_clear((PyObject *)module);
    /* Wrappers point into the table and keep this module alive through
     * their type, so no wrapper is left when the table goes. */
    ttn_table_clear(&st->table);
    if (PyThread_tss_is_created(&st->current_device))
        PyThread_tss_delete(&st->current_device);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "transfer_to_npu._C",
    .m_doc = "The C core of transfer_to_npu: the mapping table, the call wrappers and "
             "patches, and the virtual NPU's host-memory kernels.",
    .m_size = sizeof(ttn_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__C(void)
{
    return PyModuleDef_Init(&module_def);
}
