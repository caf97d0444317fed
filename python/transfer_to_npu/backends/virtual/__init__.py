"""The virtual NPU: a real ``npu`` device in PyTorch (its PrivateUse1
backend) whose memory is host memory and whose kernels are the host's.

Tensors on it are ordinary ``torch.Tensor`` objects of device ``npu:N``
with real data pointers; every op runs the cpu kernel on the same bytes, so
results equal the cpu's.  It lets a migration run, and be tested, on any
machine.
"""

import torch

from ... import _C

NAME = "virtual"
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
    from . import amp, devices, methods, npu, ops, pinned, random, storage

    _setup_privateuseone_for_python_backend(
        "npu", backend_module=npu if backend_module is None else backend_module, hook=_Hooks(),
        device_guard=_DeviceGuard())
    _C.host_install(torch._C._dlpack_exchange_api(), torch._C.TensorBase, torch.device("cpu"),
                    ops.classify, ops.retry, ops.op_of)
    ops.register()
    methods.install()
    random.install()
    amp.install()
    pinned.install()
    storage.install()
    devices.install_autograd_workaround()
    from . import hccl, storage_resize

    storage_resize.install()
    hccl.install()
    _installed = True
