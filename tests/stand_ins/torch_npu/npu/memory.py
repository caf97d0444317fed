"""torch_npu.npu.memory of the stand-in: the allocator's history and
settings, and the pluggable allocator, recording what they are asked."""
from . import _recorded


@_recorded
def _record_memory_history(enabled="all", *args, **kwargs):
    return None


@_recorded
def _snapshot(device=None):
    return {"segments": [], "device_traces": []}


@_recorded
def _dump_snapshot(filename="dump_snapshot.pickle"):
    return None


@_recorded
def _set_allocator_settings(env):
    return None


class NPUPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        self.path = path_to_so_file


def __getattr__(name):
    """The rest of the device's memory module (memory_allocated...)."""
    from .. import KERNELS

    if KERNELS:
        from transfer_to_npu.backends.virtual import memory

        return getattr(memory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
