/* The mapping log and call-site tracking.
 *
 * When the log or the report is on, every mapped call records the user's
 * call site ("file:line", the first frame outside torch and
 * transfer_to_npu) in its table entry.  Level 1 prints a line the first
 * time a mapping is hit at a site, level 2 on every call.  With both off the
 * wrappers test one flag and do nothing else.
 */
#include "patcher.h"

/* PyFrame_GetBack: declared by Python.h from 3.11 on, by this before. */
#include <frameobject.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------- */

/* The innermost frame outside the prefixes in st->internal_prefixes: its
 * file name (new reference) and line, or NULL filename when there is none;
 * *top tells whether it is the innermost frame of all. */
static int
user_frame(ttn_state *st, PyObject **filename, int *lineno, int *top)
{
    PyFrameObject *frame = PyEval_GetFrame();
    int rc = -1;

    *filename = NULL;
    *lineno = 0;
    *top = 1;
    Py_XINCREF(frame);
    while (frame != NULL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *name = code->co_filename;
        Py_ssize_t i, n = st->internal_prefixes == NULL ? 0 : PyTuple_GET_SIZE(st->internal_prefixes);
        int internal = 0;
        PyFrameObject *back;

        for (i = 0; i < n && !internal; i++) {
            Py_ssize_t r = PyUnicode_Tailmatch(name, PyTuple_GET_ITEM(st->internal_prefixes, i),
                                               0, PY_SSIZE_T_MAX, -1);
            if (r < 0) {
                Py_DECREF(code);
                goto exit;
            }
            internal = (int)r;
        }
        if (!internal) {
            *filename = Py_NewRef(name);
            *lineno = PyFrame_GetLineNumber(frame);
            Py_DECREF(code);
            break;
        }
        Py_DECREF(code);
        back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
        *top = 0;
    }
    rc = 0;

exit:
    Py_XDECREF(frame);
    return rc;
}

/* ------------------------------------------------------------------------- */

/* 0, or the errno of the write that failed. */
static int
write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The log file, for appending, in a directory others may write to (a
 * shared /tmp): a link at its path is not followed, a FIFO is not waited
 * on, and only a regular file of this user's is written.  -1 with errno
 * set otherwise. */
static int
open_log(const char *path)
{
    struct stat info;
    int saved, fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                         0644);

    if (fd < 0)
        return -1;
    if (fstat(fd, &info) < 0)
        goto refuse;
    if (!S_ISREG(info.st_mode) || info.st_uid != geteuid()) {
        errno = S_ISREG(info.st_mode) ? EPERM : EINVAL;
        goto refuse;
    }
    if (fcntl(fd, F_SETFL, O_APPEND) < 0) /* writes may block again, as to any file */
        goto refuse;
    return fd;

refuse:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* The log file could not be opened or written (a full disk, a file size
 * limit, a path that is not the user's): said once, with the reason, and
 * from now on the log goes to stderr.  A diagnostics file never stops the
 * user's job, nor fills its output with tracebacks.  -1 only when the
 * warning itself is an error (-W error). */
static int
log_file_failed(ttn_state *st, int error)
{
    PyObject *path = st->log_path;
    int rc;

    st->log_path = NULL;
    if (st->log_fd >= 0)
        close(st->log_fd);
    st->log_fd = -1;
    rc = PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                          "transfer_to_npu: cannot write the log to %R (%s); the log goes to "
                          "stderr from now on",
                          path, strerror(error));
    Py_XDECREF(path);
    return rc;
}

