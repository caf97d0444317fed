/* The import hook: rows for modules that are not imported yet.
 *
 * A row may name its owner by path, "package.module" or
 * "package.module:Class.attr".  When that module is not in sys.modules at
 * enable(), the row waits here; a finder on sys.meta_path sees the module's
 * spec found and wraps its loader's exec_module, so that the row is
 * installed the moment the module has executed (wrapt's post-import hooks:
 * one finder, inserted once; an in-progress guard against finding
 * ourselves; the hook runs after the module, never inside its lock).
 */
#include "patcher.h"

#include <structmember.h>

/* ------------------------------------------------------------------------- */

/* Resolve "package.module[:attr.path]": 1 and the object when the module is
 * imported, 0 when it is not yet (the module's name is returned either
 * way), -1 on error (an attribute path that does not resolve raises
 * AttributeError).  A path names torch's own objects, so a wrapper of ours
 * met on the way (GradScaler.__init__, whose defaults a row replaces) is
 * looked through. */
int
ttn_resolve_owner(ttn_state *st, PyObject *spec, PyObject **owner, PyObject **module_name)
{
    PyObject *modname = NULL, *obj = NULL, *part;
    Py_ssize_t len, colon, start, dot;
    int rc = -1;

    *owner = NULL;
    *module_name = NULL;
    if (PyUnicode_READY(spec) < 0)
        goto exit;
    len = PyUnicode_GET_LENGTH(spec);
    colon = PyUnicode_FindChar(spec, ':', 0, len, 1);
    if (colon == -2)
        goto exit;
    modname = colon < 0 ? Py_NewRef(spec) : PyUnicode_Substring(spec, 0, colon);
    if (modname == NULL)
        goto exit;
    obj = PyDict_GetItemWithError(PyImport_GetModuleDict(), modname);
    if (obj == NULL) {
        if (PyErr_Occurred())
            goto exit;
        /* Not imported yet: the caller defers the row. */
        *module_name = Py_NewRef(modname);
        rc = 0;
        goto exit;
    }
    Py_INCREF(obj);
    for (start = colon + 1; colon >= 0; start = dot + 1) {
        dot = PyUnicode_FindChar(spec, '.', start, len, 1);
        if (dot == -2)
            goto exit;
        part = PyUnicode_Substring(spec, start, dot < 0 ? len : dot);
        if (part == NULL)
            goto exit;
        Py_SETREF(obj, PyObject_GetAttr(obj, part));
        Py_DECREF(part);
        if (obj == NULL)
            goto exit;
        Py_SETREF(obj, Py_NewRef(ttn_unwrap(st, obj)));
        if (dot < 0)
            break;
    }
    *owner = obj;
    obj = NULL;
    *module_name = Py_NewRef(modname);
    rc = 1;

exit:
    Py_XDECREF(modname);
    Py_XDECREF(obj);
    return rc;
}

/* ========================================================================= */
/* The loader's exec_module, followed by the module's deferred rows. */

typedef struct {
    PyObject_HEAD
    PyObject *module; /* transfer_to_npu._C */
    PyObject *exec_module;
    PyObject *name;
} PostImportObject;

static PyObject *
PostImport_call(PostImportObject *self, PyObject *args, PyObject *kwargs)
{
    ttn_state *st = ttn_get_state(self->module);
    PyObject *result = PyObject_Call(self->exec_module, args, kwargs);

    if (result == NULL || !st->enabled)
        return result;
    if (ttn_install_deferred(self->module, st, self->name) < 0)
        Py_CLEAR(result);
    return result;
}

static int
PostImport_traverse(PostImportObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->module);
    Py_VISIT(self->exec_module);
    Py_VISIT(self->name);
    return 0;
}

static int
PostImport_clear(PostImportObject *self)
{
    Py_CLEAR(self->module);
    Py_CLEAR(self->exec_module);
    Py_CLEAR(self->name);
    return 0;
}

