"""``torch.accelerator`` on the virtual NPU.

torch.accelerator asks the device guard and the allocator registered in C++
for the accelerator's device, and a device defined in Python cannot supply
either: its guard always answers device 0, ignores a new current device,
and cannot synchronise.  So, when the npu is torch's accelerator, the
``torch._C`` functions behind torch.accelerator answer from ``torch.npu``
(``set_device_index``, ``current_device_index``, ``device_index``,
``synchronize`` and the memory figures): the virtual NPU puts those in
place at import (``_install_accelerator`` in its __init__).  Streams stay torch's: compiled code asks for
them between frames, where a Python function of ours would itself be
compiled.
"""

from . import npu


def exchange_device(index):
    # The previous device, as torch's exchangeDevice: -1 changes nothing.
    if index < 0:
        return -1
    previous = npu.current_device()
    if index != previous:
        npu.set_device(index)
    return previous


def set_device_index(index):
    if index >= 0:  # as torch's setDeviceIndex
        npu.set_device(index)


def synchronize_device(index):
    npu.synchronize(None if index < 0 else index)
