"""The statistics of a tensor the dump records."""

import math

import torch

# The statistics, in the order a stats tensor holds them.
STATS = ("Max", "Min", "Mean", "Norm", "nan_count", "inf_count")


def host_view():
    """A function giving, for a tensor on a device whose memory is the
    host's, a CPU tensor over the same memory (None for any other): the
    virtual NPU's npu tensors, whose statistics are then the CPU's kernels'
    at no cost of the npu's dispatch, read with no synchronisation."""
    from .. import backends

    if backends.installed != "virtual":
        return lambda t: t if t.device.type == "cpu" else None
    from ..backends.virtual.factories import host

    def view(t):
        kind = t.device.type
        return t if kind == "cpu" else host(t) if kind == "npu" else None

    return view


def prepare(t):
    """t detached, as a real tensor of float32 (float64 for float64 and
    integers); None when it has no statistics to give (empty, meta,
    sparse)."""
    if t.layout != torch.strided or t.is_meta or t.numel() == 0:
        return None
    x = t.detach()
    if x.is_complex():
        x = x.abs()
    if x.dtype != torch.float64:
        x = x.to(torch.float32 if x.is_floating_point() else torch.float64)
    return x


def _values(x):
    low, high = torch.aminmax(x)
    return torch.stack([high, low, x.mean(), torch.linalg.vector_norm(x)])


def host_stats(x, floating):
    """The statistics (STATS order) of a tensor in host memory, as floats:
    NaN and Inf are counted only where a statistic is not finite."""
    values = _values(x).tolist()
    if floating and not all(map(math.isfinite, values)):
        values += [int(x.isnan().sum()), int(x.isinf().sum())]
    else:
        values += [0, 0]
    return values


def device_stats(x, floating):
    """The statistics of a tensor in a device's own memory, as a float64
    tensor on that device (read when the step is written: no
    synchronisation per tensor)."""
    if floating:
        counts = torch.stack([x.isnan().sum(), x.isinf().sum()])
    else:
        counts = x.new_zeros(2)
    return torch.cat([_values(x).to(torch.float64), counts.to(torch.float64)])
