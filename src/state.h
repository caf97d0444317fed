/* Module state of transfer_to_npu._C and the interfaces between its files.
 *
 * Every type, interned string and torch object the extension keeps lives
 * here (PEP 489 multi-phase init); traverse/clear in module.c list every
 * field.  The pure-C parts (devspec, table) are included, not duplicated.
 */
#ifndef TTN_STATE_H
#define TTN_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "ttn/devspec.h"
#include "ttn/dlpack_abi.h"
#include "ttn/ptrmap.h"
#include "ttn/table.h"

#if defined(__GNUC__) || defined(__clang__)
#define TTN_LIKELY(x) __builtin_expect(!!(x), 1)
#define TTN_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TTN_NOINLINE __attribute__((noinline))
#else
#define TTN_LIKELY(x) (x)
#define TTN_UNLIKELY(x) (x)
#define TTN_NOINLINE
#endif

/* How a table row is installed (the "mode" field of a row). */
enum ttn_mode {
    TTN_MODE_DEVICE_ARG = 1,  /* same callable; its device argument rewritten */
    TTN_MODE_REDIRECT = 2,    /* another callable (torch.cuda.X -> torch.npu.X) */
    TTN_MODE_BACKEND = 3,     /* same callable; its process-group backend rewritten */
    TTN_MODE_ATTRIBUTE = 4,   /* attribute read redirected (Tensor.is_cuda -> is_npu) */
    TTN_MODE_CONSTRUCTOR = 5, /* torch.device construction (a slot of a C type) */
    TTN_MODE_REPLACE = 6,     /* attribute replaced by the target object itself */
    TTN_MODE_UNSUPPORTED = 7, /* no NPU counterpart: warn per call site, then run a
                               * stand-in or raise */
    TTN_MODE_ARG_REPLACE = 8, /* a positional argument replaced by a constant (user rules) */
    TTN_MODE_CLASS_DEVICE = 9, /* a C class's construction with a device (torch.Stream) */
    TTN_MODE_HOOK = 10,        /* another callable, for torch's own use (its polyfill registry):
                                * not a migration, so never counted or logged */
    TTN_MODE_ENVIRON = 11      /* an environment variable carried to the NPU's (environ.c) */
};

/* Number of cached npu spellings: "npu" plus "npu:0" .. "npu:127". */
#define TTN_NPU_SLOTS (TTN_MAX_DEVICE_INDEX + 2)

/* CUDA device strings remembered by identity, with their npu spelling. */
#define TTN_STR_CACHE 8

/* Call sites remembered by code object and instruction (log.c). */
#define TTN_SITE_CACHE 64

/* c10::DeviceType codes (part of torch's ABI); OTHER is any other type. */
enum { TTN_C10_CPU = 0, TTN_C10_CUDA = 1, TTN_C10_PRIVATEUSE1 = 20, TTN_C10_OTHER = -2 };

typedef struct ttn_state {
    /* types */
    PyTypeObject *function_type;  /* call wrapper that does not bind */
    PyTypeObject *method_type;    /* call wrapper that binds like a method */
    PyTypeObject *attribute_type; /* redirected attribute */
    PyObject *invalid_device_error;

    /* interned names */
    PyObject *str_device;
    PyObject *str_backend;
    PyObject *str_type;
    PyObject *str_index;
    PyObject *str_device_type;
    PyObject *str_cuda;
    PyObject *str_npu;

    /* the mapping log (log.c) */
    int log_level;               /* 0 quiet, 1 first hit per site, 2 every call */
    int track_sites;             /* log or report on: keep call sites */
    int log_fd;                  /* open log file, or -1 */
    PyObject *log_path;          /* log file (opened at the first line); NULL: stderr */
    PyObject *internal_prefixes; /* frames in these files are not the user's */
    struct {
        PyObject *code; /* strong: its address is not reused while here */
        int position;
        ttn_entry *entry;
        ttn_site *site;
    } site_cache[TTN_SITE_CACHE];

    /* the table and the installed patches */
    ttn_table table;
    struct ttn_patch *patches; /* what enable() patched, oldest first (patch.c) */
    Py_ssize_t npatches, patches_cap;
    ttn_ptrmap replacements; /* original -> its replacement (strong), while enabled */
    PyObject *deferred;      /* module name -> rows waiting for its import */
    PyObject *resolver;      /* resolver(ref, original) -> what a row's reference names */
    int installing;          /* rows are being installed (enable() and disable() refuse) */
    PyObject *import_hook;   /* our finder on sys.meta_path */
    PyTypeObject *import_hook_type;
    PyTypeObject *post_import_type;
    int enabled;

    /* torch.device and the npu spellings handed out by rewrites:
     * slot 0 is the bare "npu", slot i + 1 is "npu:i" */
    PyTypeObject *device_type;
    ttn_entry *device_entry;
    PyObject *npu_strings[TTN_NPU_SLOTS];
    PyObject *npu_devices[TTN_NPU_SLOTS];
    PyObject *str_cache_key[TTN_STR_CACHE];   /* strong */
    PyObject *str_cache_value[TTN_STR_CACHE]; /* borrowed from npu_strings */
    PyObject *str_cache_device[TTN_STR_CACHE]; /* the same as a torch.device, borrowed
                                                * from npu_devices; NULL before torch */
    int str_cache_next;
    int device_hash_ok;   /* > 1: devices decoded from their hash; -1: never */
    int device_layout_ok; /* > 1: devices decoded from their bytes; -1: never */

    /* the virtual NPU (host_alias.c, host_call.c) */
    const ttn_DLPackExchangeAPI *dlpack;
    PyObject *dlpack_capsule;  /* keeps the table above alive */
    PyTypeObject *tensor_type; /* torch._C.TensorBase */
    PyObject *cpu_device;      /* torch.device("cpu") */
    PyObject *host_ops;        /* op -> callable that runs it on the host */
    PyObject *special_ops;     /* op -> Python handler */
    PyObject *ops_by_name;     /* "aten::name.overload" -> op, resolved at first call */
    PyObject *resolve;         /* "aten::name.overload" -> op */
    PyObject *classify;        /* op -> handler or None, for ops not seen yet */
    PyObject *retry;           /* the slow path for a call the generic path failed */
    PyObject *complete;        /* registers the kernels left for the first npu tensor;
                                * true once they all are */
    int kernels_ready;         /* complete() has returned true */
    PyObject *pinned;          /* set of the data addresses of pinned host memory */
    PyObject *pin_made;        /* pins what a factory made for pin_memory=True
                                * (tensor -> pinned tensor); NULL: torch pins */
    Py_tss_t current_device;   /* per thread: torch.npu.current_device() + 1, or
                                * 0 (unset: device 0); see npu_method.c */
    int current_seen;          /* some thread has made a device other than 0 current */
    PyTypeObject *npu_method_type;
    PyTypeObject *lazy_type;
    PyObject *str_non_blocking;
    PyObject *str_memory_format;
    PyObject *str_pin_memory;
} ttn_state;

