/* Callables that load what they stand for at their first call.
 *
 * The virtual NPU puts functions of its own in torch at import (kernels,
 * DDP's __init__, torch._C's accelerator functions) that a process may
 * never call.  Each is a Lazy object naming its function by reference
 * ("module:attr.path", or "module:factory()": what factory(original)
 * makes), resolved at the first call: the module holding it loads then, not
 * at import.  A call costs one vectorcall more.  It binds like a function,
 * and its name, doc and __wrapped__ are its target's (reading them loads
 * it), so that signatures and wrappers see the function it stands for.
 */
#include "state.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *ref;      /* str */
    PyObject *original; /* handed to a factory; None */
    PyObject *resolver; /* resolver(ref, original) -> the target */
    PyObject *target;   /* NULL until first needed */
} LazyObject;

/* The target, a new reference; NULL with an error set when it cannot be
 * resolved (tried again at the next call). */
static PyObject *
lazy_target(LazyObject *self)
{
    PyObject *found;

    if (TTN_LIKELY(self->target != NULL))
        return Py_NewRef(self->target);
    found = PyObject_CallFunctionObjArgs(self->resolver, self->ref, self->original, NULL);
    if (found == NULL)
        return NULL;
    /* Another thread may have resolved it meanwhile (the resolver runs
     * Python code): the first one found stays. */
    if (self->target == NULL)
        self->target = Py_NewRef(found);
    Py_DECREF(found);
    return Py_NewRef(self->target);
}

static PyObject *
Lazy_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *target = lazy_target((LazyObject *)op), *result;

    if (target == NULL)
        return NULL;
    result = PyObject_Vectorcall(target, args, nargsf, kwnames);
    Py_DECREF(target);
    return result;
}

static PyObject *
Lazy_get_wrapped(LazyObject *self, void *unused)
{
    (void)unused;
    return lazy_target(self);
}

static PyObject *
Lazy_get_described(LazyObject *self, void *name)
{
    PyObject *target = lazy_target(self), *value;

    if (target == NULL)
        return NULL;
    value = PyObject_GetAttrString(target, (const char *)name);
    Py_DECREF(target);
    return value;
}

static PyObject *
Lazy_repr(LazyObject *self)
{
    return PyUnicode_FromFormat("<transfer_to_npu lazy %R%s>", self->ref,
                                self->target == NULL ? "" : " (loaded)");
}

static int
Lazy_traverse(LazyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ref);
    Py_VISIT(self->original);
    Py_VISIT(self->resolver);
    Py_VISIT(self->target);
    return 0;
}

static int
Lazy_clear(LazyObject *self)
{
    Py_CLEAR(self->ref);
    Py_CLEAR(self->original);
    Py_CLEAR(self->resolver);
    Py_CLEAR(self->target);
    return 0;
}

static void
Lazy_dealloc(LazyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    Lazy_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef Lazy_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(LazyObject, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Lazy_getset[] = {
    {"__wrapped__", (getter)Lazy_get_wrapped, NULL, NULL, NULL},
    {"__doc__", (getter)Lazy_get_described, NULL, NULL, "__doc__"},
    {"__name__", (getter)Lazy_get_described, NULL, NULL, "__name__"},
    {"__qualname__", (getter)Lazy_get_described, NULL, NULL, "__qualname__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot lazy_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, ttn_bind_as_function},
    {Py_tp_traverse, Lazy_traverse},
    {Py_tp_clear, Lazy_clear},
    {Py_tp_dealloc, Lazy_dealloc},
    {Py_tp_members, Lazy_members},
    {Py_tp_getset, Lazy_getset},
    {Py_tp_repr, Lazy_repr},
    {0, NULL},
};

PyType_Spec ttn_lazy_spec = {
    .name = "transfer_to_npu._C.Lazy",
    .basicsize = sizeof(LazyObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = lazy_slots,
};

/* ------------------------------------------------------------------------- */

static PyObject *
lazy_new(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *ref, *resolver, *original = Py_None;
    LazyObject *self;

    if (!PyArg_ParseTuple(args, "UO|O:lazy", &ref, &resolver, &original))
        return NULL;
    if (!PyCallable_Check(resolver)) {
        PyErr_Format(PyExc_TypeError, "lazy(): resolver must be callable, not %R", resolver);
        return NULL;
    }
    self = PyObject_GC_New(LazyObject, st->lazy_type);
    if (self == NULL)
        return NULL;
    self->vectorcall = Lazy_vectorcall;
    self->ref = Py_NewRef(ref);
    self->original = Py_NewRef(original);
    self->resolver = Py_NewRef(resolver);
    self->target = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

PyMethodDef ttn_lazy_methods[] = {
    {"lazy", lazy_new, METH_VARARGS,
     "lazy(ref, resolver, original=None) -> a callable standing for resolver(ref, original), "
     "resolved at its first call"},
    {NULL, NULL, 0, NULL},
};
