"""CUDA-only packages, compiled CUDA extensions and NVIDIA's programs: what
each is, and what to use on the NPU.  One list for both sides: while migrating, the import of
an extension that is not installed fails naming what to use (``_served``);
the static tools report each import of a package or an extension
(``static/scan.py``).
"""

# Package (a top-level module, or a dotted prefix) -> (what it is, what to
# use on the NPU).
PACKAGES = {
    "flash_attn": ("FlashAttention's CUDA kernels",
                   "torch.nn.functional.scaled_dot_product_attention, or "
                   "torch_npu.npu_fusion_attention on Ascend"),
    "apex": ("NVIDIA apex (CUDA amp, fused optimizers and norms)",
             "torch.amp for mixed precision, torch.optim (AdamW, SGD), torch.nn.LayerNorm"),
    "xformers": ("xFormers' CUDA attention kernels",
                 "torch.nn.functional.scaled_dot_product_attention, or "
                 "torch_npu.npu_fusion_attention on Ascend"),
    "bitsandbytes": ("bitsandbytes' CUDA 8-bit and 4-bit kernels",
                     "torch.optim optimizers; quantisation with an Ascend-supported library"),
    "cupy": ("CuPy (NumPy on CUDA)", "numpy on the host, or torch tensors on the npu"),
    "pycuda": ("PyCUDA (CUDA kernels and memory from Python)", "torch tensors and ops on the npu"),
    "pynvml": ("NVIDIA's management library (NVML)",
               "torch.npu memory functions (memory_allocated, mem_get_info), or npu-smi"),
    "triton": ("Triton (GPU kernels compiled for CUDA)",
               "torch ops, or an Ascend C / Triton-Ascend port of the kernel"),
    "cutlass": ("NVIDIA CUTLASS (CUDA matmul and convolution kernels)",
                "torch.matmul and torch ops, or an Ascend C port of the kernel"),
    "cuda": ("NVIDIA's CUDA Python bindings (cuda-python: cuda.bindings, cuda.core)",
             "torch.npu's device, stream, event and memory functions"),
    "cudnn": ("NVIDIA's cuDNN frontend", "torch ops (convolution, attention, normalization)"),
    "transformer_engine": ("NVIDIA Transformer Engine (FP8 layers and fused CUDA kernels)",
                           "torch.nn layers in bfloat16, or torch_npu's fused operators"),
    "nvidia.dali": ("NVIDIA DALI (data loading on the GPU)",
                    "torch.utils.data.DataLoader with host transforms"),
    "mamba_ssm": ("Mamba's selective-scan CUDA kernels",
                  "the selective scan in torch ops (mamba_ssm's reference, "
                  "selective_scan_ref), or an Ascend C port"),
    "causal_conv1d": ("the causal depthwise conv1d CUDA kernels",
                      "torch.nn.functional.conv1d with left padding (groups=channels)"),
}

# Compiled extension module -> the package whose build makes it.  Code
# imports them directly (apex's fused kernels, FlashAttention's).
EXTENSIONS = {
    "amp_C": "apex", "apex_C": "apex", "fused_layer_norm_cuda": "apex",
    "fused_adam_cuda": "apex", "fused_lamb_cuda": "apex", "mlp_cuda": "apex",
    "fused_dense_cuda": "apex", "syncbn": "apex", "fused_weight_gradient_mlp_cuda": "apex",
    "scaled_masked_softmax_cuda": "apex", "scaled_upper_triang_masked_softmax_cuda": "apex",
    "scaled_softmax_cuda": "apex", "fused_rotary_positional_embedding": "apex",
    "xentropy_cuda": "apex", "fast_multihead_attn": "apex", "focal_loss_cuda": "apex",
    "flash_attn_2_cuda": "flash_attn", "flash_attn_cuda": "flash_attn",
    "dropout_layer_norm": "flash_attn", "rotary_emb": "flash_attn",
    "fused_dense_lib": "flash_attn", "xentropy_cuda_lib": "flash_attn",
    "selective_scan_cuda": "mamba_ssm", "causal_conv1d_cuda": "causal_conv1d",
}

# Programs of NVIDIA's that code runs (subprocess, os.system) -> (what it is,
# what to use on the NPU).
TOOLS = {
    "nvidia-smi": ("NVIDIA's device management tool",
                   "npu-smi (npu-smi info), or torch.npu's device and memory functions"),
    "nvcc": ("the CUDA compiler", "Ascend C and its build tools for kernels"),
}


def lookup(module):
    """(kind, name, what it is, what to use) for a module that is CUDA-only
    ("extension" or "package", the name of the entry it matched), or None."""
    top = module.partition(".")[0]
    package = EXTENSIONS.get(top)
    if package is not None:
        what, use = PACKAGES[package]
        return "extension", top, f"a compiled CUDA extension of {package}", use
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        found = PACKAGES.get(name)
        if found is not None:
            return ("package", name) + found
    return None
