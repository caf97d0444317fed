"""flash_attn's functions (FlashAttention 2's interface) on the NPU.

Layouts as flash_attn's: (batch, seqlen, heads, headdim), and (total
tokens, heads, headdim) with cumulative sequence lengths for the varlen
functions.  ``causal`` and ``window_size`` are aligned at the bottom right
(flash_attn 2.1 and later): query i of a sequence sees key j when
``i + seqlen_k - seqlen_q - left <= j <= i + seqlen_k - seqlen_q + right``;
-1 is no bound, and causal is ``right = 0``.  ``alibi_slopes`` adds
``-slope * |i + seqlen_k - seqlen_q - j|``.  A query that sees no key gives
zeros (and a log-sum-exp of +inf).  ``deterministic`` changes nothing here:
the host's kernels are deterministic.

Each family (the dense functions, the varlen ones, flash_attn_with_kvcache)
checks its arguments as flash-attn's wrappers do before computing
(``_arguments.py``); float32 and head sizes above 256, which its CUDA
kernels lack, are accepted.
"""

import torch

from . import _arguments as check
from ._attention import attend, band_mask, repeat_kv
from ._rotary import apply_rotary

__all__ = ["flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func",
           "flash_attn_varlen_func", "flash_attn_varlen_kvpacked_func",
           "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache"]


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


def _attention(q, k, v, dropout_p, softmax_scale, left, right, softcap, alibi_slopes,
               return_lse):
    """(B, S, H, D) in and out; with return_lse also the log-sum-exp
    (B, H, Sq)."""
    seq_q, seq_k = q.size(1), k.size(1)
    if seq_k == 0:
        # No key: zeros, made by the inputs' product over the empty keys
        # so that they stay in the graph.
        k, v = repeat_kv(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        out = (q.transpose(1, 2) @ k.transpose(-2, -1) @ v).transpose(1, 2)
        lse = torch.full((q.size(0), q.size(2), seq_q), float("inf"), device=q.device)
        return (out, lse) if return_lse else out
    keep = None
    # Causal over equal lengths is torch's own causal attention (aligned at
    # the top left, as the bottom right is then).
    plain_causal = left < 0 and right == 0 and seq_q == seq_k
    if (left >= 0 or right >= 0) and not plain_causal:
        keep = band_mask(seq_q, seq_k, left, right, seq_k - seq_q, q.device)
    result = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale, keep,
                    _alibi(alibi_slopes, seq_q, seq_k, q.device), softcap, dropout_p,
                    return_lse=return_lse, causal=plain_causal)
    if not return_lse:
        return result.transpose(1, 2)
    return result[0].transpose(1, 2), result[1]


def _heads(where, heads, heads_k):
    if heads_k == 0 or heads % heads_k:
        raise ValueError(f"{where}: the heads of q ({heads}) must be a multiple of those of k "
                         f"and v ({heads_k})")


def _positive(where, q, batch=True):
    """A batch (dense layouts) and a head size."""
    if (batch and q.size(0) == 0) or q.size(-1) == 0:
        raise ValueError(f"{where}: {'batch size and ' if batch else ''}head size must be "
                         f"positive, got q of shape {tuple(q.shape)}")


# --- flash_attn_func and its packed forms ------------------------------------

