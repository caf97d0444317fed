/* The virtual NPU's memory.
 *
 * An npu tensor is a real PrivateUse1 tensor whose data pointer is host
 * memory.  To run an op, its npu arguments are aliased as cpu tensors and
 * the cpu results are aliased back as npu tensors: the same bytes, tagged
 * with the other device, made through DLPack's C exchange table (no copy,
 * no Python call).  Memory is accounted when a cpu result becomes npu
 * memory, and given back by the DLPack deleter when torch frees it.
 */
#include "virtual.h"

#include <stdatomic.h>
#include <stdlib.h>

/* Per-device figures.  Process-wide, not module state: a deleter runs when
 * torch frees the storage, which may be after the module is gone, and on
 * any thread, without the interpreter lock. */
typedef struct {
    _Atomic int64_t allocated; /* bytes in live npu storages */
    _Atomic int64_t peak;
    _Atomic int64_t allocations; /* live npu storages */
    _Atomic int64_t peak_allocations;
    _Atomic int64_t total_allocated;   /* bytes ever allocated */
    _Atomic int64_t total_allocations; /* storages ever allocated */
} ttn_device_memory;

static ttn_device_memory memory[TTN_MAX_DEVICE_INDEX + 1];

/* An npu storage made from a cpu result: our managed tensor around the
 * producer's, so that freeing it is seen here. */
typedef struct {
    ttn_DLManagedTensorVersioned managed;
    ttn_DLManagedTensorVersioned *inner;
    int64_t nbytes;
    int device;
} ttn_owned;

/* ------------------------------------------------------------------------- */

static void
owned_delete(ttn_DLManagedTensorVersioned *self)
{
    ttn_owned *owned = self->manager_ctx;
    ttn_device_memory *m = &memory[owned->device];

    atomic_fetch_sub_explicit(&m->allocated, owned->nbytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&m->allocations, 1, memory_order_relaxed);
    if (owned->inner != NULL && owned->inner->deleter != NULL)
        owned->inner->deleter(owned->inner);
    free(owned);
}

