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
 * That is not enough: between finding the answer (an attribute lookup on
 * the guard or the hooks) and calling it, pybind11 reads the calling
 * Python frame's name through PyObject_Str, which runs the signal handlers
 * (every PyObject_Str and PyObject_Repr does), so the default SIGINT
 * handler raises KeyboardInterrupt there too.  And the virtual NPU's
 * kernels run Python code inside torch's C++, where on the CPU there is
 * none: a KeyboardInterrupt raised there crosses the dispatcher, the
 * autograd engine, a collective's C++ on its way out, which on the CPU it
 * never does.
 *
 * So interrupt() is the SIGINT handler while the virtual NPU is installed
 * (when the script has not set one of its own): it raises
 * KeyboardInterrupt at once, as the default handler does (in a wait such
 * as time.sleep, in the loop), but not inside those callbacks.  A kernel
 * runs through callback() (or is host_call()), which holds a Ctrl-C that
 * comes meanwhile until it returns, then trips the signal again: it is
 * raised at the next check, in the Python code that called the op, as on
 * the CPU.  A Constant found through an instance (its __get__, which is
 * how pybind11 finds it) marks the thread as answering torch until it is
 * called; a Ctrl-C meanwhile trips the signal again, for the next check.
 *
 * The same for threading.Condition's __enter__ and __exit__ (lock_codes):
 * the interpreter checks for signals after the call that takes the lock
 * and at the start of the method that releases it, so a KeyboardInterrupt
 * raised there leaves the lock taken, and the next `with` on it (the
 * DataLoader's queues, as an interrupted iterator shuts its workers down)
 * waits for ever.  Ctrl-C there is raised at the next check, out of them.
 */
#include "virtual.h"

#include <frameobject.h>
#include <signal.h>
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

/* Set on a thread from pybind11's look-up of a Constant for torch's C++
 * (its __get__ through an instance) to the Constant's call; only signal
 * handlers read it, on the main thread.  A look-up runs the handlers once
 * (PyObject_Str), or at each check of Python code a collection runs
 * meanwhile (finalisers): a signal tripped again more often than this was
 * left by a look-up never followed by its call, and is raised. */
static _Thread_local int answering;
static _Thread_local int deferred;
#define MAX_DEFERRED 10000

static PyObject *
Constant_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)args;
    (void)nargsf;
    (void)kwnames;
    answering = deferred = 0;
    if (PyErr_Occurred())
        keep_error();
    return Py_NewRef(((ConstantObject *)self)->value);
}

/* An answer looked up on an instance (the guard, the hooks), as pybind11
 * does before it calls it: itself, with the thread marked as answering
 * torch until the call.  Looked up on the class, itself. */
static PyObject *
Constant_descr_get(PyObject *self, PyObject *instance, PyObject *owner)
{
    (void)owner;
    if (instance != NULL && instance != Py_None) {
        answering = 1;
        deferred = 0;
    }
    return Py_NewRef(self);
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
    {Py_tp_descr_get, Constant_descr_get},
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

/* How many of the virtual NPU's callbacks from torch's C++ this thread is
 * in, and whether a Ctrl-C came meanwhile (only the main thread's are
 * ever set: it alone runs signal handlers). */
static _Thread_local int in_callback;
static _Thread_local int interrupt_held;

void
ttn_callback_enter(void)
{
    in_callback++;
}

void
ttn_callback_leave(void)
{
    if (--in_callback == 0 && interrupt_held) {
        interrupt_held = 0;
        (void)PyErr_SetInterruptEx(SIGINT);
    }
}

/* callback(fn, *args, **kwargs): fn's result, with Ctrl-C held until it
 * returns. */
static PyObject *
callback(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *result;

    (void)module;
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "callback(fn, *args, **kwargs): fn is missing");
        return NULL;
    }
    ttn_callback_enter();
    result = PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), kwnames);
    ttn_callback_leave();
    return result;
}

/* Whether frame (the handler's second argument) runs one of lock_codes. */
static int
in_lock_code(ttn_state *st, PyObject *frame)
{
    PyCodeObject *code;
    Py_ssize_t i;
    int found = 0;

    if (st->lock_codes == NULL || !PyFrame_Check(frame))
        return 0;
    code = PyFrame_GetCode((PyFrameObject *)frame);
    for (i = 0; i < PyTuple_GET_SIZE(st->lock_codes) && !found; i++)
        found = PyTuple_GET_ITEM(st->lock_codes, i) == (PyObject *)code;
    Py_DECREF(code);
    return found;
}

/* The SIGINT handler while the virtual NPU is installed: the default
 * handler's KeyboardInterrupt, but inside a kernel held until it returns,
 * and on a thread answering torch's C++ (where pybind11 runs the handlers
 * and an exception ends the process) tripped again, for the next check
 * after the answer. */
static PyObject *
interrupt(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (in_callback > 0) {
        interrupt_held = 1;
        Py_RETURN_NONE;
    }
    if (answering && deferred < MAX_DEFERRED && PyErr_SetInterruptEx(SIGINT) == 0) {
        deferred++;
        Py_RETURN_NONE;
    }
    if (nargs == 2 && in_lock_code(ttn_get_state(module), args[1]) &&
        PyErr_SetInterruptEx(SIGINT) == 0)
        Py_RETURN_NONE;
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    return NULL;
}

/* lock_codes(codes): the code objects of context managers over a lock in
 * which Ctrl-C waits for the next check. */
static PyObject *
set_lock_codes(PyObject *module, PyObject *codes)
{
    if (!PyTuple_Check(codes)) {
        PyErr_Format(PyExc_TypeError, "lock_codes() takes a tuple of code objects, not %R",
                     codes);
        return NULL;
    }
    Py_XSETREF(ttn_get_state(module)->lock_codes, Py_NewRef(codes));
    Py_RETURN_NONE;
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
    {"interrupt", (PyCFunction)(void (*)(void))interrupt, METH_FASTCALL,
     "interrupt(signum, frame): a SIGINT handler that raises KeyboardInterrupt, as the default "
     "one does, but never inside a kernel or the look-up of a constant, where torch's C++ "
     "calls the virtual NPU (it is raised as they return)"},
    {"lock_codes", set_lock_codes, METH_O,
     "lock_codes(codes): the code objects of Python context managers over a lock (threading."
     "Condition's __enter__ and __exit__), in which Ctrl-C waits for the next check"},
    {"callback", (PyCFunction)(void (*)(void))callback, METH_FASTCALL | METH_KEYWORDS,
     "callback(fn, *args, **kwargs): fn(*args, **kwargs) as a callback of torch's C++ (a "
     "kernel): a Ctrl-C meanwhile is raised once it has returned"},
    {"constant", constant_new, METH_O,
     "constant(value): a callable that returns value, for what torch's C++ calls where an "
     "exception would end the process"},
    {"take_kept_error", take_kept_error, METH_NOARGS,
     "take_kept_error(): the exception a constant found set when torch called it (torch's "
     "engine unwinding a hook's exception), now no longer kept; None if none"},
    {NULL, NULL, 0, NULL},
};
