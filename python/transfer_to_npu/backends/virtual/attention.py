"""scaled_dot_product_attention on the virtual NPU, as on the cpu.

torch picks the attention kernel through a per-device choice that a
Python-defined device cannot provide, so for the npu it would always take
the math path: a dozen small ops, computed differently from the cpu's
fused kernel.  Here the npu asks the cpu's choice (``_fused_sdp_choice``,
which honours ``torch.nn.attention.sdpa_kernel``) and runs the kernel the
cpu would run, so results equal the cpu's.

On DTensors (tensor parallelism shards the heads) the attention goes, as on
CUDA, through the ops DTensor has sharding rules for: CUDA's flash
attention op, or its memory-efficient one for a mask, whose npu kernels
(``KERNELS``) run the cpu's flash kernel on each shard; math, which DTensor
takes apart into ops it knows, where the cpu would run math.  The
memory-efficient op's backward leaves out a gradient nobody asked for (the
mask's), which DTensor takes only where it takes an op's output that is
absent (torch 2.12 and later): before, the mask's is asked for, and
dropped.
"""

import math
import sys

import torch

__all__ = ["KERNELS", "KEYS", "NAME", "scaled_dot_product_attention"]

aten = torch.ops.aten
_FLASH = int(torch._C._SDPBackend.FLASH_ATTENTION)

# The op is a composite whose autograd is its decomposition's: the kernel
# goes on the autograd key too, where the ops it calls record their own
# gradients, and on the backend key for calls without autograd (inference
# mode).
NAME = "scaled_dot_product_attention"
KEYS = ("AutogradPrivateUse1", "PrivateUse1")


def _additive_mask(attn_mask, dtype):
    # A boolean mask says what to keep; the kernels take what to add.
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    return torch.where(attn_mask, 0.0,
                       torch.full((), float("-inf"), dtype=dtype, device=attn_mask.device))


def _validate(query, key, value, attn_mask):
    """What torch's composite checks before choosing a kernel
    (validate_sdpa_input), which the npu's kernel here replaces: one dtype
    and one device for query, key and value, two dimensions at least, a
    boolean, float or query-typed mask.  Same errors as on the cpu."""
    if not query.dtype == key.dtype == value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {query.dtype} key.dtype: {key.dtype} and value.dtype: "
                           f"{value.dtype} instead.")
    if not query.device == key.device == value.device:
        raise RuntimeError(f"Expected query, key, and value to have the same device type, but "
                           f"got query.device: {query.device} key.device: {key.device} and "
                           f"value.device: {value.device} instead.")
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.dim()} key.dim: {key.dim()} and "
                           f"value.dim: {value.dim()} instead.")
    if attn_mask is not None and attn_mask.dtype not in (torch.bool, torch.float32, query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {attn_mask.dtype} and  query.dtype: "
                           f"{query.dtype} instead.")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    _validate(query, key, value, attn_mask)
    if query.size(-2) == 0 or value.numel() == 0:
        # No query or no value: zeros, whatever else the shapes say, as
        # torch's composite gives them on the cpu (the sums, times 0, keep
        # the inputs in the graph).
        return query.new_zeros(query.shape[:-1] + (value.size(-1),)) + (
            query.sum() + key.sum() + value.sum()) * 0
    if _is_dtensor(query):
        return _sharded(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    choice = aten._fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal,
                                    scale=scale, enable_gqa=enable_gqa)
    mask = _additive_mask(attn_mask, query.dtype)
    if choice == _FLASH and (not enable_gqa or query.size(-3) == key.size(-3)):
        if query.dim() == 3:
            # The cpu chooses flash for unbatched heads too (torch 2.14);
            # its kernel takes a batch.
            return scaled_dot_product_attention(
                query[None], key[None], value[None],
                mask[None] if mask is not None and mask.dim() == 3 else mask, dropout_p,
                is_causal, scale, enable_gqa)[0]
        return aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale)[0]
    return aten._scaled_dot_product_attention_math(
        query, key, value, mask, dropout_p, is_causal, None, scale=scale,
        enable_gqa=enable_gqa)[0]


# --- DTensors ---------------------------------------------------------------

def _is_dtensor(t):
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(t, module.DTensor)


def _local(t):
    return t._local_tensor if _is_dtensor(t) else t


