"""The virtual NPU: a real ``npu`` device in PyTorch (its PrivateUse1
backend) whose memory is host memory and whose kernels are the host's.

Tensors on it are ordinary ``torch.Tensor`` objects of device ``npu:N``
with real data pointers; every op runs the cpu kernel on the same bytes, so
results equal the cpu's.  It lets a migration run, and be tested, on any
machine.
"""

import atexit
import functools
import sys

import torch

from ... import _C, _table, _torch_facts
from . import devices, npu, random

NAME = "virtual"
HCCL = "hccl"
_installed = False

class _Hooks(torch._C._acc.PrivateUse1Hooks):
    def is_available(self):
        return True

    def has_primary_context(self, dev_id):
        return True

    def is_built(self):
        return True


class _DeviceGuard(torch._C._acc.DeviceGuard):
    def type_(self):
        return torch._C._autograd.DeviceType.PrivateUse1


def lazy(name, original=None):
    """The function ``name`` of this package ("module:function", or
    "module:factory()" for what factory(original) makes), loaded at its
    first call: what the virtual NPU puts in torch at import loads its
    module only when a process uses it (a DataLoader worker, a tool never
    does)."""
    return _C.lazy(f"{__name__}.{name}", _table.resolve, original)


# Composite ops (no cpu kernel of their own) that call a kernel stub
# directly, which a Python-defined device cannot provide: they run on the
# host whole (factories.host_override).
HOST_OVERRIDES = ("kaiser_window", "kaiser_window.periodic", "kaiser_window.beta")


def dispatched_by_device():
    """The names of the ops dispatched by their device argument (their
    BackendSelect kernel), and of those of them with a cpu kernel.  Cached
    per torch build."""
    facts = _torch_facts.section(torch, "backend_select")
    if "names" not in facts:
        from . import ops  # which ops run with the cpu's kernel: learnt once per build

        names = {q for q in torch._C._dispatch_get_registrations_for_dispatch_key("BackendSelect")
                 if q.startswith("aten::")}
        facts["names"] = sorted(names)
        facts["host_kernels"] = sorted(names & ops.torch_host_kernel_names())
        _torch_facts.changed("backend_select")
    return facts


# Registrations live as long as these libraries do.
_libraries = []


def register_kernel(lib, name, kernel, key):
    """``lib.impl(name, kernel, key)``, with the key handed to torch's
    binding as its enum: given the key's name, the binding first tries a
    cast that fails (an AttributeError made and formatted), which costs
    more than the registration itself, and there are a thousand of them at
    the first npu tensor.  torch.library's record of what it registered is
    kept as lib.impl keeps it (a Library's destruction reads it)."""
    lib.m.impl(name, getattr(torch._C.DispatchKey, key), kernel)
    record = f"{lib.ns}/{name.split('::')[-1]}/{key}"
    torch.library._impls.add(record)
    lib._op_impls.add(record)


def impl(lib, name, make, key):
    """Register ``make()`` as ``lib``'s kernel of op ``name`` for ``key``,
    unless the op has one for it already (at import and at the first npu
    tensor: registry.py)."""
    # The key as torch's enum here too, for the same reason.
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"{lib.ns}::{name}",
                                                          getattr(torch._C.DispatchKey, key)):
        register_kernel(lib, name, make(), key)


def register_at_import():
    """Register the kernels torch may call before the first npu tensor:
    those of the ops that reach the npu by their device argument (the
    factories and ``.to()``: factories.py), and pinning cpu tensors
    (pinned.py: a DataLoader may pin before any npu tensor exists).  Each
    is named by reference (``lazy``), unless the op has an npu kernel
    already."""
    lib = torch.library.Library("aten", "IMPL")
    kernels = {"_to_copy": lazy("factories:to_copy")}
    for name in HOST_OVERRIDES:
        kernels[name] = lazy("factories:host_override()", name)
    for qualified in dispatched_by_device()["host_kernels"]:
        # The generic path, by name: the C core resolves the op at its
        # first call.
        kernels.setdefault(qualified[len("aten::"):], functools.partial(_C.host_call, qualified))
    for name, kernel in kernels.items():
        impl(lib, name, lambda kernel=kernel: kernel, "PrivateUse1")
    register_kernel(lib, "_pin_memory", lazy("pinned:pin_memory"), "CPU")
    register_kernel(lib, "is_pinned", lazy("pinned:is_pinned"), "CPU")
    _C.pin_made(lazy("pinned:pin_made"))
    _libraries.append(lib)


