"""Resizing an npu storage in place: ``storage.resize_(n)``.

FSDP frees a parameter's unsharded memory with ``untyped_storage().resize_(0)``
and gets it back with ``resize_(nbytes)``, while every view of that storage
(the module's parameters) must see the new memory.  torch resizes a
PrivateUse1 storage through a C++ hook that a Python-defined device cannot
provide, so here the new memory is made as an npu storage of its own and
moved into the resized one with ``_swap_data_ptr_``, which exchanges two
storages' memory (one of them empty) without changing which storage object
every tensor points at.
"""

import operator

import torch

from ... import _C
from . import storage

_original_resize = torch.UntypedStorage.resize_


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


def install():
    torch.UntypedStorage.resize_ = _resize_
