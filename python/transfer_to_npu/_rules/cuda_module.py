"""torch.cuda.X -> torch.npu.X for every public X both modules have, and
torch.cuda.amp.X -> torch.npu.amp.X when the NPU has its own amp module."""

import types

from .. import _C
from ._introspect import device_position
from ._row import row


# Submodules of torch.cuda whose names map into the npu's like-named module.
SUBMODULES = ("amp",)


def rows(torch):
    out = _module_rows(torch.cuda, torch.npu, "torch.cuda", "torch.npu")
    for sub in SUBMODULES:
        cuda_sub, npu_sub = getattr(torch.cuda, sub, None), getattr(torch.npu, sub, None)
        if isinstance(cuda_sub, types.ModuleType) and isinstance(npu_sub, types.ModuleType):
            out += _module_rows(cuda_sub, npu_sub, f"torch.cuda.{sub}", f"torch.npu.{sub}")
    return out


def _module_rows(cuda, npu, cuda_name, npu_name):
    out = []
    for name in sorted(dir(npu)):
        if name.startswith("_") or not hasattr(cuda, name):
            continue
        target = getattr(npu, name)
        if isinstance(target, types.ModuleType) or not callable(target):
            continue
        kind = "class" if isinstance(target, type) else "function"
        out.append(row(f"{cuda_name}.{name}", f"{npu_name}.{name}", kind, _C.MODE_REDIRECT,
                       cuda, name, target, device_position(target)))
    return out
