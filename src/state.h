/* Module state of transfer_to_npu._C and the interfaces between its files.
 *
 * Every type, interned string and torch object the extension keeps lives
 * here (PEP 489 multi-phase init); traverse/clear in module.c list every
 * field.  The pure-C parts (pure/, headers in include/ttn) are included,
 * not duplicated.  This is the one header the patcher (patcher/patcher.h)
 * and the virtual NPU (virtual/virtual.h) share.
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
    TTN_MODE_HOOK = 10,        /* another callable that the wrapper never counts or logs:
                                * torch's own use (its polyfill registry), or a rule's
                                * function that counts the calls it maps (_C.hit) */
    TTN_MODE_ENVIRON = 11      /* an environment variable carried to the NPU's (patcher/environ.c) */
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
    int log_lost;                /* stderr refused a line too: lines are dropped */
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
    PyObject *builtin_table; /* TorchScript's builtins by id(), and the list that keeps */
    PyObject *builtin_pairs; /* them alive (module.c: alias_builtin); NULL: none */
    int installing;          /* rows are being installed (enable() and disable() refuse) */
    PyObject *import_hook;   /* our finder on sys.meta_path */
    PyTypeObject *import_hook_type;
    PyTypeObject *post_import_type;
    int enabled;

    /* What CUDA's spellings become: the NPU's ("npu", "hccl") unless the
     * backend says otherwise (set_target: the host's for a reference run) */
    ttn_target target;
    PyObject *str_target; /* target.device, interned */

    /* torch.device and the target's spellings handed out by rewrites (the
     * "npu" names are the default target's): slot 0 is the bare type,
     * slot i + 1 is "type:i" (an unindexed target uses slot 0 alone) */
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
    int device_count;          /* visible virtual NPUs: npu:0 .. npu:device_count-1 */
    PyObject *recount;         /* () -> that number read again, asked for an index beyond
                                * it (a launcher may tell a forked worker later); or NULL */
    PyObject *pinned;          /* set of the data addresses of pinned host memory */
    PyObject *pin_made;        /* pins what a factory made for pin_memory=True
                                * (tensor -> pinned tensor); NULL: torch pins */
    Py_tss_t current_device;   /* per thread: torch.npu.current_device() + 1, or
                                * 0 (unset: device 0); see npu_method.c */
    int current_seen;          /* some thread has made a device other than 0 current */
    PyObject *lock_codes;      /* code of Python context managers over a lock, in which
                                * Ctrl-C waits (callbacks.c); NULL: none */
    PyTypeObject *npu_method_type;
    PyTypeObject *constant_type;
    PyObject *str_non_blocking;
    PyObject *str_memory_format;
    PyObject *str_pin_memory;
} ttn_state;

ttn_state *ttn_get_state(PyObject *module);

/* --- The interface between the patcher (patcher/) and the virtual NPU
 * (virtual/): neither includes the other's header, only this one. --- */

/* The patcher's, for the virtual NPU: a torch.device's type and index
 * (-1 with an error set, else 0; TTN_C10_OTHER for other devices), and the
 * cached npu device of an index (borrowed). */
int ttn_device_decode(ttn_state *st, PyObject *dev, int *type, int *index);
PyObject *ttn_npu_device(ttn_state *st, int index);
/* tp_descr_get of a callable that binds as a Python function does. */
PyObject *ttn_bind_as_function(PyObject *self, PyObject *obj, PyObject *type);

/* The virtual NPU's, for the patcher: the calling thread's current npu. */
int ttn_current_device(ttn_state *st);

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


#endif