def _sharded(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """Attention on DTensors through the ops DTensor has rules for, chosen
    as the cpu chooses for one shard."""
    choice = aten._fused_sdp_choice(_local(query), _local(key), _local(value),
                                    None if attn_mask is None else _local(attn_mask), dropout_p,
                                    is_causal, scale=scale, enable_gqa=enable_gqa)
    fused = choice == _FLASH and (not enable_gqa or query.size(-3) == key.size(-3))
    if fused and attn_mask is None:
        return aten._scaled_dot_product_flash_attention(
            query, key, value, dropout_p, is_causal, scale=scale)[0]
    if fused and not attn_mask.requires_grad:
        if attn_mask.dtype == torch.bool:
            attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(
                attn_mask.logical_not(), float("-inf"))
        # As CUDA's composite: one bias per batch and head, which DTensor
        # shards as it shards the heads.
        attn_mask = attn_mask.expand(query.size(0), query.size(1), query.size(2), key.size(2))
        compute_lse = torch.is_grad_enabled() and any(
            t.requires_grad for t in (query, key, value))
        if compute_lse and not _takes_absent_outputs(query.device_mesh):
            attn_mask = attn_mask.detach().requires_grad_()
        return aten._scaled_dot_product_efficient_attention(
            query, key, value, attn_mask, compute_lse, dropout_p, is_causal, scale=scale)[0]
    return aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale,
        enable_gqa=enable_gqa)[0]


_absent_outputs_taken = None


def _takes_absent_outputs(mesh):
    """Whether DTensor takes an op's output that is absent (a gradient not
    asked for) where its rule places one: asked of its sharding propagator
    once."""
    global _absent_outputs_taken
    if _absent_outputs_taken is None:
        from torch.distributed.tensor import DTensor, Replicate
        from torch.distributed.tensor._dtensor_spec import DTensorSpec

        spec = DTensorSpec(mesh, (Replicate(),) * mesh.ndim)
        try:
            DTensor._op_dispatcher.sharding_propagator._create_output_spec_with_new_tensor_meta(
                aten._scaled_dot_product_efficient_attention_backward.default, [spec], [None])
            _absent_outputs_taken = True
        except (AttributeError, ValueError):
            _absent_outputs_taken = False
    return _absent_outputs_taken


# CUDA's fused attention ops, which DTensor runs on each shard: the cpu's
# flash kernel on npu tensors, returning what CUDA's return (a log-sum-exp
# of the shape torch's meta functions give, empty random-number state).

def _state(query):
    return (torch.empty((2,), dtype=torch.uint64, device=query.device),
            torch.empty((), dtype=torch.uint64, device=query.device))


def flash(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *,
          scale=None):
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, scale=scale)
    seed, offset = _state(query)
    debug = torch.empty(0, dtype=query.dtype, device=query.device)
    return out, lse, None, None, query.size(2), key.size(2), seed, offset, debug


def flash_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q,
                   max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    return aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, scale=scale)


def efficient(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
              is_causal=False, *, scale=None):
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, dropout_p, is_causal, attn_mask=attn_bias, scale=scale)
    # CUDA's is padded to a multiple of 32 along the queries, or empty.
    length = math.ceil(lse.size(-1) / 32) * 32 if compute_log_sumexp else 0
    padded = lse.new_zeros(lse.shape[:-1] + (length,))
    if length:
        padded[..., :lse.size(-1)] = lse
    seed = torch.empty((), dtype=torch.long, device=query.device)
    return out, padded, seed, seed.clone()


def efficient_backward(grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed,
                       philox_offset, dropout_p, grad_input_mask, is_causal=False, *,
                       scale=None):
    grads = aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, query, key, value, out, logsumexp[..., :query.size(2)].contiguous(),
        dropout_p, is_causal, attn_mask=attn_bias, scale=scale)
    if not grad_input_mask[3]:
        return (*grads, None)
    if dropout_p or is_causal:
        raise NotImplementedError(
            "the virtual NPU's memory-efficient attention has no gradient for attn_bias with "
            "dropout or is_causal")
    return (*grads, _bias_gradient(grad_out, query, key, value, attn_bias, out, scale))


def _bias_gradient(grad_out, query, key, value, attn_bias, out, scale):
    """The gradient of an additive bias: that of the attention scores, from
    the probabilities computed again."""
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    probs = torch.softmax(query @ key.transpose(-2, -1) * scale + attn_bias, -1)
    d_probs = grad_out @ value.transpose(-2, -1)
    return (probs * (d_probs - (grad_out * out).sum(-1, keepdim=True))).to(attn_bias.dtype)


KERNELS = {"_scaled_dot_product_flash_attention": flash,
           "_scaled_dot_product_flash_attention_backward": flash_backward,
           "_scaled_dot_product_efficient_attention": efficient,
           "_scaled_dot_product_efficient_attention_backward": efficient_backward}