/* Raise *peak to now unless another thread raised it further. */
static void
raise_peak(_Atomic int64_t *peak, int64_t now)
{
    int64_t seen = atomic_load_explicit(peak, memory_order_relaxed);

    while (now > seen &&
           !atomic_compare_exchange_weak_explicit(peak, &seen, now, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

static void
account(int device, int64_t nbytes)
{
    ttn_device_memory *m = &memory[device];

    raise_peak(&m->peak,
               atomic_fetch_add_explicit(&m->allocated, nbytes, memory_order_relaxed) + nbytes);
    raise_peak(&m->peak_allocations,
               atomic_fetch_add_explicit(&m->allocations, 1, memory_order_relaxed) + 1);
    atomic_fetch_add_explicit(&m->total_allocated, nbytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->total_allocations, 1, memory_order_relaxed);
}

/* Bytes spanned by a strided tensor. */
static int64_t
extent_bytes(const ttn_DLTensor *t)
{
    int64_t span = 1, itemsize = ((int64_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
    int32_t i;

    for (i = 0; i < t->ndim; i++) {
        int64_t stride;

        if (t->shape[i] == 0)
            return 0;
        stride = t->strides != NULL ? t->strides[i] : 0;
        if (t->strides == NULL) {
            int32_t j;

            stride = 1;
            for (j = i + 1; j < t->ndim; j++)
                stride *= t->shape[j];
        }
        span += (t->shape[i] - 1) * (stride < 0 ? -stride : stride);
    }
    return span * itemsize;
}

/* ------------------------------------------------------------------------- */

static int
check_ready(ttn_state *st)
{
    if (st->dlpack == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the virtual NPU is not installed");
        return -1;
    }
    return 0;
}

int
ttn_tensor_device(ttn_state *st, PyObject *tensor, int *type, int *index)
{
    ttn_DLTensor t;

    if (st->dlpack->dltensor_from_py_object_no_sync(tensor, &t) < 0)
        return -1;
    *type = t.device.device_type;
    *index = t.device.device_id;
    return 0;
}

/* Every npu tensor is made here or in storage_tensor(): only then may ops
 * reach the npu kernels that were not registered at import, so the first
 * one registers them (torch runs nothing on a device with no tensor but
 * the factories, registered at import; host_call() asks first, as it needs
 * the handlers complete() sets).  Another thread making its first npu
 * tensor meanwhile waits in complete() until they all are. */
int
ttn_ensure_kernels(ttn_state *st)
{
    PyObject *done;
    int ready;

    if (TTN_LIKELY(st->kernels_ready) || st->complete == NULL)
        return 0;
    done = PyObject_CallNoArgs(st->complete);
    if (done == NULL)
        return -1;
    ready = PyObject_IsTrue(done);
    Py_DECREF(done);
    if (ready < 0)
        return -1;
    st->kernels_ready = ready;
    return 0;
}

/* Re-tag a tensor's memory as another device's: a new tensor object over
 * the same bytes. */
static PyObject *
retag(ttn_state *st, PyObject *tensor, int device_type, int index, int accounted)
{
    ttn_DLManagedTensorVersioned *inner = NULL, *handed = NULL;
    ttn_owned *owned = NULL;
    void *result = NULL;

    if (check_ready(st) < 0)
        goto exit;
    if (device_type == ttn_kDLExtDev && ttn_ensure_kernels(st) < 0)
        goto exit;
    if (!PyObject_TypeCheck(tensor, st->tensor_type)) {
        PyErr_Format(PyExc_TypeError, "expected a tensor, got %.200s", Py_TYPE(tensor)->tp_name);
        goto exit;
    }
    if (st->dlpack->managed_tensor_from_py_object_no_sync(tensor, &inner) < 0)
        goto exit;
    handed = inner;
    if (accounted) {
        owned = malloc(sizeof(*owned));
        if (owned == NULL) {
            PyErr_NoMemory();
            goto exit;
        }
        owned->managed = *inner;
        owned->managed.manager_ctx = owned;
        owned->managed.deleter = owned_delete;
        owned->inner = inner;
        owned->nbytes = extent_bytes(&inner->dl_tensor);
        owned->device = index;
        handed = &owned->managed;
    }
    handed->dl_tensor.device.device_type = device_type;
    handed->dl_tensor.device.device_id = index;
    /* The consumer owns `handed` from here on, success or not. */
    inner = NULL;
    if (accounted)
        account(index, owned->nbytes);
    if (st->dlpack->managed_tensor_to_py_object_no_sync(handed, &result) < 0)
        result = NULL;

exit:
    if (inner != NULL && inner->deleter != NULL)
        inner->deleter(inner);
    return result;
}

PyObject *
ttn_host_alias(ttn_state *st, PyObject *tensor)
{
    return retag(st, tensor, ttn_kDLCPU, 0, 0);
}

/* The number of npus read again (st->recount), for an index beyond it: 0
 * when it has grown to include index, -1 with an error set if asking
 * failed. */
static int
recount(ttn_state *st, long index)
{
    PyObject *n;
    long count;

    if (st->recount == NULL || index < st->device_count || index > TTN_MAX_DEVICE_INDEX)
        return 0;
    n = PyObject_CallNoArgs(st->recount);
    if (n == NULL)
        return -1;
    count = PyLong_AsLong(n);
    Py_DECREF(n);
    if (count == -1 && PyErr_Occurred())
        return -1;
    if (count > st->device_count && count <= TTN_MAX_DEVICE_INDEX + 1)
        st->device_count = (int)count;
    return 0;
}

int
ttn_check_device_index(ttn_state *st, long index)
{
    if (index >= 0 && index < st->device_count)
        return 0;
    if (index >= 0 && recount(st, index) < 0)
        return -1;
    if (index >= 0 && index < st->device_count)
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "Invalid device ordinal: npu:%ld (there %s %d visible virtual NPU%s; see "
                 "TRANSFER_TO_NPU_VIRTUAL_DEVICES and ASCEND_RT_VISIBLE_DEVICES)",
                 index, st->device_count == 1 ? "is" : "are", st->device_count,
                 st->device_count == 1 ? "" : "s");
    return -1;
}

/* Every npu tensor is made here: one on a device that does not exist is
 * refused, as CUDA refuses it. */
PyObject *
ttn_device_alias(ttn_state *st, PyObject *tensor, int index, int accounted)
{
    if (ttn_check_device_index(st, index) < 0)
        return NULL;
    return retag(st, tensor, ttn_kDLExtDev, index, accounted);
}

/* ------------------------------------------------------------------------- */

/* An npu tensor over memory that a Python object (an npu storage) owns: the
 * managed tensor holds a reference to the owner, dropped by the deleter,
 * which may run on any thread and so takes the interpreter lock. */
typedef struct {
    ttn_DLManagedTensorVersioned managed;
    PyObject *owner;
    int64_t shape[1];
    int64_t strides[1];
} ttn_borrowed;

static void
borrowed_delete(ttn_DLManagedTensorVersioned *self)
{
    ttn_borrowed *b = self->manager_ctx;

    /* After finalisation the owner is gone with the interpreter. */
    if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();

        Py_DECREF(b->owner);
        PyGILState_Release(gil);
    }
    free(b);
}

static PyObject *
storage_tensor(ttn_state *st, PyObject *owner, void *data, int64_t nbytes, int index)
{
    ttn_borrowed *b = NULL;
    void *result = NULL;

    if (check_ready(st) < 0 || ttn_ensure_kernels(st) < 0)
        goto exit;
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        PyErr_NoMemory();
        goto exit;
    }
    b->owner = Py_NewRef(owner);
    b->shape[0] = nbytes;
    b->strides[0] = 1;
    b->managed.version.major = TTN_DLPACK_MAJOR;
    b->managed.manager_ctx = b;
    b->managed.deleter = borrowed_delete;
    b->managed.dl_tensor.data = data;
    b->managed.dl_tensor.device.device_type = ttn_kDLExtDev;
    b->managed.dl_tensor.device.device_id = index;
    b->managed.dl_tensor.ndim = 1;
    b->managed.dl_tensor.dtype.code = 1; /* kDLUInt */
    b->managed.dl_tensor.dtype.bits = 8;
    b->managed.dl_tensor.dtype.lanes = 1;
    b->managed.dl_tensor.shape = b->shape;
    b->managed.dl_tensor.strides = b->strides;
    /* The consumer owns b from here on, success or not. */
    if (st->dlpack->managed_tensor_to_py_object_no_sync(&b->managed, &result) < 0)
        result = NULL;

exit:
    return result;
}

/* ------------------------------------------------------------------------- */

/* Pinned host memory (Tensor.pin_memory()): a cpu tensor whose data
 * address stays in the registry, a Python set, until torch frees the
 * memory, so that is_pinned() can answer for any tensor over it.  The
 * deleter may run on any thread, so it takes the interpreter lock. */
typedef struct {
    ttn_DLManagedTensorVersioned managed;
    ttn_DLManagedTensorVersioned *inner;
    PyObject *registry;
    PyObject *key;
} ttn_pinned;

static void
pinned_delete(ttn_DLManagedTensorVersioned *self)
{
    ttn_pinned *p = self->manager_ctx;

    /* After finalisation the registry is gone with the interpreter. */
    if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        PyObject *type, *value, *tb;

        /* Memory may be freed while an exception is being raised. */
        PyErr_Fetch(&type, &value, &tb);
        if (PySet_Discard(p->registry, p->key) < 0)
            PyErr_WriteUnraisable(p->registry);
        PyErr_Restore(type, value, tb);
        Py_DECREF(p->registry);
        Py_DECREF(p->key);
        PyGILState_Release(gil);
    }
    if (p->inner->deleter != NULL)
        p->inner->deleter(p->inner);
    free(p);
}

static PyObject *
pin(ttn_state *st, PyObject *tensor)
{
    ttn_DLManagedTensorVersioned *inner = NULL;
    ttn_pinned *p = NULL;
    PyObject *key = NULL;
    void *result = NULL;

    if (check_ready(st) < 0)
        goto exit;
    if (!PyObject_TypeCheck(tensor, st->tensor_type)) {
        PyErr_Format(PyExc_TypeError, "pin: expected a tensor, got %.200s",
                     Py_TYPE(tensor)->tp_name);
        goto exit;
    }
    if (st->dlpack->managed_tensor_from_py_object_no_sync(tensor, &inner) < 0)
        goto exit;
    if (inner->dl_tensor.device.device_type != ttn_kDLCPU) {
        PyErr_SetString(PyExc_ValueError, "pin: expected a cpu tensor");
        goto exit;
    }
    key = PyLong_FromVoidPtr((char *)inner->dl_tensor.data + inner->dl_tensor.byte_offset);
    p = key != NULL ? malloc(sizeof(*p)) : NULL;
    if (p == NULL) {
        if (key != NULL)
            PyErr_NoMemory();
        goto exit;
    }
    if (PySet_Add(st->pinned, key) < 0)
        goto exit;
    p->managed = *inner;
    p->managed.manager_ctx = p;
    p->managed.deleter = pinned_delete;
    p->inner = inner;
    p->registry = Py_NewRef(st->pinned);
    p->key = Py_NewRef(key);
    /* The consumer owns p (and inner through it) from here on, success or
     * not. */
    inner = NULL;
    if (st->dlpack->managed_tensor_to_py_object_no_sync(&p->managed, &result) < 0)
        result = NULL;
    p = NULL;

exit:
    free(p);
    if (inner != NULL && inner->deleter != NULL)
        inner->deleter(inner);
    Py_XDECREF(key);
    return result;
}

/* ========================================================================= */
/* Python interface: used by the virtual NPU's op handlers and device module. */

/* A device index argument, checked against torch's range. */
int
ttn_index_arg(PyObject *arg, int *index)
{
    long v = PyLong_AsLong(arg);

    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v > TTN_MAX_DEVICE_INDEX) {
        PyErr_Format(PyExc_ValueError, "npu device index %ld is out of range", v);
        return -1;
    }
    *index = (int)v;
    return 0;
}