static void
PostImport_dealloc(PostImportObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    PostImport_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyType_Slot post_import_slots[] = {
    {Py_tp_call, PostImport_call},
    {Py_tp_traverse, PostImport_traverse},
    {Py_tp_clear, PostImport_clear},
    {Py_tp_dealloc, PostImport_dealloc},
    {0, NULL},
};

PyType_Spec ttn_post_import_spec = {
    .name = "transfer_to_npu._C.PostImport",
    .basicsize = sizeof(PostImportObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = post_import_slots,
};

/* ========================================================================= */
/* The finder. */

typedef struct {
    PyObject_HEAD
    PyObject *module; /* transfer_to_npu._C */
    PyObject *busy;   /* names being looked up by us: set */
} ImportHookObject;

/* The spec the other finders on sys.meta_path find, or None. */
static PyObject *
find_with_others(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *meta_path, *finders = NULL, *spec = NULL;
    Py_ssize_t i;

    meta_path = PySys_GetObject("meta_path");
    if (meta_path == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sys.meta_path is missing");
        goto exit;
    }
    finders = PySequence_List(meta_path);
    if (finders == NULL)
        goto exit;
    for (i = 0; i < PyList_GET_SIZE(finders); i++) {
        PyObject *finder = PyList_GET_ITEM(finders, i), *find;

        if (finder == self)
            continue;
        find = PyObject_GetAttrString(finder, "find_spec");
        if (find == NULL) {
            /* A legacy finder without find_spec: not ours to judge. */
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                goto exit;
            PyErr_Clear();
            continue;
        }
        spec = PyObject_Vectorcall(find, args, (size_t)nargs, NULL);
        Py_DECREF(find);
        if (spec == NULL)
            goto exit;
        if (spec != Py_None)
            goto exit;
        Py_CLEAR(spec);
    }
    spec = Py_NewRef(Py_None);

exit:
    Py_XDECREF(finders);
    return spec;
}

static PyObject *
ImportHook_find_spec(ImportHookObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    ttn_state *st = ttn_get_state(self->module);
    PyObject *name, *spec = NULL, *loader = NULL, *exec = NULL;
    PostImportObject *post = NULL;
    int deferred, busy;

    if (nargs < 1 || nargs > 3 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "find_spec(fullname, path=None, target=None)");
        return NULL;
    }
    name = args[0];
    deferred = st->enabled && st->deferred != NULL ? PyDict_Contains(st->deferred, name) : 0;
    if (deferred <= 0)
        return deferred < 0 ? NULL : Py_NewRef(Py_None);
    busy = PySet_Contains(self->busy, name);
    if (busy != 0)
        return busy < 0 ? NULL : Py_NewRef(Py_None);
    if (PySet_Add(self->busy, name) < 0)
        return NULL;
    spec = find_with_others((PyObject *)self, args, nargs);
    if (PySet_Discard(self->busy, name) < 0)
        Py_CLEAR(spec);
    if (spec == NULL || spec == Py_None)
        goto exit;
    loader = PyObject_GetAttrString(spec, "loader");
    if (loader == NULL)
        goto error;
    /* A loader that is a class serves every module of its kind: leave it. */
    if (loader == Py_None || PyType_Check(loader))
        goto exit;
    exec = PyObject_GetAttrString(loader, "exec_module");
    if (exec == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto error;
        PyErr_Clear();
        goto exit;
    }
    post = PyObject_GC_New(PostImportObject, st->post_import_type);
    if (post == NULL)
        goto error;
    post->module = Py_NewRef(self->module);
    post->exec_module = Py_NewRef(exec);
    post->name = Py_NewRef(name);
    PyObject_GC_Track(post);
    if (PyObject_SetAttrString(loader, "exec_module", (PyObject *)post) < 0)
        goto error;
    goto exit;

error:
    Py_CLEAR(spec);

exit:
    Py_XDECREF(loader);
    Py_XDECREF(exec);
    Py_XDECREF((PyObject *)post);
    return spec;
}

static PyObject *
ImportHook_repr(ImportHookObject *self)
{
    return PyUnicode_FromString("<transfer_to_npu import hook>");
}

static int
ImportHook_traverse(ImportHookObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->module);
    Py_VISIT(self->busy);
    return 0;
}

static int
ImportHook_clear(ImportHookObject *self)
{
    Py_CLEAR(self->module);
    Py_CLEAR(self->busy);
    return 0;
}

static void
ImportHook_dealloc(ImportHookObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    ImportHook_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMethodDef ImportHook_methods[] = {
    {"find_spec", (PyCFunction)(void (*)(void))ImportHook_find_spec, METH_FASTCALL,
     "Finds nothing itself: wraps the loader of a module that has rows waiting for it."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot import_hook_slots[] = {
    {Py_tp_methods, ImportHook_methods},
    {Py_tp_repr, ImportHook_repr},
    {Py_tp_traverse, ImportHook_traverse},
    {Py_tp_clear, ImportHook_clear},
    {Py_tp_dealloc, ImportHook_dealloc},
    {0, NULL},
};

PyType_Spec ttn_import_hook_spec = {
    .name = "transfer_to_npu._C.ImportHook",
    .basicsize = sizeof(ImportHookObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = import_hook_slots,
};

/* ------------------------------------------------------------------------- */

int
ttn_import_hook_install(PyObject *module, ttn_state *st)
{
    PyObject *meta_path;
    ImportHookObject *hook;
    int found;

    if (st->import_hook == NULL) {
        hook = PyObject_GC_New(ImportHookObject, st->import_hook_type);
        if (hook == NULL)
            return -1;
        hook->module = Py_NewRef(module);
        hook->busy = PySet_New(NULL);
        PyObject_GC_Track(hook);
        st->import_hook = (PyObject *)hook;
        if (hook->busy == NULL)
            return -1;
    }
    meta_path = PySys_GetObject("meta_path");
    if (meta_path == NULL || !PyList_Check(meta_path)) {
        PyErr_SetString(PyExc_RuntimeError, "sys.meta_path is not a list");
        return -1;
    }
    found = PySequence_Contains(meta_path, st->import_hook);
    if (found != 0)
        return found < 0 ? -1 : 0;
    return PyList_Insert(meta_path, 0, st->import_hook);
}

int
ttn_import_hook_remove(ttn_state *st)
{
    PyObject *meta_path = PySys_GetObject("meta_path");
    Py_ssize_t i;

    if (st->import_hook == NULL || meta_path == NULL || !PyList_Check(meta_path))
        return 0;
    for (i = PyList_GET_SIZE(meta_path) - 1; i >= 0; i--) {
        if (PyList_GET_ITEM(meta_path, i) == st->import_hook &&
            PySequence_DelItem(meta_path, i) < 0)
            return -1;
    }
    return 0;
}
