/* Call wrappers (vectorcall) that rewrite device and backend arguments and
 * call the original or its NPU counterpart, and the redirected-attribute
 * descriptor.
 *
 * Two wrapper types share one implementation: FunctionWrapper for callables
 * that do not bind (builtins, module functions) and MethodWrapper, which
 * binds like a method (tp_descr_get, Py_TPFLAGS_METHOD_DESCRIPTOR) so that
 * `x.to('cuda')` costs no bound-method object.
 */
#include "patcher.h"

#include <structmember.h>

/* Arguments copied on the stack before falling back to the heap. */
#define TTN_SMALL_ARGS 8
/* Most arguments one call can have rewritten (device, device_id, backend,
 * a positional one and pin_memory). */
#define TTN_MAX_REWRITES 5

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    ttn_state *state;  /* of the module that owns this object's type */
    PyObject *wrapped; /* the original object, put back by disable() */
    PyObject *target;  /* what is called: wrapped, or its NPU counterpart; NULL until
                        * target_ref is resolved */
    PyObject *target_ref; /* "module:attr.path" the target is found at (resolve_target) */
    ttn_entry *entry;  /* entries outlive wrappers: see table.h */
    int mode;
    int pos; /* index in the vectorcall arguments of a positional device
              * (or backend) argument; -1 for none */
    int fast; /* a mode the hot path in Wrapper_vectorcall serves */
    int device_objects; /* hand the target a torch.device for a CUDA string */
    int current;        /* give an index-less device the current index */
    int pins;           /* pin what pin_memory=True makes (is_pin_kw) */
    PyObject *device_kws; /* tuple of interned keyword names taking a device */
    /* The last keyword names seen with neither a device argument nor
     * pin_memory among them.  A call site's names are one constant tuple,
     * so its next call passes by identity; held, so the address cannot be
     * reused by other names. */
    PyObject *plain_kwnames;
    PyObject *value;      /* MODE_ARG_REPLACE: what the argument at pos becomes */
    PyObject *weakreflist;
} WrapperObject;

/* ------------------------------------------------------------------------- */

/* Argument rewriting for one call: a lazily made copy of the arguments, and
 * the new references it holds. */
typedef struct {
    PyObject *const *args;
    Py_ssize_t total;
    PyObject *small[TTN_SMALL_ARGS + 1];
    PyObject **buf; /* buf[0] is free for PY_VECTORCALL_ARGUMENTS_OFFSET */
    PyObject *owned[TTN_MAX_REWRITES];
    int nowned;
    /* the first migrated argument, for the log: its name, value before and
     * after */
    PyObject *first_name;
    PyObject *first_from;
    PyObject *first_to;
} ttn_rewrite;

/* Put a new reference in slot i; `name` is the argument's when the change
 * is a migration (a CUDA spelling), NULL when it only adds the current
 * index to an npu device. */
static int
rewrite_set(ttn_rewrite *rw, Py_ssize_t i, PyObject *value, PyObject *name)
{
    if (rw->buf == NULL) {
        if (rw->total <= TTN_SMALL_ARGS)
            rw->buf = rw->small;
        else {
            rw->buf = PyMem_Malloc(sizeof(PyObject *) * (size_t)(rw->total + 1));
            if (rw->buf == NULL) {
                Py_DECREF(value);
                PyErr_NoMemory();
                return -1;
            }
        }
        memcpy(rw->buf + 1, rw->args, sizeof(PyObject *) * (size_t)rw->total);
    }
    if (rw->nowned == TTN_MAX_REWRITES) {
        Py_DECREF(value);
        PyErr_SetString(PyExc_SystemError, "too many rewritten arguments");
        return -1;
    }
    if (name != NULL && rw->first_to == NULL) {
        rw->first_name = name;
        rw->first_from = rw->args[i];
        rw->first_to = value;
    }
    rw->owned[rw->nowned++] = value;
    rw->buf[1 + i] = value;
    return 0;
}

static void
rewrite_free(ttn_rewrite *rw)
{
    int i;

    for (i = 0; i < rw->nowned; i++)
        Py_DECREF(rw->owned[i]);
    if (rw->buf != NULL && rw->buf != rw->small)
        PyMem_Free(rw->buf);
}

/* Rewrite the value in slot i as a device (is_backend == 0) or a backend.
 * Returns 1 when it is migrated, 0 when not (the current index may still
 * have been added), -1 on error. */
