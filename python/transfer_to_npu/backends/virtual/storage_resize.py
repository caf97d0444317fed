"""Resizing an npu storage in place: ``storage.resize_(n)``.

FSDP frees a parameter's unsharded memory with ``untyped_storage().resize_(0)``
and gets it back with ``resize_(nbytes)``, while every view of that storage
(the module's parameters) must see the new memory.  torch resizes a
PrivateUse1 storage through a C++ hook that a Python-defined device cannot
provide, so here the new memory is made as an npu storage of its own and
moved into the resized one with ``_swap_data_ptr_``, which exchanges two
storages' memory (one of them empty) without changing which storage object
every tensor points at.

Before torch 2.12 storages have no ``_swap_data_ptr_``, and nothing else
lets Python change the memory of a storage that tensors already point at:
there a resize within the memory the storage has changes its size alone
(``nbytes()``, ``size()``, what ``set_`` and the views made afterwards
see), and the memory stays until the storage goes.  FSDP, which frees and
gets back the same number of bytes, trains so, without the memory saved.
"""

import operator

import torch

from ... import _C
from . import storage

_original_resize = torch.UntypedStorage.resize_
_original_nbytes = torch.UntypedStorage.nbytes
# Where storages cannot swap memory: the size an npu storage was resized
# to, kept on the storage object (torch keeps one per storage).
_SIZE = "_npu_nbytes"


def _empty(device, nbytes):
    return torch.empty(nbytes, dtype=torch.uint8, device=device).untyped_storage()


def _resize_(self, size):
    if self.device.type != "npu":
        return _original_resize(self, size)
    try:
        nbytes = operator.index(size)
    except TypeError:
        raise TypeError(
            f"resize_(): size must be an int, got {type(size).__name__} {size!r}") from None
    if nbytes < 0:
        raise RuntimeError(f"resize_(): size must be non-negative, got {nbytes}")
    old = self.nbytes()
    if nbytes == old:
        return self
    if not hasattr(torch.UntypedStorage, "_swap_data_ptr_"):
        return _resize_within(self, nbytes)
    grown = _empty(self.device, nbytes) if nbytes else None
    keep = min(old, nbytes)
    if keep:
        # Growing or shrinking keeps the leading bytes, as a cpu resize does.
        index = self.device.index
        _C.to_host(storage.tensor_over(grown, index))[:keep].copy_(
            _C.to_host(storage.tensor_over(self, index))[:keep])
    if old:
        # _swap_data_ptr_ needs equal sizes or an empty side: empty self
        # first; the old memory leaves with the spare storage.
        self._swap_data_ptr_(_empty(self.device, 0))
    if grown is not None:
        self._swap_data_ptr_(grown)
    return self


def _resize_within(self, nbytes):
    capacity = _original_nbytes(self)
    if nbytes > capacity:
        raise RuntimeError(
            f"resize_(): an npu storage of {capacity} bytes cannot grow to {nbytes} on this "
            f"torch ({torch.__version__}), whose storages cannot swap memory "
            f"(UntypedStorage._swap_data_ptr_, torch 2.12 and later)")
    if nbytes == capacity:
        vars(self).pop(_SIZE, None)
    else:
        setattr(self, _SIZE, nbytes)
    return self


def _nbytes(self):
    size = vars(self).get(_SIZE)
    return _original_nbytes(self) if size is None else size


def install():
    torch.UntypedStorage.resize_ = _resize_
    if not hasattr(torch.UntypedStorage, "_swap_data_ptr_"):
        torch.UntypedStorage.nbytes = _nbytes
