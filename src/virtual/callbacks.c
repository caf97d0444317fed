/* What torch's C++ asks the virtual NPU from places that must not fail,
 * and Ctrl-C kept out of those places.
 *
 * torch's C++ asks the virtual NPU from places that must not fail:
 * the device guard's type_() (called from getDevice(), hence from
 * exchangeStream() and other noexcept members, under the stream guards'
 * destructors in autograd) and the hooks' is_available(), is_built(),
 * has_primary_context().
 *
 * torch calls them through pybind11, which runs a Python method in the
 * interpreter's loop: a pending signal (Ctrl-C) raises KeyboardInterrupt
 * there, pybind11 turns it into a C++ exception, and one thrown inside a
 * destructor or a noexcept function ends the process (std::terminate).  A
 * Constant answers from C: no Python frame, so no signal check, nothing to
 * raise.  (pybind11 takes a builtin function for "not overridden", so this
 * is an object of its own type, not one.)
 *
 * That is not enough: before pybind11 calls an override it looks at the
 * calling Python frame's name through PyObject_Str, which runs the signal
 * handlers, so the default SIGINT handler raises KeyboardInterrupt there
 * too.  interrupt_later() is the SIGINT handler while the virtual NPU is
 * installed (when the script has not set one of its own): it raises
 * nothing itself, but has the interpreter's loop raise KeyboardInterrupt
 * at its next instruction (a pending call, which only the loop runs).  A
 * second Ctrl-C while the first is still waiting (the main thread is
 * blocked, say in time.sleep) raises at once, as the default handler does.
 */
#include "virtual.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *value;
    vectorcallfunc vectorcall;
} ConstantObject;

/* The thread state dict's key for an exception kept by keep_error(). */
#define KEPT_ERROR_KEY "transfer_to_npu.kept_error"

/* torch's engine throws a Python hook's exception (a tensor hook, a saved
 * tensor's unpack hook: checkpointing's recomputation, Ctrl-C in it) as a
 * C++ exception while it is still set in the interpreter, and only
 * fetches it after unwinding through the stream guard, whose destructor
 * calls type_() through pybind11: the interpreter sees a result returned
 * with an exception set, pybind11 throws from the destructor, and the
 * process ends.  So a Constant called with an exception set keeps it in
 * the thread's state and clears it; torch then raises SystemError from
 * backward() for an exception it finds gone, and the backward wrappers
 * raise the kept one instead (take_kept_error).  A later one replaces an
 * earlier one that no wrapper took.  If it cannot be kept, it stays set,
 * as before. */
static void
keep_error(void)
{
    PyObject *type, *value, *traceback, *dict;

    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL)
        PyException_SetTraceback(value, traceback);
    dict = PyThreadState_GetDict();
    if (value != NULL && dict != NULL && PyDict_SetItemString(dict, KEPT_ERROR_KEY, value) == 0) {
        Py_CLEAR(type);
        Py_CLEAR(value);
        Py_CLEAR(traceback);
    }
    PyErr_Clear();
    PyErr_Restore(type, value, traceback); /* all NULL once kept */
}

static PyObject *
Constant_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)args;
    (void)nargsf;
    (void)kwnames;
    if (PyErr_Occurred())
        keep_error();
    return Py_NewRef(((ConstantObject *)self)->value);
}

static PyObject *
Constant_repr(ConstantObject *self)
{
    return PyUnicode_FromFormat("<transfer_to_npu constant %R>", self->value);
}

static int
Constant_traverse(ConstantObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->value);
    return 0;
}

static int
Constant_clear(ConstantObject *self)
{
    Py_CLEAR(self->value);
    return 0;
}

static void
Constant_dealloc(ConstantObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    Constant_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyMemberDef Constant_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(ConstantObject, vectorcall), READONLY},
    {"value", T_OBJECT, offsetof(ConstantObject, value), READONLY, "what every call returns"},
    {NULL},
};

static PyType_Slot Constant_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_repr, Constant_repr},
    {Py_tp_traverse, Constant_traverse},
    {Py_tp_clear, Constant_clear},
    {Py_tp_dealloc, Constant_dealloc},
    {Py_tp_members, Constant_members},
    {Py_tp_doc, "A callable that returns one value, whatever it is given, without running "
                "Python code."},
    {0, NULL},
};

PyType_Spec ttn_constant_spec = {
    .name = "transfer_to_npu._C.Constant",
    .basicsize = sizeof(ConstantObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Constant_slots,
};

/* ------------------------------------------------------------------------- */

static PyObject *
constant_new(PyObject *module, PyObject *value)
{
    ttn_state *st = ttn_get_state(module);
    ConstantObject *self = PyObject_GC_New(ConstantObject, st->constant_type);

    if (self == NULL)
        return NULL;
    self->value = Py_NewRef(value);
    self->vectorcall = Constant_vectorcall;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* ------------------------------------------------------------------------- */

/* Set while a KeyboardInterrupt waits for the loop.  Process-wide, as
 * signal handlers are; only the main thread runs them and pending calls,
 * so it needs no lock. */
static int interrupt_pending;

static int
raise_interrupt(void *unused)
{
    (void)unused;
    if (!interrupt_pending)
        return 0; /* raised already, by a second Ctrl-C */
    interrupt_pending = 0;
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    return -1;
}

static PyObject *
interrupt_later(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    (void)args;
    (void)nargs;
    if (!interrupt_pending && Py_AddPendingCall(raise_interrupt, NULL) == 0) {
        interrupt_pending = 1;
        Py_RETURN_NONE;
    }
    interrupt_pending = 0;
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    return NULL;
}

/* The exception keep_error() kept on this thread, taken; None if none. */
static PyObject *
take_kept_error(PyObject *module, PyObject *unused)
{
    PyObject *dict = PyThreadState_GetDict();
    PyObject *kept = dict == NULL ? NULL : PyDict_GetItemString(dict, KEPT_ERROR_KEY);

    (void)module;
    (void)unused;
    kept = Py_NewRef(kept != NULL ? kept : Py_None);
    if (kept != Py_None && PyDict_DelItemString(dict, KEPT_ERROR_KEY) < 0)
        Py_CLEAR(kept);
    return kept;
}

PyMethodDef ttn_callbacks_methods[] = {
    {"interrupt_later", (PyCFunction)(void (*)(void))interrupt_later, METH_FASTCALL,
     "interrupt_later(signum, frame): a SIGINT handler that has KeyboardInterrupt raised at "
     "the interpreter's next instruction rather than where it is called"},
    {"constant", constant_new, METH_O,
     "constant(value): a callable that returns value, for what torch's C++ calls where an "
     "exception would end the process"},
    {"take_kept_error", take_kept_error, METH_NOARGS,
     "take_kept_error(): the exception a constant found set when torch called it (torch's "
     "engine unwinding a hook's exception), now no longer kept; None if none"},
    {NULL, NULL, 0, NULL},
};