static PyObject *
host_install(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *capsule, *tensor_type, *cpu_device, *complete;
    const ttn_DLPackExchangeAPI *api;
    int count;

    if (!PyArg_ParseTuple(args, "OO!OOi:host_install", &capsule, &PyType_Type, &tensor_type,
                          &cpu_device, &complete, &count))
        return NULL;
    if (!PyType_Check(Py_TYPE(cpu_device)) || Py_TYPE(cpu_device)->tp_new == NULL) {
        PyErr_SetString(PyExc_TypeError, "host_install: cpu_device must be a torch.device");
        return NULL;
    }
    api = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
    if (api == NULL)
        return NULL;
    if (api->header.version.major != TTN_DLPACK_MAJOR ||
        api->managed_tensor_from_py_object_no_sync == NULL ||
        api->managed_tensor_to_py_object_no_sync == NULL ||
        api->dltensor_from_py_object_no_sync == NULL) {
        PyErr_Format(PyExc_RuntimeError,
                     "torch's DLPack exchange table (version %u) is not usable",
                     (unsigned)api->header.version.major);
        return NULL;
    }
    Py_XSETREF(st->dlpack_capsule, Py_NewRef(capsule));
    Py_XSETREF(st->tensor_type, (PyTypeObject *)Py_NewRef(tensor_type));
    Py_XSETREF(st->cpu_device, Py_NewRef(cpu_device));
    /* Device arguments of npu ops are recognised by this type. */
    Py_XSETREF(st->device_type, (PyTypeObject *)Py_NewRef(Py_TYPE(cpu_device)));
    Py_XSETREF(st->complete, Py_NewRef(complete));
    st->kernels_ready = 0;
    st->device_count = count;
    if (st->pinned == NULL && (st->pinned = PySet_New(NULL)) == NULL)
        return NULL;
    st->dlpack = api;
    Py_RETURN_NONE;
}

