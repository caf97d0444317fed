"""What CUDA code asks about the device, answered for the NPU.

Code written for GPUs asks which CUDA it runs on before it picks a path:
``torch.version.cuda``, the compute capability, ``get_device_properties``,
the NCCL version, the TF32 switches.  A CUDA-less answer (None, ``(0, 0)``,
a missing ``torch._C._nccl_version``) sends it down a path that fails or is
slower than it needs to be: ``TrainingArguments(tf32=True)`` refuses, DDP's
``bf16_compress_hook`` is refused, a version check raises a TypeError.

One policy answers every question, on both NPUs: the device presents itself
as an Ampere-class GPU, compute capability 8.0.  What CUDA code gates on 8.0
the NPU has: bfloat16, and reduced-precision float32 matmuls (TF32 on the
GPU, HF32 on Ascend, to which the TF32 switches are mapped when the NPU has
them).  What code gates on 8.9 and later (FP8 matmuls, FlashAttention 3,
Hopper's features) is refused, as it would fail on the NPU.  A capability
brings in no CUDA kernel by itself: libraries that have them (flash_attn,
bitsandbytes, apex) first check that their package imports, and on an NPU
such a package is absent or a stand-in that runs there.  Every answer is a plain function of the device
asked about: nothing is swapped in for the duration of a call, so no
exception or second thread can leave a swap behind.
"""

from .. import _C, _identity
from .._identity import ARCH_LIST, CAPABILITY, CUDA_VERSION, NCCL_VERSION
from ._introspect import device_position
from ._row import row

_HERE = _identity.__name__

# The torch.cuda functions answered here, with what the table says they
# give (cuda_module and unsupported leave them out).
FUNCTIONS = {
    "get_device_properties": (_identity.get_device_properties,
                              f"capability {CAPABILITY[0]}.{CAPABILITY[1]}, the npu's name, "
                              f"memory and cores"),
    "get_device_capability": (_identity.get_device_capability, str(CAPABILITY)),
    "get_arch_list": (_identity.get_arch_list, str(list(ARCH_LIST))),
    "is_tf32_supported": (_identity.is_tf32_supported, "True (HF32 on the NPU)"),
}


def _has_hf32(npu, name):
    switch = getattr(npu, name, None)
    return switch is not None and isinstance(getattr(switch, "allow_hf32", None), bool)


def rows(torch, npu=None):
    npu = torch.npu if npu is None else npu
    out = []
    for name, (fn, answer) in FUNCTIONS.items():
        if hasattr(torch.cuda, name):
            out.append(row(f"torch.cuda.{name}", answer, "function", _C.MODE_REDIRECT,
                           torch.cuda, name, fn, device_position(fn)))
    out += [
        row("torch.version.cuda", repr(CUDA_VERSION), "constant", _C.MODE_REPLACE,
            torch.version, "cuda", f"{_HERE}:CUDA_VERSION"),
        row("torch._C._nccl_version", f"NCCL {'.'.join(map(str, NCCL_VERSION))}", "constant",
            _C.MODE_REPLACE, torch._C, "_nccl_version", _identity.nccl_version),
        row("torch._C._nccl_version_suffix", "b''", "constant", _C.MODE_REPLACE, torch._C,
            "_nccl_version_suffix", _identity.nccl_version_suffix),
    ]
    if _has_hf32(npu, "matmul"):
        out.append(row("torch.backends.cuda.matmul.allow_tf32", "torch.npu.matmul.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_cublas_allow_tf32",
                       f"{_HERE}:matmul_tf32()", kws=()))
        out.append(row("torch.set_float32_matmul_precision", "torch.npu.matmul.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_float32_matmul_precision",
                       f"{_HERE}:matmul_precision()", kws=()))
    if _has_hf32(npu, "conv"):
        import torch.backends.cudnn as cudnn

        out.append(row("torch.backends.cudnn.allow_tf32", "torch.npu.conv.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_cudnn_allow_tf32",
                       f"{_HERE}:conv_tf32()", kws=()))
        out.append(row("torch.backends.cudnn.allow_tf32 (attribute)",
                       "torch.npu.conv.allow_hf32", "property", _C.MODE_REPLACE,
                       type(cudnn), "allow_tf32", f"{_HERE}:cudnn_allow_tf32_property()"))
    return out

