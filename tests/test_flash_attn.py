"""The served flash_attn's decoding and rotary interfaces against their
definitions written out here: flash_attn_with_kvcache (the cache written in
place, cache_batch_idx, cache_leftpad, a paged cache, rotary embedding of
the new keys and of the queries), the varlen functions on a paged cache
and with rows outside every sequence, and flash_attn.layers.rotary /
flash_attn.ops.triton.rotary (what transformers' ModernBert imports)."""
import pytest
import torch

from conftest import calls


def _rotate(x, cos, sin, interleaved=False):
    """x (..., S, H, D) rotated at rows of cos/sin (..., S, rotary_dim/2)."""
    rd = 2 * cos.size(-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    if interleaved:
        x0, x1 = x[..., 0:rd:2], x[..., 1:rd:2]
    else:
        x0, x1 = x[..., :rd // 2], x[..., rd // 2:rd]
    o0, o1 = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    rotated = torch.stack((o0, o1), -1).flatten(-2) if interleaved else torch.cat((o0, o1), -1)
    return torch.cat((rotated, x[..., rd:]), -1)


def _attend(q, k, v, causal, scale=None):
    """q (Sq, H, D) over k, v (Sk, Hk, D), causal aligned at the bottom
    right; also the log-sum-exp (H, Sq)."""
    k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
    v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
    scale = q.size(-1) ** -0.5 if scale is None else scale
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    if causal:
        i = torch.arange(q.size(0))[:, None] + k.size(0) - q.size(0)
        scores = scores.masked_fill(torch.arange(k.size(0))[None, :] > i, float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v), scores.logsumexp(-1)


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_kvcache_appends_in_place_and_attends(migrated):
    from flash_attn import flash_attn_with_kvcache

    q, k, v = _randn(2, 2, 4, 8, seed=0), _randn(2, 2, 2, 8, seed=1), _randn(2, 2, 2, 8, seed=2)
    k_cache, v_cache = _randn(3, 8, 2, 8, seed=3), _randn(3, 8, 2, 8, seed=4)
    rows, starts, pads = [2, 0], [3, 5], [1, 0]
    nk, nv = k_cache.npu(), v_cache.npu()
    before = calls("flash_attn.flash_attn_with_kvcache")
    out, lse = flash_attn_with_kvcache(
        q.npu(), nk, nv, k.npu(), v.npu(), cache_seqlens=torch.tensor(starts, dtype=torch.int32,
                                                                      device="npu"),
        cache_batch_idx=torch.tensor(rows, dtype=torch.int32, device="npu"),
        cache_leftpad=torch.tensor(pads, dtype=torch.int32, device="npu"), causal=True,
        return_softmax_lse=True)
    assert calls("flash_attn.flash_attn_with_kvcache") == before + 1
    assert out.shape == (2, 2, 4, 8) and lse.shape == (2, 4, 2) and out.device.type == "npu"
    for b, (row, start, pad) in enumerate(zip(rows, starts, pads)):
        k_cache[row, start:start + 2], v_cache[row, start:start + 2] = k[b], v[b]
        ref, ref_lse = _attend(q[b], k_cache[row, pad:start + 2], v_cache[row, pad:start + 2],
                               causal=True)
        torch.testing.assert_close(out[b].cpu(), ref)
        torch.testing.assert_close(lse[b].cpu(), ref_lse)
    # The cache itself was written, as flash-attn's is.
    torch.testing.assert_close(nk.cpu(), k_cache)
    torch.testing.assert_close(nv.cpu(), v_cache)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("interleaved", [True, False])
def test_kvcache_rotates_new_keys_and_queries(migrated, causal, interleaved):
    from flash_attn import flash_attn_with_kvcache

    q, k, v = _randn(1, 2, 2, 8, seed=0), _randn(1, 2, 2, 8, seed=1), _randn(1, 2, 2, 8, seed=2)
    k_cache, v_cache = _randn(1, 8, 2, 8, seed=3), _randn(1, 8, 2, 8, seed=4)
    angle = _randn(8, 2, seed=5)  # rotary_dim 4 of 8
    cos, sin = angle.cos(), angle.sin()
    out = flash_attn_with_kvcache(q.npu(), k_cache.npu(), v_cache.npu(), k.npu(), v.npu(),
                                  cos.npu(), sin.npu(), cache_seqlens=4, causal=causal,
                                  rotary_interleaved=interleaved)
    k_cache[0, 4:6] = _rotate(k[0], cos[4:6], sin[4:6], interleaved)
    v_cache[0, 4:6] = v[0]
    # Causal: each query at its own position; else all at cache_seqlens.
    at = slice(4, 6) if causal else [4, 4]
    ref, _ = _attend(_rotate(q[0], cos[at], sin[at], interleaved), k_cache[0, :6],
                     v_cache[0, :6], causal)
    torch.testing.assert_close(out[0].cpu(), ref)


def test_kvcache_paged(migrated):
    from flash_attn import flash_attn_with_kvcache

    # Blocks of 4 positions; sequence 0 in blocks 5 then 1, sequence 1 in 2
    # then 0; -1 pads the table (never read).
    table = [[5, 1, -1], [2, 0, -1]]
    k_cache, v_cache = _randn(6, 4, 2, 8, seed=0), _randn(6, 4, 2, 8, seed=1)
    q, k, v = _randn(2, 1, 2, 8, seed=2), _randn(2, 1, 2, 8, seed=3), _randn(2, 1, 2, 8, seed=4)
    starts = [3, 6]
    nk, nv = k_cache.npu(), v_cache.npu()
    out = flash_attn_with_kvcache(q.npu(), nk, nv, k.npu(), v.npu(),
                                  cache_seqlens=torch.tensor(starts, dtype=torch.int32).npu(),
                                  block_table=torch.tensor(table, dtype=torch.int32).npu(),
                                  causal=True)
    for b, start in enumerate(starts):
        block, offset = table[b][start // 4], start % 4
        k_cache[block, offset], v_cache[block, offset] = k[b, 0], v[b, 0]
        keys = torch.cat([k_cache[i] for i in table[b][:2]])[:start + 1]
        values = torch.cat([v_cache[i] for i in table[b][:2]])[:start + 1]
        torch.testing.assert_close(out[b].cpu(), _attend(q[b], keys, values, True)[0])
    torch.testing.assert_close(nk.cpu(), k_cache)


def test_varlen_paged_and_rows_outside_every_sequence(migrated):
    from flash_attn import flash_attn_varlen_func

    # Rows 0 and 6 belong to no sequence: zeros, the output keeping q's rows.
    q = _randn(7, 2, 8, seed=0)
    k_cache, v_cache = _randn(4, 4, 2, 8, seed=1), _randn(4, 4, 2, 8, seed=2)
    table = torch.tensor([[3, 0], [1, 2]], dtype=torch.int32)
    cu_q = torch.tensor([1, 3, 6], dtype=torch.int32)
    cu_k = torch.tensor([0, 5, 8], dtype=torch.int32)
    out = flash_attn_varlen_func(q.npu(), k_cache.npu(), v_cache.npu(), cu_q.npu(), cu_k.npu(),
                                 3, 5, causal=True, block_table=table.npu())
    assert out.shape == (7, 2, 8)
    assert torch.equal(out[0].cpu(), torch.zeros(2, 8))
    assert torch.equal(out[6].cpu(), torch.zeros(2, 8))
    for b, (qa, qb, n) in enumerate(((1, 3, 5), (3, 6, 3))):
        keys = torch.cat([k_cache[i] for i in table[b].tolist()])[:n]
        values = torch.cat([v_cache[i] for i in table[b].tolist()])[:n]
        torch.testing.assert_close(out[qa:qb].cpu(), _attend(q[qa:qb], keys, values, True)[0])


def test_rotary_apply_matches_definition(migrated):
    from flash_attn.layers.rotary import apply_rotary_emb
    from flash_attn.ops.triton.rotary import apply_rotary

    x = _randn(2, 5, 3, 8, seed=0)
    angle = _randn(9, 3, seed=1)  # rotary_dim 6 of 8
    cos, sin = angle.cos(), angle.sin()
    offsets = torch.tensor([0, 4], dtype=torch.int32)
    for interleaved in (False, True):
        out = apply_rotary(x.npu(), cos.npu(), sin.npu(), offsets.npu(), interleaved=interleaved)
        for b, o in enumerate(offsets.tolist()):
            torch.testing.assert_close(out[b].cpu(), _rotate(x[b], cos[o:o + 5], sin[o:o + 5],
                                                             interleaved))
    # Packed sequences of 2 and 3 tokens: positions count from each start.
    packed = x[0]
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    out = apply_rotary(packed.npu(), cos.npu(), sin.npu(), cu_seqlens=cu.npu(), max_seqlen=3)
    ref = torch.cat([_rotate(packed[:2], cos[:2], sin[:2]), _rotate(packed[2:], cos[:3], sin[:3])])
    torch.testing.assert_close(out.cpu(), ref)
    # The autograd form: its gradient is the backward rotation.
    leaf = x.npu().requires_grad_()
    cpu_leaf = x.clone().requires_grad_()
    apply_rotary_emb(leaf, cos.npu(), sin.npu()).pow(2).sum().backward()
    _rotate(cpu_leaf, cos[:5], sin[:5]).pow(2).sum().backward()
    torch.testing.assert_close(leaf.grad.cpu(), cpu_leaf.grad)


def test_rotary_embedding_module(migrated):
    from flash_attn.layers.rotary import RotaryEmbedding

    rotary = RotaryEmbedding(4, base=100.0, device="cuda")
    qkv = _randn(2, 5, 3, 2, 8, seed=0)
    out = rotary(qkv.npu().clone())
    inv = 1.0 / (100.0 ** (torch.arange(0, 4, 2).float() / 4))
    freqs = torch.outer(torch.arange(5).float(), inv)
    ref = qkv.clone()
    for i in (0, 1):  # query and key; the value is kept
        ref[:, :, i] = _rotate(qkv[:, :, i], freqs.cos(), freqs.sin())
    torch.testing.assert_close(out.cpu(), ref)


def test_unserved_flash_attn_modules_fail_naming_themselves(migrated):
    for name in ("flash_attn.ops.rms_norm", "flash_attn.layers.patch_embed",
                 "flash_attn.modules", "flash_attn.ops.triton.layer_norm"):
        with pytest.raises(ModuleNotFoundError, match=name.replace(".", r"\.")):
            __import__(name)
