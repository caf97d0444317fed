/* The virtual NPU's generic kernel: run an op that reached the npu
 * (PrivateUse1) dispatch key on the host.
 *
 *   host_call(op, *args, **kwargs)
 *
 * is registered as the PrivateUse1 fallback, and, with the op's name
 * ("aten::add.Tensor") in place of the op, as the kernel of each op that has
 * a cpu kernel.  npu tensors become cpu
 * aliases of the same memory, npu devices become the cpu device, the op's
 * cpu kernel runs, and cpu results become npu tensors on the inputs'
 * device; a result that is one of the aliased inputs (in-place and out=
 * ops) is returned as the caller's own npu tensor.  Ops that need more than
 * this (views, copies between devices, resizing) are handed to Python
 * handlers chosen once per op by the `classify` callable.  A call the
 * generic path fails is handed, with its error, to the Python slow path
 * (`retry`), which reruns what it can and otherwise raises.
 */
#include "virtual.h"

#define TTN_SMALL_PAIRS 16
#define TTN_SMALL_ARGS 12
#define TTN_DL_COMPLEX 5 /* DLPack's type code kDLComplex */

typedef struct {
    ttn_state *st;
    PyObject *op;
    int tensor_index; /* npu device of the tensor inputs, -1 if none */
    int host_tensor;  /* a cpu tensor of one or more dimensions is an input */
    int device_index; /* npu device named by a device argument, -1 if none */
    int device_named; /* a device argument named the npu, with or without index */
    /* (cpu alias, npu original) pairs, new references */
    PyObject **pairs;
    Py_ssize_t npairs, cap;
    PyObject *small_pairs[2 * TTN_SMALL_PAIRS];
} ttn_call;

/* ------------------------------------------------------------------------- */

