"""flash_attn's rotary embedding (``flash_attn.layers.rotary`` and the
kernel's wrapper, ``flash_attn.ops.triton.rotary.apply_rotary``) in torch
ops, as its Triton kernel computes it.

The first ``rotary_dim`` (twice cos's last size) features of each head are
rotated in pairs: the two halves (GPT-NeoX) or neighbours (``interleaved``,
GPT-J), in float32, the result stored in the input's dtype; the other
features are kept.  Token s of sequence b takes cos and sin at row
``s + seqlen_offsets[b]``; a row past the table rotates by nothing, as the
kernel's masked loads do.  With ``cu_seqlens`` the tokens are packed
(total, heads, headdim) and positions count from each sequence's start;
rows outside every sequence are kept.  ``conjugate`` rotates backwards
(the gradient).
"""

import torch

from . import _arguments as check

__all__ = ["ApplyRotaryEmb", "ApplyRotaryEmbKV_", "ApplyRotaryEmbQKV_", "RotaryEmbedding",
           "apply_rotary", "apply_rotary_emb", "apply_rotary_emb_func", "apply_rotary_emb_kv_",
           "apply_rotary_emb_qkv_", "apply_rotary_emb_torch", "rotate_half"]

_WHERE = "flash_attn apply_rotary"


def _positions(x, seqlen_offsets, cu_seqlens, max_seqlen):
    """Each row's position in the cos/sin table, (batch, seqlen) or
    (total,); -1 for the rows of no sequence."""
    if cu_seqlens is None:
        batch, seqlen = x.shape[:2]
        pos = torch.arange(seqlen, device=x.device).expand(batch, seqlen)
        if isinstance(seqlen_offsets, torch.Tensor):
            return pos + seqlen_offsets.to(device=x.device, dtype=torch.long)[:, None]
        return pos + seqlen_offsets
    bounds = check.lengths(_WHERE, "cu_seqlens", cu_seqlens.to(torch.int32), x.size(0),
                           x.device)
    longest = max(b - a for a, b in zip(bounds, bounds[1:]))
    if longest > max_seqlen:
        raise ValueError(f"{_WHERE}: max_seqlen={max_seqlen} is shorter than a sequence of "
                         f"cu_seqlens (length {longest})")
    pos = torch.full((x.size(0),), -1, dtype=torch.long, device=x.device)
    offsets = seqlen_offsets.tolist() if isinstance(seqlen_offsets, torch.Tensor) \
        else [seqlen_offsets] * (len(bounds) - 1)
    for (a, b), offset in zip(zip(bounds, bounds[1:]), offsets):
        pos[a:b] = torch.arange(offset, offset + b - a, device=x.device)
    return pos


def _check(x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen):
    varlen = cu_seqlens is not None
    check.tensor(_WHERE, "x", x, 3 if varlen else 4)
    check.tensor(_WHERE, "cos", cos, 2)
    check.tensor(_WHERE, "sin", sin, 2)
    check.alike(_WHERE, (("x", x), ("cos", cos), ("sin", sin)))
    check.shape(_WHERE, "sin", sin, cos.shape, "seqlen_ro, rotary_dim / 2")
    seqlen_ro, rotary_dim = cos.size(0), 2 * cos.size(1)
    if rotary_dim > x.size(-1):
        raise ValueError(f"{_WHERE}: rotary_dim ({rotary_dim}, twice cos's last size) must be at "
                         f"most the head dimension of x, {x.size(-1)}")
    if varlen:
        if max_seqlen is None:
            raise ValueError(f"{_WHERE}: cu_seqlens given, max_seqlen must be given too")
        check.tensor(_WHERE, "cu_seqlens", cu_seqlens, 1, (torch.int32, torch.int64))
        batch, seqlen = cu_seqlens.size(0) - 1, int(max_seqlen)
    else:
        batch, seqlen = x.size(0), x.size(1)
    if seqlen_ro < seqlen:
        raise ValueError(f"{_WHERE}: cos and sin have {seqlen_ro} rows, fewer than the "
                         f"{seqlen} positions of a sequence")
    if isinstance(seqlen_offsets, torch.Tensor):
        check.tensor(_WHERE, "seqlen_offsets", seqlen_offsets, 1, (torch.int32, torch.int64))
        check.shape(_WHERE, "seqlen_offsets", seqlen_offsets, (batch,), "batch_size")
    elif not isinstance(seqlen_offsets, int) or not 0 <= seqlen_offsets <= seqlen_ro - seqlen:
        raise ValueError(f"{_WHERE}: seqlen_offsets={seqlen_offsets!r} must be an int from 0 to "
                         f"{seqlen_ro - seqlen} (cos and sin have {seqlen_ro} rows) or a tensor")
    return rotary_dim