def _check_dense(where, q, k, v, dropout_p, causal, window_size, alibi_slopes):
    """(batch, seqlen, heads, headdim) tensors that agree as flash-attn's
    mha_fwd checks; returns the window."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check.tensor(where, name, t, 4)
    check.alike(where, (("q", q), ("k", k), ("v", v)))
    _positive(where, q)
    batch, _, heads, dim = q.shape
    expected = (batch, k.size(1), k.size(2), dim)
    for name, t in (("k", k), ("v", v)):
        check.shape(where, name, t, expected, "batch_size, seqlen_k, num_heads_k, head_size")
    _heads(where, heads, k.size(2))
    check.unit_interval(where, "dropout_p", dropout_p)
    check.slopes(where, alibi_slopes, batch, heads, q.device)
    return check.window(where, causal, window_size)


def _packed(where, tensor, name, dims, parts, dim, layout):
    check.tensor(where, name, tensor, dims)
    if tensor.size(dim) != parts:
        raise ValueError(f"{where}: {name} must have shape ({layout}), got {tuple(tensor.shape)}")
    return tensor.unbind(dim=dim)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False,
                    window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False,
                    return_attn_probs=False):
    left, right = _check_dense("flash_attn_func", q, k, v, dropout_p, causal, window_size,
                               alibi_slopes)
    result = _attention(q, k, v, dropout_p, softmax_scale, left, right, softcap, alibi_slopes,
                        return_attn_probs)
    # flash_attn's third result, the dropout pattern, is a debugging aid of
    # its CUDA kernel: None here.
    return (*result, None) if return_attn_probs else result


def flash_attn_qkvpacked_func(qkv, dropout_p=0.0, softmax_scale=None, causal=False,
                              window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                              deterministic=False, return_attn_probs=False):
    """qkv: (batch, seqlen, 3, heads, headdim)."""
    q, k, v = _packed("flash_attn_qkvpacked_func", qkv, "qkv", 5, 3, 2,
                      "batch_size, seqlen, 3, num_heads, head_size")
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


def flash_attn_kvpacked_func(q, kv, dropout_p=0.0, softmax_scale=None, causal=False,
                             window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                             deterministic=False, return_attn_probs=False):
    """kv: (batch, seqlen_k, 2, heads_k, headdim)."""
    k, v = _packed("flash_attn_kvpacked_func", kv, "kv", 5, 2, 2,
                   "batch_size, seqlen_k, 2, num_heads_k, head_size")
    return flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap,
                           alibi_slopes, deterministic, return_attn_probs)


# --- the varlen functions ----------------------------------------------------

def _block_table(where, block_table, lengths, page, num_blocks, device):
    """A paged cache's block table: (batch, max_num_blocks_per_seq) int32
    indices of blocks, of which a sequence of n positions uses the first
    ceil(n / page) (the others, padding, are never read).  Returns the
    blocks each sequence uses."""
    check.tensor(where, "block_table", block_table, 2, (torch.int32,))
    if block_table.size(0) != len(lengths) or block_table.device != device:
        raise ValueError(f"{where}: block_table must have shape (batch_size, "
                         f"max_num_blocks_per_seq) with batch_size {len(lengths)}, on {device}; "
                         f"got {tuple(block_table.shape)} on {block_table.device}")
    rows = [row[:-(-n // page)] for row, n in zip(block_table.tolist(), lengths)]
    if any(n > block_table.size(1) * page for n in lengths):
        raise ValueError(f"{where}: sequences of {lengths} positions do not fit "
                         f"{block_table.size(1)} blocks of {page}")
    if any(not 0 <= i < num_blocks for row in rows for i in row):
        raise ValueError(f"{where}: block_table={rows} (the blocks used) must index the "
                         f"{num_blocks} blocks of the cache")
    return rows


def _paged(cache, blocks, length):
    """The first ``length`` positions of a sequence whose positions lie in
    ``blocks`` of the paged cache (num_blocks, page_block_size, ...)."""
    return cache[blocks].flatten(0, 1)[:length]


def _check_varlen(where, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                  dropout_p, causal, window_size, alibi_slopes, block_table):
    """Packed tensors and cumulative lengths that agree as flash-attn's
    mha_varlen_fwd checks, and sequences no longer than the max_seqlen
    given; returns the window, both lengths' bounds and the block table."""
    paged = block_table is not None
    check.tensor(where, "q", q, 3)
    for name, t in (("k", k), ("v", v)):
        check.tensor(where, name, t, 4 if paged else 3)
    check.alike(where, (("q", q), ("k", k), ("v", v)))
    _positive(where, q, batch=False)
    _, heads, dim = q.shape
    heads_k = k.size(-2)
    expected = (k.size(0), k.size(1), heads_k, dim) if paged else (k.size(0), heads_k, dim)
    names = ("num_blocks, page_block_size, num_heads_k, head_size" if paged
             else "total_k, num_heads_k, head_size")
    for name, t in (("k", k), ("v", v)):
        check.shape(where, name, t, expected, names)
    _heads(where, heads, heads_k)
    bq = check.lengths(where, "cu_seqlens_q", cu_seqlens_q, q.size(0), q.device)
    # With a block table, cu_seqlens_k counts positions of the paged cache.
    bk = check.lengths(where, "cu_seqlens_k", cu_seqlens_k,
                       None if paged else k.size(0), q.device)
    if len(bq) != len(bk):
        raise ValueError(f"{where}: cu_seqlens_q and cu_seqlens_k hold {len(bq)} and {len(bk)} "
                         f"bounds; they must describe the same batch")
    blocks = None
    if paged:
        blocks = _block_table(where, block_table, [b - a for a, b in zip(bk, bk[1:])],
                              k.size(1), k.size(0), q.device)
    for name, bounds, most in (("max_seqlen_q", bq, max_seqlen_q),
                               ("max_seqlen_k", bk, max_seqlen_k)):
        longest = max(b - a for a, b in zip(bounds, bounds[1:]))
        if most is not None and longest > int(most):
            raise ValueError(f"{where}: {name}={most} is shorter than a sequence of "
                             f"cu_seqlens (length {longest})")
    check.unit_interval(where, "dropout_p", dropout_p)
    check.slopes(where, alibi_slopes, len(bq) - 1, heads, q.device)
    return check.window(where, causal, window_size), bq, bk, blocks


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None,
                           max_seqlen_k=None, dropout_p=0.0, softmax_scale=None, causal=False,
                           window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """q: (total_q, heads, headdim), k and v (total_k, heads_k, headdim), or
    with ``block_table`` a paged cache (num_blocks, page_block_size,
    heads_k, headdim); sequence b is rows cu_seqlens[b]:cu_seqlens[b+1]
    (its keys, with a block table, the first of its blocks' positions).
    Each sequence is attended on its own; rows of no sequence give zeros."""
    (left, right), bq, bk, blocks = _check_varlen(
        "flash_attn_varlen_func", q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
        max_seqlen_k, dropout_p, causal, window_size, alibi_slopes, block_table)
    outs, lses = [], []
    # Rows before the first sequence and after the last: zeros.
    head, tail = bq[0], q.size(0) - bq[-1]
    out_shape = tuple(q.shape[1:-1]) + (v.size(-1),)
    for b in range(len(bq) - 1):
        slopes = alibi_slopes if alibi_slopes is None or alibi_slopes.dim() == 1 \
            else alibi_slopes[b]
        if blocks is None:
            kb, vb = k[bk[b]:bk[b + 1]], v[bk[b]:bk[b + 1]]
        else:
            kb, vb = (_paged(t, blocks[b], bk[b + 1] - bk[b]) for t in (k, v))
        result = _attention(q[bq[b]:bq[b + 1]].unsqueeze(0), kb.unsqueeze(0), vb.unsqueeze(0),
                            dropout_p, softmax_scale, left, right, softcap, slopes,
                            return_attn_probs)
        outs.append(result[0][0] if return_attn_probs else result[0])
        if return_attn_probs:
            lses.append(result[1][0])
    out = torch.cat([q.new_zeros((head,) + out_shape)] + outs
                    + [q.new_zeros((tail,) + out_shape)])
    if not return_attn_probs:
        return out
    inf = float("inf")
    lse = torch.cat([torch.full((q.size(1), head), inf, device=q.device)] + lses
                    + [torch.full((q.size(1), tail), inf, device=q.device)], dim=-1)
    return out, lse, None


