/* torch.Stream(device='cuda'), torch.Event(device='cuda'),
 * torch.Generator(device='cuda'): C classes whose constructor takes a device.
 *
 * Their names must stay the classes (isinstance, subclasses), so, as for
 * torch.device (device_ctor.c), the tp_new slot of each is replaced while
 * migration is enabled, and a CUDA device argument is handed on as the
 * npu's.  A backend whose npu cannot serve torch's own objects (the virtual
 * NPU, a device defined in Python: its events can neither synchronise nor
 * time) names a subclass that can; a constructor call for the npu (an npu
 * device, an index, or none: the accelerator's current device) then makes
 * one of those.  A slot function receives no context, so the installed
 * classes are reached through one process-wide table.
 *
 * Patching the slot serves whatever class torch makes them with: on torch
 * 2.12 and later torch.Generator's class comes from a Python metaclass
 * without a __call__ of its own, before it (and on every torch_npu line)
 * from `type`; both construct through the slot.
 *
 * A subclass without a __new__ of its own copied the slot when it was made:
 * the slot of each is switched along with its base's, so that the user's
 * subclasses are migrated too and CPython's check that a __new__ call goes
 * to the right slot ("X.__new__(Y) is not safe") keeps passing.
 */
#include "patcher.h"

/* Classes one process can have patched (torch.Stream, torch.Event,
 * torch.Generator). */
#define TTN_CLASS_CTORS 4

typedef struct {
    PyObject *module; /* strong while installed: keeps the state below alive */
    ttn_state *state; /* NULL while not installed */
    PyTypeObject *npu_class; /* strong, or NULL: torch's own objects serve */
    PyObject *npu_ref;       /* where npu_class is found, at its first use (its module
                              * loads then); NULL once found or when there is none */
    ttn_entry *entry;
    int none_is_npu; /* a call without a device is for the current device
                      * (Stream, Event), not the CPU (Generator) */
    /* Kept after restore, for good: a subclass made while patched keeps
     * class_new as its slot, and a call already inside class_new (another
     * thread may disable meanwhile) still reaches the original. */
    PyTypeObject *type; /* strong */
    newfunc original_new;
    vectorcallfunc original_vectorcall;
} ttn_class_ctor;

static ttn_class_ctor installed[TTN_CLASS_CTORS];

/* ------------------------------------------------------------------------- */

/* The record of type, or of the patched class it derives from (a subclass
 * made after the patch inherits the slot); NULL for none. */
static ttn_class_ctor *
record_of(PyTypeObject *type)
{
    int i;

    for (i = 0; i < TTN_CLASS_CTORS; i++)
        if (installed[i].type == type)
            return &installed[i];
    for (i = 0; i < TTN_CLASS_CTORS; i++)
        if (installed[i].type != NULL && PyType_IsSubtype(type, installed[i].type))
            return &installed[i];
    return NULL;
}

/* Whether the device a constructor gets (migrated) is the npu: none when
 * the class takes none as the accelerator's current device, an index, an
 * npu spelling or device. */
static int
names_npu(ttn_state *st, PyObject *dev, int none_is_npu)
{
    int type, index;

    if (dev == NULL || dev == Py_None)
        return none_is_npu;
    if (PyLong_Check(dev))
        return !PyBool_Check(dev);
    if (PyUnicode_Check(dev))
        return PyUnicode_Tailmatch(dev, st->str_npu, 0, 3, -1) == 1 &&
               (PyUnicode_GET_LENGTH(dev) == 3 || PyUnicode_ReadChar(dev, 3) == ':');
    if (st->device_type != NULL && Py_IS_TYPE(dev, st->device_type)) {
        if (ttn_device_decode(st, dev, &type, &index) < 0)
            return -1;
        return type == TTN_C10_PRIVATEUSE1;
    }
    return 0;
}

/* Whether cls can make type's npu objects (the row's class must derive
 * from type); -1 with an error set when it cannot. */
static int
check_npu_class(ttn_entry *entry, PyTypeObject *type, PyObject *cls)
{
    if (PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, type))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: the npu's class must derive from it, got %R",
                 entry->source, cls);
    return -1;
}

