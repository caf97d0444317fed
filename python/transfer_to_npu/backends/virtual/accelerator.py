"""``torch.accelerator`` on the virtual NPU.

torch.accelerator asks the device guard and the allocator registered in C++
for the accelerator's device, and a device defined in Python cannot supply
either: its guard always answers device 0, ignores a new current device,
and cannot synchronise.  So, when the npu is torch's accelerator, the
``torch._C`` functions behind torch.accelerator answer from ``torch.npu``
(``set_device_index``, ``current_device_index``, ``device_index``,
``synchronize`` and the memory figures).  Streams stay torch's: compiled
code asks for them between frames, where a Python function of ours would
itself be compiled.
"""

import torch

from . import devices, npu


def _exchange_device(index):
    # The previous device, as torch's exchangeDevice: -1 changes nothing.
    if index < 0:
        return -1
    previous = npu.current_device()
    if index != previous:
        npu.set_device(index)
    return previous


def _set_device_index(index):
    if index >= 0:  # as torch's setDeviceIndex
        npu.set_device(index)


def _synchronize_device(index):
    npu.synchronize(None if index < 0 else index)


def _memory(name):
    """torch.npu's memory function ``name``, looked up at each call: its
    module loads at the first."""

    def call(*args):
        return getattr(npu, name)(*args)

    call.__name__ = call.__qualname__ = name
    return call


# torch._C name -> what it becomes.
REPLACEMENTS = {
    "_accelerator_getDeviceIndex": devices.current,  # C: no frame for compiled code
    "_accelerator_setDeviceIndex": _set_device_index,
    "_accelerator_exchangeDevice": _exchange_device,
    "_accelerator_maybeExchangeDevice": _exchange_device,
    "_accelerator_synchronizeDevice": _synchronize_device,
    "_accelerator_isAllocatorInitialized": npu.is_initialized,
    "_accelerator_getDeviceStats": _memory("memory_stats_as_nested_dict"),
    "_accelerator_emptyCache": _memory("empty_cache"),
    "_accelerator_resetPeakStats": _memory("reset_peak_memory_stats"),
    "_accelerator_resetAccumulatedStats": _memory("reset_accumulated_memory_stats"),
    "_accelerator_getMemoryInfo": _memory("mem_get_info"),
}


def install():
    """Put the replacements in place when the npu is torch's accelerator
    (a build with CUDA keeps its own)."""
    get = getattr(torch._C, "_accelerator_getAccelerator", None)
    accelerator = get() if get is not None else None
    if accelerator is None or accelerator.type != "npu":
        return
    for name, replacement in REPLACEMENTS.items():
        if hasattr(torch._C, name):
            setattr(torch._C, name, replacement)