def flash_attn_varlen_qkvpacked_func(qkv, cu_seqlens, max_seqlen=None, dropout_p=0.0,
                                     softmax_scale=None, causal=False, window_size=(-1, -1),
                                     softcap=0.0, alibi_slopes=None, deterministic=False,
                                     return_attn_probs=False):
    """qkv: (total, 3, heads, headdim)."""
    q, k, v = _packed("flash_attn_varlen_qkvpacked_func", qkv, "qkv", 4, 3, 1,
                      "total, 3, num_heads, head_size")
    return flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen,
                                  dropout_p, softmax_scale, causal, window_size, softcap,
                                  alibi_slopes, deterministic, return_attn_probs)


def flash_attn_varlen_kvpacked_func(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None,
                                    max_seqlen_k=None, dropout_p=0.0, softmax_scale=None,
                                    causal=False, window_size=(-1, -1), softcap=0.0,
                                    alibi_slopes=None, deterministic=False,
                                    return_attn_probs=False):
    """kv: (total_k, 2, heads_k, headdim)."""
    k, v = _packed("flash_attn_varlen_kvpacked_func", kv, "kv", 4, 2, 1,
                   "total_k, 2, num_heads_k, head_size")
    return flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                  max_seqlen_k, dropout_p, softmax_scale, causal, window_size,
                                  softcap, alibi_slopes, deterministic, return_attn_probs)


