"""The served attention refuses what the CUDA packages refuse: tensors that
do not agree in batch, length, heads or dtype, cumulative lengths that are
not lengths, a bias of the wrong shape.  A wrong shape is an error naming
the argument and its value, never a result of some shape; and torch's own
attention refuses mixed dtypes on the npu as on the cpu."""
import pytest
import torch
import torch.nn.functional as F

# On the torch line of `make test` only: the served packages' argument checks, in Python.
pytestmark = pytest.mark.main_line


def _t(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype, device="npu")


def test_flash_attn_refuses_tensors_that_do_not_agree(migrated):
    from flash_attn import flash_attn_func, flash_attn_kvpacked_func, flash_attn_qkvpacked_func

    q = _t(1, 4, 2, 8)
    with pytest.raises(ValueError, match=r"flash_attn_func: k must have shape .*\(1, 4, 2, 8\), "
                                         r"got \(2, 4, 2, 8\)"):
        flash_attn_func(q, _t(2, 4, 2, 8), _t(2, 4, 2, 8))  # q batch 1, k and v batch 2
    with pytest.raises(ValueError, match=r"v must have shape .*\(1, 5, 2, 8\), got \(1, 6, 2, 8\)"):
        flash_attn_func(q, _t(1, 5, 2, 8), _t(1, 6, 2, 8))  # 5 keys, 6 values
    with pytest.raises(ValueError, match=r"the heads of q \(2\) must be a multiple .* \(3\)"):
        flash_attn_func(q, _t(1, 4, 3, 8), _t(1, 4, 3, 8))
    with pytest.raises(ValueError, match="q and k must have the same dtype, got torch.float32 "
                                         "and torch.float16"):
        flash_attn_func(q, _t(1, 4, 2, 8, dtype=torch.float16), _t(1, 4, 2, 8))
    with pytest.raises(ValueError, match=r"alibi_slopes must have shape"):
        flash_attn_func(q, q, q, alibi_slopes=torch.ones(3, device="npu"))
    with pytest.raises(ValueError, match=r"dropout_p=1\.5"):
        flash_attn_func(q, q, q, dropout_p=1.5)
    with pytest.raises(ValueError, match=r"qkv must have shape \(batch_size, seqlen, 3, "):
        flash_attn_qkvpacked_func(_t(1, 4, 4, 2, 8))
    with pytest.raises(ValueError, match=r"kv must have 5 dimensions"):
        flash_attn_kvpacked_func(q, _t(1, 4, 2, 8))


def test_flash_attn_varlen_refuses_lengths_that_are_not_lengths(migrated):
    from flash_attn import flash_attn_varlen_func

    q, k, v = _t(8, 2, 8), _t(8, 2, 8), _t(8, 2, 8)

    def cu(*bounds, dtype=torch.int32):
        return torch.tensor(bounds, dtype=dtype, device="npu")

    with pytest.raises(ValueError, match=r"cu_seqlens_q=\[0, 5, 3, 8\] must rise"):
        flash_attn_varlen_func(q, k, v, cu(0, 5, 3, 8), cu(0, 2, 4, 8), 5, 5)  # backwards
    with pytest.raises(ValueError, match=r"cu_seqlens_k=\[0, 4, 9\] must rise .* 8 rows given"):
        flash_attn_varlen_func(q, k, v, cu(0, 4, 8), cu(0, 4, 9), 4, 5)  # past the keys
    with pytest.raises(ValueError, match="cu_seqlens_q must have dtype torch.int32, got "
                                         "torch.int64"):
        flash_attn_varlen_func(q, k, v, cu(0, 4, 8, dtype=torch.int64), cu(0, 4, 8), 4, 4)
    with pytest.raises(ValueError, match="hold 3 and 2 bounds"):
        flash_attn_varlen_func(q, k, v, cu(0, 4, 8), cu(0, 8), 4, 8)
    with pytest.raises(ValueError, match=r"max_seqlen_q=3 is shorter .* \(length 4\)"):
        flash_attn_varlen_func(q, k, v, cu(0, 4, 8), cu(0, 4, 8), 3, 4)
    with pytest.raises(ValueError, match=r"v must have shape .*\(8, 2, 8\), got \(7, 2, 8\)"):
        flash_attn_varlen_func(q, k, _t(7, 2, 8), cu(0, 4, 8), cu(0, 4, 8), 4, 4)
    # Lengths covering half the rows: the output keeps q's rows (as
    # flash-attn's), the rows of no sequence zero.
    out = flash_attn_varlen_func(q, k, v, cu(0, 2, 4), cu(0, 4, 8), 2, 4)
    assert out.shape == (8, 2, 8) and not out[4:].any() and out[:4].any()