static PyObject *
host_check_device_index(PyObject *module, PyObject *arg)
{
    long index = PyLong_AsLong(arg);

    if ((index == -1 && PyErr_Occurred()) ||
        ttn_check_device_index(ttn_get_state(module), index) < 0)
        return NULL;
    return PyLong_FromLong(index);
}

static PyObject *
host_recount(PyObject *module, PyObject *fn)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "host_recount() takes a callable, not %R", fn);
        return NULL;
    }
    Py_XSETREF(ttn_get_state(module)->recount, Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* The ops' handling written in Python, which loads with the kernels that
 * need it: complete() sets it before it registers them. */
static PyObject *
host_handlers(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    PyObject *classify, *retry, *resolve;

    if (!PyArg_ParseTuple(args, "OOO:host_handlers", &classify, &retry, &resolve))
        return NULL;
    Py_XSETREF(st->classify, Py_NewRef(classify));
    Py_XSETREF(st->retry, Py_NewRef(retry));
    Py_XSETREF(st->resolve, Py_NewRef(resolve));
    Py_RETURN_NONE;
}

static PyObject *
host_to_host(PyObject *module, PyObject *tensor)
{
    return ttn_host_alias(ttn_get_state(module), tensor);
}

static PyObject *
host_to_device(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int index, accounted = 1;

    if (nargs < 2 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "to_device(tensor, index, accounted=True)");
        return NULL;
    }
    if (ttn_index_arg(args[1], &index) < 0)
        return NULL;
    if (nargs == 3 && (accounted = PyObject_IsTrue(args[2])) < 0)
        return NULL;
    return ttn_device_alias(ttn_get_state(module), args[0], index, accounted);
}

