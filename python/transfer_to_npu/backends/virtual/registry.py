"""Registering the virtual NPU's kernels with torch's dispatcher at the
first npu tensor (ops.py, autocast.py), after the user's code has run: an
op or fallback that something else (a ``torch.library`` kernel of the
user's) registered for the npu in the meantime keeps its kernel, as it
would have overridden ours had ours come first.  torch itself registers no
aten kernel for the device.  The kernels torch may call before that are
in place from import (``register_at_import`` in the package's __init__).
"""

import torch

from . import impl  # noqa: F401  (one check, at import and here)


def fallback(lib, kernel, key):
    """Register ``kernel`` as the fallback for ``key``, unless there is
    one already."""
    if not torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)):
        lib.fallback(kernel, key)
