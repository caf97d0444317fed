"""Pinned memory in the reference run: ``Tensor.pin_memory()``,
``is_pinned()``, ``DataLoader(pin_memory=True)`` and the factories'
``pin_memory=True`` do on the host what they do on a GPU machine.

torch pins through the accelerator's allocator of pinned memory, and a
host with none refuses ("Cannot access accelerator device when none is
available").  Here ``pin_memory()`` copies the tensor (a pinned copy is a
new tensor on CUDA too) and remembers its storage as pinned until the
storage is freed; ``is_pinned()`` asks that record.  They are the cpu
kernels of ``_pin_memory`` and ``is_pinned``, which torch's own code
(DataLoader's pinning thread) reaches too.
"""

import weakref

import torch

# The data addresses of the storages pin_memory() made, while they live.
_pinned = set()
_libraries = []


def _remember(tensor):
    storage = tensor.untyped_storage()
    address = storage.data_ptr()
    if storage.nbytes() and address not in _pinned:
        _pinned.add(address)
        # A storage's Python object lives as long as the storage itself.
        weakref.finalize(storage, _pinned.discard, address)
    return tensor


def pin_memory(self, device=None):
    if self.layout != torch.strided:
        raise RuntimeError(
            f"cannot pin a tensor of layout {self.layout}: only dense CPU tensors can be pinned")
    pinned = torch.empty_like(self)
    pinned.copy_(self)
    return _remember(pinned)


def is_pinned(self, device=None):
    if self.layout != torch.strided:
        return False
    storage = self.untyped_storage()
    return storage.nbytes() > 0 and storage.data_ptr() in _pinned


def pin_made(tensor):
    """A factory's result asked for with pin_memory=True, made unpinned."""
    if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided:
        _remember(tensor)
    return tensor


def register():
    from ... import _C

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_pin_memory", pin_memory, "CPU")
    lib.impl("is_pinned", is_pinned, "CPU")
    _libraries.append(lib)
    _C.pin_made(pin_made)
