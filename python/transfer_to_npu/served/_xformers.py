"""xformers' memory_efficient_attention and its attention biases on the
NPU (torch's attention on the virtual NPU, npu_fusion_attention on
torch_npu).

Layouts as xformers': query (batch, seq_q, heads, dim), (batch, seq_q,
groups, heads, dim) or (batch, seq_q, dim), keys and values alike (checked
as xformers checks them: no broadcasting); the biases of ``xformers.ops.fmha.attn_bias``
that training code uses: causal (``LowerTriangularMask``, aligned at the top
left, and ``LowerTriangularFromBottomRightMask``), a tensor added to the
scores (alone, or with the causal mask through ``add_bias``), and the block
diagonal masks of sequences packed into one row (``BlockDiagonalMask`` and
its causal form, from the sequences' lengths).
"""

import math

import torch

from . import _arguments as check
from ._attention import attend, band_mask

__all__ = ["AttentionBias", "BlockDiagonalCausalMask", "BlockDiagonalMask",
           "LowerTriangularFromBottomRightMask", "LowerTriangularMask",
           "LowerTriangularMaskWithTensorBias", "memory_efficient_attention",
           "memory_efficient_attention_forward"]


class AttentionBias:
    """A bias the attention adds to its scores, given by what it keeps
    (``keep``) and what it adds (``tensor``)."""

    def keep(self, seq_q, seq_k, device):
        return None

    def tensor(self):
        return None

    def materialize(self, shape, dtype=torch.float32, device="cpu"):
        """The bias as a tensor of ``shape`` (..., seq_q, seq_k): 0 where a
        score is kept, -inf where it is dropped, plus the tensor bias."""
        out = torch.zeros(shape, dtype=dtype, device=device)
        keep = self.keep(shape[-2], shape[-1], out.device)
        if keep is not None:
            out = out.masked_fill(~keep, float("-inf"))
        if self.tensor() is not None:
            out = out + self.tensor().to(dtype)
        return out


class LowerTriangularMask(AttentionBias):
    """Causal: query i sees keys 0..i."""

    def __init__(self, *tensor_args, **tensor_kwargs):
        pass

    def keep(self, seq_q, seq_k, device):
        return band_mask(seq_q, seq_k, -1, 0, 0, device)

    def add_bias(self, bias):
        return LowerTriangularMaskWithTensorBias(bias)


class LowerTriangularFromBottomRightMask(AttentionBias):
    """Causal, aligned at the bottom right: the last query sees every key."""

    def keep(self, seq_q, seq_k, device):
        return band_mask(seq_q, seq_k, -1, 0, seq_k - seq_q, device)


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    """Causal, and a tensor added to the scores."""

    def __init__(self, bias):
        self._bias = bias

    def tensor(self):
        return self._bias


def _lengths(seqlen, name):
    try:
        lengths = [int(n) for n in seqlen]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={seqlen!r} must be a sequence of lengths") from None
    if any(n < 0 for n in lengths):
        raise ValueError(f"{name}={seqlen!r}: lengths cannot be negative")
    return lengths


class BlockDiagonalMask(AttentionBias):
    """Sequences packed into one row (batch 1): each query sees the keys of
    its own sequence only."""

    _causal = False

    def __init__(self, q_seqlen, kv_seqlen):
        self.q_seqlen, self.kv_seqlen = q_seqlen, kv_seqlen

    @classmethod
    def from_seqlens(cls, q_seqlen, kv_seqlen=None, *, device=None):
        # device: where xformers keeps the lengths; here the mask is made
        # where the attention's tensors are.
        q = _lengths(q_seqlen, "q_seqlen")
        kv = q if kv_seqlen is None else _lengths(kv_seqlen, "kv_seqlen")
        if len(q) != len(kv):
            raise ValueError(f"q_seqlen and kv_seqlen name {len(q)} and {len(kv)} sequences")
        return cls(q, kv)

    def make_causal(self):
        return BlockDiagonalCausalMask(self.q_seqlen, self.kv_seqlen)

    def keep(self, seq_q, seq_k, device):
        if seq_q != sum(self.q_seqlen) or seq_k != sum(self.kv_seqlen):
            raise ValueError(f"a block diagonal mask of {sum(self.q_seqlen)} queries and "
                             f"{sum(self.kv_seqlen)} keys applied to {seq_q} and {seq_k}")
        keep = torch.zeros(seq_q, seq_k, dtype=torch.bool, device=device)
        q0 = k0 = 0
        for nq, nk in zip(self.q_seqlen, self.kv_seqlen):
            keep[q0:q0 + nq, k0:k0 + nk] = (band_mask(nq, nk, -1, 0, 0, device) if self._causal
                                            else True)
            q0, k0 = q0 + nq, k0 + nk
        return keep

    def split(self, tensor, batch_sizes=None):
        """A (1, total, ...) tensor cut into its sequences."""
        return list(tensor.split(self.q_seqlen, dim=1))