static int
remember(ttn_call *c, PyObject *alias, PyObject *original)
{
    if (c->npairs == c->cap) {
        Py_ssize_t cap = c->cap * 2;
        PyObject **grown;

        if (c->pairs == c->small_pairs) {
            grown = PyMem_Malloc(sizeof(PyObject *) * 2 * (size_t)cap);
            if (grown != NULL)
                memcpy(grown, c->pairs, sizeof(PyObject *) * 2 * (size_t)c->npairs);
        }
        else
            grown = PyMem_Realloc(c->pairs, sizeof(PyObject *) * 2 * (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->pairs = grown;
        c->cap = cap;
    }
    c->pairs[2 * c->npairs] = Py_NewRef(alias);
    c->pairs[2 * c->npairs + 1] = Py_NewRef(original);
    c->npairs++;
    return 0;
}

static void
call_free(ttn_call *c)
{
    Py_ssize_t i;

    for (i = 0; i < 2 * c->npairs; i++)
        Py_DECREF(c->pairs[i]);
    if (c->pairs != c->small_pairs)
        PyMem_Free(c->pairs);
}

/* ------------------------------------------------------------------------- */

static PyObject *convert_arg(ttn_call *c, PyObject *v);

/* Whether a complex tensor has its conjugate or negative bit set: DLPack
 * would alias its stored values without the bit.  Only complex tensors are
 * asked (a method call each); torch resolves the negative bit of real ones
 * before every op but a few, which ops.py hands to a Python handler. */
static int
has_math_bit(PyObject *tensor)
{
    static const char *const names[] = {"is_conj", "is_neg"};
    int i, found = 0;

    for (i = 0; i < 2 && !found; i++) {
        PyObject *bit = PyObject_CallMethod(tensor, names[i], NULL);

        if (bit == NULL)
            return -1;
        found = PyObject_IsTrue(bit);
        Py_DECREF(bit);
        if (found < 0)
            return -1;
    }
    return found;
}

static PyObject *
convert_tensor(ttn_call *c, PyObject *v)
{
    PyObject *alias = NULL;
    ttn_DLTensor t;
    int index, bit;

    if (c->st->dlpack->dltensor_from_py_object_no_sync(v, &t) < 0)
        return NULL;
    if (t.device.device_type != ttn_kDLExtDev) {
        /* cpu scalars mix with device tensors, as in torch's kernels */
        if (t.device.device_type == ttn_kDLCPU && t.ndim > 0)
            c->host_tensor = 1;
        return Py_NewRef(v);
    }
    if (t.dtype.code == TTN_DL_COMPLEX) {
        bit = has_math_bit(v);
        if (bit < 0)
            return NULL;
        if (bit) {
            /* The slow path resolves it (ops.retry). */
            PyErr_Format(PyExc_RuntimeError,
                         "%R: an npu input has its conjugate or negative bit set", c->op);
            return NULL;
        }
    }
    index = t.device.device_id;
    if (c->tensor_index < 0)
        c->tensor_index = index;
    else if (c->tensor_index != index) {
        PyErr_Format(PyExc_RuntimeError,
                     "Expected all tensors to be on the same device, but found at least two "
                     "devices, npu:%d and npu:%d! (in operator %R)",
                     c->tensor_index, index, c->op);
        return NULL;
    }
    alias = ttn_host_alias(c->st, v);
    if (alias == NULL)
        return NULL;
    if (remember(c, alias, v) < 0)
        Py_CLEAR(alias);
    return alias;
}

static PyObject *
convert_device(ttn_call *c, PyObject *v)
{
    int type, index;

    if (ttn_device_decode(c->st, v, &type, &index) < 0)
        return NULL;
    if (type != TTN_C10_PRIVATEUSE1)
        return Py_NewRef(v);
    c->device_named = 1;
    if (index >= 0) {
        /* Refused before the op runs (a factory would make the tensor
         * first). */
        if (ttn_check_device_index(c->st, index) < 0)
            return NULL;
        c->device_index = index;
    }
    return Py_NewRef(c->st->cpu_device);
}

/* Lists and tuples (TensorList, Tensor?[]): a new sequence only when an
 * element changed, so size lists cost one pass of type checks. */
static PyObject *
convert_sequence(ttn_call *c, PyObject *v)
{
    Py_ssize_t i, n = PySequence_Fast_GET_SIZE(v);
    PyObject **items = PySequence_Fast_ITEMS(v);
    PyObject *out = NULL;

    for (i = 0; i < n; i++) {
        PyObject *item = items[i];
        PyObject *conv;

        if (PyLong_CheckExact(item) || PyFloat_CheckExact(item) || item == Py_None)
            continue;
        conv = convert_arg(c, item);
        if (conv == NULL)
            goto error;
        if (conv == item && out == NULL) {
            Py_DECREF(conv);
            continue;
        }
        if (out == NULL) {
            Py_ssize_t j;

            out = PyList_Check(v) ? PyList_New(n) : PyTuple_New(n);
            if (out == NULL) {
                Py_DECREF(conv);
                goto error;
            }
            for (j = 0; j < n; j++) {
                PyObject *keep = Py_NewRef(items[j]);

                if (PyList_Check(out))
                    PyList_SET_ITEM(out, j, keep);
                else
                    PyTuple_SET_ITEM(out, j, keep);
            }
        }
        if (PyList_Check(out))
            Py_SETREF(((PyListObject *)out)->ob_item[i], conv);
        else
            Py_SETREF(((PyTupleObject *)out)->ob_item[i], conv);
    }
    return out != NULL ? out : Py_NewRef(v);

error:
    Py_XDECREF(out);
    return NULL;
}

static PyObject *
convert_arg(ttn_call *c, PyObject *v)
{
    if (PyObject_TypeCheck(v, c->st->tensor_type))
        return convert_tensor(c, v);
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v))
        return convert_sequence(c, v);
    if (c->st->device_type != NULL && Py_IS_TYPE(v, c->st->device_type))
        return convert_device(c, v);
    return Py_NewRef(v);
}