def test_flash_attn_with_kvcache_refuses_what_does_not_fit(migrated):
    from flash_attn import flash_attn_with_kvcache

    q, cache = _t(2, 1, 2, 8), _t(2, 6, 2, 8)
    seqlens = torch.tensor([5, 6], dtype=torch.int32, device="npu")
    with pytest.raises(ValueError, match=r"cache_seqlens=\[5, 6\] .* must fit the cache's 6"):
        flash_attn_with_kvcache(q, cache, cache.clone(), _t(2, 1, 2, 8), _t(2, 1, 2, 8),
                                cache_seqlens=seqlens)
    with pytest.raises(ValueError, match=r"k must have shape .*\(2, 1, 2, 8\), got \(1, 1, 2, 8\)"):
        flash_attn_with_kvcache(q, cache, cache.clone(), _t(1, 1, 2, 8), _t(1, 1, 2, 8),
                                cache_seqlens=0)
    with pytest.raises(ValueError, match="k and v must be given together"):
        flash_attn_with_kvcache(q, cache, cache.clone(), _t(2, 1, 2, 8))
    with pytest.raises(ValueError, match=r"cache_batch_idx=\[0, 2\] must index the 2 rows"):
        flash_attn_with_kvcache(q, cache, cache.clone(), cache_batch_idx=torch.tensor(
            [0, 2], dtype=torch.int32, device="npu"))
    with pytest.raises(ValueError, match=r"block_table=\[\[0, 7\]\] \(the blocks used\) must "
                                         r"index the 2 "):
        flash_attn_with_kvcache(q[:1], cache, cache.clone(), block_table=torch.tensor(
            [[0, 7]], dtype=torch.int32, device="npu"))


def test_xformers_refuses_tensors_that_do_not_agree(migrated):
    import xformers.ops as xops

    q = _t(1, 4, 2, 8)
    with pytest.raises(ValueError, match=r"incompatible shapes: query \(1, 4, 2, 8\), key "
                                         r"\(2, 4, 2, 8\)"):
        xops.memory_efficient_attention(q, _t(2, 4, 2, 8), _t(2, 4, 2, 8))
    with pytest.raises(ValueError, match="incompatible shapes"):  # no broadcasting of heads
        xops.memory_efficient_attention(_t(1, 4, 4, 8), q, q)
    with pytest.raises(ValueError, match="query and value must have the same dtype"):
        xops.memory_efficient_attention(q, q, q.double())
    with pytest.raises(ValueError, match=r"bias must have shape .* \(1, 2, 4, 4\), got "
                                         r"\(1, 1, 4, 4\)"):
        xops.memory_efficient_attention(q, q, q, attn_bias=_t(1, 1, 4, 4))
    mask = xops.fmha.BlockDiagonalMask.from_seqlens([2, 2])
    with pytest.raises(ValueError, match="a block diagonal mask takes a batch of 1"):
        xops.memory_efficient_attention(_t(2, 4, 2, 8), _t(2, 4, 2, 8), _t(2, 4, 2, 8),
                                        attn_bias=mask)
    with pytest.raises(ValueError, match="needs inputs of shape"):
        xops.memory_efficient_attention(_t(1, 4, 8), _t(1, 4, 8), _t(1, 4, 8), attn_bias=mask)


def test_xformers_groups_of_heads(migrated):
    """BMGHK: key and value expanded over the heads of a group, as xformers
    takes grouped-query attention."""
    import xformers.ops as xops

    q, k, v = _t(2, 5, 2, 3, 8), _t(2, 6, 2, 1, 8), _t(2, 6, 2, 1, 4)
    out = xops.memory_efficient_attention(q, k.expand(-1, -1, -1, 3, -1),
                                          v.expand(-1, -1, -1, 3, -1))
    assert out.shape == (2, 5, 2, 3, 4)
    ref = F.scaled_dot_product_attention(*(t.cpu().flatten(2, 3).transpose(1, 2) for t in (
        q, k.expand(-1, -1, -1, 3, -1), v.expand(-1, -1, -1, 3, -1))))
    torch.testing.assert_close(out.cpu(), ref.transpose(1, 2).unflatten(2, (2, 3)))


def test_scaled_dot_product_attention_refuses_mixed_dtypes_as_on_the_cpu(migrated):
    q, kv = torch.randn(1, 2, 3, 4, dtype=torch.float16), torch.randn(1, 2, 3, 4)
    with pytest.raises(RuntimeError) as cpu:
        F.scaled_dot_product_attention(q, kv, kv)
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same "
                                           "dtype") as npu:
        F.scaled_dot_product_attention(q.npu(), kv.npu(), kv.npu())
    assert "same dtype" in str(cpu.value)
    mask = torch.zeros(3, 3, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype"):
        F.scaled_dot_product_attention(kv.npu(), kv.npu(), kv.npu(), attn_mask=mask.npu())
    assert npu.value is not None
