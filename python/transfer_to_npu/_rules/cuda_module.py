"""torch.cuda.X -> torch.npu.X for every public X both modules have, and
torch.cuda.amp.X -> torch.npu.amp.X when the NPU has its own amp module."""

import types

from .. import _C
from ._introspect import device_position, module_has
from ._row import row
from .identity import FUNCTIONS as IDENTITY


# Submodules of torch.cuda whose names map into the npu's like-named module.
SUBMODULES = ("amp",)

# Data (not callables) of both modules that CUDA code reads per device:
# torch.cuda.default_generators[i].manual_seed(...).
DATA = ("default_generators",)


def rows(torch):
    out = _module_rows(torch.cuda, torch.npu, "torch.cuda", "torch.npu")
    for sub in SUBMODULES:
        cuda_sub, npu_sub = getattr(torch.cuda, sub, None), getattr(torch.npu, sub, None)
        if isinstance(cuda_sub, types.ModuleType) and isinstance(npu_sub, types.ModuleType):
            out += _module_rows(cuda_sub, npu_sub, f"torch.cuda.{sub}", f"torch.npu.{sub}")
    return out


def _module_rows(cuda, npu, cuda_name, npu_name):
    out = []
    # Targets named from torch ("torch:npu.synchronize"), found at their
    # first call.
    path = "torch:" + npu_name.partition(".")[2]
    # A device module may serve its data from a module __getattr__, outside dir().
    for name in sorted(set(dir(npu)).union(d for d in DATA if hasattr(npu, d))):
        # What CUDA code asks about the device is answered by identity.py.
        if name.startswith("_") or name in IDENTITY or not module_has(cuda, name):
            continue
        target = getattr(npu, name)
        if name in DATA:
            out.append(row(f"{cuda_name}.{name}", f"{npu_name}.{name}", "constant",
                           _C.MODE_REPLACE, cuda, name, f"{path}.{name}"))
            continue
        if isinstance(target, types.ModuleType) or not callable(target):
            continue
        kind = "class" if isinstance(target, type) else "function"
        out.append(row(f"{cuda_name}.{name}", f"{npu_name}.{name}", kind, _C.MODE_REDIRECT,
                       cuda, name, f"{path}.{name}", device_position(target)))
    return out