def _rotated(x, cos, sin, interleaved, conjugate):
    """x (..., rotary_dim) rotated by cos and sin (..., rotary_dim / 2), in
    float32."""
    x = x.float()
    cos, sin = cos.float(), sin.float()
    if conjugate:
        sin = -sin
    if interleaved:
        x0, x1 = x[..., 0::2], x[..., 1::2]
    else:
        x0, x1 = x.chunk(2, dim=-1)
    o0, o1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    if interleaved:
        return torch.stack((o0, o1), dim=-1).flatten(-2)
    return torch.cat((o0, o1), dim=-1)


def apply_rotary(x, cos, sin, seqlen_offsets=0, cu_seqlens=None, max_seqlen=None,
                 interleaved=False, inplace=False, conjugate=False):
    """x: (batch, seqlen, heads, headdim), or (total, heads, headdim) with
    cu_seqlens; cos, sin: (seqlen_ro, rotary_dim / 2).  Returns x rotated
    (x itself when ``inplace``)."""
    rotary_dim = _check(x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen)
    pos = _positions(x, seqlen_offsets, cu_seqlens, max_seqlen)
    inside = (pos >= 0) & (pos < cos.size(0))
    rows = torch.where(inside, pos, torch.zeros_like(pos))
    # Past the table (or outside every sequence): cos 1, sin 0.
    c = torch.where(inside[..., None], cos[rows].float(), 1.0)[..., None, :]
    s = torch.where(inside[..., None], sin[rows].float(), 0.0)[..., None, :]
    out = x if inplace else x.clone()
    out[..., :rotary_dim] = _rotated(x[..., :rotary_dim], c, s, interleaved, conjugate).to(x.dtype)
    return out


class ApplyRotaryEmb(torch.autograd.Function):
    """apply_rotary with its gradient (the rotation backwards)."""

    @staticmethod
    def forward(ctx, x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
                cu_seqlens=None, max_seqlen=None):
        out = apply_rotary(x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, interleaved,
                           inplace)
        ctx.save_for_backward(cos, sin)
        ctx.args = (seqlen_offsets, cu_seqlens, max_seqlen, interleaved, inplace)
        if inplace:
            ctx.mark_dirty(x)
        return out

    @staticmethod
    def backward(ctx, do):
        cos, sin = ctx.saved_tensors
        offsets, cu_seqlens, max_seqlen, interleaved, inplace = ctx.args
        grad = apply_rotary(do, cos, sin, offsets, cu_seqlens, max_seqlen, interleaved,
                            inplace, conjugate=True)
        return grad, None, None, None, None, None, None, None


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
                     cu_seqlens=None, max_seqlen=None):
    """x: (batch, seqlen, heads, headdim), or (total, heads, headdim) with
    cu_seqlens; the first rotary_dim features rotated."""
    return ApplyRotaryEmb.apply(x, cos, sin, interleaved, inplace, seqlen_offsets, cu_seqlens,
                                max_seqlen)


apply_rotary_emb_func = apply_rotary_emb


def _qk(qkv, num_heads_q):
    """The query and key parts of a packed qkv: (b, s, 3, h, d), or
    (b, s, hq + 2 * hk, d) with num_heads_q."""
    where = "flash_attn apply_rotary_emb_qkv_"
    check.tensor(where, "qkv", qkv, (4, 5))
    if qkv.dim() == 5:
        if qkv.size(2) != 3:
            raise ValueError(f"{where}: qkv must have shape (batch, seqlen, 3, heads, headdim), "
                             f"got {tuple(qkv.shape)}")
        return qkv[:, :, 0], qkv[:, :, 1]
    heads = qkv.size(2)
    if num_heads_q is None or not 0 < num_heads_q <= heads or (heads - num_heads_q) % 2:
        raise ValueError(f"{where}: qkv of shape {tuple(qkv.shape)} needs num_heads_q (got "
                         f"{num_heads_q!r}) with heads = num_heads_q + 2 * num_heads_k")
    heads_k = (heads - num_heads_q) // 2
    return qkv[:, :, :num_heads_q], qkv[:, :, num_heads_q:num_heads_q + heads_k]


