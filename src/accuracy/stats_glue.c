/* tensor_stats(): the statistics the accuracy dump records of a tensor in
 * host memory (ttn/stats.h computes them), for Python.
 *
 * The caller passes the tensor's own data address, element type, shape and
 * strides, and keeps the tensor alive meanwhile (accuracy/stats.py).
 */
#include "state.h"

#include "ttn/stats.h"

/* A tuple of ndim ints into values; -1 with an exception otherwise. */
static int
int64_tuple(PyObject *tuple, const char *what, int64_t *values, int ndim)
{
    int i;

    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != ndim) {
        PyErr_Format(PyExc_ValueError, "tensor_stats: %s must be a tuple of %d ints", what, ndim);
        return -1;
    }
    for (i = 0; i < ndim; i++) {
        values[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
        if (values[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static PyObject *
tensor_stats(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t shape[TTN_STATS_MAX_DIMS], strides[TTN_STATS_MAX_DIMS];
    ttn_stats_result r;
    PyObject *result = NULL;
    void *data;
    Py_ssize_t ndim;
    int dtype, done;

    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                         "tensor_stats(address, dtype, shape, strides) takes 4 arguments");
        goto exit;
    }
    data = PyLong_AsVoidPtr(args[0]);
    if (data == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "tensor_stats: address must not be 0");
        goto exit;
    }
    dtype = PyLong_AsLong(args[1]);
    if (dtype == -1 && PyErr_Occurred())
        goto exit;
    if (!PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_ValueError, "tensor_stats: shape must be a tuple of ints");
        goto exit;
    }
    ndim = PyTuple_GET_SIZE(args[2]);
    if (ndim > TTN_STATS_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "tensor_stats: %zd dimensions, at most %d", ndim,
                     TTN_STATS_MAX_DIMS);
        goto exit;
    }
    if (int64_tuple(args[2], "shape", shape, (int)ndim) < 0 ||
        int64_tuple(args[3], "strides", strides, (int)ndim) < 0)
        goto exit;
    Py_BEGIN_ALLOW_THREADS
    done = ttn_stats(data, dtype, (int)ndim, shape, strides, &r);
    Py_END_ALLOW_THREADS
    if (done < 0) {
        PyErr_Format(PyExc_ValueError, "tensor_stats: element type %d or an empty shape", dtype);
        goto exit;
    }
    result = Py_BuildValue("(ddddLL)", r.max, r.min, r.mean, r.norm, (long long)r.nan,
                           (long long)r.inf);

exit:
    return result;
}

PyMethodDef ttn_stats_methods[] = {
    {"tensor_stats", (PyCFunction)(void (*)(void))tensor_stats, METH_FASTCALL,
     "tensor_stats(address, dtype, shape, strides) -> (max, min, mean, norm, nan, inf) of the "
     "elements of a tensor in host memory (strides in elements; dtype: STATS_DTYPES)"},
    {NULL, NULL, 0, NULL},
};

/* The element types' names, in ttn/stats.h's order: STATS_DTYPES. */
static const char *const dtype_names[TTN_DTYPES] = {
    "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
    "bool",
};

int
ttn_stats_add_constants(PyObject *module)
{
    PyObject *names = PyTuple_New(TTN_DTYPES);
    int i, result = -1;

    if (names == NULL)
        goto exit;
    for (i = 0; i < TTN_DTYPES; i++) {
        PyObject *name = PyUnicode_FromString(dtype_names[i]);

        if (name == NULL)
            goto exit;
        PyTuple_SET_ITEM(names, i, name);
    }
    if (PyModule_AddObjectRef(module, "STATS_DTYPES", names) < 0)
        goto exit;
    result = 0;

exit:
    Py_XDECREF(names);
    return result;
}