static PyObject *
host_storage_tensor(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    void *data;
    long long nbytes;
    int index;

    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "storage_tensor(storage, data_ptr, nbytes, index)");
        return NULL;
    }
    data = PyLong_AsVoidPtr(args[1]);
    if (data == NULL && PyErr_Occurred())
        return NULL;
    nbytes = PyLong_AsLongLong(args[2]);
    if (nbytes == -1 && PyErr_Occurred())
        return NULL;
    if (nbytes < 0) {
        PyErr_Format(PyExc_ValueError, "storage_tensor: nbytes must not be negative, got %lld",
                     nbytes);
        return NULL;
    }
    if (ttn_index_arg(args[3], &index) < 0)
        return NULL;
    return storage_tensor(ttn_get_state(module), args[0], data, (int64_t)nbytes, index);
}

static PyObject *
host_memory_stats(PyObject *module, PyObject *arg)
{
    int index;
    ttn_device_memory *m;

    (void)module;
    if (ttn_index_arg(arg, &index) < 0)
        return NULL;
    m = &memory[index];
    return Py_BuildValue("{sLsLsLsLsLsL}", "allocated", (long long)atomic_load(&m->allocated),
                         "peak", (long long)atomic_load(&m->peak), "allocations",
                         (long long)atomic_load(&m->allocations), "peak_allocations",
                         (long long)atomic_load(&m->peak_allocations), "total_allocated",
                         (long long)atomic_load(&m->total_allocated), "total_allocations",
                         (long long)atomic_load(&m->total_allocations));
}

