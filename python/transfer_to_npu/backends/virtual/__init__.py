"""The virtual NPU: a real ``npu`` device in PyTorch (its PrivateUse1
backend) whose memory is host memory and whose kernels are the host's.

Tensors on it are ordinary ``torch.Tensor`` objects of device ``npu:N``
with real data pointers; every op runs the cpu kernel on the same bytes, so
results equal the cpu's.  It lets a migration run, and be tested, on any
machine.
"""

import atexit
import functools
import signal
import sys
import threading

import torch

from ... import _C
from .. import dispatched_by_device
from . import devices, npu, random

NAME = "virtual"
HCCL = "hccl"
_installed = False

# What torch's C++ asks the device, answered from C (_C.constant): some of
# it is asked where an exception ends the process (the device guard's
# type_(), under the stream guards' destructors in autograd), and a Python
# method would raise a pending KeyboardInterrupt there.  Class attributes:
# looked up through an instance, a constant holds Ctrl-C back until it is
# called (callbacks.c).
class _Hooks(torch._C._acc.PrivateUse1Hooks):
    is_built = has_primary_context = _C.constant(True)


def _hooks(available):
    return type("_Hooks", (_Hooks,), {"is_available": _C.constant(available)})()


class _DeviceGuard(torch._C._acc.DeviceGuard):
    type_ = _C.constant(torch._C._autograd.DeviceType.PrivateUse1)


# Composite ops (no cpu kernel of their own) that call a kernel stub
# directly, which a Python-defined device cannot provide: they run on the
# host whole (factories.host_override).
HOST_OVERRIDES = ("kaiser_window", "kaiser_window.periodic", "kaiser_window.beta")


def runs_host_kernel(qualified):
    """Whether the npu runs aten op ``qualified`` with the cpu's own kernel:
    one that has one, but for one whose CompositeImplicitAutograd kernel is
    also its autograd, which a backend kernel would hide.  Also a composite
    Scalar overload (``remainder.Scalar``...): it only wraps the number and
    calls the Tensor overload, which takes a number badly through a Python
    kernel."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    keys = torch._C.DispatchKey
    if has(qualified, keys.CPU):
        return not has(qualified, keys.CompositeImplicitAutograd)
    name, _, overload = qualified.partition(".")
    return ("Scalar" in overload and has(qualified, keys.CompositeExplicitAutograd)
            and not any("Device" in str(a.type)
                        for a in torch._C._get_schema(name, overload).arguments))


def host_kernel_names():
    """The aten ops the npu runs with the cpu's own kernel."""
    candidates = set()
    for key in ("CPU", "CompositeExplicitAutograd"):
        candidates.update(q for q in torch._C._dispatch_get_registrations_for_dispatch_key(key)
                          if q.startswith("aten::"))
    return frozenset(q for q in candidates if runs_host_kernel(q))


# Registrations live as long as these libraries do.
_libraries = []


def as_callback(kernel):
    """kernel, run as a callback of torch's C++: a Ctrl-C that comes while
    it runs is raised once it has returned, in the code that called the
    op, as on the CPU, whose kernels run no Python code (callbacks.c).  The
    generic kernel (host_call) does so itself."""
    if kernel is torch.library.fallthrough_kernel or getattr(kernel, "func", kernel) is \
            _C.host_call:
        return kernel
    return functools.partial(_C.callback, kernel)


def register_kernel(lib, name, kernel, key):
    """``lib.impl(name, kernel, key)``, with the key handed to torch's
    binding as its enum: given the key's name, the binding first tries a
    cast that fails (an AttributeError made and formatted), which costs
    more than the registration itself, and there are a thousand of them at
    the first npu tensor.  torch.library's record of what it registered is
    kept as lib.impl keeps it (a Library's destruction reads it)."""
    lib.m.impl(name, getattr(torch._C.DispatchKey, key), as_callback(kernel))
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
    (pinned.py: a DataLoader may pin before any npu tensor exists), unless
    the op has an npu kernel already."""
    from . import factories, pinned

    lib = torch.library.Library("aten", "IMPL")
    try:
        kernels = {"_to_copy": factories.to_copy}
        for name in HOST_OVERRIDES:
            kernels[name] = factories.host_override(name)
        for qualified in sorted(q for q in dispatched_by_device() if runs_host_kernel(q)):
            # The generic path, by name: the C core resolves the op at its
            # first call.
            kernels.setdefault(qualified[len("aten::"):], functools.partial(_C.host_call, qualified))
        for name, kernel in kernels.items():
            impl(lib, name, lambda kernel=kernel: kernel, "PrivateUse1")
        register_kernel(lib, "_pin_memory", pinned.pin_memory, "CPU")
        register_kernel(lib, "is_pinned", pinned.is_pinned, "CPU")
        _C.pin_made(pinned.pin_made)
    except BaseException:
        # What it registered is unregistered (a Library's destruction does
        # so), for the step to be taken again.
        lib._destroy()
        raise
    _libraries.append(lib)


# The steps of install() done in this process: an install that fails half
# way (a KeyboardInterrupt, an error of torch's) is taken up again at the
# step that failed, as torch keeps what the steps before registered and
# refuses to register it twice.
_done = set()


def is_installed():
    """Whether the virtual NPU is this process's npu device (under its own
    name, or presented as torch_npu)."""
    return _installed


def install(backend_module=None):
    """Make the ``npu`` device and ``torch.npu`` exist (once per process).
    ``torch.npu`` is ``backend_module`` when given (a package presenting the
    virtual NPU under its own device module), else this package's npu."""
    global _installed
    if _installed:
        return
    for step in _steps(npu if backend_module is None else backend_module):
        if step.__name__ not in _done:
            step()
            _done.add(step.__name__)
    _installed = True


