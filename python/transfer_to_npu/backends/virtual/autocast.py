"""Mixed precision on the virtual NPU: its autocast kernels.

``torch.autocast('npu', dtype=...)`` turns on torch's AutocastPrivateUse1
dispatch key, for which core PyTorch registers nothing.  Here every op
falls through it, but for the ops the running torch gives CUDA's autocast
a kernel for, whose kernels cast as CUDA's do (``autocast_policy.py``: the
lists, and the kernels of each policy).

The kernels are registered at the first npu tensor (autocast only casts
tensors), when this module loads.
"""

import torch

from ..autocast_policy import Policy
from . import registry

_KEY = "AutocastPrivateUse1"

_libraries = []


def register():
    """The autocast kernels: CUDA's, op for op."""
    lib = torch.library.Library("aten", "IMPL")
    for name, make in Policy("npu", _KEY).kernels().items():
        registry.impl(lib, name, make, _KEY)
    rest = torch.library.Library("_", "IMPL")
    registry.fallback(rest, torch.library.fallthrough_kernel, _KEY)
    _libraries.extend([lib, rest])
