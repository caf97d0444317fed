/* torch.device('cuda'), torch.device('cuda:1'), torch.device('cuda', 1).
 *
 * torch.device is a C type that cannot be subclassed, and replacing the
 * name `torch.device` would break isinstance() checks everywhere, so the
 * type's tp_new slot itself is replaced while migration is enabled.  A slot
 * function receives no context, so the installed state is reached through
 * one process-wide pointer, set and cleared together with the slot.
 */
#include "patcher.h"

static struct {
    PyObject *module; /* strong: keeps the state below alive */
    ttn_state *state;
    PyTypeObject *type;
    /* Kept after restore: a call already inside device_new (another thread
     * may disable meanwhile) still reaches the original. */
    newfunc original_new;
    vectorcallfunc original_vectorcall;
} installed;

/* ------------------------------------------------------------------------- */

/* args and kwds with the argument a constructor takes first (the first
 * positional one, else the keyword `key`) made `value`; new references.
 * The tuple is always a new one: a full slice of a tuple is the tuple
 * itself, which may be the caller's (torch.device(*t)). */
int
ttn_with_first_argument(PyObject *args, PyObject *kwds, PyObject *key, PyObject *value,
                        PyObject **newargs, PyObject **newkwds)
{
    Py_ssize_t i, n = PyTuple_GET_SIZE(args);
    int rc = -1;

    *newargs = NULL;
    *newkwds = NULL;
    if (n > 0) {
        *newargs = PyTuple_New(n);
        if (*newargs == NULL)
            goto exit;
        for (i = 0; i < n; i++)
            PyTuple_SET_ITEM(*newargs, i, Py_NewRef(i == 0 ? value : PyTuple_GET_ITEM(args, i)));
        *newkwds = Py_XNewRef(kwds);
    }
    else {
        *newkwds = PyDict_Copy(kwds);
        if (*newkwds == NULL || PyDict_SetItem(*newkwds, key, value) < 0)
            goto exit;
        *newargs = Py_NewRef(args);
    }
    rc = 0;

exit:
    if (rc < 0)
        Py_CLEAR(*newkwds);
    return rc;
}

static PyObject *
raise_invalid(ttn_state *st, PyObject *spec)
{
    PyErr_Format(st->invalid_device_error,
                 "Invalid device string: %R (argument 'type' of torch.device)", spec);
    return NULL;
}

/* Call the original constructor with the type argument (keyword `key` when
 * not positional) replaced by `value`. */
static PyObject *
call_with(PyTypeObject *type, PyObject *args, PyObject *kwds, PyObject *key, PyObject *value)
{
    PyObject *newargs = NULL, *newkwds = NULL, *result = NULL;

    if (ttn_with_first_argument(args, kwds, key, value, &newargs, &newkwds) < 0)
        goto exit;
    result = installed.original_new(type, newargs, newkwds);

exit:
    Py_XDECREF(newargs);
    Py_XDECREF(newkwds);
    return result;
}

/* The original constructor given the npu spelling of device `idx`, for the
 * shapes the cache below does not cover (so that torch reports its own
 * errors for them, and makes what it makes of the rest). */
static PyObject *
call_original(ttn_state *st, PyTypeObject *type, PyObject *args, PyObject *kwds, PyObject *key,
              int idx)
{
    PyObject *npu = ttn_npu_string(st, idx);

    return npu == NULL ? NULL : call_with(type, args, kwds, key, npu);
}

/* torch's verdict on the arguments, which it gives before it reads the
 * type (an index of the wrong type, an argument too many, a keyword it
 * does not know): the original constructor given the target's type, as str
 * or bytes as spec is.  0 when it accepts them. */
static int
check_arguments(ttn_state *st, PyTypeObject *type, PyObject *args, PyObject *kwds, PyObject *key,
                PyObject *spec)
{
    PyObject *target = PyUnicode_Check(spec) ? Py_NewRef(st->str_target)
                                             : PyBytes_FromString(st->target.device);
    PyObject *made = target == NULL ? NULL : call_with(type, args, kwds, key, target);

    Py_XDECREF(target);
    if (made == NULL)
        return -1;
    Py_DECREF(made);
    return 0;
}

