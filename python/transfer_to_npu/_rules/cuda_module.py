"""torch.cuda.X -> torch.npu.X for every X of torch.cuda's public API that
the npu module has, torch.cuda.amp.X -> torch.npu.amp.X when the NPU has
its own amp module, and the CUDA names whose NPU counterpart has another
name (COUNTERPARTS).

``npu`` is whatever torch.npu is: torch_npu's, the virtual NPU's, or the
stand-in made from a torch_npu release's surface (``surfaces.load``).
"""

import types

from .. import _C
from ._introspect import device_position, module_has, original
from ._row import row
from .identity import FUNCTIONS as IDENTITY


# Submodules of torch.cuda whose names map into the npu's like-named module.
SUBMODULES = ("amp",)

# Data (not callables) of both modules that CUDA code reads per device:
# torch.cuda.default_generators[i].manual_seed(...).
DATA = ("default_generators",)

# torch.cuda.<path> -> torch.npu.<path> where the npu's counterpart has
# another name, or lives in a submodule that SUBMODULES leaves out; each
# applies where torch.cuda has the first and the npu the second, and the
# npu lacks a like-named counterpart.  (The renames Ascend's own
# transfer_to_npu makes, and those the two modules' names show.)
COUNTERPARTS = {
    "CUDAGraph": "NPUGraph",
    "graphs.CUDAGraph": "graphs.NPUGraph",
    "graphs.graph": "graphs.graph",
    "graphs.graph_pool_handle": "graphs.graph_pool_handle",
    "graphs.make_graphed_callables": "graphs.make_graphed_callables",
    "CUDAPluggableAllocator": "NPUPluggableAllocator",
    "memory.CUDAPluggableAllocator": "memory.NPUPluggableAllocator",
    # The allocator's history and settings: private in both, and what
    # torch's memory visualisation guide has scripts call.
    "memory._record_memory_history": "memory._record_memory_history",
    "memory._snapshot": "memory._snapshot",
    "memory._dump_snapshot": "memory._dump_snapshot",
    "memory._set_allocator_settings": "memory._set_allocator_settings",
    # Deprecated names for what the npu has under today's.
    "memory_cached": "memory_reserved",
    "max_memory_cached": "max_memory_reserved",
    "reset_max_memory_cached": "reset_peak_memory_stats",
}


def public_names(module):
    """A module's public API: its __all__, else its public names."""
    names = module.__dict__.get("__all__")
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    return names


def _find(module, dotted):
    """What module.<dotted> is, through submodules only; None if absent."""
    *path, name = dotted.split(".")
    for part in path:
        module = getattr(module, part) if module_has(module, part) else None
        if not isinstance(module, types.ModuleType):
            return None
    return getattr(module, name) if module_has(module, name) else None


def counterparts(cuda, npu):
    """{torch.cuda path: torch.npu path} of the COUNTERPARTS that apply."""
    out = {}
    for source, target in COUNTERPARTS.items():
        if _find(npu, target) is None or _find(cuda, source) is None:
            continue
        if "." in source or not module_has(npu, source):  # else mapped under its own name
            out[source] = target
    return out


def _names(npu):
    """How the rows name the device module: (its name, the reference a
    target is found by): torch.npu through torch, found at the first call
    (torch_npu's, the virtual NPU's, a release's surface); the host's
    (backends/cpu.py) as itself."""
    name = getattr(npu, "__name__", "")
    if name.endswith(".backends.cpu"):
        return name, name + ":"
    return "torch.npu", "torch:npu."


def _is_ours(npu):
    """Whether the device module is this package's (the virtual NPU's, the
    host's), whose functions take CUDA's calls as they are
    (tests/test_call_shapes.py); torch_npu's may name or place a parameter
    otherwise."""
    return getattr(npu, "VIRTUAL", False) or getattr(npu, "__name__", "").endswith(
        ".backends.cpu")


def _target(source, cuda_obj, npu_obj, ref, adapt):
    """What a row of source calls: its counterpart found by ref, or, where
    the counterpart takes CUDA's arguments otherwise, a call that adapts
    them (call_shapes.Adapted)."""
    if adapt:
        from . import call_shapes  # torch_npu's only: the process of another backend never loads it

        if call_shapes.differ(cuda_obj, npu_obj):
            return call_shapes.Adapted(source, cuda_obj, ref)
    return ref


def rows(torch, npu=None):
    npu = torch.npu if npu is None else npu
    npu_name, ref = _names(npu)
    adapt = not _is_ours(npu)
    out = _module_rows(torch.cuda, npu, "torch.cuda", npu_name, ref, adapt)
    for sub in SUBMODULES:
        cuda_sub, npu_sub = getattr(torch.cuda, sub, None), getattr(npu, sub, None)
        if isinstance(cuda_sub, types.ModuleType) and isinstance(npu_sub, types.ModuleType):
            out += _module_rows(cuda_sub, npu_sub, f"torch.cuda.{sub}", f"{npu_name}.{sub}",
                                f"{ref}{sub}.", adapt)
    for source, target in counterparts(torch.cuda, npu).items():
        owner, _, name = f"torch.cuda.{source}".rpartition(".")
        cuda_obj = original(_find(torch.cuda, source))
        out.append(row(f"torch.cuda.{source}", f"{npu_name}.{target}", _kind(_find(npu, target)),
                       _C.MODE_REDIRECT, owner, name,
                       _target(f"torch.cuda.{source}", cuda_obj, _find(npu, target),
                               f"{ref}{target}", adapt),
                       device_position(cuda_obj)))
    return out


def _kind(target):
    return "class" if isinstance(target, type) else "function"


def _module_rows(cuda, npu, cuda_name, npu_name, ref, adapt):
    out = []
    # Targets named by reference ("torch:npu.synchronize"), found at their
    # first call.
    public = set(public_names(cuda)).union(DATA)
    # A device module may serve its data from a module __getattr__, outside dir().
    for name in sorted(set(dir(npu)).union(d for d in DATA if hasattr(npu, d))):
        # What CUDA code asks about the device is answered by identity.py.
        if (name.startswith("_") or name not in public or name in IDENTITY
                or not module_has(cuda, name)):
            continue
        target = getattr(npu, name)
        if name in DATA:
            out.append(row(f"{cuda_name}.{name}", f"{npu_name}.{name}", "constant",
                           _C.MODE_REPLACE, cuda, name, f"{ref}{name}"))
            continue
        if isinstance(target, types.ModuleType) or not callable(target):
            continue
        # The call's arguments are CUDA's: a device among them is where
        # CUDA's function has it.
        cuda_obj = original(getattr(cuda, name))
        out.append(row(f"{cuda_name}.{name}", f"{npu_name}.{name}", _kind(target),
                       _C.MODE_REDIRECT, cuda, name,
                       _target(f"{cuda_name}.{name}", cuda_obj, target, f"{ref}{name}", adapt),
                       device_position(cuda_obj)))
    return out