/* ------------------------------------------------------------------------- */

static PyObject *convert_result(ttn_call *c, PyObject *r, int index);

static int
same_geometry(const ttn_DLTensor *a, const ttn_DLTensor *b)
{
    int32_t i;

    if (a->ndim != b->ndim)
        return 0;
    for (i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] ||
            (a->strides != NULL && b->strides != NULL && a->strides[i] != b->strides[i]))
            return 0;
    return 1;
}

static PyObject *
int64_tuple(const int64_t *values, int32_t n)
{
    PyObject *t = PyTuple_New(n);
    int32_t i;

    for (i = 0; t != NULL && i < n; i++) {
        PyObject *v = PyLong_FromLongLong((long long)values[i]);

        if (v == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* An in-place or out= result is the caller's own npu tensor.  The cpu
 * kernel may have re-shaped the host alias within its memory (an out=
 * tensor resized to fewer elements, or to none): the npu tensor takes the
 * alias's shape.  Growing is not possible here; that fails in the kernel
 * and goes to the slow path. */
static PyObject *
own_result(ttn_call *c, PyObject *alias, PyObject *original)
{
    ttn_DLTensor a, o;
    PyObject *sizes = NULL, *strides = NULL, *offset = NULL, *done = NULL, *result = NULL;

    if (c->st->dlpack->dltensor_from_py_object_no_sync(alias, &a) < 0 ||
        c->st->dlpack->dltensor_from_py_object_no_sync(original, &o) < 0)
        goto exit;
    if (same_geometry(&a, &o)) {
        result = Py_NewRef(original);
        goto exit;
    }
    if (a.strides == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%R re-shaped an npu tensor without strides", c->op);
        goto exit;
    }
    sizes = int64_tuple(a.shape, a.ndim);
    strides = int64_tuple(a.strides, a.ndim);
    offset = sizes != NULL && strides != NULL
                 ? PyObject_CallMethod(original, "storage_offset", NULL) : NULL;
    if (offset == NULL)
        goto exit;
    done = PyObject_CallMethod(original, "as_strided_", "OOO", sizes, strides, offset);
    if (done != NULL)
        result = Py_NewRef(original);

exit:
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    Py_XDECREF(offset);
    Py_XDECREF(done);
    return result;
}

/* A cpu kernel may return a complex result as a lazy conjugate (a
 * conjugate or negative bit over other values, as linalg_lu_solve with
 * left=False does), which DLPack cannot carry: the npu result is the
 * resolved values.  Real results carry no such bit from a kernel. */
static PyObject *
resolved(ttn_DLTensor *t, PyObject *r)
{
    PyObject *conj = NULL, *result = NULL;

    if (t->dtype.code != TTN_DL_COMPLEX)
        return Py_NewRef(r);
    conj = PyObject_CallMethod(r, "resolve_conj", NULL);
    if (conj != NULL)
        result = PyObject_CallMethod(conj, "resolve_neg", NULL);
    Py_XDECREF(conj);
    return result;
}

/* A result the virtual NPU cannot hold (sparse, quantized, mkldnn: DLPack
 * carries dense memory only) fails with an error naming the op and the
 * device, DLPack's refusal as its cause. */
static void
result_refused(ttn_call *c, int index)
{
    PyObject *type, *value, *tb, *error = NULL;

    if (PyErr_ExceptionMatches(PyExc_MemoryError))
        return;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    error = PyObject_CallFunction(PyExc_NotImplementedError, "N",
                                  PyUnicode_FromFormat(
                                      "%S returns a tensor the virtual NPU (npu:%d) cannot "
                                      "hold: %S", c->op, index, value));
    if (error == NULL) {
        /* Keep the original error; the new one could not be made. */
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return;
    }
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    PyException_SetCause(error, value); /* steals value */
    PyErr_SetObject(PyExc_NotImplementedError, error);
    Py_DECREF(error);
    Py_XDECREF(type);
    Py_XDECREF(tb);
}

static PyObject *
result_tensor(ttn_call *c, PyObject *r, int index)
{
    ttn_DLTensor t;
    PyObject *values, *result;
    Py_ssize_t i;

    /* In-place and out= ops return their argument: give back the caller's
     * npu tensor, not the alias. */
    for (i = 0; i < c->npairs; i++)
        if (c->pairs[2 * i] == r)
            return own_result(c, r, c->pairs[2 * i + 1]);
    if (c->st->dlpack->dltensor_from_py_object_no_sync(r, &t) < 0) {
        result_refused(c, index);
        return NULL;
    }
    if (t.device.device_type != ttn_kDLCPU)
        return Py_NewRef(r);
    values = resolved(&t, r);
    if (values == NULL)
        return NULL;
    result = ttn_device_alias(c->st, values, index, 1);
    if (result == NULL)
        result_refused(c, index);
    Py_DECREF(values);
    return result;
}

static PyObject *
convert_result(ttn_call *c, PyObject *r, int index)
{
    PyObject *out = NULL;
    Py_ssize_t i, n;

    if (PyObject_TypeCheck(r, c->st->tensor_type))
        return result_tensor(c, r, index);
    if (!PyList_CheckExact(r) && !PyTuple_CheckExact(r))
        return Py_NewRef(r);
    n = PySequence_Fast_GET_SIZE(r);
    out = PyList_CheckExact(r) ? PyList_New(n) : PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *item = convert_result(c, PySequence_Fast_GET_ITEM(r, i), index);

        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        if (PyList_CheckExact(out))
            PyList_SET_ITEM(out, i, item);
        else
            PyTuple_SET_ITEM(out, i, item);
    }
    return out;
}

/* ------------------------------------------------------------------------- */

/* What runs `op` on the host (borrowed), or NULL with *handler set
 * (borrowed) when a Python handler takes the op instead. */
static PyObject *
lookup(ttn_state *st, PyObject *op, PyObject **handler)
{
    PyObject *fn, *h = NULL;

    *handler = NULL;
    fn = PyDict_GetItemWithError(st->host_ops, op);
    if (fn != NULL || PyErr_Occurred())
        return fn;
    *handler = PyDict_GetItemWithError(st->special_ops, op);
    if (*handler != NULL || PyErr_Occurred())
        return NULL;
    if (st->classify == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the virtual NPU's op handlers are not set");
        return NULL;
    }
    h = PyObject_CallOneArg(st->classify, op);
    if (h == NULL)
        return NULL;
    if (h != Py_None) {
        if (PyDict_SetItem(st->special_ops, op, h) < 0) {
            Py_DECREF(h);
            return NULL;
        }
        Py_DECREF(h);
        *handler = PyDict_GetItemWithError(st->special_ops, op);
        return NULL;
    }
    Py_DECREF(h);
    /* OpOverload._op is the bound C++ operator: calling it directly skips
     * OpOverload.__call__'s Python frame. */
    fn = PyObject_GetAttrString(op, "_op");
    if (fn == NULL)
        return NULL;
    if (PyDict_SetItem(st->host_ops, op, fn) < 0) {
        Py_DECREF(fn);
        return NULL;
    }
    Py_DECREF(fn);
    return PyDict_GetItemWithError(st->host_ops, op);
}

/* Run fn, the host form of op, on host aliases of the npu arguments.  When
 * `strict`, a cpu tensor of one or more dimensions among npu tensors is an
 * error, as torch's device check has it; ops that take such a tensor on
 * purpose (cpu indices, the batch sizes of a packed sequence) come through
 * a Python handler and host_run_mixed, which is not strict. */
static PyObject *
run_on_host(ttn_state *st, PyObject *op, PyObject *fn, PyObject *const *args, Py_ssize_t nargs,
            PyObject *kwnames, int strict)
{
    ttn_call c;
    PyObject *small[TTN_SMALL_ARGS + 1];
    PyObject **conv = small;
    PyObject *raw = NULL, *result = NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    Py_ssize_t total = nargs + nkw, done = 0, i;
    int index;

    small[0] = NULL;
    c.st = st;
    c.op = op;
    c.tensor_index = -1;
    c.device_index = -1;
    c.device_named = 0;
    c.host_tensor = 0;
    c.pairs = c.small_pairs;
    c.npairs = 0;
    c.cap = TTN_SMALL_PAIRS;
    if (total > TTN_SMALL_ARGS) {
        conv = PyMem_Malloc(sizeof(PyObject *) * (size_t)(total + 1));
        if (conv == NULL) {
            PyErr_NoMemory();
            goto exit;
        }
    }
    for (done = 0; done < total; done++) {
        conv[done + 1] = convert_arg(&c, args[done]);
        if (conv[done + 1] == NULL)
            goto exit;
    }
    if (strict && c.host_tensor && c.tensor_index >= 0) {
        PyErr_Format(PyExc_RuntimeError,
                     "Expected all tensors to be on the same device, but found at least two "
                     "devices, npu:%d and cpu! (in operator %R)",
                     c.tensor_index, op);
        goto exit;
    }
    raw = PyObject_Vectorcall(fn, conv + 1, (size_t)nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                              kwnames);
    if (raw == NULL)
        goto exit;
    /* A device argument decides where results go (factories, *_like with
     * device=); otherwise they stay with the inputs. */
    if (c.device_index >= 0)
        index = c.device_index;
    else if (!c.device_named && c.tensor_index >= 0)
        index = c.tensor_index;
    else
        index = ttn_current_device(st);
    result = convert_result(&c, raw, index);

exit:
    for (i = 0; i < done; i++)
        Py_DECREF(conv[i + 1]);
    if (conv != small)
        PyMem_Free(conv);
    Py_XDECREF(raw);
    call_free(&c);
    return result;
}

/* callable(*lead, *args, **kwargs): args and kwnames as a vectorcall got
 * them, after nlead leading arguments. */
static PyObject *
call_prepended(PyObject *callable, PyObject *const *lead, Py_ssize_t nlead,
               PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *small[TTN_SMALL_ARGS + 2];
    PyObject **call = small, *result;
    Py_ssize_t total = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));

    if (nlead + total > TTN_SMALL_ARGS + 2) {
        call = PyMem_Malloc(sizeof(PyObject *) * (size_t)(nlead + total));
        if (call == NULL)
            return PyErr_NoMemory();
    }
    memcpy(call, lead, sizeof(PyObject *) * (size_t)nlead);
    memcpy(call + nlead, args, sizeof(PyObject *) * (size_t)total);
    result = PyObject_Vectorcall(callable, call, (size_t)(nlead + nargs), kwnames);
    if (call != small)
        PyMem_Free(call);
    return result;
}

