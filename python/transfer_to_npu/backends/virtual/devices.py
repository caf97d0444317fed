"""Which virtual NPUs exist and which one is current.

``TRANSFER_TO_NPU_VIRTUAL_DEVICES`` sets how many there are (default 1).
The current device is per thread, as on real hardware, and is mirrored into
the C core, which places the results of ops that name no device index.
"""

import os
import threading

import torch

from ... import _C

_local = threading.local()


def count():
    """Number of virtual NPUs."""
    raw = os.environ.get("TRANSFER_TO_NPU_VIRTUAL_DEVICES", "1")
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(
            f"TRANSFER_TO_NPU_VIRTUAL_DEVICES must be a positive integer, got {raw!r}") from None
    if not 1 <= n <= _C.MAX_DEVICE_INDEX + 1:
        raise ValueError(
            f"TRANSFER_TO_NPU_VIRTUAL_DEVICES must be between 1 and {_C.MAX_DEVICE_INDEX + 1}, "
            f"got {raw!r}")
    return n


def current():
    return getattr(_local, "index", 0)


def set_current(index):
    _local.index = index
    _C.set_current_device(index)


def check_index(index):
    n = count()
    if not 0 <= index < n:
        raise RuntimeError(
            f"Invalid device ordinal: npu:{index} (there {'is' if n == 1 else 'are'} {n} virtual "
            f"NPU{'' if n == 1 else 's'}; set TRANSFER_TO_NPU_VIRTUAL_DEVICES for more)")
    return index


def index_of(device, optional=True):
    """The device index that ``device`` (int, str, torch.device, None) names."""
    if device is None:
        if optional:
            return current()
        raise ValueError("expected an npu device, got None")
    if isinstance(device, bool):
        raise TypeError(f"expected an npu device, got {device!r}")
    if isinstance(device, int):
        return check_index(device)
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "npu":
            raise ValueError(f"expected an npu device, got {str(device)!r}")
        return current() if device.index is None else check_index(device.index)
    if hasattr(device, "device") and isinstance(device.device, torch.device):
        return index_of(device.device)  # a Stream or a tensor
    raise TypeError(f"expected an npu device, got {type(device).__name__} {device!r}")


def as_device(device=None):
    return torch.device("npu", index_of(device))
