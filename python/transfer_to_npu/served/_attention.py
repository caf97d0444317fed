"""Attention as flash_attn, xformers and torch_npu's npu_fusion_attention
compute it, on the NPU.

On the virtual NPU: torch's ``scaled_dot_product_attention`` (the host's
kernels, through the virtual NPU's own attention), or, where a caller asks
for more than it gives (the softmax's log-sum-exp, a soft cap, rows that
see no key at all), the same math written out in torch ops, which autograd
differentiates.  On Ascend's torch_npu: ``torch_npu.npu_fusion_attention``.

Tensors here are (batch, heads, seq, dim); masks say what to keep (True)
and broadcast to (batch, heads, seq_q, seq_k).
"""

import math

import torch
import torch.nn.functional as F

from .. import backends

__all__ = ["attend", "band_mask", "math_attention", "repeat_kv"]


def band_mask(seq_q, seq_k, left, right, offset, device):
    """Which keys each query sees: key j for query i when
    ``i + offset - left <= j <= i + offset + right`` (a negative bound is
    none).  ``offset`` aligns the band: 0 at the top left, ``seq_k - seq_q``
    at the bottom right."""
    i = torch.arange(seq_q, device=device).unsqueeze(1) + offset
    j = torch.arange(seq_k, device=device).unsqueeze(0)
    keep = torch.ones(seq_q, seq_k, dtype=torch.bool, device=device)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


def repeat_kv(q, k, v):
    """Keys and values repeated for grouped-query attention (heads of q a
    multiple of theirs)."""
    hq, hk = q.size(-3), k.size(-3)
    if hq == hk:
        return k, v
    if hk == 0 or hq % hk:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hk})")
    return k.repeat_interleave(hq // hk, dim=-3), v.repeat_interleave(hq // hk, dim=-3)


def math_attention(q, k, v, scale, keep=None, bias=None, softcap=0.0, dropout_p=0.0,
                   pre_scale_bias=False):
    """softmax(scale * q k^T [+ bias], masked) v, written out: returns the
    output, and the softmax's row maximum and row sum (float32, as fused
    kernels keep them: lse = max + log(sum)).  A row with no key left gives
    zeros, not NaN.  ``pre_scale_bias``: the bias is added before scaling
    (npu_fusion_attention's pse)."""
    k, v = repeat_kv(q, k, v)
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1))
    if bias is not None and pre_scale_bias:
        scores = scores + bias.float()
    scores = scores * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None and not pre_scale_bias:
        scores = scores + bias.float()
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    weights = torch.exp(scores - row_max)
    row_sum = weights.sum(dim=-1, keepdim=True)
    weights = weights / torch.where(row_sum == 0, torch.ones_like(row_sum), row_sum)
    if dropout_p:
        weights = F.dropout(weights, dropout_p)
    out = torch.matmul(weights.to(v.dtype), v)
    return out, row_max.detach(), row_sum.detach()


def attend(q, k, v, scale=None, keep=None, bias=None, softcap=0.0, dropout_p=0.0,
           return_lse=False, causal=False):
    """Attention of (B, H, S, D) tensors: the output (B, Hq, Sq, Dv), and
    with ``return_lse`` the softmax's log-sum-exp (B, Hq, Sq), float32.
    ``causal``: query i sees keys 0..i (aligned at the top left), where
    torch's kernels need no mask."""
    # torch's attention is given no scale when the caller gave none: its
    # kernel for an explicit scale is slower (3 us of 40 for small shapes)
    # and its default is this same 1/sqrt(headdim).
    given_scale = scale
    if scale is None:
        scale = 1.0 / math.sqrt(q.size(-1))
    if causal and (keep is not None or bias is not None or return_lse or softcap
                   or backends.installed == "torch_npu"):
        causal_keep = band_mask(q.size(-2), k.size(-2), -1, 0, 0, q.device)
        keep, causal = causal_keep if keep is None else keep & causal_keep, False
    if backends.installed == "torch_npu":
        return _npu_attend(q, k, v, scale, keep, bias, softcap, dropout_p, return_lse)
    empty_rows = keep is not None and not bool(keep.any(dim=-1).all())
    if return_lse or softcap or empty_rows:
        out, row_max, row_sum = math_attention(q, k, v, scale, keep, bias, softcap, dropout_p)
        if not return_lse:
            return out
        # A row that sees no key: +inf, as flash-attn's kernels give.
        lse = torch.where(row_sum == 0, float("inf"), row_max + torch.log(row_sum))
        return out, lse.squeeze(-1)
    mask = keep
    if bias is not None:
        mask = bias.to(q.dtype) if keep is None else bias.to(q.dtype).masked_fill(
            ~keep, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                          is_causal=causal, scale=given_scale,
                                          enable_gqa=q.size(-3) != k.size(-3))


def _npu_attend(q, k, v, scale, keep, bias, softcap, dropout_p, return_lse):
    """Ascend's fused attention kernel (BNSD), its mask saying what to drop
    and its position bias added before scaling."""
    import torch_npu

    if softcap:
        raise NotImplementedError(
            "attention with a soft cap (softcap=) has no Ascend kernel; use softcap=0.0")
    atten_mask = None if keep is None else ~keep
    pse = None if bias is None else (bias / scale).to(q.dtype)
    out, softmax_max, softmax_sum = torch_npu.npu_fusion_attention(
        q, k, v, q.size(1), "BNSD", pse=pse, atten_mask=atten_mask, scale=scale,
        keep_prob=1.0 - dropout_p)[:3]
    if not return_lse:
        return out
    return out, softmax_max[..., 0] + torch.log(softmax_sum[..., 0])
