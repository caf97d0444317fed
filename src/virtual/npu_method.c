/* Tensor.npu() of the virtual NPU, and the current device per thread.
 *
 * Every migrated `.cuda()` calls Tensor.npu.  Written in Python it costs a
 * frame of its own, which the migration's wrapper (a C object) cannot share
 * with its caller's; here the common calls (`x.npu()`, `x.npu(None)`,
 * `x.npu(non_blocking=True)`) go from C straight to torch's Tensor.to with
 * the cached torch.device of the thread's current npu.  Every other call,
 * and every tensor that has a __torch_function__ (or a mode that wants to
 * see it), goes to the Python version, which the object stands for
 * (__wrapped__, __doc__, signature).
 */
#include "virtual.h"

#include <structmember.h>

/* ------------------------------------------------------------------------- */
/* The current device is per thread, as on real hardware and in
 * devices.py; a thread that never set one is on device 0. */

int
ttn_current_device(ttn_state *st)
{
    void *value = PyThread_tss_get(&st->current_device);

    return value == NULL ? 0 : (int)((intptr_t)value - 1);
}

int
ttn_set_current_device(ttn_state *st, int index)
{
    if (PyThread_tss_set(&st->current_device, (void *)(intptr_t)(index + 1)) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "cannot record the thread's current npu");
        return -1;
    }
    if (index != 0)
        st->current_seen = 1; /* from now on, index-less devices are looked at */
    return 0;
}

/* ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    ttn_state *state;
    PyObject *fallback;       /* the Python Tensor.npu: every other call */
    PyObject *to;             /* torch._C.TensorBase.to */
    PyObject *torch_function; /* torch._C._has_torch_function_unary */
} NpuMethodObject;

/* Keywords the quick path passes on to Tensor.to as they are. */
static int
passed_on(NpuMethodObject *self, PyObject *kwnames)
{
    ttn_state *st = self->state;
    Py_ssize_t i;

    for (i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);

        if (!ttn_kwname_is(name, st->str_non_blocking) &&
            !ttn_kwname_is(name, st->str_memory_format))
            return 0;
    }
    return 1;
}

static PyObject *
NpuMethod_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    NpuMethodObject *self = (NpuMethodObject *)op;
    ttn_state *st = self->state;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw, i;
    PyObject *stack[TTN_NPU_METHOD_ARGS + 1], *device, *overridden;
    int wants;

    nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    /* Quick: a tensor, no device or None, and only keywords for Tensor.to. */
    if (nargs < 1 || nargs > 2 || (nargs == 2 && args[1] != Py_None) ||
        nkw > TTN_NPU_METHOD_ARGS - 2 || (nkw > 0 && !passed_on(self, kwnames)) ||
        st->tensor_type == NULL || !PyObject_TypeCheck(args[0], st->tensor_type))
        return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    overridden = PyObject_Vectorcall(self->torch_function, args, 1, NULL);
    if (overridden == NULL)
        return NULL;
    wants = PyObject_IsTrue(overridden);
    Py_DECREF(overridden);
    if (wants != 0)
        return wants < 0 ? NULL : PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
    device = ttn_npu_device(st, ttn_current_device(st));
    if (device == NULL)
        return NULL;
    stack[1] = args[0];
    stack[2] = device; /* borrowed: the cache holds it */
    for (i = 0; i < nkw; i++)
        stack[3 + i] = args[nargs + i];
    return PyObject_Vectorcall(self->to, stack + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
}

/* ------------------------------------------------------------------------- */

static int
NpuMethod_traverse(NpuMethodObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->fallback);
    Py_VISIT(self->to);
    Py_VISIT(self->torch_function);
    return 0;
}

static int
NpuMethod_clear(NpuMethodObject *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->to);
    Py_CLEAR(self->torch_function);
    return 0;
}

static void
NpuMethod_dealloc(NpuMethodObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    NpuMethod_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

/* Introspection describes the Python version (signature, doc, name). */
static PyObject *
NpuMethod_get_described(NpuMethodObject *self, void *name)
{
    return PyObject_GetAttrString(self->fallback, (const char *)name);
}

static PyMemberDef NpuMethod_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(NpuMethodObject, fallback), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(NpuMethodObject, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef NpuMethod_getset[] = {
    {"__doc__", (getter)NpuMethod_get_described, NULL, NULL, "__doc__"},
    {"__name__", (getter)NpuMethod_get_described, NULL, NULL, "__name__"},
    {"__qualname__", (getter)NpuMethod_get_described, NULL, NULL, "__qualname__"},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *
NpuMethod_repr(NpuMethodObject *self)
{
    return PyUnicode_FromFormat("<transfer_to_npu Tensor.npu of %R>", self->fallback);
}

static PyType_Slot npu_method_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, ttn_bind_as_function},
    {Py_tp_traverse, NpuMethod_traverse},
    {Py_tp_clear, NpuMethod_clear},
    {Py_tp_dealloc, NpuMethod_dealloc},
    {Py_tp_members, NpuMethod_members},
    {Py_tp_getset, NpuMethod_getset},
    {Py_tp_repr, NpuMethod_repr},
    {0, NULL},
};

PyType_Spec ttn_npu_method_spec = {
    .name = "transfer_to_npu._C.NpuMethod",
    .basicsize = sizeof(NpuMethodObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = npu_method_slots,
};

/* ------------------------------------------------------------------------- */

static PyObject *
npu_method_new(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *fallback, *to, *torch_function;
    NpuMethodObject *self;

    if (!PyArg_ParseTuple(args, "OOO:npu_method", &fallback, &to, &torch_function))
        return NULL;
    if (!PyCallable_Check(fallback) || !PyCallable_Check(to) || !PyCallable_Check(torch_function)) {
        PyErr_SetString(PyExc_TypeError, "npu_method(fallback, to, has_torch_function_unary) "
                                         "takes three callables");
        return NULL;
    }
    self = PyObject_GC_New(NpuMethodObject, st->npu_method_type);
    if (self == NULL)
        return NULL;
    self->vectorcall = NpuMethod_vectorcall;
    self->state = st;
    self->fallback = Py_NewRef(fallback);
    self->to = Py_NewRef(to);
    self->torch_function = Py_NewRef(torch_function);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
set_current_device(PyObject *module, PyObject *arg)
{
    int index;

    if (ttn_index_arg(arg, &index) < 0 || ttn_set_current_device(ttn_get_state(module), index) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
current_device(PyObject *module, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(ttn_current_device(ttn_get_state(module)));
}

PyMethodDef ttn_npu_method_methods[] = {
    {"npu_method", npu_method_new, METH_VARARGS,
     "npu_method(fallback, TensorBase.to, has_torch_function_unary) -> Tensor.npu in C, "
     "calling fallback for what it does not do itself"},
    {"set_current_device", set_current_device, METH_O,
     "set_current_device(index): the calling thread's current npu, where npu results without "
     "a device go"},
    {"current_device", current_device, METH_NOARGS,
     "current_device() -> the calling thread's current npu"},
    {NULL, NULL, 0, NULL},
};