static PyObject *
host_reset_peak(PyObject *module, PyObject *arg)
{
    int index;
    ttn_device_memory *m;

    (void)module;
    if (ttn_index_arg(arg, &index) < 0)
        return NULL;
    m = &memory[index];
    atomic_store(&m->peak, atomic_load(&m->allocated));
    atomic_store(&m->peak_allocations, atomic_load(&m->allocations));
    Py_RETURN_NONE;
}

static PyObject *
host_pin(PyObject *module, PyObject *tensor)
{
    return pin(ttn_get_state(module), tensor);
}

/* pin_made(handler): the factories' results asked for with pin_memory=True
 * go to handler, which pins them (see is_pin_kw in wrapper.c). */
static PyObject *
host_pin_made(PyObject *module, PyObject *handler)
{
    if (!PyCallable_Check(handler)) {
        PyErr_Format(PyExc_TypeError, "pin_made: handler must be callable, got %.200s",
                     Py_TYPE(handler)->tp_name);
        return NULL;
    }
    Py_XSETREF(ttn_get_state(module)->pin_made, Py_NewRef(handler));
    Py_RETURN_NONE;
}

/* keep_to_exit(obj): a reference the interpreter never drops.  For what
 * must not be freed during finalisation: the last reference then taken by
 * a foreign thread would make it take the interpreter lock, which ends the
 * thread wherever it is (see hccl.py). */
static PyObject *
host_keep_to_exit(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_INCREF(obj);
    Py_RETURN_NONE;
}

static PyObject *
host_is_pinned(PyObject *module, PyObject *address)
{
    ttn_state *st = ttn_get_state(module);
    int found;

    if (st->pinned == NULL)
        Py_RETURN_FALSE;
    found = PySet_Contains(st->pinned, address);
    if (found < 0)
        return NULL;
    return PyBool_FromLong(found);
}

PyMethodDef ttn_host_alias_methods[] = {
    {"host_install", host_install, METH_VARARGS,
     "host_install(dlpack_exchange_api, TensorBase, cpu_device, complete, device_count)\n"
     "Make the virtual NPU's aliasing available; complete() registers its kernels."},
    {"host_recount", host_recount, METH_O,
     "host_recount(fn): fn() gives the number of npus read again, asked for an index beyond "
     "the number host_install() was given"},
    {"check_device_index", host_check_device_index, METH_O,
     "check_device_index(index) -> index, or RuntimeError when npu:index does not exist"},
    {"host_handlers", host_handlers, METH_VARARGS,
     "host_handlers(classify, retry, resolve)\n"
     "Set the Python handling of the ops that the generic path does not run alone."},
    {"to_host", host_to_host, METH_O, "to_host(npu_tensor) -> cpu tensor over the same memory"},
    {"to_device", (PyCFunction)(void (*)(void))host_to_device, METH_FASTCALL,
     "to_device(cpu_tensor, index, accounted=True) -> npu tensor over the same memory"},
    {"storage_tensor", (PyCFunction)(void (*)(void))host_storage_tensor, METH_FASTCALL,
     "storage_tensor(owner, data_ptr, nbytes, index) -> npu uint8 tensor over memory that "
     "owner keeps alive"},
    {"memory_stats", host_memory_stats, METH_O, "memory_stats(index) -> dict of byte counts"},
    {"reset_peak_memory", host_reset_peak, METH_O, "reset_peak_memory(index)"},
    {"pin", host_pin, METH_O,
     "pin(cpu_tensor) -> cpu tensor over the same memory, pinned until torch frees it"},
    {"pin_made", host_pin_made, METH_O,
     "pin_made(handler): handler(tensor) pins what a factory made for pin_memory=True"},
    {"is_pinned", host_is_pinned, METH_O,
     "is_pinned(data_address) -> whether pin() made the memory at that address"},
    {"keep_to_exit", host_keep_to_exit, METH_O,
     "keep_to_exit(obj): keep obj alive until the process exits"},
    {NULL, NULL, 0, NULL},
};