class BlockDiagonalCausalMask(BlockDiagonalMask):
    """Packed sequences, each causal (aligned at its top left)."""

    _causal = True


def _check(query, key, value, attn_bias, p):
    """The arguments as xformers' Inputs.validate_inputs checks them: query,
    key and value all BMK, BMHK or BMGHK, of one dtype and device, agreeing
    in batch, heads and head size (no broadcasting), a tensor bias of the
    scores' exact shape, a block diagonal mask on a batch of 1."""
    where = "memory_efficient_attention"
    named = (("query", query), ("key", key), ("value", value))
    for name, t in named:
        check.tensor(where, name, t, (3, 4, 5))
    if key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError(f"{where}: query, key and value must all be (batch, seq, dim), (batch, "
                         f"seq, heads, dim) or (batch, seq, groups, heads, dim), got shapes "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    check.alike(where, named)
    if query.size(-1) == 0:
        raise ValueError(f"{where}: the head size must be positive, got query of shape "
                         f"{tuple(query.shape)}")
    batch, seq_q, heads = query.size(0), query.size(1), tuple(query.shape[2:-1])
    seq_k = key.size(1)
    if (tuple(key.shape) != (batch, seq_k) + heads + (query.size(-1),)
            or tuple(value.shape) != (batch, seq_k) + heads + (value.size(-1),)):
        raise ValueError(f"{where}: incompatible shapes: query {tuple(query.shape)}, key "
                         f"{tuple(key.shape)}, value {tuple(value.shape)}: key and value need "
                         f"query's batch and heads, key its head size (no broadcasting: "
                         f"expand them first)")
    if query.dim() == 3 and not (attn_bias is None or isinstance(attn_bias, torch.Tensor)
                                 or type(attn_bias) is LowerTriangularMask):
        raise ValueError(f"{where}: attn_bias of type {type(attn_bias).__name__} needs inputs "
                         f"of shape (batch, seq, heads, dim), not (batch, seq, dim)")
    bias = attn_bias if isinstance(attn_bias, torch.Tensor) else \
        attn_bias.tensor() if isinstance(attn_bias, AttentionBias) else None
    expected = (batch,) + heads + (seq_q, seq_k)
    if bias is not None and tuple(bias.shape) != expected:
        raise ValueError(f"{where}: the attention bias must have shape (batch, heads..., seq_q, "
                         f"seq_k) = {expected}, got {tuple(bias.shape)}")
    if isinstance(attn_bias, BlockDiagonalMask) and batch != 1:
        raise ValueError(f"{where}: a block diagonal mask takes a batch of 1 (its sequences "
                         f"packed), got query of shape {tuple(query.shape)}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{where}: p={p!r} must be in [0, 1]")


def memory_efficient_attention(query, key, value, attn_bias=None, p=0.0, scale=None, *,
                               op=None, output_dtype=None):
    """softmax(query key^T * scale + attn_bias) value; ``op`` (a choice of
    CUDA kernel) is not needed."""
    _check(query, key, value, attn_bias, p)
    if attn_bias is not None and not isinstance(attn_bias, (torch.Tensor, AttentionBias)):
        raise TypeError(f"memory_efficient_attention: attn_bias of type "
                        f"{type(attn_bias).__name__} is not supported on the NPU")
    shape = query.shape[:-1] + (value.size(-1),)
    # One heads dimension: (batch, seq, heads, dim), groups folded in (each
    # reshape an op on the device: none where there is one already).
    heads = math.prod(query.shape[2:-1])
    if query.dim() != 4:
        query, key, value = (t.reshape(t.size(0), t.size(1), heads, t.size(-1)) for t in
                             (query, key, value))
    seq_q, seq_k = query.size(1), key.size(1)
    causal = isinstance(attn_bias, LowerTriangularMask)  # torch's causal attention
    keep, bias = None, attn_bias
    if isinstance(attn_bias, AttentionBias):
        keep = None if causal else attn_bias.keep(seq_q, seq_k, query.device)
        bias = attn_bias.tensor()
    if bias is not None and bias.dim() != 4:
        bias = bias.reshape(bias.size(0), heads, seq_q, seq_k)
    out = attend(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2), scale, keep,
                 bias, 0.0, p, causal=causal).transpose(1, 2)
    if out.dim() != len(shape):
        out = out.reshape(shape)
    return out if output_dtype is None else out.to(output_dtype)


def memory_efficient_attention_forward(query, key, value, attn_bias=None, p=0.0, scale=None, *,
                                       op=None, output_dtype=None):
    return memory_efficient_attention(query, key, value, attn_bias, p, scale,
                                      output_dtype=output_dtype)
