"""The objects of torch.npu's device interface that a script makes:
``torch.npu.device`` and ``torch.npu.device_of`` (context managers that make
an npu current) and what ``get_device_properties()`` returns."""

import os

from . import devices
from .npu import DEVICE_NAME


class device:
    """``with torch.npu.device(i):`` makes npu ``i`` current inside the
    block."""

    def __init__(self, device):
        # None and a negative index change nothing, as with torch.cuda.device.
        self.idx = (-1 if device is None or devices.is_negative_index(device)
                    else devices.index_of(device))
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = devices.current()
        if self.idx >= 0:
            devices.set_current(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0:
            devices.set_current(self.prev_idx)
        return False


class device_of(device):
    """``with torch.npu.device_of(tensor):`` makes the tensor's npu
    current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "npu" else None)


class _NPUDeviceProperties:
    """What ``get_device_properties()`` says of a virtual NPU: its memory
    is the host's physical memory, its cores the host's (also under
    torch_npu's names for an NPU's cores: cube and vector)."""

    __slots__ = ("name", "total_memory", "major", "minor", "multi_processor_count",
                 "is_integrated", "cube_core_num", "vector_core_num")

    def __init__(self):
        from . import memory

        self.name = DEVICE_NAME
        self.total_memory = memory.total_memory()
        self.major, self.minor = 0, 0
        self.multi_processor_count = os.cpu_count() or 1
        self.cube_core_num = self.vector_core_num = self.multi_processor_count
        self.is_integrated = True

    def __repr__(self):
        return (f"_NPUDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None, *, device_name=None):
    """The device as CUDA names it, or as torch_npu does (device_name)."""
    devices.index_of(devices.either("device", device, "device_name", device_name))
    return _NPUDeviceProperties()