int
ttn_log_write(ttn_state *st, PyObject *line)
{
    const char *s;
    Py_ssize_t n;
    PyObject *err, *type, *value, *tb;
    int error;

    if (st->log_lost)
        return 0;
    if (st->log_fd < 0 && st->log_path != NULL) {
        /* Opened on the first line, so that a process that logs nothing
         * (a data-loading worker, say) leaves no empty file. */
        const char *path = PyUnicode_AsUTF8(st->log_path);

        if (path == NULL)
            return -1;
        st->log_fd = open_log(path);
        if (st->log_fd < 0 && log_file_failed(st, errno) < 0)
            return -1;
    }
    if (st->log_fd >= 0) {
        /* One write(2) per line on an O_APPEND descriptor: lines from
         * several threads never mix. */
        s = PyUnicode_AsUTF8AndSize(line, &n);
        if (s == NULL)
            return -1;
        error = write_all(st->log_fd, s, (size_t)n);
        if (error == 0)
            return 0;
        if (log_file_failed(st, error) < 0)
            return -1;
    }
    err = PySys_GetObject("stderr");
    if (err == NULL || err == Py_None)
        return 0;
    if (PyFile_WriteObject(line, err, Py_PRINT_RAW) == 0)
        return 0;
    /* stderr refuses it too, as a broken stream does (closed: ValueError;
     * a full disk behind it: OSError): from now on the log is dropped.
     * Anything else (Ctrl-C, a bug) goes on. */
    PyErr_Fetch(&type, &value, &tb);
    if (!PyErr_GivenExceptionMatches(type, PyExc_OSError) &&
        !PyErr_GivenExceptionMatches(type, PyExc_ValueError)) {
        PyErr_Restore(type, value, tb);
        return -1;
    }
    st->log_lost = 1;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return 0;
}

/* ------------------------------------------------------------------------- */

/* An entry's name as shown before the arguments of a call: without the note
 * that some names carry ("init_process_group(backend='hccl')",
 * "torch.Stream (the virtual NPU's)"), which the argument shown replaces. */
static PyObject *
name_before_args(const char *shown)
{
    const char *paren = strchr(shown, '(');
    size_t n = paren == NULL ? strlen(shown) : (size_t)(paren - shown);

    while (n > 0 && shown[n - 1] == ' ')
        n--;
    return PyUnicode_FromStringAndSize(shown, (Py_ssize_t)n);
}

static PyObject *
format_line(ttn_entry *e, const char *where, PyObject *argname, PyObject *from, PyObject *to)
{
    PyObject *source = NULL, *target = NULL, *line = NULL;

    if (argname == NULL)
        return PyUnicode_FromFormat("transfer_to_npu: %s: %s -> %s\n", where, e->source,
                                    e->target);
    source = name_before_args(e->source);
    if (source == NULL)
        goto exit;
    target = name_before_args(e->target);
    if (target == NULL)
        goto exit;
    line = PyUnicode_FromFormat("transfer_to_npu: %s: %U(%U=%R) -> %U(%U=%R)\n", where, source,
                                argname, from, target, argname, to);

exit:
    Py_XDECREF(source);
    Py_XDECREF(target);
    return line;
}

static int
log_hit(ttn_state *st, ttn_entry *e, const char *where, int created, PyObject *argname,
        PyObject *from, PyObject *to)
{
    PyObject *line;
    int rc;

    if (!(st->log_level >= 2 || (st->log_level == 1 && created)))
        return 0;
    line = format_line(e, where, argname, from, to);
    if (line == NULL)
        return -1;
    rc = ttn_log_write(st, line);
    Py_DECREF(line);
    return rc;
}

/* ------------------------------------------------------------------------- */
/* Call sites remembered by the calling frame's code and instruction: a
 * mapped call repeated in a loop finds its site without walking frames or
 * formatting "file:line".  Only sites in the innermost frame are kept, where
 * code and instruction decide the site. */

static size_t
site_slot(PyObject *code, int lasti, ttn_entry *e)
{
    uintptr_t h = ((uintptr_t)code >> 4) ^ ((uintptr_t)e >> 4) * 31u ^ (uintptr_t)lasti * 131u;

    return (size_t)(h % TTN_SITE_CACHE);
}

