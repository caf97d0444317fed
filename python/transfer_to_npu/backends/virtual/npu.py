"""``torch.npu`` on the virtual NPU: the device module registered for the
``npu`` device, with the interfaces of Ascend's ``torch_npu.npu`` that
training code uses.

Memory is host memory and kernels are the host's, so everything here is
exact: synchronisation has nothing to wait for, memory figures count the
bytes of live npu tensors, and each npu's random numbers come from a host
generator of its own, which the npu kernels draw from.
"""

import importlib
import importlib.machinery

import torch

from . import devices, random  # noqa: F401  (torch.npu.random, as torch_npu's)
from .random import (get_rng_state, get_rng_state_all, initial_seed, manual_seed,
                     manual_seed_all, seed, seed_all, set_rng_state, set_rng_state_all)

# `import torch.npu.amp` too, as with torch_npu (`from torch.npu.amp import
# GradScaler`): torch.npu is a package whose submodules a finder at the end
# of sys.meta_path supplies (virtual/__init__.py puts it there), loading
# them then.
__path__ = []
_SUBMODULES = {"torch.npu.amp": "amp"}


class Submodules:
    """Finder and loader of torch.npu's submodules: each is the module of
    this package, under a second name."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in _SUBMODULES:
            return None
        return importlib.machinery.ModuleSpec(name, Submodules)

    @staticmethod
    def create_module(spec):
        module = importlib.import_module(f"{__package__}.{_SUBMODULES[spec.name]}")
        spec.loader_state = module.__spec__
        return module

    @staticmethod
    def exec_module(module):
        # Loaded already; the import system gave it the second name's spec.
        module.__spec__ = module.__spec__.loader_state


__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
    "synchronize", "device", "device_of", "get_device_name", "get_device_capability",
    "is_bf16_supported", "get_amp_supported_dtype",
    "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
    "StreamContext",
    "get_device_properties", "mem_get_info",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_accumulated_memory_stats",
    "memory_stats", "memory_stats_as_nested_dict", "memory_summary", "empty_cache", "amp",
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
    "ShortTensor", "IntTensor", "LongTensor", "BoolTensor",
]

VIRTUAL = True  # tells tools and tests which NPU this is

# Whether the npu has been used in this process: false until its first
# tensor, init() or a current-device call, like CUDA's lazy
# initialisation.  torch.utils.checkpoint saves the RNG state of an
# initialised device only; Lightning refuses to fork once it is.
_initialized = False


# --- devices --------------------------------------------------------------

def is_available():
    return devices.count() > 0


def is_initialized():
    return _initialized


def init():
    global _initialized
    _initialized = True


def _lazy_init():
    init()


def _is_in_bad_fork():
    return False


def device_count():
    return devices.count()


def current_device():
    if not _initialized:
        init()
    return devices.current()


def set_device(device):
    if devices.is_negative_index(device):
        return  # as torch.cuda.set_device(-1): nothing to set
    devices.set_current(devices.index_of(device, optional=False))
    if not _initialized:
        init()


def synchronize(device=None):
    """Wait for the device's work: done already, since every op runs
    synchronously on the host; the argument is still checked."""
    devices.index_of(device)


DEVICE_NAME = "Virtual NPU (host memory)"


# The device as CUDA names it, or as torch_npu does (device_name).
def get_device_name(device=None, *, device_name=None):
    devices.index_of(devices.either("device", device, "device_name", device_name))
    return DEVICE_NAME


def get_device_capability(device=None):
    devices.index_of(device)
    return (0, 0)


def is_bf16_supported(including_emulation=True):
    """True: emulated or not, the host computes bfloat16."""
    return True


def get_amp_supported_dtype():
    # torch_npu's answer on a device with bfloat16.  float32 among them keeps
    # autocast(dtype=torch.float32) on, as CUDA's is (nanoGPT's float32
    # setting): ops it lists run in float32 whatever their inputs.
    return [torch.float16, torch.bfloat16, torch.float32]


# --- random numbers and memory -------------------------------------------
# Each npu has its own host generator (random.py, imported above); memory
# figures come from the C core's count of live npu tensors (memory.py).

# One generator per visible npu, set when the device is installed.
default_generators = ()


# The rest of the device module, each part in a module of its own (they
# import what is above).
from . import amp, memory  # noqa: E402  (torch.npu.amp and torch.npu.memory, as torch.cuda's)
from .device_objects import device, device_of, get_device_properties  # noqa: E402
from .memory import (empty_cache, max_memory_allocated, max_memory_reserved,  # noqa: E402
                     mem_get_info, memory_allocated, memory_reserved, memory_stats,
                     memory_stats_as_nested_dict, memory_summary,
                     reset_accumulated_memory_stats, reset_max_memory_allocated,
                     reset_peak_memory_stats)
from .streams import (Event, Stream, StreamContext, current_stream,  # noqa: E402
                      default_stream, set_stream, stream)
from .ascend_settings import config, conv, matmul, set_compile_mode, set_option  # noqa: E402
from .typed_tensors import (BFloat16Tensor, BoolTensor, ByteTensor,  # noqa: E402
                            CharTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor,
                            LongTensor, ShortTensor)
