"""The packages served while migrating (``_served.py``): each of their
functions and classes is a row, patched in the served module when it
loads (the import hook waits for it), so that its calls are counted,
logged and reported as any migrated call is.  Rows name the served module
of this package they patch and the implementation they call; the source
is the name the user's code imports.

torch_npu's rows exist on the virtual NPU only: with Ascend's torch_npu,
``import torch_npu`` is Ascend's own.
"""

from .. import _C
from ._row import row

_SERVED = "transfer_to_npu.served"

_ATTENTION = {"virtual": "torch.nn.functional.scaled_dot_product_attention",
              "cpu": "torch.nn.functional.scaled_dot_product_attention",
              "torch_npu": "torch_npu.npu_fusion_attention"}
_REFERENCE = "its reference math in torch ops (virtual NPU)"
_ROTARY = "its math in torch ops"

# (module the user imports, served module, implementation module,
#  {name: (kind, target)}); a target of None is the backend's attention.
PACKAGES = (
    ("torch_npu", "torch_npu", "_fused_ops",
     dict.fromkeys(("npu_fusion_attention", "npu_rms_norm", "npu_rotary_mul", "npu_swiglu",
                    "npu_geglu", "npu_apply_adam", "npu_apply_adam_w"),
                   ("function", _REFERENCE))
     | {"npu_format_cast": ("function", "the tensor itself (the virtual NPU has one format)")}),
    ("torch_npu.optim", "torch_npu_optim", "_optimizers",
     {"NpuFusedAdam": ("class", "torch.optim.Adam"),
      "NpuFusedAdamW": ("class", "torch.optim.AdamW"),
      "NpuFusedSGD": ("class", "torch.optim.SGD")}),
    ("flash_attn", "flash_attn", "_flash",
     dict.fromkeys(("flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func",
                    "flash_attn_varlen_func", "flash_attn_varlen_kvpacked_func",
                    "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache"),
                   ("function", None))),
    ("flash_attn.layers.rotary", "flash_attn_rotary", "_rotary",
     {"apply_rotary_emb": ("function", _ROTARY),
      "apply_rotary_emb_qkv_": ("function", _ROTARY),
      "apply_rotary_emb_kv_": ("function", _ROTARY),
      "RotaryEmbedding": ("class", _ROTARY)}),
    ("flash_attn.ops.triton.rotary", "flash_attn_rotary", "_rotary",
     {"apply_rotary": ("function", _ROTARY)}),
    ("xformers.ops", "xformers_ops", "_xformers",
     dict.fromkeys(("memory_efficient_attention", "memory_efficient_attention_forward"),
                   ("function", None))),
    ("apex.amp", "apex_amp", "_amp",
     {"initialize": ("function", "torch.autocast(dtype=torch.float16) (O1) or float16 models "
                                 "(O2: with float32 master weights; O3), and a loss scaler"),
      "scale_loss": ("function",
                     "loss scaling (torch._amp_foreach_non_finite_check_and_unscale_)")}),
    ("apex.optimizers", "apex_optimizers", "_optimizers",
     {"FusedAdam": ("class", "torch.optim.Adam (AdamW mode: decoupled weight decay)"),
      "FusedLAMB": ("class", "LAMB in torch ops"), "FusedSGD": ("class", "torch.optim.SGD")}),
    ("apex.normalization", "apex_normalization", "_layers",
     {"FusedLayerNorm": ("class", "torch.nn.LayerNorm"),
      "MixedFusedLayerNorm": ("class", "torch.nn.LayerNorm"),
      "FusedRMSNorm": ("class", "torch.nn.RMSNorm"),
      "MixedFusedRMSNorm": ("class", "torch.nn.RMSNorm")}),
    ("apex.parallel", "apex_parallel", "_layers",
     {"DistributedDataParallel": ("class", "torch.nn.parallel.DistributedDataParallel"),
      "SyncBatchNorm": ("class", "torch.nn.SyncBatchNorm"),
      "convert_syncbn_model": ("function", "torch.nn.SyncBatchNorm.convert_sync_batchnorm")}),
)


def rows(torch, backend):
    """The rows for the backend named ("virtual", "torch_npu" or "cpu")."""
    out = []
    for public, served, implementation, names in PACKAGES:
        if public.partition(".")[0] == "torch_npu" and backend != "virtual":
            continue
        for name, (kind, target) in names.items():
            out.append(row(f"{public}.{name}", target or _ATTENTION[backend], kind,
                           _C.MODE_REDIRECT, f"{_SERVED}.{served}", name,
                           f"{_SERVED}.{implementation}:{name}", kws=()))
    return out