static int
frame_position(PyFrameObject *frame, int *position)
{
#if PY_VERSION_HEX >= 0x030B0000
    *position = PyFrame_GetLasti(frame);
#else
    *position = PyFrame_GetLineNumber(frame);
#endif
    return 0;
}

void
ttn_site_cache_clear(ttn_state *st)
{
    int i;

    for (i = 0; i < TTN_SITE_CACHE; i++) {
        Py_CLEAR(st->site_cache[i].code);
        st->site_cache[i].entry = NULL;
        st->site_cache[i].site = NULL;
    }
}

/* Record one hit of e at the user's call site; log it if the level says so.
 * Returns the site's file name and line through *filename_out (new
 * reference) when asked, and whether the site is new through *created.
 * -1 on error. */
static int
record(ttn_state *st, ttn_entry *e, PyObject *argname, PyObject *from, PyObject *to,
       PyObject **filename_out, int *lineno_out, int *created)
{
    PyObject *filename = NULL, *where = NULL, *code = NULL;
    PyFrameObject *innermost = PyEval_GetFrame();
    ttn_site *site;
    const char *key;
    int lineno = 0, top = 0, position = 0, rc = -1;
    size_t slot = 0;

    *created = 0;
    if (innermost != NULL && filename_out == NULL) {
        code = (PyObject *)PyFrame_GetCode(innermost);
        frame_position(innermost, &position);
        slot = site_slot(code, position, e);
        if (st->site_cache[slot].code == code && st->site_cache[slot].position == position &&
            st->site_cache[slot].entry == e) {
            site = st->site_cache[slot].site;
            site->count++;
            rc = log_hit(st, e, site->where, 0, argname, from, to);
            goto exit;
        }
    }
    if (user_frame(st, &filename, &lineno, &top) < 0)
        goto exit;
    where = filename != NULL ? PyUnicode_FromFormat("%U:%d", filename, lineno)
                             : PyUnicode_FromString("<unknown>:0");
    if (where == NULL)
        goto exit;
    key = PyUnicode_AsUTF8(where);
    if (key == NULL)
        goto exit;
    site = ttn_entry_hit_site(e, key, created);
    if (site == NULL) {
        PyErr_NoMemory();
        goto exit;
    }
    if (code != NULL && top && filename != NULL) {
        Py_XSETREF(st->site_cache[slot].code, Py_NewRef(code));
        st->site_cache[slot].position = position;
        st->site_cache[slot].entry = e;
        st->site_cache[slot].site = site;
    }
    if (log_hit(st, e, key, *created, argname, from, to) < 0)
        goto exit;
    if (filename_out != NULL) {
        *filename_out = filename;
        *lineno_out = lineno;
        filename = NULL;
    }
    rc = 0;

exit:
    Py_XDECREF(code);
    Py_XDECREF(filename);
    Py_XDECREF(where);
    return rc;
}

void
ttn_track(ttn_state *st, ttn_entry *e, PyObject *argname, PyObject *from, PyObject *to)
{
    int created;

    /* A log that cannot be written must not fail the user's call: report
     * the failure the way Python reports errors it cannot raise. */
    if (record(st, e, argname, from, to, NULL, NULL, &created) < 0)
        PyErr_WriteUnraisable(NULL);
}

/* ------------------------------------------------------------------------- */

int
ttn_unsupported_hit(ttn_state *st, ttn_entry *e)
{
    PyObject *filename = NULL, *message = NULL;
    int lineno = 0, created = 0, rc = -1;

    e->calls++;
    /* Sites are always kept for these: the warning is once per site. */
    if (record(st, e, NULL, NULL, NULL, &filename, &lineno, &created) < 0)
        goto exit;
    if (created) {
        message = PyUnicode_FromFormat("transfer_to_npu: %s has no NPU counterpart: %s",
                                       e->source, e->target);
        if (message == NULL)
            goto exit;
        if (PyErr_WarnExplicitObject(PyExc_RuntimeWarning, message,
                                     filename != NULL ? filename : Py_None, lineno, NULL,
                                     NULL) < 0)
            goto exit;
    }
    rc = 0;

exit:
    Py_XDECREF(filename);
    Py_XDECREF(message);
    return rc;
}