/* The generic path failed: call retry(error, op, *args, **kwargs), the
 * Python slow path.  It reruns the calls it knows how to (an out= tensor
 * that must grow, which a host alias of fixed size cannot; a conjugate
 * input, which DLPack cannot carry; a number where the op takes a tensor)
 * and raises anything else, with the op and device named. */
static PyObject *
retry(ttn_state *st, PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *type = NULL, *value = NULL, *tb = NULL, *result = NULL, *lead[2];

    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL || st->retry == NULL) {
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (tb != NULL && PyException_SetTraceback(value, tb) < 0)
        goto exit;
    lead[0] = value;
    lead[1] = op;
    result = call_prepended(st->retry, lead, 2, args, nargs, kwnames);

exit:
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return result;
}

/* The op a kernel was registered for.  Kernels are registered by name, and
 * the name is resolved at the op's first call: resolving all of them costs
 * milliseconds at every process start.  Borrowed; NULL on error. */
static PyObject *
op_named(ttn_state *st, PyObject *key)
{
    PyObject *op;

    if (!PyUnicode_CheckExact(key))
        return key; /* an op already: the fallback kernel gets it from torch */
    op = PyDict_GetItemWithError(st->ops_by_name, key);
    if (op != NULL || PyErr_Occurred())
        return op;
    if (st->resolve == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the virtual NPU's op handlers are not set");
        return NULL;
    }
    op = PyObject_CallOneArg(st->resolve, key);
    if (op == NULL)
        return NULL;
    if (PyDict_SetItem(st->ops_by_name, key, op) < 0) {
        Py_DECREF(op);
        return NULL;
    }
    Py_DECREF(op); /* the dict holds it */
    return op;
}