/* The class that makes the npu's objects (a new reference), found at its
 * first use when the row names it; NULL with an error set, or without one
 * when migration was disabled meanwhile. */
static PyTypeObject *
npu_class_of(ttn_class_ctor *rec)
{
    ttn_state *st = rec->state;
    PyObject *ref, *found;

    if (rec->npu_class != NULL)
        return (PyTypeObject *)Py_NewRef(rec->npu_class);
    if (rec->npu_ref == NULL || st == NULL)
        return NULL; /* disabled meanwhile: torch's own constructor serves */
    /* Resolving runs Python code, which may disable (and clear the
     * record): what it needs is held, and the record is filled only if it
     * is still this state's. */
    ref = Py_NewRef(rec->npu_ref);
    found = ttn_resolve_ref(st, ref, (PyObject *)rec->type);
    Py_DECREF(ref);
    if (found == NULL)
        return NULL;
    if (check_npu_class(rec->entry, rec->type, found) < 0) {
        Py_DECREF(found);
        return NULL;
    }
    if (rec->state == st && rec->npu_class == NULL) {
        rec->npu_class = (PyTypeObject *)Py_NewRef(found);
        Py_CLEAR(rec->npu_ref);
    }
    return (PyTypeObject *)found;
}

static PyObject *
class_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    ttn_class_ctor *rec = record_of(type);
    ttn_state *st;
    PyObject *dev = NULL, *mapped = NULL, *newargs = NULL, *newkwds = NULL, *result = NULL;
    PyTypeObject *npu_class = NULL;
    int r;

    if (rec == NULL) { /* records are kept for good: cannot happen */
        PyErr_Format(PyExc_SystemError, "%s: constructor slot without its class",
                     type->tp_name);
        return NULL;
    }
    st = rec->state;
    if (st == NULL || !st->enabled)
        return rec->original_new(type, args, kwds);
    /* torch.Stream(stream_id=, device_index=, device_type=) rewraps a
     * stream torch made: torch's to do. */
    if (kwds != NULL) {
        r = PyDict_Contains(kwds, st->str_device_type);
        if (r != 0)
            return r < 0 ? NULL : rec->original_new(type, args, kwds);
    }
    /* Held: logging the rewrite may run code (a str subclass's __repr__)
     * that changes kwds. */
    if (PyTuple_GET_SIZE(args) > 0)
        dev = Py_NewRef(PyTuple_GET_ITEM(args, 0));
    else if (kwds != NULL) {
        dev = Py_XNewRef(PyDict_GetItemWithError(kwds, st->str_device));
        if (dev == NULL && PyErr_Occurred())
            goto exit;
    }
    if (dev != NULL) {
        r = ttn_map_device(st, dev, &mapped, st->str_device, rec->entry);
        if (r < 0)
            goto exit;
        if (r) {
            ttn_hit_detail(st, rec->entry, st->str_device, dev, mapped);
            if (ttn_with_first_argument(args, kwds, st->str_device, mapped, &newargs,
                                        &newkwds) < 0)
                goto exit;
            args = newargs;
            kwds = newkwds;
            Py_SETREF(dev, Py_NewRef(mapped));
        }
    }
    /* A subclass (the user's, or the npu's own calling up) is only
     * migrated. */
    if ((rec->npu_class != NULL || rec->npu_ref != NULL) && type == rec->type) {
        r = names_npu(st, dev, rec->none_is_npu);
        if (r < 0)
            goto exit;
        if (r) {
            /* Held: its __new__ runs Python code, which may disable. */
            npu_class = npu_class_of(rec);
            if (npu_class == NULL) {
                if (!PyErr_Occurred())
                    result = rec->original_new(type, args, kwds);
                goto exit;
            }
            /* Only made here: type_call initialises what this returns. */
            result = npu_class->tp_new(npu_class, args, kwds);
            goto exit;
        }
    }
    result = rec->original_new(type, args, kwds);