# --- flash_attn_with_kvcache -------------------------------------------------

def _per_batch(where, name, value, batch, device, default=None, whole=False):
    """A (batch,) int32 tensor (or, ``whole``, an int for every sequence) as
    a list of ints."""
    if value is None:
        return [default] * batch
    if whole and isinstance(value, int) and not isinstance(value, bool):
        return [value] * batch
    check.tensor(where, name, value, 1, (torch.int32,))
    if value.size(0) != batch or value.device != device:
        raise ValueError(f"{where}: {name} must have shape (batch_size,) = ({batch},) on "
                         f"{device}, got {tuple(value.shape)} on {value.device}")
    return value.tolist()


def _check_kvcache(where, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                   cache_batch_idx, cache_leftpad, block_table, causal, window_size,
                   alibi_slopes):
    """The arguments of flash_attn_with_kvcache as mha_fwd_kvcache checks
    them, and a cache that holds what is appended; returns the window and,
    per sequence, its cache row (or blocks), start, end and left padding."""
    paged = block_table is not None
    named = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)]
    if (k is None) != (v is None):
        raise ValueError(f"{where}: k and v must be given together")
    if k is not None:
        named += [("k", k), ("v", v)]
    for name, t in named:
        check.tensor(where, name, t, 4)
    check.alike(where, named)
    _positive(where, q)
    batch, seq_q, heads, dim = q.shape
    heads_k = k_cache.size(2)
    expected = k_cache.shape[:3] + (dim,)
    names = ("num_blocks, page_block_size, num_heads_k, head_size" if paged
             else "batch_size_cache, seqlen_cache, num_heads_k, head_size")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check.shape(where, name, t, expected, names)
    _heads(where, heads, heads_k)
    new = 0
    if k is not None:
        new = k.size(1)
        for name, t in (("k", k), ("v", v)):
            check.shape(where, name, t, (batch, new, heads_k, dim),
                        "batch_size, seqlen_new, num_heads_k, head_size")
    if paged:
        if cache_batch_idx is not None or cache_leftpad is not None:
            raise ValueError(f"{where}: a paged cache (block_table) takes no cache_batch_idx "
                             f"nor cache_leftpad")
        check.tensor(where, "block_table", block_table, 2, (torch.int32,))
        capacity = block_table.size(1) * k_cache.size(1)
    else:
        rows = _per_batch(where, "cache_batch_idx", cache_batch_idx, batch, q.device)
        if cache_batch_idx is None:
            rows = list(range(batch))
        if any(not 0 <= r < k_cache.size(0) for r in rows):
            raise ValueError(f"{where}: cache_batch_idx={rows} must index the "
                             f"{k_cache.size(0)} rows of k_cache (without it, k_cache needs "
                             f"at least batch_size = {batch} rows)")
        capacity = k_cache.size(1)
    if k is not None and cache_seqlens is None:
        raise ValueError(f"{where}: k and v given, cache_seqlens must say where they go")
    starts = _per_batch(where, "cache_seqlens", cache_seqlens, batch, q.device, capacity,
                        whole=True)
    pads = _per_batch(where, "cache_leftpad", cache_leftpad, batch, q.device, 0)
    for start, pad in zip(starts, pads):
        if not 0 <= pad <= start or start + new > capacity:
            raise ValueError(f"{where}: cache_seqlens={starts} (with cache_leftpad={pads}) and "
                             f"{new} new positions must fit the cache's {capacity}")
    if paged:
        rows = _block_table(where, block_table, [start + new for start in starts],
                            k_cache.size(1), k_cache.size(0), q.device)
    if (rotary_cos is None) != (rotary_sin is None):
        raise ValueError(f"{where}: rotary_cos and rotary_sin must be given together")
    if rotary_cos is not None:
        if k is None:
            raise ValueError(f"{where}: rotary_cos and rotary_sin rotate the new k and q: k and "
                             f"v must be given")
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            check.tensor(where, name, t, 2)
        check.alike(where, (("q", q), ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)))
        check.shape(where, "rotary_sin", rotary_sin, rotary_cos.shape,
                    "seqlen_ro, rotary_dim / 2")
        if 2 * rotary_cos.size(1) > dim or rotary_cos.size(0) < capacity:
            raise ValueError(f"{where}: rotary_cos must have shape (seqlen_ro, rotary_dim / 2) "
                             f"with seqlen_ro >= {capacity} (the cache) and rotary_dim <= "
                             f"{dim}, got {tuple(rotary_cos.shape)}")
    check.slopes(where, alibi_slopes, batch, heads, q.device)
    return check.window(where, causal, window_size), rows, starts, pads


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None,
                            rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None,
                            causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False):
    """Decoding with a KV cache: k_cache and v_cache (batch_size_cache,
    seqlen_cache, heads_k, headdim), or paged (num_blocks,
    page_block_size, heads_k, headdim) with ``block_table``.  The new k and
    v, when given, are written into the cache in place at cache_seqlens
    (k rotated first by rotary_cos/sin at those positions, and q too: at
    its own positions when causal or local, all at cache_seqlens
    otherwise); then q attends to positions cache_leftpad to cache_seqlens
    + seqlen_new of its cache row (cache_batch_idx, default b).  No
    gradient, as flash-attn's.  ``num_splits`` (a kernel choice) changes
    nothing."""
    (left, right), rows, starts, pads = _check_kvcache(
        "flash_attn_with_kvcache", q, k_cache, v_cache, k, v, rotary_cos, rotary_sin,
        cache_seqlens, cache_batch_idx, cache_leftpad, block_table, causal, window_size,
        alibi_slopes)
    paged = block_table is not None
    page = k_cache.size(1)
    new = 0 if k is None else k.size(1)
    outs, lses = [], []
    with torch.no_grad():
        for b, (row, start, pad) in enumerate(zip(rows, starts, pads)):
            qb = q[b:b + 1]
            if k is not None:
                kb = k[b:b + 1]
                if rotary_cos is not None:
                    kb = apply_rotary(kb, rotary_cos, rotary_sin, start,
                                      interleaved=rotary_interleaved)
                    local = causal or left >= 0 or right >= 0
                    # Not causal nor local: every query at position start.
                    qr = qb if local else qb.reshape(1, 1, -1, qb.size(-1))
                    qb = apply_rotary(qr, rotary_cos, rotary_sin, start,
                                      interleaved=rotary_interleaved).reshape(qb.shape)
                for cache, t in ((k_cache, kb[0]), (v_cache, v[b])):
                    if paged:
                        positions = torch.arange(start, start + new, device=q.device)
                        blocks = torch.tensor(row, device=q.device)[positions // page]
                        cache[blocks, positions % page] = t
                    else:
                        cache[row, start:start + new] = t
            end = start + new
            if paged:
                kb, vb = (_paged(c, row, end)[pad:] for c in (k_cache, v_cache))
            else:
                kb, vb = k_cache[row, pad:end], v_cache[row, pad:end]
            slopes = alibi_slopes if alibi_slopes is None or alibi_slopes.dim() == 1 \
                else alibi_slopes[b:b + 1]
            result = _attention(qb, kb.unsqueeze(0), vb.unsqueeze(0), 0.0, softmax_scale, left,
                                right, softcap, slopes, return_softmax_lse)
            outs.append(result[0] if return_softmax_lse else result)
            if return_softmax_lse:
                lses.append(result[1])
    out = torch.cat(outs)
    return (out, torch.cat(lses)) if return_softmax_lse else out