/* ------------------------------------------------------------------------- */

/* An environment variable of the table found set at enable (environ.c),
 * counted at the site "<environment>": carried (npu_name), it is logged
 * as NAME='value' -> NPU_NAME='value'; with no counterpart, warned about
 * once. */
int
ttn_environ_hit(ttn_state *st, ttn_entry *e, PyObject *value, PyObject *npu_name,
                PyObject *npu_value)
{
    static const char where[] = "<environment>";
    PyObject *line = NULL;
    int created = 0, rc = -1;

    e->calls++;
    if (ttn_entry_hit_site(e, where, &created) == NULL) {
        PyErr_NoMemory();
        goto exit;
    }
    if (npu_name == NULL) {
        if (created && PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                                        "transfer_to_npu: %s has no NPU counterpart: %s",
                                        e->source, e->target) < 0)
            goto exit;
    }
    else if (st->log_level >= 2 || (st->log_level == 1 && created)) {
        line = PyUnicode_FromFormat("transfer_to_npu: %s: %s=%R -> %U=%R\n", where, e->source,
                                    value, npu_name, npu_value);
        /* As for a call: a log that cannot be written fails nothing. */
        if (line == NULL || ttn_log_write(st, line) < 0)
            PyErr_WriteUnraisable(NULL);
    }
    rc = 0;

exit:
    Py_XDECREF(line);
    return rc;
}

/* ========================================================================= */

void
ttn_log_close(ttn_state *st)
{
    /* Only a descriptor this module opened is closed. */
    if (st->log_fd >= 0 && st->log_path != NULL)
        close(st->log_fd);
    st->log_fd = -1;
    Py_CLEAR(st->log_path);
}

static PyObject *
log_configure(PyObject *module, PyObject *args)
{
    ttn_state *st = ttn_get_state(module);
    int level, track;
    PyObject *path, *prefixes;

    if (!PyArg_ParseTuple(args, "iOpO!:log_configure", &level, &path, &track, &PyTuple_Type,
                          &prefixes))
        return NULL;
    if (level < 0 || level > 2) {
        PyErr_Format(PyExc_ValueError, "log level must be 0, 1 or 2, got %d", level);
        return NULL;
    }
    if (path != Py_None && !PyUnicode_Check(path)) {
        PyErr_Format(PyExc_TypeError, "log path must be a str or None, got %.200s",
                     Py_TYPE(path)->tp_name);
        return NULL;
    }
    ttn_log_close(st);
    st->log_lost = 0;
    if (path != Py_None)
        st->log_path = Py_NewRef(path);
    Py_XSETREF(st->internal_prefixes, Py_NewRef(prefixes));
    st->log_level = level;
    st->track_sites = track || level > 0;
    Py_RETURN_NONE;
}

static PyObject *
log_write(PyObject *module, PyObject *line)
{
    if (!PyUnicode_Check(line)) {
        PyErr_Format(PyExc_TypeError, "log_write() takes a str, got %.200s",
                     Py_TYPE(line)->tp_name);
        return NULL;
    }
    if (ttn_log_write(ttn_get_state(module), line) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyMethodDef ttn_log_methods[] = {
    {"log_configure", log_configure, METH_VARARGS,
     "log_configure(level, path, track_sites, internal_prefixes): level 0-2; path None for "
     "sys.stderr, else a file opened (append) at the first line; track_sites records call "
     "sites for the report; frames whose file starts with one of internal_prefixes are not "
     "the user's"},
    {"log_write", log_write, METH_O, "log_write(line): write a line where the log goes"},
    {NULL, NULL, 0, NULL},
};
