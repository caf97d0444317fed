"""npu storages of the virtual NPU.

torch creates device storages through the device's C++ allocator
(``torch.UntypedStorage(n, device=...)``, used by ``storage.to()``,
``storage.npu()`` and ``torch.load``), and a Python-defined device has none;
so an npu storage is made as the storage of an npu byte tensor instead, and
a tensor over an existing npu storage (``set_``) by aliasing its memory.
"""

import torch

from ... import _C
from . import devices

_original_new = torch._C.StorageBase.__new__


def tensor_over(untyped_storage, index):
    """A 1-D uint8 npu tensor over all of ``untyped_storage``'s bytes,
    keeping the storage alive."""
    nbytes = untyped_storage.nbytes()
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device=torch.device("npu", index))
    return _C.storage_tensor(untyped_storage, untyped_storage.data_ptr(), nbytes, index)


def _npu_storage(args, device):
    if not args:
        data = torch.empty(0, dtype=torch.uint8, device=device)
    elif len(args) == 1 and isinstance(args[0], int):
        data = torch.empty(args[0], dtype=torch.uint8, device=device)
    elif len(args) == 1:
        data = torch.tensor(list(args[0]), dtype=torch.uint8, device=device)
    else:
        raise TypeError(f"UntypedStorage(): unexpected arguments {args!r} for an npu storage")
    return data.untyped_storage()


def untyped_storage_new(cls, *args, device=None, **kwargs):
    """``torch.UntypedStorage.__new__`` (in place from import, by reference)."""
    if device is not None and not kwargs:
        target = torch.device(device) if not isinstance(device, torch.device) else device
        if target.type == "npu":
            return _npu_storage(args, devices.as_device(target))
    if device is not None:
        kwargs["device"] = device
    return _original_new(cls, *args, **kwargs)
