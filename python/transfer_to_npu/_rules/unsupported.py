"""CUDA APIs with no NPU counterpart.

Each public function of torch.cuda (and of its nvtx, graphs and jiterator
modules) that the npu module lacks is mapped to one of:

* an exact stand-in, when the answer on the npu is known
  (``is_current_stream_capturing()`` is False: nothing is captured);
* a no-op stand-in where skipping the call is harmless (NVTX ranges, sync
  debug modes): warned once per call site, listed in the report;
* an error where results would be wrong (CUDA graphs, jiterator kernels,
  the CUDA runtime): warned once per call site, listed in the report, and
  NotImplementedError naming the API.

Classes the user may catch or test against (OutOfMemoryError, storages)
and typing helpers are left as they are.
"""

import contextlib
import inspect
import types

from .. import _C
from ._introspect import module_has, original
from ._row import row
from .cuda_module import counterparts
from .identity import FUNCTIONS as IDENTITY

# The stand-ins are module functions, so that the table names them by path.

def _not_capturing():
    return False


EXACT = {
    "is_current_stream_capturing": (_not_capturing, "False (nothing is captured on the npu)"),
}


@contextlib.contextmanager
def _no_range(*args, **kwargs):
    yield


def _no_range_id(msg):
    return 0


def _no_depth():
    return 0


def _no_range_end(range_id):
    return None


def _no_mark(msg):
    return None


def _no_sync_debug(debug_mode):
    return None


def _sync_debug_off():
    return 0


def _no_gencode_flags():
    return ""


def _nothing_to_collect():
    return None


def _no_history(*args, **kwargs):
    return None


def _no_memory_cap(fraction, device=None):
    """set_per_process_memory_fraction: its argument checked as CUDA checks
    it, the cap itself not applied (the npu's allocator has none to set)."""
    if not isinstance(fraction, float):
        raise TypeError(f"set_per_process_memory_fraction: fraction={fraction!r} must be a float")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"set_per_process_memory_fraction: fraction={fraction!r} is not in 0~1")


NOOP = {
    "nvtx.range_push": (_no_range_id, "NVTX ranges annotate CUDA profiles; skipped"),
    "nvtx.range_pop": (_no_depth, "NVTX ranges annotate CUDA profiles; skipped"),
    "nvtx.range_start": (_no_range_id, "NVTX ranges annotate CUDA profiles; skipped"),
    "nvtx.range_end": (_no_range_end, "NVTX ranges annotate CUDA profiles; skipped"),
    "nvtx.mark": (_no_mark, "NVTX marks annotate CUDA profiles; skipped"),
    "nvtx.range": (_no_range, "NVTX ranges annotate CUDA profiles; skipped"),
    "set_sync_debug_mode": (_no_sync_debug, "CUDA sync debugging; skipped"),
    "get_sync_debug_mode": (_sync_debug_off, "CUDA sync debugging is off"),
    "get_gencode_flags": (_no_gencode_flags, "no CUDA code generation flags"),
    "ipc_collect": (_nothing_to_collect, "CUDA IPC memory; nothing to collect"),
    "memory._record_memory_history": (_no_history, "CUDA allocator history; not recorded"),
    "set_per_process_memory_fraction": (_no_memory_cap,
                                        "a cap on the process's device memory; not applied"),
}

ERROR = {
    "CUDAGraph": "CUDA graphs capture and replay GPU work; on Ascend use torch_npu's NPUGraph",
    "graph": "CUDA graphs capture and replay GPU work; on Ascend use torch_npu's NPUGraph",
    "graphs.CUDAGraph": "CUDA graphs capture and replay GPU work",
    "graphs.graph": "CUDA graphs capture and replay GPU work",
    "make_graphed_callables": "CUDA graphs capture and replay GPU work",
    "graphs.make_graphed_callables": "CUDA graphs capture and replay GPU work",
    "graph_pool_handle": "CUDA graphs capture and replay GPU work",
    "graphs.graph_pool_handle": "CUDA graphs capture and replay GPU work",
    "jiterator._create_jit_fn": "jiterator compiles CUDA C++ source at run time",
    "jiterator._create_multi_output_jit_fn": "jiterator compiles CUDA C++ source at run time",
    "cudart": "the CUDA runtime library is not on an NPU machine",
}
DEFAULT_REASON = "no equivalent on the NPU"


def _lookup(torch, dotted):
    obj = torch.cuda
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None, None
    owner_path, _, name = ("torch.cuda." + dotted).rpartition(".")
    return owner_path, name


def _is_cuda_function(obj):
    obj = original(obj)
    if not (inspect.isfunction(obj) or inspect.isbuiltin(obj)):
        return False
    return (getattr(obj, "__module__", "") or "").startswith("torch.cuda")


def rows(torch, npu=None):
    npu = torch.npu if npu is None else npu
    out = []
    # Names with a counterpart of another name (cuda_module's rows), and
    # those answered by identity.py.
    listed = dict.fromkeys(counterparts(torch.cuda, npu), True)
    listed.update(dict.fromkeys(IDENTITY, True))
    for name, (fn, why) in EXACT.items():
        if module_has(torch.cuda, name) and not module_has(npu, name):
            out.append(row(f"torch.cuda.{name}", why, "function", _C.MODE_REDIRECT, torch.cuda,
                           name, fn))
            listed[name] = True
    for table, stand_in in ((NOOP, True), (ERROR, False)):
        for dotted, value in table.items():
            owner_path, name = _lookup(torch, dotted)
            if owner_path is None or dotted in listed or (
                    "." not in dotted and module_has(npu, dotted)):
                continue
            fn, why = value if stand_in else (None, value)
            out.append(row(f"torch.cuda.{dotted}", why, "unsupported", _C.MODE_UNSUPPORTED,
                           owner_path, name, fn, kws=()))
            listed[dotted] = True
    # Every other torch.cuda function the npu lacks.
    for name in sorted(dir(torch.cuda)):
        obj = getattr(torch.cuda, name)
        if (name.startswith("_") or name in listed or module_has(npu, name)
                or isinstance(obj, (type, types.ModuleType)) or not _is_cuda_function(obj)):
            continue
        out.append(row(f"torch.cuda.{name}", DEFAULT_REASON, "unsupported",
                       _C.MODE_UNSUPPORTED, torch.cuda, name, None, kws=()))
    return out