def _steps(device_module):
    """install()'s steps, in order; each changes nothing when it fails."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    from . import ddp, methods, registry

    def device():
        current = torch._C._get_privateuse1_backend_name()
        if current not in ("privateuseone", "npu"):
            raise RuntimeError(
                f"the virtual NPU needs torch's PrivateUse1 device, which is already taken by "
                f"{current!r}")
        hooks = _hooks(devices.count() > 0)
        _setup_privateuseone_for_python_backend(
            "npu", backend_module=device_module, hook=hooks, device_guard=_DeviceGuard())

    def memory():
        # Most kernels wait for the first npu tensor (registry.complete()):
        # registering them takes tens of milliseconds, which a process that
        # never uses the npu (a DataLoader worker, a tool) should not pay at
        # import.
        _C.host_install(torch._C._dlpack_exchange_api(), torch._C.TensorBase,
                        torch.device("cpu"), registry.complete, devices.count())
        _C.host_recount(devices.recount)

    def methods_and_generators():
        # Tensor.npu in C (methods.py has its other calls).
        torch.Tensor.npu = _C.npu_method(methods.npu, torch._C.TensorBase.to,
                                         torch._C._has_torch_function_unary)
        random.install()
        npu.default_generators = random.default_generators

    def submodules():
        if device_module is npu:
            sys.meta_path.append(npu.Submodules)  # torch.npu.amp

    def autograd():
        devices.install_autograd_workaround()

    def distributed():
        # Before the patcher wraps DDP's __init__ in turn: disable() puts
        # back what it found, this (ddp.py).
        ddp_class = torch.nn.parallel.DistributedDataParallel
        ddp_class.__init__ = ddp.without_unused_parameters(ddp_class.__init__)

    return (device, memory, register_at_import, methods_and_generators, submodules,
            _install_storage, autograd, distributed, _install_accelerator, _install_hccl,
            _defer_interrupts)


def _defer_interrupts():
    """Ctrl-C raises KeyboardInterrupt where the default handler would,
    but in a kernel and while torch's C++ looks up one of the constants
    above, where an exception ends the process, and in a Condition's
    __enter__ and __exit__, where it would leave the lock taken: there it is
    raised as they return (callbacks.c).  Only in place of the default
    handler, which only the main thread can set."""
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        _C.lock_codes((threading.Condition.__enter__.__code__,
                       threading.Condition.__exit__.__code__))
        signal.signal(signal.SIGINT, _C.interrupt)


def _install_storage():
    """npu storages, made as the storage of an npu byte tensor
    (storage.py)."""
    from . import storage

    # A function set on a class binds to nothing when looked up there, as
    # __new__ must.
    torch.UntypedStorage.__new__ = storage.untyped_storage_new
    # storage.npu() and storage.is_npu, as on tensors and modules: the
    # classic map_location=lambda storage, loc: storage.npu() needs them.
    if not hasattr(torch.UntypedStorage, "npu"):
        from torch.utils.backend_registration import (
            _generate_storage_methods_for_privateuse1_backend)

        _generate_storage_methods_for_privateuse1_backend("npu")


def _install_accelerator():
    """torch.accelerator answered from torch.npu when the npu is torch's
    accelerator (a build with CUDA keeps its own; accelerator.py says why)."""
    get = getattr(torch._C, "_accelerator_getAccelerator", None)
    accelerator_device = get() if get is not None else None
    if accelerator_device is None or accelerator_device.type != "npu":
        return
    from . import accelerator, memory

    replacements = {
        "_accelerator_getDeviceIndex": devices.current,  # C: no frame for compiled code
        "_accelerator_isAllocatorInitialized": npu.is_initialized,
        "_accelerator_setDeviceIndex": accelerator.set_device_index,
        "_accelerator_exchangeDevice": accelerator.exchange_device,
        "_accelerator_maybeExchangeDevice": accelerator.exchange_device,
        "_accelerator_synchronizeDevice": accelerator.synchronize_device,
        "_accelerator_getDeviceStats": memory.memory_stats_as_nested_dict,
        "_accelerator_emptyCache": memory.empty_cache,
        "_accelerator_resetPeakStats": memory.reset_peak_memory_stats,
        "_accelerator_resetAccumulatedStats": memory.reset_accumulated_memory_stats,
        "_accelerator_getMemoryInfo": memory.mem_get_info,
    }
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