static int
rewrite_slot(WrapperObject *self, ttn_rewrite *rw, Py_ssize_t i, int is_backend,
             PyObject *argname)
{
    PyObject *value = NULL, *string, *device;
    int r, c;

    if (self->mode == TTN_MODE_ARG_REPLACE) {
        value = Py_NewRef(self->value);
        r = 1;
    }
    else if (is_backend)
        r = ttn_map_backend(self->state, rw->args[i], &value);
    else
        r = ttn_map_device_arg(self->state, rw->args[i], &value, argname, self->entry,
                               self->device_objects);
    if (r < 0)
        return r;
    if (self->current) {
        c = ttn_current_index(self->state, r ? value : rw->args[i], &string, &device);
        if (c < 0) {
            Py_XDECREF(value);
            return -1;
        }
        if (c)
            Py_XSETREF(value, Py_NewRef(PyUnicode_Check(rw->args[i]) ? string : device));
        else if (!r)
            return 0;
    }
    else if (!r)
        return 0;
    return rewrite_set(rw, i, value, r ? argname : NULL) < 0 ? -1 : r;
}

/* A builtin of METH_VARARGS | METH_KEYWORDS (torch.empty, torch.ones and
 * torch's other functions) has no vectorcall: the interpreter calls it
 * through its type's tp_call, making the argument tuple and keyword dict,
 * and checks the result.  The same is done here without the generic steps
 * between (50 to 110 instructions a call).  The recursion check those steps
 * make is left to what can recurse: a Python frame the callee runs checks
 * it on entry. */
