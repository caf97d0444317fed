/* The patcher's own interfaces between its files (the module's rows, the
 * wrappers, the constructor slots, patching, the import hook, the log, the
 * rules file).  The virtual NPU never includes this. */
#ifndef TTN_PATCHER_H
#define TTN_PATCHER_H

#include "state.h"

/* log.c */
void ttn_track(ttn_state *st, ttn_entry *e, PyObject *argname, PyObject *from, PyObject *to);
int ttn_unsupported_hit(ttn_state *st, ttn_entry *e);
int ttn_environ_hit(ttn_state *st, ttn_entry *e, PyObject *value, PyObject *npu_name,
                    PyObject *npu_value);
int ttn_log_write(ttn_state *st, PyObject *line);
void ttn_log_close(ttn_state *st);
void ttn_site_cache_clear(ttn_state *st);
extern PyMethodDef ttn_log_methods[];

/* A mapping was applied: count it, and record its call site when the log
 * or the report wants it (one predictable branch when both are off).  For
 * a rewritten argument, argname/from/to say what changed. */
static inline void
ttn_hit_detail(ttn_state *st, ttn_entry *entry, PyObject *argname, PyObject *from,
               PyObject *to)
{
    entry->calls++;
    if (st->track_sites)
        ttn_track(st, entry, argname, from, to);
}

static inline void
ttn_hit(ttn_state *st, ttn_entry *entry)
{
    ttn_hit_detail(st, entry, NULL, NULL, NULL);
}

/* devargs.c: rewrite one argument.  Each returns 1 and a new reference in
 * *out when the value is rewritten, 0 when it stays, -1 on error (an
 * invalid CUDA device string raises InvalidDeviceError naming `what`). */
int ttn_map_device(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
                   ttn_entry *entry);
/* The same for a callee that does not itself parse the argument as torch's
 * builtins do (parsed 0): malformed bytes are left to it. */
int ttn_map_device_arg(ttn_state *st, PyObject *value, PyObject **out, PyObject *argname,
                       ttn_entry *entry, int parsed);
int ttn_map_backend(ttn_state *st, PyObject *value, PyObject **out);

/* For the callables torch gives an index-less device the current one
 * (Tensor.to, torch.tensor, ...): v, as the callee would get it, with the
 * thread's current npu index put in when v is an npu device with no index
 * and that index is not 0.  Returns 1 with *string and *as_device (borrowed
 * from the caches: the npu spelling, and the same as a torch.device or NULL
 * before torch; both the device when v is one), 0 when v stays, -1 on
 * error. */
int ttn_current_index_slow(ttn_state *st, PyObject *v, PyObject **string, PyObject **as_device);

static inline int
ttn_current_index(ttn_state *st, PyObject *v, PyObject **string, PyObject **as_device)
{
    if (TTN_LIKELY(!st->current_seen))
        return 0;
    return ttn_current_index_slow(st, v, string, as_device);
}

/* A torch.device's type and index read from its bytes (PyObject_HEAD, then
 * c10::Device's two int8s), once that reading has agreed with the
 * attributes (devargs.c); 0 when it has not been verified. */
static inline int
ttn_device_read(const ttn_state *st, PyObject *dev, int *type, int *index)
{
    const int8_t *p = (const int8_t *)((const char *)dev + sizeof(PyObject));

    if (!TTN_LIKELY(st->device_layout_ok > 1))
        return 0;
    *type = (int)(uint8_t)p[0];
    *index = (int)p[1];
    return 1;
}

/* Whether a str could be a CUDA device spec at all: only one that starts
 * "cuda" (exactly: devspec.c's rule) can, which an ASCII string shows
 * without a UTF-8 view.  'npu', 'cpu' and names go straight on. */
static inline int
ttn_may_be_cuda(PyObject *s)
{
    return PyUnicode_GET_LENGTH(s) >= 4 &&
           (!PyUnicode_IS_COMPACT_ASCII(s) || memcmp(PyUnicode_DATA(s), "cuda", 4) == 0);
}

/* The same for bytes, which torch takes wherever it takes a device string
 * (torch.device(b'cuda'), x.to(b'cuda')). */
