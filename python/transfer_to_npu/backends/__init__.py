"""Choosing the NPU the migration targets.

``TRANSFER_TO_NPU_BACKEND``: ``auto`` (default: ``torch_npu`` when it
imports, else the virtual NPU), ``torch_npu`` or ``virtual``.  Both make
the ``npu`` device and ``torch.npu`` exist; the mapping table is the same.
"""

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


def is_hccl_available():
    """Whether the ``hccl`` process-group backend is registered (by
    torch_npu, or by the virtual NPU): what
    ``torch.distributed.is_nccl_available()`` answers once migrated."""
    import torch.distributed as dist

    if hasattr(dist, "is_backend_available"):
        return dist.is_backend_available("hccl")
    return "hccl" in dist.Backend.backend_list


def _virtual():
    """The virtual NPU module, after checking torch has what it builds on."""
    import torch

    missing = [name for name in ("_dlpack_exchange_api", "_acc") if not hasattr(torch._C, name)]
    if missing:
        raise ImportError(
            f"the virtual NPU needs a newer PyTorch than {torch.__version__} (it builds on "
            f"{', '.join('torch._C.' + m for m in missing)}); install torch_npu to use Ascend "
            f"hardware, or a newer torch")
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
