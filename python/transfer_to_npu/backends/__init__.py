"""Choosing the NPU the migration targets.

``TRANSFER_TO_NPU_BACKEND``: ``auto`` (default: ``torch_npu`` when it
imports, else the virtual NPU), ``torch_npu`` or ``virtual``.  Both make
the ``npu`` device and ``torch.npu`` exist; the mapping table is the same.
"""

import functools
import importlib.util
import os
import warnings

CHOICES = ("auto", "torch_npu", "virtual")

#: The backend install() installed in this process, or None.
installed = None


def requested():
    value = os.environ.get("TRANSFER_TO_NPU_BACKEND", "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(
            f"TRANSFER_TO_NPU_BACKEND must be one of {', '.join(CHOICES)}, got "
            f"{os.environ.get('TRANSFER_TO_NPU_BACKEND')!r}")
    return value


def install():
    """Install the requested backend (once per process); return its name."""
    global installed
    if installed is None:
        installed = _install()
    return installed


@functools.lru_cache(maxsize=None)
def dispatched_by_device():
    """The aten ops torch dispatches by their device argument: those with a
    BackendSelect kernel, which torchgen gives every native op whose schema
    has the tensor options (dtype, layout, device, pin_memory) but the
    ``*_like`` and ``new_*`` ops, which dispatch on their tensor (its
    needs_backend_select).  The virtual NPU registers their kernels at
    import; the rules map their device argument (_rules/factories.py)."""
    import torch

    return frozenset(q for q in torch._C._dispatch_get_registrations_for_dispatch_key(
        "BackendSelect") if q.startswith("aten::"))


def is_hccl_available():
    """Whether the ``hccl`` process-group backend is registered (by
    torch_npu, or by the virtual NPU): what
    ``torch.distributed.is_nccl_available()`` answers once migrated."""
    import torch.distributed as dist

    if hasattr(dist, "is_backend_available"):
        return dist.is_backend_available("hccl")
    return "hccl" in dist.Backend.backend_list


# What the virtual NPU builds on, and the oldest torch that has it all.
# torch._C._acc: the Python device guard and hooks of a PrivateUse1 device
# defined in Python (torch.utils.backend_registration's
# _setup_privateuseone_for_python_backend).  torch._C._dlpack_exchange_api:
# the C function table through which the C core reads and makes tensors
# over the same memory (host_alias.c, host_call.c), without a DLPack
# capsule per call.
VIRTUAL_NEEDS = ("_acc", "_dlpack_exchange_api")
# The first with both (torch 2.8's and 2.9's wheels have neither
# _dlpack_exchange_api nor backend_registration's Python backend set-up).
VIRTUAL_MIN_TORCH = "2.10"


def _virtual_missing():
    import torch

    return [name for name in VIRTUAL_NEEDS if not hasattr(torch._C, name)]


def virtual_supported():
    """Whether the running torch has what the virtual NPU builds on."""
    return not _virtual_missing()


def _virtual():
    """The virtual NPU module, after checking torch has what it builds on."""
    import torch

    missing = _virtual_missing()
    if missing:
        raise ImportError(
            f"the virtual NPU needs PyTorch {VIRTUAL_MIN_TORCH} or newer, found "
            f"{torch.__version__}: it builds on {', '.join('torch._C.' + m for m in missing)}. "
            f"On Ascend hardware install torch_npu (the migration then targets it, on any "
            f"torch from 2.1); to run on the host, install torch>={VIRTUAL_MIN_TORCH}")
    from . import virtual

    return virtual


def _install():
    choice = requested()
    if choice == "virtual" or (choice == "auto" and importlib.util.find_spec("torch_npu") is None):
        virtual = _virtual()
        virtual.install()
        return virtual.NAME
    from . import torch_npu as real

    ok, error = real.available()
    if ok:
        real.install()
        return real.NAME
    if choice == "torch_npu":
        raise ImportError(
            f"TRANSFER_TO_NPU_BACKEND=torch_npu but torch_npu cannot be imported: {error}")
    if not isinstance(error, ModuleNotFoundError) or error.name != "torch_npu":
        # Installed but broken: say so, then still run on the virtual NPU.
        warnings.warn(
            f"transfer_to_npu: torch_npu is installed but failed to import ({error}); "
            f"using the virtual NPU", RuntimeWarning, stacklevel=3)
    virtual = _virtual()
    virtual.install()
    return virtual.NAME