def install(backend_module=None):
    """Make the ``npu`` device and ``torch.npu`` exist (once per process).
    ``torch.npu`` is ``backend_module`` when given (a package presenting the
    virtual NPU under its own device module), else this package's npu."""
    global _installed
    if _installed:
        return
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    current = torch._C._get_privateuse1_backend_name()
    if current not in ("privateuseone", "npu"):
        raise RuntimeError(
            f"the virtual NPU needs torch's PrivateUse1 device, which is already taken by "
            f"{current!r}")
    _setup_privateuseone_for_python_backend(
        "npu", backend_module=npu if backend_module is None else backend_module, hook=_Hooks(),
        device_guard=_DeviceGuard())
    # Most kernels wait for the first npu tensor (registry.complete()):
    # registering them takes tens of milliseconds, which a process that
    # never uses the npu (a DataLoader worker, a tool) should not pay at
    # import.
    _C.host_install(torch._C._dlpack_exchange_api(), torch._C.TensorBase, torch.device("cpu"),
                    lazy("registry:complete"))
    register_at_import()
    # Tensor.npu in C (methods.py has its other calls).
    torch.Tensor.npu = _C.npu_method(lazy("methods:npu"), torch._C.TensorBase.to,
                                     torch._C._has_torch_function_unary)
    random.install()
    npu.default_generators = random.default_generators
    if backend_module is None:
        sys.meta_path.append(npu.Submodules)  # torch.npu.amp
    _install_storage()
    devices.install_autograd_workaround()
    # Before the patcher wraps DDP's __init__ in turn: disable() puts back
    # what it found, this (ddp.py).
    ddp = torch.nn.parallel.DistributedDataParallel
    ddp.__init__ = lazy("ddp:without_unused_parameters()", ddp.__init__)
    _install_accelerator()
    _install_hccl()
    _installed = True


def _install_storage():
    """npu storages, made as the storage of an npu byte tensor
    (storage.py)."""
    # Not wrapped in a staticmethod, which would read the function's name
    # and doc, loading it: looked up on the class, it binds to nothing, as
    # a function set there does.
    torch.UntypedStorage.__new__ = lazy("storage:untyped_storage_new")
    # storage.npu() and storage.is_npu, as on tensors and modules: the
    # classic map_location=lambda storage, loc: storage.npu() needs them.
    if not hasattr(torch.UntypedStorage, "npu"):
        from torch.utils.backend_registration import (
            _generate_storage_methods_for_privateuse1_backend)

        _generate_storage_methods_for_privateuse1_backend("npu")


# The torch._C functions behind torch.accelerator -> what answers them when
# the npu is torch's accelerator (accelerator.py says why).
_ACCELERATOR = {
    "_accelerator_setDeviceIndex": "accelerator:set_device_index",
    "_accelerator_exchangeDevice": "accelerator:exchange_device",
    "_accelerator_maybeExchangeDevice": "accelerator:exchange_device",
    "_accelerator_synchronizeDevice": "accelerator:synchronize_device",
    "_accelerator_getDeviceStats": "npu:memory_stats_as_nested_dict",
    "_accelerator_emptyCache": "npu:empty_cache",
    "_accelerator_resetPeakStats": "npu:reset_peak_memory_stats",
    "_accelerator_resetAccumulatedStats": "npu:reset_accumulated_memory_stats",
    "_accelerator_getMemoryInfo": "npu:mem_get_info",
}


def _install_accelerator():
    """torch.accelerator answered from torch.npu when the npu is torch's
    accelerator (a build with CUDA keeps its own)."""
    get = getattr(torch._C, "_accelerator_getAccelerator", None)
    accelerator = get() if get is not None else None
    if accelerator is None or accelerator.type != "npu":
        return
    replacements = {"_accelerator_getDeviceIndex": devices.current,  # C: no frame for compiled code
                    "_accelerator_isAllocatorInitialized": npu.is_initialized}
    replacements.update((name, lazy(ref)) for name, ref in _ACCELERATOR.items())
    for name, replacement in replacements.items():
        if hasattr(torch._C, name):
            setattr(torch._C, name, replacement)


def _install_hccl():
    """Register ``hccl`` for the npu device.  Its module (hccl.py) loads
    when the first group is made, or at the first npu tensor."""
    import torch.distributed as dist

    if dist.is_available() and HCCL not in dist.Backend.backend_list:
        dist.Backend.register_backend(HCCL, _create_hccl, extended_api=True, devices=["npu"])
        # Registered now, before the script's own exit handlers, so that it
        # runs after them (they may still run collectives).
        atexit.register(_hold_collectives_at_exit)


def _create_hccl(opts, backend_options):
    from . import hccl

    return hccl.create(opts, backend_options)


def _hold_collectives_at_exit():
    hccl = sys.modules.get(f"{__name__}.hccl")
    if hccl is not None:  # else there were no collectives
        hccl.keep_running_at_exit()