static TTN_NOINLINE PyObject *
call_varargs(PyObject *target, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyCFunctionWithKeywords f =
        (PyCFunctionWithKeywords)(void (*)(void))PyCFunction_GET_FUNCTION(target);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw, i;
    PyObject *tuple, *kwargs = NULL, *result = NULL;

    nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    tuple = PyTuple_New(nargs);
    if (tuple == NULL)
        goto exit;
    for (i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    if (nkw > 0) {
        kwargs = PyDict_New();
        if (kwargs == NULL)
            goto exit;
        for (i = 0; i < nkw; i++) {
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
                goto exit;
        }
    }
    result = f(PyCFunction_GET_SELF(target), tuple, kwargs);
    /* What the interpreter checks of every builtin's result. */
    if (result != NULL && PyErr_Occurred()) {
        Py_CLEAR(result);
        PyErr_Format(PyExc_SystemError, "%R returned a result with an exception set", target);
    }
    else if (result == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_SystemError, "%R returned NULL without setting an exception", target);

exit:
    Py_XDECREF(tuple);
    Py_XDECREF(kwargs);
    return result;
}

/* Call `target` the way PyObject_Vectorcall does, minus its bookkeeping:
 * straight through the callee's own vectorcall when it has one.  The
 * lookup is PyVectorcall_Function's, inlined: the interpreter exports it as
 * a function, a call through the PLT on every migrated call. */
static inline PyObject *
call_target(PyObject *target, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyTypeObject *type = Py_TYPE(target);
    vectorcallfunc f = PyType_HasFeature(type, Py_TPFLAGS_HAVE_VECTORCALL)
                           ? *(vectorcallfunc *)((char *)target + type->tp_vectorcall_offset)
                           : NULL;

    if (TTN_LIKELY(f != NULL))
        return f(target, args, nargsf, kwnames);
    /* The calling convention as the interpreter reads it (METH_STATIC, on
     * torch's, says how it was defined, not how it is called). */
    if (type == &PyCFunction_Type &&
        (PyCFunction_GET_FLAGS(target) & (METH_VARARGS | METH_FASTCALL | METH_NOARGS | METH_O |
                                          METH_KEYWORDS | METH_METHOD)) ==
            (METH_VARARGS | METH_KEYWORDS))
        return call_varargs(target, args, nargsf, kwnames);
    return PyObject_Vectorcall(target, args, nargsf, kwnames);
}

/* Whether a keyword names one of this callable's device arguments.  Names
 * from compiled code and ours are both interned, so identity decides; only
 * a name built at run time is compared by value. */
static inline int
is_device_kw(WrapperObject *self, PyObject *name)
{
    Py_ssize_t k, n = PyTuple_GET_SIZE(self->device_kws);

    for (k = 0; k < n; k++)
        if (name == PyTuple_GET_ITEM(self->device_kws, k))
            return 1;
    if (TTN_LIKELY(PyUnicode_CHECK_INTERNED(name)))
        return 0;
    for (k = 0; k < n; k++)
        if (PyUnicode_Compare(name, PyTuple_GET_ITEM(self->device_kws, k)) == 0)
            return 1;
    return 0;
}

/* pin_memory=... given to a callable that makes tensors where the NPU
 * cannot pin: the general path has the tensor made unpinned, then pinned. */
static inline int
is_pin_kw(WrapperObject *self, PyObject *name)
{
    return self->pins && ttn_kwname_is(name, self->state->str_pin_memory);
}

/* A true pin_memory at slot i is made False (a callable without that
 * argument still says so itself).  Returns 1 when it was true. */
static int
unpin_slot(ttn_rewrite *rw, Py_ssize_t i)
{
    int r = PyObject_IsTrue(rw->args[i]);

    if (r <= 0)
        return r;
    return rewrite_set(rw, i, Py_NewRef(Py_False), NULL) < 0 ? -1 : 1;
}

/* The target of a wrapper whose row names it by reference, found at its
 * first use rather than at enable(): the module that holds it (a part of
 * torch.npu, a rule's stand-in) is imported only if the API is used.  Two
 * threads may both resolve it; the first result is kept.  Borrowed, or NULL
 * with an error set. */
static TTN_NOINLINE PyObject *
resolve_target(WrapperObject *self)
{
    PyObject *found;

    if (self->target != NULL)
        return self->target;
    found = ttn_resolve_ref(self->state, self->target_ref, self->wrapped);
    if (found == NULL)
        return NULL;
    if (self->target == NULL) {
        self->target = found;
        /* The hot path may call it now. */
        self->fast = self->mode == TTN_MODE_REDIRECT || self->mode == TTN_MODE_HOOK;
    }
    else
        Py_DECREF(found);
    return self->target;
}

static inline PyObject *
wrapper_target(WrapperObject *self)
{
    return TTN_LIKELY(self->target != NULL) ? self->target : resolve_target(self);
}

/* Every mode, every argument shape: the general path. */
static TTN_NOINLINE PyObject *
wrapper_call_general(WrapperObject *self, PyObject *const *args, size_t nargsf,
                     PyObject *kwnames)
{
    ttn_state *st = self->state;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw, i;
    ttn_rewrite rw;
    PyObject *result = NULL;
    int changed = 0, pin = 0, r;

    if (!st->enabled)
        return call_target(self->wrapped, args, nargsf, kwnames);
    if (wrapper_target(self) == NULL)
        return NULL;
    if (self->mode == TTN_MODE_UNSUPPORTED) {
        if (ttn_unsupported_hit(st, self->entry) < 0)
            return NULL;
        /* No stand-in: results would be wrong, so say so. */
        if (self->target == self->wrapped) {
            PyErr_Format(PyExc_NotImplementedError, "%s has no NPU counterpart: %s",
                         self->entry->source, self->entry->target);
            return NULL;
        }
        return call_target(self->target, args, nargsf, kwnames);
    }
    nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    rw.args = args;
    rw.total = nargs + nkw;
    rw.buf = NULL;
    rw.nowned = 0;
    rw.first_name = NULL;
    rw.first_from = NULL;
    rw.first_to = NULL;

    if (self->pos >= 0 && self->pos < nargs) {
        int backend = self->mode == TTN_MODE_BACKEND;

        r = rewrite_slot(self, &rw, self->pos, backend,
                         self->mode == TTN_MODE_ARG_REPLACE ? NULL
                         : backend                          ? st->str_backend
                                                            : st->str_device);
        if (r < 0)
            goto exit;
        changed |= r;
    }
    for (i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        Py_ssize_t k, nkws = PyTuple_GET_SIZE(self->device_kws);

        r = 0;
        for (k = 0; k < nkws; k++) {
            if (ttn_kwname_is(name, PyTuple_GET_ITEM(self->device_kws, k))) {
                r = rewrite_slot(self, &rw, nargs + i, 0, name);
                break;
            }
        }
        if (k == nkws && self->mode == TTN_MODE_BACKEND && ttn_kwname_is(name, st->str_backend))
            r = rewrite_slot(self, &rw, nargs + i, 1, name);
        else if (k == nkws && is_pin_kw(self, name)) {
            r = unpin_slot(&rw, nargs + i);
            pin |= r > 0;
            r = r < 0 ? r : 0; /* not a migration */
        }
        if (r < 0)
            goto exit;
        changed |= r;
    }
    if (changed)
        ttn_hit_detail(st, self->entry, rw.first_name, rw.first_from, rw.first_to);
    else if (self->mode == TTN_MODE_REDIRECT)
        ttn_hit(st, self->entry);
    if (rw.buf == NULL)
        result = call_target(self->target, args, nargsf, kwnames);
    else
        result = call_target(self->target, rw.buf + 1,
                             (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    if (pin && result != NULL)
        Py_SETREF(result, PyObject_CallOneArg(st->pin_made, result));

exit:
    rewrite_free(&rw);
    return result;
}

/* The cheap test that lets every other call pass straight through: does v
 * need a closer look?  It does when it may be a CUDA device spec, or an
 * index-less device where this callable fills in the current index and a
 * device other than 0 has been made current.  A str that cannot start
 * "cuda" ('npu', 'cpu') and a torch.device read as not CUDA's go on: the
 * quick path would keep them, after a call and a second look. */
static inline int
maybe_device(WrapperObject *self, PyObject *v)
{
    ttn_state *st = self->state;
    PyTypeObject *t = Py_TYPE(v);
    int type, index;

    if (t == &PyUnicode_Type)
        return ttn_may_be_cuda(v) || (self->current & st->current_seen);
    if (t == st->device_type)
        return !ttn_device_read(st, v, &type, &index) || type == TTN_C10_CUDA ||
               (index < 0 && (self->current & st->current_seen));
    if (PyType_HasFeature(t, Py_TPFLAGS_BYTES_SUBCLASS))
        return ttn_bytes_may_be_cuda(v);
    return t == &PyDict_Type || PyType_HasFeature(t, Py_TPFLAGS_UNICODE_SUBCLASS);
}

static TTN_NOINLINE int
maybe_device_kw(WrapperObject *self, PyObject *const *values, PyObject *kwnames)
{
    Py_ssize_t i, nkw = PyTuple_GET_SIZE(kwnames);
    int plain = 1;

    for (i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);

        if (is_device_kw(self, name)) {
            if (maybe_device(self, values[i]))
                return 1;
            plain = 0;
        }
        else if (is_pin_kw(self, name))
            return 1;
    }
    if (plain)
        Py_XSETREF(self->plain_kwnames, Py_NewRef(kwnames)); /* a tuple of str: no finaliser */
    return 0;
}

/* One device argument whose npu spelling is at hand (a CUDA string seen
 * before, a CUDA torch.device) is rewritten on the stack; anything else
 * takes the general path.  Kept out of line so that the pass-through path
 * stays small. */
static TTN_NOINLINE PyObject *
wrapper_call_quick(WrapperObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    ttn_state *st = self->state;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), nkw, total, i, slot = -1;
    PyObject *replacement = NULL, *as_device = NULL, *name = NULL, *stack[TTN_SMALL_ARGS + 1];
    int verdict = TTN_QUICK_KEEP;

    nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    total = nargs + nkw;
    /* A device other than 0 is current somewhere: index-less devices get
     * its index, which only the general path looks for. */
    if (total > TTN_SMALL_ARGS || (self->current & st->current_seen))
        return wrapper_call_general(self, args, nargsf, kwnames);
    if (self->pos >= 0 && self->pos < nargs) {
        verdict = ttn_quick_device(st, args[self->pos], &replacement, &as_device);
        if (verdict != TTN_QUICK_KEEP) {
            slot = self->pos;
            name = st->str_device;
        }
    }
    for (i = 0; i < nkw && verdict != TTN_QUICK_SLOW; i++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, i);
        PyObject *r = NULL, *d = NULL;
        int v;

        if (!is_device_kw(self, kw)) {
            if (is_pin_kw(self, kw))
                verdict = TTN_QUICK_SLOW;
            continue;
        }
        v = ttn_quick_device(st, args[nargs + i], &r, &d);
        if (v == TTN_QUICK_KEEP)
            continue;
        if (slot >= 0)
            v = TTN_QUICK_SLOW; /* two rewrites: the general path's work */
        slot = nargs + i;
        name = kw;
        replacement = r;
        as_device = d;
        verdict = v;
    }
    if (verdict == TTN_QUICK_SLOW)
        return wrapper_call_general(self, args, nargsf, kwnames);
    if (slot < 0) {
        if (self->mode == TTN_MODE_REDIRECT)
            ttn_hit(st, self->entry);
        return call_target(self->target, args, nargsf, kwnames);
    }
    memcpy(stack + 1, args, sizeof(PyObject *) * (size_t)total);
    /* Borrowed: the caches hold them.  The log shows the npu spelling. */
    stack[1 + slot] = self->device_objects && as_device != NULL ? as_device : replacement;
    ttn_hit_detail(st, self->entry, name, args[slot], replacement);
    return call_target(self->target, stack + 1, (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                       kwnames);
}

/* A call that passes, counted: a redirect counts every call. */
static TTN_NOINLINE PyObject *
wrapper_call_counted(WrapperObject *self, PyObject *const *args, size_t nargsf,
                     PyObject *kwnames)
{
    ttn_hit(self->state, self->entry);
    return call_target(self->target, args, nargsf, kwnames);
}

/* A call with nothing to rewrite goes on to the target. */
static inline PyObject *
wrapper_pass(WrapperObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (self->mode == TTN_MODE_REDIRECT)
        return wrapper_call_counted(self, args, nargsf, kwnames);
    return call_target(self->target, args, nargsf, kwnames);
}

/* The hot path's keyword names, when they are not the last plain ones. */
static TTN_NOINLINE PyObject *
wrapper_call_keywords(WrapperObject *self, PyObject *const *args, size_t nargsf,
                      PyObject *kwnames)
{
    if (maybe_device_kw(self, args + PyVectorcall_NARGS(nargsf), kwnames))
        return wrapper_call_quick(self, args, nargsf, kwnames);
    return wrapper_pass(self, args, nargsf, kwnames);
}

/* The hot path: nothing that could be a device where this callable takes
 * one, so the call goes straight on.  Everything else is a tail call, so
 * that a pass-through saves no registers. */
static PyObject *
Wrapper_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    WrapperObject *self = (WrapperObject *)op;
    Py_ssize_t nargs;

    if (!TTN_LIKELY(self->fast & self->state->enabled))
        return wrapper_call_general(self, args, nargsf, kwnames);
    nargs = PyVectorcall_NARGS(nargsf);
    if (self->pos >= 0 && self->pos < nargs && maybe_device(self, args[self->pos]))
        return wrapper_call_quick(self, args, nargsf, kwnames);
    if (kwnames != NULL && kwnames != self->plain_kwnames)
        return wrapper_call_keywords(self, args, nargsf, kwnames);
    return wrapper_pass(self, args, nargsf, kwnames);
}