ttn_state *ttn_get_state(PyObject *module);

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
int ttn_map_backend(ttn_state *st, PyObject *value, PyObject **out);
int ttn_device_decode(ttn_state *st, PyObject *dev, int *type, int *index);

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

/* The wrappers' quick look at one argument, never raising: KEEP (not a
 * CUDA device spec), REWRITE (*replacement, borrowed from the caches, is
 * its npu spelling, and *as_device the same as a torch.device, or NULL) or
 * SLOW (anything else: the general path decides). */
enum { TTN_QUICK_KEEP = 0, TTN_QUICK_REWRITE = 1, TTN_QUICK_SLOW = 2 };
int ttn_quick_device(ttn_state *st, PyObject *v, PyObject **replacement, PyObject **as_device);
PyObject *ttn_npu_string(ttn_state *st, int index);
PyObject *ttn_npu_device(ttn_state *st, int index);

/* Whether a keyword name is `interned` (one of ours). */
static inline int
ttn_kwname_is(PyObject *name, PyObject *interned)
{
    /* Keyword names from compiled code are interned, so identity decides
     * almost always; a name built at run time is compared by value. */
    if (name == interned)
        return 1;
    if (PyUnicode_CHECK_INTERNED(name))
        return 0;
    return PyUnicode_Compare(name, interned) == 0;
}

/* wrapper.c */
PyObject *ttn_bind_as_function(PyObject *self, PyObject *obj, PyObject *type);
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
/* npu_class NULL and npu_ref given: the class is found at its first use. */
int ttn_class_ctor_install(PyObject *module, ttn_state *st, PyTypeObject *type,
                           PyObject *npu_class, PyObject *npu_ref, ttn_entry *entry);
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

/* patch.c: one patch, undone by ttn_patch_restore_all(); original is what
 * the owner itself held under the name, NULL for nothing (strong refs). */
typedef struct ttn_patch {
    PyObject *owner;
    PyObject *name;
    PyObject *original;
} ttn_patch;
int ttn_patch_apply(ttn_state *st, PyObject *owner, PyObject *name, PyObject *replacement);
int ttn_patch_restore_all(ttn_state *st);
int ttn_patches_traverse(ttn_state *st, visitproc visit, void *arg);
void ttn_patches_clear(ttn_state *st);
Py_ssize_t ttn_rebind(ttn_state *st, PyObject *module);

/* environ.c */
int ttn_environ_install(ttn_state *st, PyObject *environ, PyObject *npu_name, PyObject *values,
                        ttn_entry *entry);

/* rules_glue.c */
extern PyMethodDef ttn_rules_methods[];

/* host_alias.c */
PyObject *ttn_host_alias(ttn_state *st, PyObject *tensor);
PyObject *ttn_device_alias(ttn_state *st, PyObject *tensor, int index, int account);
int ttn_tensor_device(ttn_state *st, PyObject *tensor, int *type, int *index);
int ttn_ensure_kernels(ttn_state *st);
int ttn_index_arg(PyObject *arg, int *index);
extern PyMethodDef ttn_host_alias_methods[];

/* host_call.c */
extern PyMethodDef ttn_host_call_methods[];

/* npu_method.c */
/* Most keywords a quick Tensor.npu() passes on (non_blocking,
 * memory_format), plus the tensor and the device. */
#define TTN_NPU_METHOD_ARGS 4
int ttn_current_device(ttn_state *st);
int ttn_set_current_device(ttn_state *st, int index);
extern PyType_Spec ttn_npu_method_spec;
extern PyMethodDef ttn_npu_method_methods[];

/* lazy.c */
extern PyType_Spec ttn_lazy_spec;
extern PyMethodDef ttn_lazy_methods[];

/* stamp.c */
extern PyMethodDef ttn_stamp_methods[];

#endif
