"""``torch.accelerator`` in the reference run: the host is the accelerator,
as the GPU is on the machine the script was written for.

``torch.cuda`` answers for the host (the package's __init__); torch's
accelerator API asks its C functions instead, which find no accelerator on
a host (or, on a CUDA build of torch, CUDA, and the driver).  Those
functions are answered here from the host's ``torch.cuda`` (rows of
``_rules/accelerator.py``): ``current_accelerator()`` is the cpu device,
available, with as many devices as ``torch.cuda.device_count()``, so that
a script choosing its device and data path by them (``pin_memory``,
workers) takes the path it takes on a GPU.
"""

import torch

from . import _check, current_device, device_count, mem_get_info, memory_stats


def get_accelerator():
    return torch.device("cpu")


def get_device_index():
    return current_device()


def set_device_index(index):
    _check(index)


def exchange_device(index):
    # The previous device, as torch's exchangeDevice: -1 changes nothing.
    return -1 if index < 0 else current_device()


def synchronize_device(index):
    pass


def get_stream(index):
    return torch.cpu.current_stream()


def set_stream(stream):
    pass


def is_allocator_initialized():
    return True


def device_stats(device=None):
    return memory_stats()


def nothing(device=None):
    pass


def memory_info(device=None):
    return mem_get_info()


#: torch._C's functions behind torch.accelerator -> their host answer.
ANSWERS = {
    "_accelerator_getAccelerator": get_accelerator,
    "_accelerator_getDeviceIndex": get_device_index,
    "_accelerator_setDeviceIndex": set_device_index,
    "_accelerator_exchangeDevice": exchange_device,
    "_accelerator_maybeExchangeDevice": exchange_device,
    "_accelerator_synchronizeDevice": synchronize_device,
    "_accelerator_getStream": get_stream,
    "_accelerator_setStream": set_stream,
    "_accelerator_isAllocatorInitialized": is_allocator_initialized,
    "_accelerator_getDeviceStats": device_stats,
    "_accelerator_emptyCache": nothing,
    "_accelerator_resetPeakStats": nothing,
    "_accelerator_resetAccumulatedStats": nothing,
    "_accelerator_getMemoryInfo": memory_info,
}

#: torch.accelerator's functions that ask the device module rather than
#: torch._C, answered as torch.cuda answers.
FUNCTIONS = {"device_count": device_count}