/* Count the mapping of a CUDA type string; the log shows its npu spelling. */
static int
hit(ttn_state *st, PyObject *spec, int idx)
{
    PyObject *npu;

    if (!st->track_sites) {
        ttn_hit(st, st->device_entry);
        return 0;
    }
    npu = ttn_npu_string(st, idx); /* borrowed: cached */
    if (npu == NULL)
        return -1;
    ttn_hit_detail(st, st->device_entry, st->str_type, spec, npu);
    return 0;
}

/* The argument at position i, else the keyword `key`, held (looking it up
 * may run a key's __eq__, and logging a rewrite may run a str subclass's
 * __repr__, either of which may change kwds); NULL with no error when
 * absent. */
static PyObject *
argument(PyObject *args, PyObject *kwds, Py_ssize_t i, PyObject *key)
{
    if (PyTuple_GET_SIZE(args) > i)
        return Py_NewRef(PyTuple_GET_ITEM(args, i));
    if (kwds == NULL || PyDict_GET_SIZE(kwds) == 0)
        return NULL;
    return Py_XNewRef(PyDict_GetItemWithError(kwds, key));
}

/* torch.device has two signatures: device(device), one argument
 * (positional, or the keyword device), and device(type, index=None), which
 * refuses a type that includes an index.  Of a CUDA type, the cached npu
 * device is made for the common shapes; torch judges the rest, as it would
 * judge the npu spelling. */