class ApplyRotaryEmbQKV_(torch.autograd.Function):
    """The query and key of a packed qkv rotated in place (cos_k and sin_k
    for the key when given: XPos)."""

    @staticmethod
    def forward(ctx, qkv, cos, sin, cos_k=None, sin_k=None, interleaved=False,
                seqlen_offsets=0, num_heads_q=None):
        _rotate_qk(qkv, cos, sin, cos_k, sin_k, interleaved, seqlen_offsets, num_heads_q, False)
        ctx.save_for_backward(cos, sin, cos_k, sin_k)
        ctx.args = (interleaved, seqlen_offsets, num_heads_q)
        ctx.mark_dirty(qkv)
        return qkv

    @staticmethod
    def backward(ctx, dqkv):
        cos, sin, cos_k, sin_k = ctx.saved_tensors
        interleaved, offsets, num_heads_q = ctx.args
        _rotate_qk(dqkv, cos, sin, cos_k, sin_k, interleaved, offsets, num_heads_q, True)
        return dqkv, None, None, None, None, None, None, None


def _rotate_qk(qkv, cos, sin, cos_k, sin_k, interleaved, offsets, num_heads_q, conjugate):
    q, k = _qk(qkv, num_heads_q)
    cos_k = cos if cos_k is None else cos_k
    sin_k = sin if sin_k is None else sin_k
    for part, c, s in ((q, cos, sin), (k, cos_k, sin_k)):
        part.copy_(apply_rotary(part, c, s, offsets, interleaved=interleaved,
                                conjugate=conjugate))


def apply_rotary_emb_qkv_(qkv, cos, sin, cos_k=None, sin_k=None, interleaved=False,
                          seqlen_offsets=0, num_heads_q=None):
    return ApplyRotaryEmbQKV_.apply(qkv, cos, sin, cos_k, sin_k, interleaved, seqlen_offsets,
                                    num_heads_q)


class ApplyRotaryEmbKV_(torch.autograd.Function):
    """The key of a packed kv (batch, seqlen, 2, heads, headdim) rotated in
    place."""

    @staticmethod
    def forward(ctx, kv, cos, sin, interleaved=False, seqlen_offsets=0):
        _rotate_k(kv, cos, sin, interleaved, seqlen_offsets, False)
        ctx.save_for_backward(cos, sin)
        ctx.args = (interleaved, seqlen_offsets)
        ctx.mark_dirty(kv)
        return kv

    @staticmethod
    def backward(ctx, dkv):
        cos, sin = ctx.saved_tensors
        _rotate_k(dkv, cos, sin, *ctx.args, True)
        return dkv, None, None, None, None


def _rotate_k(kv, cos, sin, interleaved, offsets, conjugate):
    where = "flash_attn apply_rotary_emb_kv_"
    check.tensor(where, "kv", kv, 5)
    if kv.size(2) != 2:
        raise ValueError(f"{where}: kv must have shape (batch, seqlen, 2, heads, headdim), got "
                         f"{tuple(kv.shape)}")
    apply_rotary(kv[:, :, 0], cos, sin, offsets, interleaved=interleaved, inplace=True,
                 conjugate=conjugate)


def apply_rotary_emb_kv_(kv, cos, sin, interleaved=False, seqlen_offsets=0):
    return ApplyRotaryEmbKV_.apply(kv, cos, sin, interleaved, seqlen_offsets)


def rotate_half(x, interleaved=False):
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_emb_torch(x, cos, sin, interleaved=False):
    """The reference: x (batch, seqlen, heads, headdim), cos and sin
    (seqlen, rotary_dim / 2) or (batch, seqlen, rotary_dim / 2)."""
    ro_dim = cos.shape[-1] * 2
    if ro_dim > x.shape[-1]:
        raise ValueError(f"flash_attn apply_rotary_emb_torch: rotary_dim ({ro_dim}) must be at "
                         f"most the head dimension of x, {x.shape[-1]}")
    if interleaved:
        cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    else:
        cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return torch.cat([x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim], interleaved) * sin,
                      x[..., ro_dim:]], dim=-1)


