"""atheris target: the argument checks of the served attention (flash_attn's
dense, varlen and kvcache functions, xformers' memory_efficient_attention)
and of torch's attention on the npu, handed tensors of shapes, dtypes and
cumulative lengths built from the fuzzer's bytes, mostly near agreeing.

Each call must raise a clear error (ValueError, TypeError, RuntimeError or
NotImplementedError, with a message) where the arguments do not agree as
the real package requires, and return a tensor of the right shape where
they do; torch's attention on the npu must refuse and accept what it
refuses and accepts on the cpu.  Anything else (another exception, a
result of another shape) is a finding.

    python tests/fuzz/fuzz_served.py -max_total_time=300 corpus/
"""
import sys

import atheris

with atheris.instrument_imports(include=["transfer_to_npu.served"]):
    import transfer_to_npu.served._arguments  # noqa: F401
    import transfer_to_npu.served._flash  # noqa: F401
    import transfer_to_npu.served._xformers  # noqa: F401
import torch
import torch.nn.functional as F

import flash_attn  # served: transfer_to_npu is enabled
import xformers.ops as xops

CLEAR = (ValueError, TypeError, RuntimeError, NotImplementedError)
DTYPES = [torch.float32, torch.float32, torch.float32, torch.float64, torch.float16,
          torch.int64]


class Sizes:
    """A base size per named dimension, each use of which the fuzzer may
    change (so that most tensors agree, and some do not)."""

    def __init__(self, data):
        self.data = data
        self.base = {name: data.ConsumeIntInRange(lo, 4) for name, lo in (
            ("B", 0), ("Sq", 0), ("Sk", 0), ("H", 1), ("Hk", 1), ("D", 0), ("Dv", 1),
            ("new", 0))}
        if data.ConsumeBool():
            self.base["H"] = self.base["Hk"] * data.ConsumeIntInRange(1, 3)

    def __getitem__(self, name):
        if self.data.ConsumeIntInRange(0, 15) == 0:
            return self.data.ConsumeIntInRange(0, 5)
        return self.base[name]

    def tensor(self, *names, dtype=None):
        dtype = dtype or (DTYPES[0] if self.data.ConsumeIntInRange(0, 7) else
                          self.data.PickValueInList(DTYPES))
        shape = [self[n] for n in names]
        if self.data.ConsumeIntInRange(0, 31) == 0:  # a dimension more or less
            shape = shape[:-1] if self.data.ConsumeBool() else shape + [2]
        if dtype.is_floating_point:
            return torch.randn(shape, dtype=dtype, device="npu")
        return torch.randint(0, 4, shape, dtype=dtype, device="npu")


def _agree(dtype_tensors):
    return all(t.dtype == dtype_tensors[0].dtype for t in dtype_tensors) and \
        dtype_tensors[0].dtype.is_floating_point


def _divides(a, b):
    return a > 0 and b % a == 0


def _bounds(data, total):
    """Cumulative lengths: mostly valid ones within total, sometimes not."""
    n = data.ConsumeIntInRange(1, 4)
    cuts = sorted(data.ConsumeIntInRange(0, total) for _ in range(n - 1))
    bounds = [0] + cuts + [total]
    if data.ConsumeIntInRange(0, 7) == 0:
        bounds[data.ConsumeIntInRange(0, len(bounds) - 1)] = data.ConsumeIntInRange(-2, total + 2)
    dtype = torch.int32 if data.ConsumeIntInRange(0, 15) else torch.int64
    return torch.tensor(bounds, dtype=dtype, device="npu"), bounds


def _valid_bounds(bounds, total):
    return len(bounds) >= 2 and bounds[0] >= 0 and bounds[-1] <= total and all(
        b >= a for a, b in zip(bounds, bounds[1:]))


def dense(data, s):
    q, k, v = s.tensor("B", "Sq", "H", "D"), s.tensor("B", "Sk", "Hk", "D"), \
        s.tensor("B", "Sk", "Hk", "D")
    valid = (q.dim() == k.dim() == v.dim() == 4 and _agree([q, k, v]) and q.size(0) > 0
             and q.size(3) > 0 and k.shape == (q.size(0), k.size(1), k.size(2), q.size(3))
             and v.shape == k.shape and _divides(k.size(2), q.size(2)))
    causal = data.ConsumeBool()
    return (lambda: flash_attn.flash_attn_func(q, k, v, causal=causal)), valid, \
        tuple(q.shape) if valid else None


