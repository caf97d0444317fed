"""The statistics of a tensor the dump records: Max, Min, Mean, Norm (L2)
and the counts of NaN and infinities.

A tensor in host memory (the cpu's, the virtual NPU's) is read once, in
place, by the C core (``_C.tensor_stats``: its element type as it is, no
copy, sums in float64): 1.6 microseconds for 256 elements, where torch's
ops take 20.  A contiguous float32 tensor is read in vector registers,
some 2 times faster than torch's three ops on one thread (50k to 800k
elements; 5 times on 8k), up to DENSE_MOST elements, past which torch's ops, on all of
torch's threads, take over.  Other tensors are read one element at a
time, some 2.5 times slower per element than torch's ops: past FAST_MOST
elements these take them, as do complex tensors.  A tensor in a device's
own memory gets torch's ops on the device, read when its step is written.
"""

import math

import torch

from .. import _C

# Where torch's ops become cheaper (measured: 8k elements, one thread).
FAST_MOST = 8192
# A contiguous float32 tensor's bound (16 MB: 1.5 ms on one thread).
DENSE_MOST = 1 << 22

# torch dtype -> the C core's code for it.
_CODES = {getattr(torch, name): code for code, name in enumerate(_C.STATS_DTYPES)}

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


def fast_stats(t):
    """The statistics of a tensor in host memory by the C core, as floats
    (STATS order); None for one it does not read (large, complex, not
    strided, empty)."""
    code = _CODES.get(t.dtype)
    n = t.numel()
    if code is None or t.layout != torch.strided or n == 0:
        return None
    if t.is_contiguous():
        if n > (DENSE_MOST if t.dtype == torch.float32 else FAST_MOST):
            return None
        shape, strides = (n,), (1,)  # one row
    elif n <= FAST_MOST:
        shape, strides = tuple(t.shape), t.stride()
    else:
        return None
    high, low, mean, norm, nan, inf = _C.tensor_stats(t.data_ptr(), code, shape, strides)
    return [high, low, mean, norm, nan, inf]


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