class RotaryEmbedding(torch.nn.Module):
    """flash_attn.layers.rotary.RotaryEmbedding: RoFormer's rotary position
    embedding (XPos with ``scale_base``), its cos/sin tables cached up to
    the longest sequence seen, applied in place to a packed qkv or to q and
    a packed kv."""

    # pos_idx_in_fp32: flash_attn's before 2.8, by name (2.8 puts device
    # in its place; positions are float32).
    def __init__(self, dim, base=10000.0, interleaved=False, scale_base=None, device=None, *,
                 pos_idx_in_fp32=True):
        super().__init__()
        self.dim = dim
        self.base = float(base)
        self.pos_idx_in_fp32 = pos_idx_in_fp32
        self.register_buffer("inv_freq", self._compute_inv_freq(device), persistent=False)
        self.interleaved = interleaved
        self.scale_base = scale_base
        scale = (torch.arange(0, dim, 2, device=device, dtype=torch.float32) + 0.4 * dim) \
            / (1.4 * dim) if scale_base is not None else None
        self.register_buffer("scale", scale, persistent=False)
        self._seq_len_cached = 0
        self._cos_cached = self._sin_cached = None
        self._cos_k_cached = self._sin_k_cached = None

    def _compute_inv_freq(self, device=None):
        return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device,
                                                 dtype=torch.float32) / self.dim))

    def _update_cos_sin_cache(self, seqlen, device=None, dtype=None):
        # Recomputed for a longer sequence, another device or dtype, or
        # leaving inference mode.
        cached = self._cos_cached
        if not (seqlen > self._seq_len_cached or cached is None or cached.device != device
                or cached.dtype != dtype or (self.training and cached.is_inference())):
            return
        self._seq_len_cached = seqlen
        # float32 positions and frequencies: bfloat16 would lose the
        # large products' precision.
        if self.pos_idx_in_fp32:
            t = torch.arange(seqlen, device=device, dtype=torch.float32)
            inv_freq = self.inv_freq if self.inv_freq.dtype == torch.float32 \
                else self._compute_inv_freq(device=device)
        else:
            t = torch.arange(seqlen, device=device, dtype=self.inv_freq.dtype)
            inv_freq = self.inv_freq
        freqs = torch.outer(t, inv_freq)
        if self.scale is None:
            self._cos_cached = torch.cos(freqs).to(dtype)
            self._sin_cached = torch.sin(freqs).to(dtype)
            return
        power = (torch.arange(seqlen, dtype=self.scale.dtype, device=self.scale.device)
                 - seqlen // 2) / self.scale_base
        scale = self.scale.to(device=power.device) ** power[:, None]
        self._cos_cached = (torch.cos(freqs) * scale).to(dtype)
        self._sin_cached = (torch.sin(freqs) * scale).to(dtype)
        self._cos_k_cached = (torch.cos(freqs) / scale).to(dtype)
        self._sin_k_cached = (torch.sin(freqs) / scale).to(dtype)

    def forward(self, qkv, kv=None, seqlen_offset=0, max_seqlen=None, num_heads_q=None):
        """qkv: (batch, seqlen, 3, heads, headdim) or (batch, seqlen,
        num_heads_q + 2 * num_heads_k, headdim); or q (batch, seqlen,
        heads, headdim) with kv (batch, seqlen, 2, heads, headdim).
        Rotated in place."""
        seqlen = qkv.shape[1]
        if max_seqlen is not None:
            self._update_cos_sin_cache(max_seqlen, device=qkv.device, dtype=qkv.dtype)
        elif isinstance(seqlen_offset, int):
            self._update_cos_sin_cache(seqlen + seqlen_offset, device=qkv.device,
                                       dtype=qkv.dtype)
        xpos = self.scale is not None
        if kv is None:
            return apply_rotary_emb_qkv_(qkv, self._cos_cached, self._sin_cached,
                                         self._cos_k_cached if xpos else None,
                                         self._sin_k_cached if xpos else None,
                                         self.interleaved, seqlen_offset, num_heads_q)
        q = apply_rotary_emb(qkv, self._cos_cached, self._sin_cached, self.interleaved, True,
                             seqlen_offset)
        kv = apply_rotary_emb_kv_(kv, self._cos_k_cached if xpos else self._cos_cached,
                                  self._sin_k_cached if xpos else self._sin_cached,
                                  self.interleaved, seqlen_offset)
        return q, kv
