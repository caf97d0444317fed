"""Which virtual NPUs exist and which one is current.

``TRANSFER_TO_NPU_VIRTUAL_DEVICES`` sets how many the machine has (default
1, or under a launcher such as torchrun one per process of the node,
``LOCAL_WORLD_SIZE``).  ``ASCEND_RT_VISIBLE_DEVICES`` then selects among
them as on real hardware: a comma-separated list of device ids, renumbered
from 0 in the order given; the list ends at its first entry that names no
device.  The current device is per thread, as on real hardware, and kept by
the C core, which places the results of ops that name no device index.
"""

import functools
import os
import warnings

import torch

from ... import _C


def _launched_per_node():
    """The processes a launcher (torchrun, torch.distributed.launch) runs on
    this node, or None outside one."""
    try:
        n = int(os.environ.get("LOCAL_WORLD_SIZE", ""))
    except ValueError:
        return None
    return n if 1 <= n <= _C.MAX_DEVICE_INDEX + 1 else None


@functools.lru_cache(maxsize=None)
def physical_count():
    """Number of virtual NPUs on this 'machine'."""
    raw = os.environ.get("TRANSFER_TO_NPU_VIRTUAL_DEVICES")
    if raw is None:
        # Under a launcher, one per process of the node, as a GPU script
        # launched so expects (it calls set_device(LOCAL_RANK)).
        return _launched_per_node() or 1
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


@functools.lru_cache(maxsize=None)
def visible():
    """The physical ids of the visible devices, in their visible order."""
    n = physical_count()
    raw = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if raw is None:
        return tuple(range(n))
    if raw.strip() == "":
        return ()  # as CUDA_VISIBLE_DEVICES="": no device
    ids = []
    for item in raw.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= n or int(item) in ids:
            if item.startswith("-") and item[1:].isdigit():
                break  # "-1": no device, on purpose
            warnings.warn(
                f"ASCEND_RT_VISIBLE_DEVICES={raw!r}: {item!r} names no virtual NPU (there "
                f"{'is' if n == 1 else 'are'} {n}, set by TRANSFER_TO_NPU_VIRTUAL_DEVICES); "
                f"the devices before it are visible", RuntimeWarning, stacklevel=2)
            break
        ids.append(int(item))
    return tuple(ids)


def count():
    """Number of visible virtual NPUs."""
    return len(visible())


# The current device is kept per thread by the C core, which also places
# the results of ops that name no device index and serves Tensor.npu().
current = _C.current_device
set_current = _C.set_current_device


def check_index(index):
    """index, if npu:index exists; else RuntimeError ("Invalid device
    ordinal"), as the C core raises for a tensor made there."""
    return _C.check_device_index(index)


def is_negative_index(device):
    """Whether device is a negative int, which CUDA's set_device and device
    context take for 'no change'."""
    return isinstance(device, int) and not isinstance(device, bool) and device < 0


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


def install_autograd_workaround():
    """Run backward on the calling thread, never on a per-device worker.

    torch's autograd engine gives each device index below the device count
    its worker thread, and a Python-defined device reports a count of one:
    backward through npu:1 would trip the engine.  And the virtual NPU's
    kernels are the host's: on a worker thread they would only contend with
    the calling thread's idle OpenMP pool for the same cores."""
    import torch.autograd.graph as graph

    run = graph._engine_run_backward

    @functools.wraps(run)
    def _engine_run_backward(*args, **kwargs):
        if torch._C._is_multithreading_enabled():
            torch._C._set_multithreading_enabled(False)
        return run(*args, **kwargs)

    # backward() and grad() call it by the name torch.autograd imported.
    graph._engine_run_backward = _engine_run_backward
    torch.autograd._engine_run_backward = _engine_run_backward