/* ------------------------------------------------------------------------- */

PyObject *
ttn_wrapper_new(ttn_state *st, int binds, PyObject *wrapped, PyObject *target,
                PyObject *target_ref, ttn_entry *entry, int mode, int pos, PyObject *device_kws,
                PyObject *value, int devarg_flags)
{
    PyTypeObject *type = binds ? st->method_type : st->function_type;
    WrapperObject *self = PyObject_GC_New(WrapperObject, type);

    if (self == NULL)
        return NULL;
    self->vectorcall = Wrapper_vectorcall;
    self->state = st;
    self->wrapped = Py_NewRef(wrapped);
    self->target = Py_XNewRef(target);
    self->target_ref = Py_XNewRef(target_ref);
    self->entry = entry;
    self->mode = mode;
    self->pos = pos;
    /* An unresolved target takes the general path, which resolves it. */
    self->fast = mode == TTN_MODE_DEVICE_ARG ||
                 ((mode == TTN_MODE_REDIRECT || mode == TTN_MODE_HOOK) && target != NULL);
    /* Where torch parses the device argument as a torch.device in C (the
     * factories, Tensor.to: the row says so), a torch.device is taken as it
     * is and a string is parsed at every call (about 100 ns).  Anything
     * else gets the string, as written: it may use it as one
     * (torch.is_autocast_enabled('cuda') takes a str). */
    self->device_objects = mode == TTN_MODE_DEVICE_ARG && (devarg_flags & TTN_DEVARG_OBJECTS);
    /* Torch asks the device guard for an index-less device's index in
     * these (Tensor.to, torch.tensor; the row says so), and the guard of
     * a device defined in Python answers 0. */
    self->current = mode == TTN_MODE_DEVICE_ARG && (devarg_flags & TTN_DEVARG_CURRENT) != 0;
    /* Those are the callables that make tensors (the factories,
     * Tensor.new_*; Tensor.to and Module.to's _parse_to take no pin_memory), and the
     * virtual NPU, a device defined in Python, has no pinned allocator for
     * torch to ask: the backend pins instead (pin_made). */
    self->pins = self->current && st->pin_made != NULL;
    self->device_kws = Py_NewRef(device_kws);
    self->plain_kwnames = NULL;
    self->value = Py_XNewRef(value);
    self->weakreflist = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* ------------------------------------------------------------------------- */

static int
Wrapper_traverse(WrapperObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->wrapped);
    Py_VISIT(self->target);
    Py_VISIT(self->target_ref);
    Py_VISIT(self->device_kws);
    Py_VISIT(self->plain_kwnames);
    Py_VISIT(self->value);
    return 0;
}

