"""scaled_dot_product_attention on the virtual NPU, as on the cpu.

torch picks the attention kernel through a per-device choice that a
Python-defined device cannot provide, so for the npu it would always take
the math path: a dozen small ops, computed differently from the cpu's
fused kernel.  Here the npu asks the cpu's choice (``_fused_sdp_choice``,
which honours ``torch.nn.attention.sdpa_kernel``) and runs the kernel the
cpu would run, so results equal the cpu's.
"""

import torch

__all__ = ["KEYS", "NAME", "scaled_dot_product_attention"]

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


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    choice = aten._fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal,
                                    scale=scale, enable_gqa=enable_gqa)
    mask = _additive_mask(attn_mask, query.dtype)
    if choice == _FLASH and (not enable_gqa or query.size(-3) == key.size(-3)):
        return aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale)[0]
    return aten._scaled_dot_product_attention_math(
        query, key, value, mask, dropout_p, is_causal, None, scale=scale,
        enable_gqa=enable_gqa)[0]
