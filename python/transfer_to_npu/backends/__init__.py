"""Choosing the NPU the migration targets.

``TRANSFER_TO_NPU_BACKEND``: ``auto`` (default: ``torch_npu`` when it
imports, else the virtual NPU), ``torch_npu`` or ``virtual``.  Both make
the ``npu`` device and ``torch.npu`` exist; the mapping table is the same.
``cpu`` targets the host instead (the reference run of ``compare``): the
same table, with the device type and process-group backend of ``TARGETS``
and the device module ``cpu.py``.
"""

import functools
import importlib.util
import os
import warnings

CHOICES = ("auto", "torch_npu", "virtual", "cpu")

#: Per backend, what CUDA's spellings become: the device type 'cuda'
#: becomes, the process-group backend 'nccl' becomes, and whether the
#: device takes an index (the host is one device).
TARGETS = {"torch_npu": ("npu", "hccl", True), "virtual": ("npu", "hccl", True),
           "cpu": ("cpu", "gloo", False)}

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
    """Install the requested backend (once per process), and give the C
    core its target; return its name."""
    global installed
    if installed is None:
        from .. import _C

        name = _install()
        _C.set_target(*TARGETS[name])
        installed = name
    return installed


def target_type():
    """The device type CUDA's becomes: 'npu', or 'cpu' for the cpu backend."""
    return TARGETS.get(installed, TARGETS["virtual"])[0]


def device_module():
    """What torch.cuda's functions map to: torch.npu, or the host's."""
    if installed == "cpu":
        from . import cpu

        return cpu
    import torch

    return torch.npu


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
    """Whether the target's process-group backend is registered (``hccl``,
    by torch_npu or by the virtual NPU; the cpu backend's ``gloo``): what
    ``torch.distributed.is_nccl_available()`` answers once migrated."""
    import torch.distributed as dist

    name = TARGETS.get(installed, TARGETS["virtual"])[1]
    if hasattr(dist, "is_backend_available"):
        return dist.is_backend_available(name)
    return name in dist.Backend.backend_list


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
    if choice == "cpu":
        from . import cpu

        cpu.install()
        return cpu.NAME
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
