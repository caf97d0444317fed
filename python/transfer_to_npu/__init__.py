"""transfer_to_npu: run CUDA PyTorch training code on Ascend NPUs, unedited.

    import transfer_to_npu      # one line, before or after `import torch`

patches PyTorch in-process so that CUDA spellings (``torch.cuda.*``,
``'cuda:N'``, ``.cuda()``, ``backend='nccl'``...) run on the NPU: Ascend's
``torch_npu`` when it is installed, else the built-in virtual NPU, whose
memory is host memory and whose kernels are the host's.
"""

import threading

from . import _C
from ._C import InvalidDeviceError

__all__ = ["enable", "disable", "is_enabled", "mappings", "backend", "InvalidDeviceError"]

__version__ = "0.1.0"

#: "torch_npu" or "virtual" once enabled; None before.
backend = None

_lock = threading.RLock()


def _import_torch():
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            "transfer_to_npu needs PyTorch: pip install torch (2.1 or newer)") from exc
    return torch


def enable():
    """Migrate: install the NPU backend and patch every CUDA spelling.
    Idempotent."""
    global backend
    with _lock:
        if _C.is_enabled():
            return
        torch = _import_torch()
        from . import _rules, backends

        name = backends.install()
        _C.enable(_rules.rows(torch))
        backend = name


def disable():
    """Put back every object enable() replaced (the very same objects).
    The npu device itself stays available."""
    with _lock:
        _C.disable()


def is_enabled():
    return _C.is_enabled()


def mappings():
    """One dict per mapped symbol: source, target, kind and how many calls
    were migrated."""
    return [{"source": m["source"], "target": m["target"], "kind": m["kind"],
             "calls": m["calls"]} for m in _C.mappings()]


enable()
