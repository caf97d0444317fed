/* Environment variables of the mapping table: a CUDA- or NCCL-side
 * variable carried over to its NPU counterpart (NCCL_SOCKET_IFNAME ->
 * HCCL_SOCKET_IFNAME), or warned about when it has none.
 *
 * A row (mode TTN_MODE_ENVIRON) names the mapping (os.environ) as owner,
 * the NPU's variable (empty: no counterpart) and, when the CUDA variable is
 * set, its value with the value the NPU's is given, which the rules worked
 * out from it.  The NPU's own setting wins; a variable carried is a patch
 * like any other, so disable() unsets it again.
 */
#include "patcher.h"

/* ------------------------------------------------------------------------- */

int
ttn_environ_install(ttn_state *st, PyObject *environ, PyObject *npu_name, PyObject *values,
                    ttn_entry *entry)
{
    PyObject *value, *npu_value;
    int has;

    if (values == Py_None)
        return 0; /* not set: in the table (and --list) only */
    if (!PyTuple_Check(values) || PyTuple_GET_SIZE(values) != 2 ||
        !PyUnicode_Check(PyTuple_GET_ITEM(values, 0))) {
        PyErr_Format(PyExc_TypeError, "%s: an environment row's values are (str, str or None), "
                     "not %R", entry->source, values);
        return -1;
    }
    value = PyTuple_GET_ITEM(values, 0);
    npu_value = PyTuple_GET_ITEM(values, 1);
    if (PyUnicode_GET_LENGTH(npu_name) == 0)
        return ttn_environ_hit(st, entry, value, NULL, NULL);
    has = PySequence_Contains(environ, npu_name);
    if (has != 0)
        return has < 0 ? -1 : 0;
    if (!PyUnicode_Check(npu_value)) {
        PyErr_Format(PyExc_TypeError, "%s: the value for %U must be a str, not %R", entry->source,
                     npu_name, npu_value);
        return -1;
    }
    if (ttn_patch_apply(st, environ, npu_name, npu_value) < 0)
        return -1;
    return ttn_environ_hit(st, entry, value, npu_name, npu_value);
}
