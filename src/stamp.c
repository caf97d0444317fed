/* stamp(path): what the package's caches check a source file by, its
 * (st_mtime_ns, st_size, st_ctime_ns), or None when it cannot be stated.
 *
 * The first import states every module the cached mapping table was derived
 * from; os.stat makes a stat_result of twenty fields, its times as floats
 * and as nanoseconds in long arithmetic, for the three numbers used. */
#include "state.h"

#include <sys/stat.h>

#ifndef _WIN32

#ifdef __APPLE__
#define TTN_MTIME st_mtimespec
#define TTN_CTIME st_ctimespec
#else
#define TTN_MTIME st_mtim
#define TTN_CTIME st_ctim
#endif

static long long
nanoseconds(struct timespec t)
{
    return (long long)t.tv_sec * 1000000000LL + (long long)t.tv_nsec;
}

static PyObject *
stamp(PyObject *module, PyObject *path)
{
    PyObject *encoded = NULL, *result = NULL;
    struct stat st;
    int rc;

    (void)module;
    if (!PyUnicode_FSConverter(path, &encoded)) {
        /* A path with a NUL in it (ValueError), as os.stat's: no file. */
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            goto exit;
        PyErr_Clear();
        result = Py_NewRef(Py_None);
        goto exit;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = stat(PyBytes_AS_STRING(encoded), &st);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        result = Py_NewRef(Py_None);
    else
        result = Py_BuildValue("(LLL)", nanoseconds(st.TTN_MTIME), (long long)st.st_size,
                               nanoseconds(st.TTN_CTIME));

exit:
    Py_XDECREF(encoded);
    return result;
}

PyMethodDef ttn_stamp_methods[] = {
    {"stamp", stamp, METH_O,
     "stamp(path) -> (st_mtime_ns, st_size, st_ctime_ns) of the file, as os.stat gives them, "
     "or None when it cannot be stated"},
    {NULL, NULL, 0, NULL},
};

#else

/* Windows: the caches state files with os.stat. */
PyMethodDef ttn_stamp_methods[] = {
    {NULL, NULL, 0, NULL},
};

#endif