def varlen(data, s):
    q, k, v = s.tensor("Sq", "H", "D"), s.tensor("Sk", "Hk", "D"), s.tensor("Sk", "Hk", "D")
    tq, tk = q.size(0) if q.dim() else 0, k.size(0) if k.dim() else 0
    cu_q, bq = _bounds(data, tq)
    cu_k, bk = _bounds(data, tk) if data.ConsumeIntInRange(0, 3) else (cu_q, bq)
    longest = max([b - a for a, b in zip(bq, bq[1:])] + [0])
    max_q = longest + data.ConsumeIntInRange(-1, 1)
    longest_k = max([b - a for a, b in zip(bk, bk[1:])] + [0])
    valid = (q.dim() == k.dim() == v.dim() == 3 and _agree([q, k, v]) and q.size(2) > 0
             and k.shape == (tk, k.size(1), q.size(2)) and v.shape == k.shape
             and _divides(k.size(1), q.size(1)) and cu_q.dtype == cu_k.dtype == torch.int32
             and len(bq) == len(bk) and _valid_bounds(bq, tq) and _valid_bounds(bk, tk)
             and max_q >= longest)
    causal = data.ConsumeBool()
    return (lambda: flash_attn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, longest_k,
                                                      causal=causal)), valid, \
        tuple(q.shape) if valid else None


def kvcache(data, s):
    q = s.tensor("B", "Sq", "H", "D")
    k_cache, v_cache = s.tensor("B", "Sk", "Hk", "D"), s.tensor("B", "Sk", "Hk", "D")
    new = data.ConsumeBool()
    k = v = None
    if new:
        k, v = s.tensor("B", "new", "Hk", "D"), s.tensor("B", "new", "Hk", "D")
    start = data.ConsumeIntInRange(-1, 5)
    seqlens = start if data.ConsumeBool() else torch.full(
        (max(q.size(0), 0) if q.dim() else 0,), start, dtype=torch.int32, device="npu")
    tensors = [q, k_cache, v_cache] + ([k, v] if new else [])
    valid = (all(t.dim() == 4 for t in tensors) and _agree(tensors) and q.size(0) > 0
             and q.size(3) > 0 and k_cache.size(0) >= q.size(0)
             and k_cache.shape[1:] == (k_cache.size(1), k_cache.size(2), q.size(3))
             and v_cache.shape == k_cache.shape and _divides(k_cache.size(2), q.size(2)))
    if valid and new:
        valid = (k.shape == (q.size(0), k.size(1), k_cache.size(2), q.size(3))
                 and v.shape == k.shape and 0 <= start and start + k.size(1) <= k_cache.size(1))
    elif valid:
        valid = 0 <= start <= k_cache.size(1)
    causal = data.ConsumeBool()
    return (lambda: flash_attn.flash_attn_with_kvcache(q, k_cache, v_cache, k, v,
                                                       cache_seqlens=seqlens, causal=causal)), \
        valid, tuple(q.shape) if valid else None


def memory_efficient(data, s):
    three = data.ConsumeIntInRange(0, 3) == 0
    heads = () if three else ("H",)
    q, k, v = s.tensor("B", "Sq", *heads, "D"), s.tensor("B", "Sk", *heads, "D"), \
        s.tensor("B", "Sk", *heads, "Dv")
    valid = (q.dim() == k.dim() == v.dim() and q.dim() in (3, 4, 5) and _agree([q, k, v])
             and q.size(-1) > 0 and k.shape == (q.size(0), k.size(1)) + q.shape[2:]
             and v.shape == k.shape[:-1] + (v.size(-1),))
    bias = xops.LowerTriangularMask() if data.ConsumeBool() else None
    expected = tuple(q.shape[:-1]) + (v.size(-1),) if valid else None
    return (lambda: xops.memory_efficient_attention(q, k, v, attn_bias=bias)), valid, expected


def sdpa(data, s):
    q, k, v = s.tensor("B", "H", "Sq", "D"), s.tensor("B", "H", "Sk", "D"), \
        s.tensor("B", "H", "Sk", "Dv")
    causal = data.ConsumeBool()
    try:  # the cpu says what is accepted, and the result's shape
        expected = tuple(F.scaled_dot_product_attention(q.cpu(), k.cpu(), v.cpu(),
                                                        is_causal=causal).shape)
    except CLEAR:
        expected = None
    return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), \
        expected is not None, expected


FAMILIES = [dense, varlen, kvcache, memory_efficient, sdpa]


def test_one_input(raw):
    data = atheris.FuzzedDataProvider(raw)
    family = data.PickValueInList(FAMILIES)
    call, valid, expected = family(data, Sizes(data))
    try:
        out = call()
    except CLEAR as e:
        if valid or not str(e):
            why = "valid arguments refused" if valid else "an error without a message"
            raise AssertionError(f"{family.__name__}: {why}: {e!r}") from e
        return
    if not valid:
        raise AssertionError(f"{family.__name__}: arguments that do not agree gave a result of "
                             f"shape {tuple(out.shape)}")
    if tuple(out.shape) != expected:
        raise AssertionError(f"{family.__name__}: result of shape {tuple(out.shape)}, "
                             f"not {expected}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