static inline int
ttn_bytes_may_be_cuda(PyObject *b)
{
    return PyBytes_GET_SIZE(b) >= 4 && memcmp(PyBytes_AS_STRING(b), "cuda", 4) == 0;
}

/* The wrappers' quick look at one argument, never raising: KEEP (not a
 * CUDA device spec), REWRITE (*replacement, borrowed from the caches, is
 * its npu spelling, and *as_device the same as a torch.device, or NULL) or
 * SLOW (anything else: the general path decides). */
enum { TTN_QUICK_KEEP = 0, TTN_QUICK_REWRITE = 1, TTN_QUICK_SLOW = 2 };
int ttn_quick_device(ttn_state *st, PyObject *v, PyObject **replacement, PyObject **as_device);
PyObject *ttn_npu_string(ttn_state *st, int index);

/* wrapper.c */
extern PyType_Spec ttn_function_spec;
extern PyType_Spec ttn_method_spec;
extern PyType_Spec ttn_attribute_spec;
/* Flags of a device-argument wrapper (a row's device_objects and
 * current_index). */
enum { TTN_DEVARG_OBJECTS = 1, TTN_DEVARG_CURRENT = 2 };
/* target NULL: target_ref names it, resolved at first use. */
PyObject *ttn_wrapper_new(ttn_state *st, int binds, PyObject *wrapped, PyObject *target,
                          PyObject *target_ref, ttn_entry *entry, int mode, int pos,
                          PyObject *device_kws, PyObject *value, int devarg_flags);
PyObject *ttn_unwrap(ttn_state *st, PyObject *obj);
PyObject *ttn_attribute_new(ttn_state *st, PyObject *wrapped, PyObject *target_name,
                            ttn_entry *entry);

/* device_ctor.c */
int ttn_device_ctor_install(PyObject *module, ttn_state *st, PyTypeObject *device_type,
                            ttn_entry *entry);
void ttn_device_ctor_restore(ttn_state *st);
int ttn_with_first_argument(PyObject *args, PyObject *kwds, PyObject *key, PyObject *value,
                            PyObject **newargs, PyObject **newkwds);

/* class_ctor.c */
/* npu_class NULL and npu_ref given: the class is found at its first use.
 * none_is_npu: a call without a device makes the current npu's object. */
int ttn_class_ctor_install(PyObject *module, ttn_state *st, PyTypeObject *type,
                           PyObject *npu_class, PyObject *npu_ref, int none_is_npu,
                           ttn_entry *entry);
void ttn_class_ctor_restore(ttn_state *st);

/* import_hook.c */
extern PyType_Spec ttn_import_hook_spec;
extern PyType_Spec ttn_post_import_spec;
int ttn_resolve_owner(ttn_state *st, PyObject *spec, PyObject **owner, PyObject **module_name);
int ttn_import_hook_install(PyObject *module, ttn_state *st);
int ttn_import_hook_remove(ttn_state *st);

/* module.c: install the rows waiting for module `name`; what a row's
 * reference names (a new reference) */
int ttn_install_deferred(PyObject *module, ttn_state *st, PyObject *name);
PyObject *ttn_resolve_ref(ttn_state *st, PyObject *ref, PyObject *original);

/* environ.c */
int ttn_environ_install(ttn_state *st, PyObject *environ, PyObject *npu_name, PyObject *values,
                        ttn_entry *entry);

/* patch.c: one patch, undone by ttn_patch_restore_all(); original is what
 * the owner itself held under the name, NULL for nothing, replacement what
 * the patch put there (strong refs). */
typedef struct ttn_patch {
    PyObject *owner;
    PyObject *name;
    PyObject *original;
    PyObject *replacement;
} ttn_patch;
int ttn_patch_apply(ttn_state *st, PyObject *owner, PyObject *name, PyObject *replacement);
int ttn_patch_restore_all(ttn_state *st);
int ttn_patches_traverse(ttn_state *st, visitproc visit, void *arg);
void ttn_patches_clear(ttn_state *st);
Py_ssize_t ttn_rebind(ttn_state *st, PyObject *module);

/* rules_glue.c */
extern PyMethodDef ttn_rules_methods[];

#endif
