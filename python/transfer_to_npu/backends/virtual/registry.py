"""Registering the virtual NPU's kernels with torch's dispatcher at the
first npu tensor (``complete()``, which the C core calls then; the kernels
are ops.py's, autocast.py's, hccl.py's and pinned.py's), after the user's
code has run: an op or fallback that something else (a ``torch.library``
kernel of the user's) registered for the npu in the meantime keeps its
kernel, as it would have overridden ours had ours come first.  torch itself registers no
aten kernel for the device.  The kernels torch may call before that are
in place from import (``register_at_import`` in the package's __init__).
"""

import os
import threading

import torch

from ... import _C
from . import as_callback, impl, npu  # noqa: F401  (impl: one check, at import and here)

# The kernels left for the first npu tensor: registered once, under this
# lock, by the first thread to make one.
_completion = threading.RLock()
_complete = {"done": False, "running": False}


def _after_fork_in_child():
    # A fork while another thread was registering: that thread is not in
    # the child, and would hold the lock for ever.  The child registers
    # what is missing itself (impl skips what is there).
    global _completion
    _completion = threading.RLock()
    _complete["running"] = False


os.register_at_fork(after_in_child=_after_fork_in_child)


def complete():
    """Register the kernels that only ops on an npu tensor reach; true once
    they all are.  The C core calls it before it makes the first npu tensor,
    on whichever thread that is; another thread making one meanwhile waits
    here.  Registration itself making one (on this thread) gets false."""
    with _completion:
        if _complete["done"] or _complete["running"]:
            return _complete["done"]
        _complete["running"] = True
        try:
            from . import autocast, hccl, ops, pinned, storage_resize

            npu.init()  # its first tensor

            _C.host_handlers(ops.classify, ops.retry, ops.op_of)
            ops.register()
            autocast.register()
            hccl.register()
            pinned.register()
            # Only npu storages are resized here, and there are none yet.
            storage_resize.install()
            _complete["done"] = True
        finally:
            _complete["running"] = False
        return True


def fallback(lib, kernel, key):
    """Register ``kernel`` as the fallback for ``key``, unless there is
    one already."""
    if not torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)):
        lib.fallback(as_callback(kernel), key)
