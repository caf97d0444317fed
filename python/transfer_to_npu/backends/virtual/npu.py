"""``torch.npu`` on the virtual NPU: the device module registered for the
``npu`` device, with the interfaces of Ascend's ``torch_npu.npu`` that
training code uses.

Memory is host memory and kernels are the host's, so everything here is
exact: synchronisation has nothing to wait for, memory figures count the
bytes of live npu tensors, and random numbers come from the host generator
that the npu kernels use.
"""

import torch

from ... import _C
from . import devices
from .streams import (Event, Stream, StreamContext, current_stream, default_stream, set_stream,
                      stream)
from .typed_tensors import (BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor,
                            FloatTensor, HalfTensor, IntTensor, LongTensor, ShortTensor)

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
    "synchronize", "device", "device_of", "get_device_name", "get_device_capability",
    "is_bf16_supported", "get_amp_supported_dtype",
    "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
    "StreamContext",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "empty_cache",
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor",
]

VIRTUAL = True  # tells tools and tests which NPU this is


# --- devices --------------------------------------------------------------

def is_available():
    return True


def is_initialized():
    return True


def init():
    pass


def _lazy_init():
    pass


def _is_in_bad_fork():
    return False


def device_count():
    return devices.count()


def current_device():
    return devices.current()


def set_device(device):
    devices.set_current(devices.index_of(device, optional=False))


def synchronize(device=None):
    """Wait for the device's work: done already, since every op runs
    synchronously on the host; the argument is still checked."""
    devices.index_of(device)


class device:
    """``with torch.npu.device(i):`` makes npu ``i`` current inside the
    block."""

    def __init__(self, device):
        self.idx = -1 if device is None else devices.index_of(device)
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


def get_device_name(device=None):
    devices.index_of(device)
    return "Virtual NPU (host memory)"


def get_device_capability(device=None):
    devices.index_of(device)
    return (0, 0)


def is_bf16_supported(including_emulation=True):
    return True


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]


# --- random numbers -------------------------------------------------------
# npu kernels draw from the host's default generator, so seeding it is what
# makes npu randomness reproducible.

def manual_seed(seed):
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed):
    torch.default_generator.manual_seed(int(seed))


def seed():
    torch.default_generator.seed()


def seed_all():
    torch.default_generator.seed()


def initial_seed():
    return torch.default_generator.initial_seed()


def get_rng_state(device="npu"):
    devices.index_of(device)
    return torch.default_generator.get_state()


def set_rng_state(new_state, device="npu"):
    devices.index_of(device)
    torch.default_generator.set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# --- memory ---------------------------------------------------------------

def memory_allocated(device=None):
    return _C.memory_stats(devices.index_of(device))["allocated"]


def max_memory_allocated(device=None):
    return _C.memory_stats(devices.index_of(device))["peak"]


def memory_reserved(device=None):
    # No caching allocator: what is reserved is what is allocated.
    return memory_allocated(device)


def max_memory_reserved(device=None):
    return max_memory_allocated(device)


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory(devices.index_of(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def empty_cache():
    pass
