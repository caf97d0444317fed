"""Pinned host memory with the virtual NPU: ``Tensor.pin_memory()``,
``is_pinned()``, ``DataLoader(pin_memory=True)``.

torch pins through the accelerator's allocator of pinned memory, which a
Python-defined device cannot provide.  Here ``pin_memory()`` copies the
tensor into host memory that the C core registers as pinned until torch
frees it, and ``is_pinned()`` asks that registry; both are the kernels of
``_pin_memory`` and ``is_pinned`` for cpu tensors, in place from import
(the package's __init__; this module loads at the first call of one).
Copies from pinned memory to the npu, blocking or not, are plain host
copies.

The factories (``torch.empty(..., pin_memory=True)``, ``torch.tensor``,
``Tensor.new_*``) would ask that allocator too: their migration wrappers
have the tensor made unpinned and pass it to ``pin_made`` (safetensors
stages a load to the device this way).
"""

import torch

from ... import _C
from . import register_kernel

_libraries = []


def pin_memory(self, device=None):
    if self.layout != torch.strided:
        raise RuntimeError(
            f"cannot pin a tensor of layout {self.layout}: only dense CPU tensors can be pinned")
    # The same strides when they are dense, as torch's pinning keeps them.
    pinned = torch.empty_like(self)
    pinned.copy_(self)
    if pinned.untyped_storage().nbytes() == 0:
        return pinned
    return _C.pin(pinned)


def is_pinned(self, device=None):
    if self.layout != torch.strided:
        return False
    storage = self.untyped_storage()
    return storage.nbytes() > 0 and _C.is_pinned(storage.data_ptr())


def pin_made(tensor):
    if not isinstance(tensor, torch.Tensor):
        return tensor
    if tensor.device.type != "cpu" or tensor.layout != torch.strided:
        # torch's words for a device tensor asked to be pinned
        raise RuntimeError("Only dense CPU tensors can be pinned")
    if tensor.untyped_storage().nbytes() == 0:
        return tensor
    if not tensor.requires_grad:
        return _C.pin(tensor)
    return _C.pin(tensor.detach()).requires_grad_()


def _npu_pin_memory(self, device=None):
    raise RuntimeError(
        f"cannot pin a tensor on {self.device}: only dense CPU tensors can be pinned")


def _npu_is_pinned(self, device=None):
    return False


def register():
    """Asking to pin an npu tensor: at the first npu tensor."""
    lib = torch.library.Library("aten", "IMPL")
    register_kernel(lib, "_pin_memory", _npu_pin_memory, "PrivateUse1")
    register_kernel(lib, "is_pinned", _npu_is_pinned, "PrivateUse1")
    _libraries.append(lib)