/* host_call(op_or_name, *args, **kwargs).  The op and what runs it are
 * held over the call: it runs Python code, which may change the dicts they
 * come from.  It is a kernel, a callback of torch's C++: Ctrl-C is held
 * until it returns (callbacks.c). */
static PyObject *
host_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *op = NULL, *fn = NULL, *handler = NULL, *result = NULL;

    ttn_callback_enter();
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "host_call(op, *args, **kwargs): op is missing");
        goto exit;
    }
    if (st->dlpack == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the virtual NPU is not installed");
        goto exit;
    }
    /* The first op to reach the npu (a factory: there is no npu tensor
     * yet) registers the rest, and sets the handlers it needs itself. */
    if (TTN_UNLIKELY(!st->kernels_ready) && ttn_ensure_kernels(st) < 0)
        goto exit;
    op = Py_XNewRef(op_named(st, args[0]));
    if (op == NULL)
        goto exit;
    fn = Py_XNewRef(lookup(st, op, &handler));
    Py_XINCREF(handler);
    if (fn != NULL) {
        result = run_on_host(st, op, fn, args + 1, nargs - 1, kwnames, 1);
        if (result == NULL)
            result = retry(st, op, args + 1, nargs - 1, kwnames);
    }
    else if (handler != NULL)
        result = call_prepended(handler, &op, 1, args + 1, nargs - 1, kwnames);

