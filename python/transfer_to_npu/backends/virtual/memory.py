"""Memory figures of the virtual NPU (``torch.npu.memory_*``).

The C core counts, per device, the bytes and the storages of live npu
tensors: a storage is counted when a host result becomes npu memory and
uncounted when torch frees it.  There is no caching allocator, so what is
reserved is what is allocated and ``empty_cache`` has nothing to give back.
A virtual NPU's memory is the host's: its capacity is the host's physical
memory, and what is free is what its live tensors leave of it.
"""

import collections
import functools
import os

from ... import _C
from . import devices

__all__ = ["memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated",
           "reset_accumulated_memory_stats", "memory_stats", "memory_stats_as_nested_dict",
           "memory_summary", "mem_get_info", "empty_cache", "total_memory"]

# Totals at the last reset_accumulated_memory_stats(), per device.
_accumulated_base = collections.defaultdict(lambda: (0, 0, 0, 0))


@functools.lru_cache(maxsize=None)
def total_memory():
    """Bytes of host physical memory: the capacity of every virtual NPU."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _stats(device):
    return _C.memory_stats(devices.index_of(device))


def memory_allocated(device=None):
    return _stats(device)["allocated"]


def max_memory_allocated(device=None):
    return _stats(device)["peak"]


def memory_reserved(device=None):
    return memory_allocated(device)


def max_memory_reserved(device=None):
    return max_memory_allocated(device)




def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory(devices.index_of(device))


def reset_max_memory_allocated(device=None):
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    index = devices.index_of(device)
    s = _C.memory_stats(index)
    _accumulated_base[index] = (s["total_allocated"], s["total_allocations"],
                                s["total_allocated"] - s["allocated"],
                                s["total_allocations"] - s["allocations"])


def empty_cache():
    """Nothing is cached: every freed npu tensor's memory goes straight
    back to the host."""


def mem_get_info(device=None):
    """(free, total) bytes of the device."""
    total = total_memory()
    return max(total - memory_reserved(device), 0), total


def _counters(device):
    """{kind: {current, peak, allocated, freed}} for bytes and storages."""
    index = devices.index_of(device)
    s = _C.memory_stats(index)
    base_bytes, base_count, base_freed_bytes, base_freed_count = _accumulated_base[index]
    nbytes = {"current": s["allocated"], "peak": s["peak"],
              "allocated": s["total_allocated"] - base_bytes,
              "freed": s["total_allocated"] - s["allocated"] - base_freed_bytes}
    count = {"current": s["allocations"], "peak": s["peak_allocations"],
             "allocated": s["total_allocations"] - base_count,
             "freed": s["total_allocations"] - s["allocations"] - base_freed_count}
    return nbytes, count


def memory_stats_as_nested_dict(device=None):
    """The layout of torch.cuda.memory_stats_as_nested_dict(): every
    storage is one block of one segment, in one pool."""
    nbytes, count = _counters(device)
    zero = {"current": 0, "peak": 0, "allocated": 0, "freed": 0}

    def pools(figures):
        return {"all": dict(figures), "large_pool": dict(figures), "small_pool": dict(zero)}

    return {
        "allocated_bytes": pools(nbytes), "reserved_bytes": pools(nbytes),
        "active_bytes": pools(nbytes), "requested_bytes": pools(nbytes),
        "allocation": pools(count), "segment": pools(count), "active": pools(count),
        "inactive_split": pools(zero), "inactive_split_bytes": pools(zero),
        "oversize_allocations": dict(zero), "oversize_segments": dict(zero),
        "num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0,
        "num_device_alloc": count["allocated"], "num_device_free": count["freed"],
        "max_split_size": -1,
    }


def memory_stats(device=None):
    """The flat dictionary torch.cuda.memory_stats() returns:
    "allocated_bytes.all.current" and so on, in key order."""
    flat = []

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else key, inner)
        else:
            flat.append((prefix, value))

    walk("", memory_stats_as_nested_dict(device))
    return collections.OrderedDict(sorted(flat))


def _format_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def memory_summary(device=None, abbreviated=False):
    """A table of the device's memory figures, laid out like
    torch.cuda.memory_summary()."""
    index = devices.index_of(device)
    nbytes, count = _counters(index)
    free, total = mem_get_info(index)
    width = 79
    rule = "|" + "=" * (width - 2) + "|"
    thin = "|" + "-" * (width - 2) + "|"

    def row(cells):
        return "| " + " | ".join(cells) + " |"

    def line(name, figures, fmt):
        return row([f"{name:<22}", *(f"{fmt(figures[k]):>11}"
                                     for k in ("current", "peak", "allocated", "freed"))])

    lines = [
        rule,
        f"|{f'Virtual NPU memory summary, device ID {index}':^{width - 2}}|",
        thin,
        f"|{'host memory: no caching allocator, reserved equals allocated':^{width - 2}}|",
        rule,
        row([f"{'Metric':<22}", f"{'Cur Usage':>11}", f"{'Peak Usage':>11}",
             f"{'Tot Alloc':>11}", f"{'Tot Freed':>11}"]),
        thin,
        line("Allocated memory", nbytes, _format_bytes),
        line("Active memory", nbytes, _format_bytes),
        line("Requested memory", nbytes, _format_bytes),
        line("Reserved memory", nbytes, _format_bytes),
        thin,
        line("Allocations", count, str),
        line("Active allocs", count, str),
        line("Segments", count, str),
        thin,
        row([f"{'Free / total':<22}",
             f"{_format_bytes(free) + ' / ' + _format_bytes(total):>50}"]),
        rule,
    ]
    return "\n".join(lines) + "\n"