exit:
    Py_XDECREF(dev);
    Py_XDECREF(npu_class);
    Py_XDECREF(mapped);
    Py_XDECREF(newargs);
    Py_XDECREF(newkwds);
    return result;
}

/* ------------------------------------------------------------------------- */

/* Give every subclass of type (at any depth) whose slot is `from` the slot
 * `to`.  Subclasses with a __new__ of their own keep theirs. */
static int
switch_subclasses(PyTypeObject *type, newfunc from, newfunc to)
{
    PyObject *subclasses = PyObject_CallMethod((PyObject *)type, "__subclasses__", NULL);
    Py_ssize_t i;
    int rc = -1;

    if (subclasses == NULL)
        goto exit;
    if (!PyList_Check(subclasses)) {
        PyErr_Format(PyExc_TypeError, "%s.__subclasses__() is not a list", type->tp_name);
        goto exit;
    }
    for (i = 0; i < PyList_GET_SIZE(subclasses); i++) {
        PyTypeObject *sub = (PyTypeObject *)PyList_GET_ITEM(subclasses, i);

        if (sub->tp_new == from)
            sub->tp_new = to;
        if (switch_subclasses(sub, from, to) < 0)
            goto exit;
    }
    rc = 0;

exit:
    Py_XDECREF(subclasses);
    return rc;
}

/* ------------------------------------------------------------------------- */

int
ttn_class_ctor_install(PyObject *module, ttn_state *st, PyTypeObject *type, PyObject *npu_class,
                       PyObject *npu_ref, int none_is_npu, ttn_entry *entry)
{
    ttn_class_ctor *rec = NULL;
    int i;

    if (type->tp_new == NULL) {
        PyErr_Format(PyExc_TypeError, "%s has no constructor to patch", entry->source);
        return -1;
    }
    if (npu_class != NULL && check_npu_class(entry, type, npu_class) < 0)
        return -1;
    for (i = 0; i < TTN_CLASS_CTORS && rec == NULL; i++)
        if (installed[i].type == type || installed[i].type == NULL)
            rec = &installed[i];
    if (rec == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: no room for another patched constructor",
                     entry->source);
        return -1;
    }
    if (rec->state == st)
        return 0; /* already patched by this module */
    if (rec->state != NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s is already patched by another transfer_to_npu module",
                     entry->source);
        return -1;
    }
    if (rec->type == NULL) {
        rec->type = (PyTypeObject *)Py_NewRef(type);
        rec->original_new = type->tp_new;
        rec->original_vectorcall = type->tp_vectorcall;
    }
    if (switch_subclasses(type, rec->original_new, class_new) < 0)
        return -1;
    rec->module = Py_NewRef(module);
    rec->state = st;
    rec->npu_class = (PyTypeObject *)Py_XNewRef(npu_class);
    rec->npu_ref = Py_XNewRef(npu_ref);
    rec->entry = entry;
    rec->none_is_npu = none_is_npu;
    /* A type's own vectorcall would bypass tp_new: route calls through
     * tp_call -> tp_new while patched. */
    type->tp_vectorcall = NULL;
    type->tp_new = class_new;
    return 0;
}

/* ------------------------------------------------------------------------- */

void
ttn_class_ctor_restore(ttn_state *st)
{
    PyObject *type, *value, *tb;
    int i;

    /* May run while an exception is being raised (a failed enable). */
    PyErr_Fetch(&type, &value, &tb);
    for (i = 0; i < TTN_CLASS_CTORS; i++) {
        ttn_class_ctor *rec = &installed[i];

        if (rec->state != st)
            continue;
        rec->type->tp_new = rec->original_new;
        rec->type->tp_vectorcall = rec->original_vectorcall;
        if (switch_subclasses(rec->type, class_new, rec->original_new) < 0)
            PyErr_WriteUnraisable((PyObject *)rec->type);
        rec->state = NULL;
        Py_CLEAR(rec->npu_class);
        Py_CLEAR(rec->npu_ref);
        Py_CLEAR(rec->module);
    }
    PyErr_Restore(type, value, tb);
}