static PyObject *
device_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    ttn_state *st = installed.state;
    newfunc original = installed.original_new;
    PyObject *spec = NULL, *index = NULL, *result = NULL, *shown, *key;
    Py_ssize_t len, nargs = PyTuple_GET_SIZE(args), nkw = kwds == NULL ? 0 : PyDict_GET_SIZE(kwds);
    const char *s;
    int idx = -1, with_index, simple, dev_type, dev_index, overflow, has_device;
    long explicit_index;

    if (st == NULL || !st->enabled || type != installed.type)
        return original(type, args, kwds);
    has_device = nargs == 0 && nkw == 1 ? PyDict_Contains(kwds, st->str_device) : 0;
    if (has_device < 0)
        goto exit;
    key = has_device ? st->str_device : st->str_type;
    with_index = !(nargs + nkw == 1 && (nargs == 1 || key == st->str_device));
    spec = argument(args, kwds, 0, key);
    if (spec == NULL && PyErr_Occurred())
        goto exit;
    if (spec != NULL && Py_IS_TYPE(spec, type) && !with_index) {
        /* torch.device(d) of a CUDA device made before migration. */
        if (ttn_device_decode(st, spec, &dev_type, &dev_index) < 0)
            goto exit;
        if (dev_type != TTN_C10_CUDA || dev_index < -1 || dev_index > TTN_MAX_DEVICE_INDEX) {
            result = original(type, args, kwds);
            goto exit;
        }
        result = Py_XNewRef(ttn_npu_device(st, dev_index));
        if (result != NULL)
            ttn_hit_detail(st, st->device_entry, key, spec, result);
        goto exit;
    }
    /* The type as torch reads it: a str, or bytes. */
    if (spec != NULL && PyBytes_Check(spec) && ttn_bytes_may_be_cuda(spec)) {
        s = PyBytes_AS_STRING(spec);
        len = PyBytes_GET_SIZE(spec);
    }
    else if (spec == NULL || !PyUnicode_Check(spec) || !ttn_may_be_cuda(spec)) {
        result = original(type, args, kwds);
        goto exit;
    }
    else if ((s = PyUnicode_AsUTF8AndSize(spec, &len)) == NULL)
        goto exit;
    index = with_index ? argument(args, kwds, 1, st->str_index) : NULL;
    if (index == NULL && PyErr_Occurred())
        goto exit;
    simple = nargs + nkw == 1 + (index != NULL) &&
             (index == NULL || index == Py_None || PyLong_CheckExact(index));
    if (!simple && check_arguments(st, type, args, kwds, key, spec) < 0)
        goto exit;
    switch (ttn_devspec_parse(s, (size_t)len, &idx)) {
    case TTN_DEV_CUDA:
        break;
    case TTN_DEV_INVALID:
        result = raise_invalid(st, spec);
        goto exit;
    default:
        result = original(type, args, kwds);
        goto exit;
    }
    if (with_index && idx >= 0) {
        /* torch's own check, made here so that the message shows what the
         * user wrote rather than its npu spelling. */
        shown = PyUnicode_DecodeLatin1(s, len, NULL);
        if (shown != NULL) {
            PyErr_Format(PyExc_RuntimeError,
                         "type (string) must not include an index because index was passed "
                         "explicitly: %U",
                         shown);
            Py_DECREF(shown);
        }
        goto exit;
    }
    if (index == Py_None)
        Py_CLEAR(index);
    if (hit(st, spec, idx) < 0)
        goto exit;
    if (!simple) {
        /* Judged by torch above; an unindexed target is one device, as the
         * common shapes below make it whatever the index. */
        result = st->target.indexed ? call_original(st, type, args, kwds, key, idx)
                                    : Py_XNewRef(ttn_npu_device(st, idx));
        goto exit;
    }
    if (index != NULL) {
        explicit_index = PyLong_AsLongAndOverflow(index, &overflow);
        if (explicit_index == -1 && PyErr_Occurred())
            goto exit;
        if (overflow > 0 || explicit_index > TTN_MAX_DEVICE_INDEX) {
            /* torch keeps an index in eight bits: 128 would come back as
             * npu:-128. */
            PyErr_Format(PyExc_RuntimeError,
                         "Device index must be between -1 and %d, got %R (torch.device(%R, %R))",
                         TTN_MAX_DEVICE_INDEX, index, spec, index);
            goto exit;
        }
        if (overflow < 0 || explicit_index < 0) {
            /* torch's: "Device index must not be negative". */
            result = call_original(st, type, args, kwds, key, idx);
            goto exit;
        }
        idx = (int)explicit_index;
    }
    /* torch.device objects are immutable: hand out the cached one, which
     * also lets the wrappers recognise it by identity. */
    result = Py_XNewRef(ttn_npu_device(st, idx));

exit:
    Py_XDECREF(spec);
    Py_XDECREF(index);
    return result;
}

/* ------------------------------------------------------------------------- */

int
ttn_device_ctor_install(PyObject *module, ttn_state *st, PyTypeObject *device_type,
                        ttn_entry *entry)
{
    if (installed.state != NULL) {
        if (installed.state == st)
            return 0;
        PyErr_SetString(PyExc_RuntimeError,
                        "torch.device is already patched by another transfer_to_npu module");
        return -1;
    }
    if (device_type->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError, "torch.device has no constructor to patch");
        return -1;
    }
    st->device_entry = entry;
    installed.module = Py_NewRef(module);
    installed.state = st;
    installed.type = device_type;
    installed.original_new = device_type->tp_new;
    installed.original_vectorcall = device_type->tp_vectorcall;
    /* A type's own vectorcall would bypass tp_new: route calls through
     * tp_call -> tp_new while patched. */
    device_type->tp_vectorcall = NULL;
    device_type->tp_new = device_new;
    return 0;
}

/* ------------------------------------------------------------------------- */

void
ttn_device_ctor_restore(ttn_state *st)
{
    if (installed.state != st)
        return;
    installed.type->tp_new = installed.original_new;
    installed.type->tp_vectorcall = installed.original_vectorcall;
    installed.state = NULL;
    installed.type = NULL;
    Py_CLEAR(installed.module);
}