static int
Wrapper_clear(WrapperObject *self)
{
    Py_CLEAR(self->wrapped);
    Py_CLEAR(self->target);
    Py_CLEAR(self->target_ref);
    Py_CLEAR(self->device_kws);
    Py_CLEAR(self->plain_kwnames);
    Py_CLEAR(self->value);
    return 0;
}

static void
Wrapper_dealloc(WrapperObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    Wrapper_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

/* ------------------------------------------------------------------------- */

/* tp_descr_get of the callables that bind as a function does (wrappers of
 * methods, Tensor.npu, lazy functions): the object itself on the class, a
 * bound method on an instance. */
PyObject *
ttn_bind_as_function(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

/* ------------------------------------------------------------------------- */

static PyObject *
Wrapper_getattro(WrapperObject *self, PyObject *name)
{
    PyObject *value = PyObject_GenericGetAttr((PyObject *)self, name);
    Py_ssize_t len;
    const char *s;

    if (value != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return value;
    PyErr_Clear();
    /* Dunders (__name__, __module__, __qualname__, __doc__) describe the
     * original, so pickling by reference and introspection find it; other
     * attributes (a class's methods, constants) come from what is called. */
    s = PyUnicode_AsUTF8AndSize(name, &len);
    if (s == NULL)
        return NULL;
    if (len > 4 && s[0] == '_' && s[1] == '_' && s[len - 1] == '_' && s[len - 2] == '_')
        return PyObject_GetAttr(self->wrapped, name);
    if (wrapper_target(self) == NULL)
        return NULL;
    return PyObject_GetAttr(self->target, name);
}

/* ------------------------------------------------------------------------- */

static PyObject *
Wrapper_repr(WrapperObject *self)
{
    return PyUnicode_FromFormat("<transfer_to_npu %s of %R>", self->entry->kind, self->wrapped);
}

/* ------------------------------------------------------------------------- */

/* A redirected class (torch.cuda.Stream -> torch.npu.Stream) still works in
 * isinstance(), issubclass() and as a base class. */
static PyObject *
Wrapper_instancecheck(WrapperObject *self, PyObject *obj)
{
    PyObject *target = wrapper_target(self);
    int r = target == NULL ? -1 : PyObject_IsInstance(obj, target);

    return r < 0 ? NULL : PyBool_FromLong(r);
}

static PyObject *
Wrapper_subclasscheck(WrapperObject *self, PyObject *cls)
{
    PyObject *target = wrapper_target(self);
    int r = target == NULL ? -1 : PyObject_IsSubclass(cls, target);

    return r < 0 ? NULL : PyBool_FromLong(r);
}

static PyObject *
Wrapper_mro_entries(WrapperObject *self, PyObject *bases)
{
    PyObject *target = wrapper_target(self), *method = NULL, *result = NULL;

    if (target == NULL)
        goto exit;
    /* A target that adapts CUDA's arguments to a class's own
     * (_rules/call_shapes.py: Adapted) says which class it makes. */
    if (!PyType_Check(target)) {
        method = PyObject_GetAttrString(target, "__mro_entries__");
        if (method != NULL) {
            result = PyObject_CallOneArg(method, bases);
            goto exit;
        }
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto exit;
        PyErr_Clear();
    }
    result = PyTuple_Pack(1, target);

exit:
    Py_XDECREF(method);
    return result;
}

/* `torch.cuda.Stream | None`, as annotations write it (evaluated when a
 * module loads): the union of the class a wrapper stands for, the one
 * isinstance() checks against.  A wrapper of a function is left as the
 * function, which has no union, so the error is the original's. */
static PyObject *Wrapper_or(PyObject *a, PyObject *b);

static PyObject *
stands_for(PyObject *o)
{
    WrapperObject *w;
    PyObject *target;

    if (PyType_GetSlot(Py_TYPE(o), Py_nb_or) != (void *)Wrapper_or)
        return o;
    w = (WrapperObject *)o;
    target = wrapper_target(w);
    if (target == NULL)
        return NULL;
    return PyType_Check(target) || !PyType_Check(w->wrapped) ? target : w->wrapped;
}

static PyObject *
Wrapper_or(PyObject *a, PyObject *b)
{
    PyObject *left = stands_for(a), *right = left == NULL ? NULL : stands_for(b);

    return right == NULL ? NULL : PyNumber_Or(left, right);
}

/* A wrapper is as immutable as the function it stands for: copies are
 * itself, and it pickles by reference, as the name it is installed under
 * (pkgutil.resolve_name finds what that name is wherever it is loaded). */
static PyObject *
Wrapper_copy(PyObject *self, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(self);
}

/* Pickled by reference, to be resolved at loading: a builtin of a module
 * by where it lives ("torch._C._nn:_parse_to", which a row names for the
 * API that calls it, Module.to), anything else by its row's source. */
static PyObject *
Wrapper_reduce(WrapperObject *self, PyObject *unused)
{
    PyObject *pkgutil = NULL, *resolve = NULL, *where = NULL, *result = NULL;
    PyObject *owner = PyCFunction_Check(self->wrapped) ? PyCFunction_GET_SELF(self->wrapped)
                                                       : NULL;

    (void)unused;
    pkgutil = PyImport_ImportModule("pkgutil");
    if (pkgutil == NULL)
        goto exit;
    resolve = PyObject_GetAttrString(pkgutil, "resolve_name");
    if (resolve == NULL)
        goto exit;
    if (owner != NULL && PyModule_Check(owner)) {
        PyObject *module_name = PyModule_GetNameObject(owner);
        PyObject *name = module_name == NULL ? NULL
                                             : PyObject_GetAttrString(self->wrapped, "__name__");

        if (name != NULL)
            where = PyUnicode_FromFormat("%U:%U", module_name, name);
        Py_XDECREF(module_name);
        Py_XDECREF(name);
    }
    else
        where = PyUnicode_FromString(self->entry->source);
    if (where == NULL)
        goto exit;
    result = Py_BuildValue("(O(O))", resolve, where);

exit:
    Py_XDECREF(pkgutil);
    Py_XDECREF(resolve);
    Py_XDECREF(where);
    return result;
}

static PyObject *
Wrapper_get_source(WrapperObject *self, void *closure)
{
    (void)closure;
    return PyUnicode_FromString(self->entry->source);
}

static PyObject *
Wrapper_get_target(WrapperObject *self, void *closure)
{
    (void)closure;
    return Py_XNewRef(wrapper_target(self));
}

/* Dynamo (torch.compile) cannot trace a C callable it does not know: it
 * traces instead what a wrapper holds at __original_fn when the wrapper's
 * type says __script_if_tracing_wrapper (its protocol for wrappers that
 * hold the callable they stand for).  That is the migrated meaning written
 * in Python (transfer_to_npu._traceable), so compiled code sees the NPU
 * call, as eager code does. */
static PyObject *
Wrapper_get_traceable(WrapperObject *self, void *closure)
{
    PyObject *module = PyImport_ImportModule("transfer_to_npu._traceable"), *result = NULL;

    (void)closure;
    if (module == NULL)
        goto exit;
    if (self->device_kws == NULL) { /* cleared: it stands for nothing now */
        PyErr_SetString(PyExc_AttributeError, "__original_fn");
        goto exit;
    }
    result = PyObject_CallMethod(module, "traceable", "OiiO", (PyObject *)self, self->mode,
                                 self->pos, self->device_kws);

exit:
    Py_XDECREF(module);
    return result;
}

static PyObject *
Wrapper_get_true(PyObject *self, void *closure)
{
    (void)self;
    (void)closure;
    Py_RETURN_TRUE;
}

static PyMethodDef Wrapper_methods[] = {
    {"__instancecheck__", (PyCFunction)Wrapper_instancecheck, METH_O, NULL},
    {"__subclasscheck__", (PyCFunction)Wrapper_subclasscheck, METH_O, NULL},
    {"__mro_entries__", (PyCFunction)Wrapper_mro_entries, METH_O, NULL},
    {"__copy__", Wrapper_copy, METH_NOARGS, NULL},
    {"__deepcopy__", Wrapper_copy, METH_O, NULL},
    {"__reduce__", (PyCFunction)Wrapper_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Wrapper_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(WrapperObject, wrapped), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(WrapperObject, vectorcall), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(WrapperObject, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Wrapper_getset[] = {
    {"__npu_source__", (getter)Wrapper_get_source, NULL, NULL, NULL},
    {"__npu_target__", (getter)Wrapper_get_target, NULL, NULL, NULL},
    {"__original_fn", (getter)Wrapper_get_traceable, NULL, NULL, NULL},
    {"__script_if_tracing_wrapper", Wrapper_get_true, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot function_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_nb_or, Wrapper_or},
    {Py_tp_traverse, Wrapper_traverse},
    {Py_tp_clear, Wrapper_clear},
    {Py_tp_dealloc, Wrapper_dealloc},
    {Py_tp_getattro, Wrapper_getattro},
    {Py_tp_repr, Wrapper_repr},
    {Py_tp_methods, Wrapper_methods},
    {Py_tp_members, Wrapper_members},
    {Py_tp_getset, Wrapper_getset},
    {0, NULL},
};

static PyType_Slot method_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, ttn_bind_as_function},
    {Py_tp_traverse, Wrapper_traverse},
    {Py_tp_clear, Wrapper_clear},
    {Py_tp_dealloc, Wrapper_dealloc},
    {Py_tp_getattro, Wrapper_getattro},
    {Py_tp_repr, Wrapper_repr},
    {Py_tp_methods, Wrapper_methods},
    {Py_tp_members, Wrapper_members},
    {Py_tp_getset, Wrapper_getset},
    {0, NULL},
};

PyType_Spec ttn_function_spec = {
    .name = "transfer_to_npu._C.FunctionWrapper",
    .basicsize = sizeof(WrapperObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = function_slots,
};

PyType_Spec ttn_method_spec = {
    .name = "transfer_to_npu._C.MethodWrapper",
    .basicsize = sizeof(WrapperObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
             Py_TPFLAGS_METHOD_DESCRIPTOR | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = method_slots,
};

/* ========================================================================= */

/* A redirected attribute: reading `x.is_cuda` reads `x.is_npu`. */
typedef struct {
    PyObject_HEAD
    ttn_state *state;
    PyObject *wrapped;     /* the original descriptor */
    PyObject *target_name; /* attribute read instead */
    ttn_entry *entry;
} AttributeObject;

PyObject *
ttn_attribute_new(ttn_state *st, PyObject *wrapped, PyObject *target_name, ttn_entry *entry)
{
    AttributeObject *self = PyObject_GC_New(AttributeObject, st->attribute_type);

    if (self == NULL)
        return NULL;
    self->state = st;
    self->wrapped = Py_NewRef(wrapped);
    self->target_name = Py_NewRef(target_name);
    self->entry = entry;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
Attribute_descr_get(AttributeObject *self, PyObject *obj, PyObject *type)
{
    descrgetfunc get;

    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    if (self->state->enabled) {
        ttn_hit(self->state, self->entry);
        return PyObject_GetAttr(obj, self->target_name);
    }
    get = Py_TYPE(self->wrapped)->tp_descr_get;
    if (get == NULL)
        return Py_NewRef(self->wrapped);
    return get(self->wrapped, obj, type);
}

/* A data descriptor like the getset it replaces: assignment goes to the
 * original, which refuses it in torch's own words. */
static int
Attribute_descr_set(AttributeObject *self, PyObject *obj, PyObject *value)
{
    descrsetfunc set = Py_TYPE(self->wrapped)->tp_descr_set;

    if (set == NULL) {
        PyErr_Format(PyExc_AttributeError, "attribute '%s' is not writable",
                     self->entry->source);
        return -1;
    }
    return set(self->wrapped, obj, value);
}

static int
Attribute_traverse(AttributeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->wrapped);
    Py_VISIT(self->target_name);
    return 0;
}

static int
Attribute_clear(AttributeObject *self)
{
    Py_CLEAR(self->wrapped);
    Py_CLEAR(self->target_name);
    return 0;
}

static void
Attribute_dealloc(AttributeObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_GC_UnTrack(self);
    Attribute_clear(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *
Attribute_repr(AttributeObject *self)
{
    return PyUnicode_FromFormat("<transfer_to_npu attribute %s -> %U>", self->entry->source,
                                self->target_name);
}

static PyMemberDef Attribute_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(AttributeObject, wrapped), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot attribute_slots[] = {
    {Py_tp_descr_get, Attribute_descr_get},
    {Py_tp_descr_set, Attribute_descr_set},
    {Py_tp_traverse, Attribute_traverse},
    {Py_tp_clear, Attribute_clear},
    {Py_tp_dealloc, Attribute_dealloc},
    {Py_tp_repr, Attribute_repr},
    {Py_tp_members, Attribute_members},
    {0, NULL},
};

PyType_Spec ttn_attribute_spec = {
    .name = "transfer_to_npu._C.AttributeRedirect",
    .basicsize = sizeof(AttributeObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = attribute_slots,
};

/* ------------------------------------------------------------------------- */

/* What one of this module's wrappers or redirected attributes stands in
 * for (torch's own object, which a path names); any other object itself.
 * Borrowed. */
PyObject *
ttn_unwrap(ttn_state *st, PyObject *obj)
{
    PyTypeObject *t = Py_TYPE(obj);
    PyObject *inner = NULL;

    if (t == st->function_type || t == st->method_type)
        inner = ((WrapperObject *)obj)->wrapped;
    else if (t == st->attribute_type)
        inner = ((AttributeObject *)obj)->wrapped;
    return inner != NULL ? inner : obj;
}