exit:
    Py_XDECREF(op);
    Py_XDECREF(fn);
    Py_XDECREF(handler);
    ttn_callback_leave();
    return result;
}

static PyObject *
run_for_handler(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                int strict)
{
    ttn_state *st = ttn_get_state(module);

    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "host_run(op, fn, *args, **kwargs)");
        return NULL;
    }
    if (st->dlpack == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the virtual NPU is not installed");
        return NULL;
    }
    return run_on_host(st, args[0], args[1], args + 2, nargs - 2, kwnames, strict);
}

/* run_on_host for Python handlers that adjust an op before or after the
 * generic path: host_run(op, host_callable, *args, **kwargs). */
static PyObject *
host_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return run_for_handler(module, args, nargs, kwnames, 1);
}

static PyObject *
host_run_mixed(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return run_for_handler(module, args, nargs, kwnames, 0);
}

PyMethodDef ttn_host_call_methods[] = {
    {"host_call", (PyCFunction)(void (*)(void))host_call, METH_FASTCALL | METH_KEYWORDS,
     "host_call(op, *args, **kwargs): run an npu op with the host's kernels"},
    {"host_run", (PyCFunction)(void (*)(void))host_run, METH_FASTCALL | METH_KEYWORDS,
     "host_run(op, fn, *args, **kwargs): run fn on host aliases of the npu arguments and "
     "move its results to the npu"},
    {"host_run_mixed", (PyCFunction)(void (*)(void))host_run_mixed,
     METH_FASTCALL | METH_KEYWORDS,
     "host_run_mixed(op, fn, *args, **kwargs): host_run for ops that take cpu tensors of "
     "any shape beside npu ones (cpu indices)"},
    {NULL, NULL, 0, NULL},
};
