"""flash_attn's functions (FlashAttention 2's interface) on the NPU.

Layouts as flash_attn's: (batch, seqlen, heads, headdim), and (total
tokens, heads, headdim) with cumulative sequence lengths for the varlen
functions.  ``causal`` and ``window_size`` are aligned at the bottom right
(flash_attn 2.1 and later): query i of a sequence sees key j when
``i + seqlen_k - seqlen_q - left <= j <= i + seqlen_k - seqlen_q + right``;
-1 is no bound, and causal is ``right = 0``.  ``alibi_slopes`` adds
``-slope * |i + seqlen_k - seqlen_q - j|``.  ``deterministic`` changes
nothing here: the host's kernels are deterministic.
"""

import torch

from ._attention import attend, band_mask

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func",
           "flash_attn_varlen_func", "flash_attn_varlen_kvpacked_func",
           "flash_attn_varlen_qkvpacked_func"]


def _window(causal, window_size):
    try:
        left, right = (int(w) for w in window_size)
    except (TypeError, ValueError):
        raise ValueError(f"window_size={window_size!r} must be a pair of ints") from None
    return left, 0 if causal else right


def _alibi(slopes, seq_q, seq_k, device):
    if slopes is None:
        return None
    i = torch.arange(seq_q, device=device).unsqueeze(1) + (seq_k - seq_q)
    j = torch.arange(seq_k, device=device).unsqueeze(0)
    distance = (i - j).abs().float()
    slopes = slopes.float()
    if slopes.dim() == 1:  # (heads,)
        return -slopes[:, None, None] * distance
    return -slopes[:, :, None, None] * distance  # (batch, heads)


def _check(q, k, v, dims):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != dims:
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"flash_attn: {name} must be a {dims}-d tensor, got {shape}")


def _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes,
               return_attn_probs):
    """(B, S, H, D) in and out."""
    left, right = _window(causal, window_size)
    seq_q, seq_k = q.size(1), k.size(1)
    keep = None
    # Causal over equal lengths is torch's own causal attention (aligned at
    # the top left, as the bottom right is then).
    plain_causal = left < 0 and right == 0 and seq_q == seq_k
    if (left >= 0 or right >= 0) and not plain_causal:
        keep = band_mask(seq_q, seq_k, left, right, seq_k - seq_q, q.device)
    result = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale, keep,
                    _alibi(alibi_slopes, seq_q, seq_k, q.device), softcap, dropout_p,
                    return_lse=return_attn_probs, causal=plain_causal)
    if not return_attn_probs:
        return result.transpose(1, 2)
    out, lse = result
    # flash_attn's third result, the dropout pattern, is a debugging aid of
    # its CUDA kernel: None here.
    return out.transpose(1, 2), lse, None


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False):
    _check(q, k, v, 4)
    return _attention(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                      alibi_slopes, return_attn_probs)


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """qkv: (batch, seqlen, 3, heads, headdim)."""
    q, k, v = qkv.unbind(dim=2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """kv: (batch, seqlen_k, 2, heads_k, headdim)."""
    k, v = kv.unbind(dim=2)
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


def _bounds(cu_seqlens, name):
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1:
        raise ValueError(f"flash_attn: {name} must be a 1-d tensor of cumulative lengths, got "
                         f"{cu_seqlens!r}")
    return cu_seqlens.tolist()


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None,
                           max_seqlen_k=None, dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """q: (total_q, heads, headdim), k and v (total_k, heads_k, headdim);
    sequence b is rows cu_seqlens[b]:cu_seqlens[b+1].  Each sequence is
    attended on its own."""
    _check(q, k, v, 3)
    if block_table is not None:
        raise NotImplementedError("flash_attn_varlen_func(block_table=...): a paged KV cache "
                                  "has no NPU counterpart here; pass contiguous k and v")
    bq, bk = _bounds(cu_seqlens_q, "cu_seqlens_q"), _bounds(cu_seqlens_k, "cu_seqlens_k")
    if len(bq) != len(bk):
        raise ValueError(f"flash_attn: cu_seqlens_q and cu_seqlens_k hold {len(bq)} and "
                         f"{len(bk)} bounds; they must describe the same batch")
    outs, lses = [], []
    for b in range(len(bq) - 1):
        slopes = alibi_slopes if alibi_slopes is None or alibi_slopes.dim() == 1 \
            else alibi_slopes[b]
        result = _attention(q[bq[b]:bq[b + 1]].unsqueeze(0), k[bk[b]:bk[b + 1]].unsqueeze(0),
                            v[bk[b]:bk[b + 1]].unsqueeze(0), dropout_p, softmax_scale, causal,
                            window_size, softcap, slopes, return_attn_probs)
        if return_attn_probs:
            outs.append(result[0][0])
            lses.append(result[1][0])
        else:
            outs.append(result[0])
    out = torch.cat(outs) if outs else q.new_empty((0,) + tuple(q.shape[1:-1]) + (v.size(-1),))
    if not return_attn_probs:
        return out
    lse = torch.cat(lses, dim=-1) if lses else q.new_empty((q.size(1), 0), dtype=torch.float32)
    return out, lse, None


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen=None, dropout_p=0.0,
                                     softmax_scale=None, causal=False, window_size=(-1, -1),
                                     softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """qkv: (total, 3, heads, headdim)."""
    q, k, v = qkv.unbind(dim=1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                  dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None,
                                    max_seqlen_k=None, dropout_p=0.0, softmax_scale=None,
                                    causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False):
    """kv: (total_k, 2, heads_k, headdim)."""
    k, v = kv.unbind(dim=1)
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, dropout_p, softmax_scale, causal, window_size,
                                  softcap, alibi_slopes, deterministic, return_attn_probs)
