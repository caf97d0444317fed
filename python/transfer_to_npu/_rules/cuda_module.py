"""torch.cuda.X -> torch.npu.X for every public X both modules have."""

import types

from .. import _C
from ._introspect import device_position
from ._row import row


def rows(torch):
    out = []
    cuda, npu = torch.cuda, torch.npu
    for name in sorted(dir(npu)):
        if name.startswith("_") or not hasattr(cuda, name):
            continue
        target = getattr(npu, name)
        if isinstance(target, types.ModuleType) or not callable(target):
            continue
        kind = "class" if isinstance(target, type) else "function"
        out.append(row(f"torch.cuda.{name}", f"torch.npu.{name}", kind, _C.MODE_REDIRECT, cuda,
                       name, target, device_position(target)))
    return out
