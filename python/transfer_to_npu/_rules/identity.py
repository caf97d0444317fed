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
such a package is absent or a stand-in that runs there.  Every answer is a
plain function of the device asked about: nothing is swapped in for the
duration of a call, so no exception or second thread can leave a swap
behind.  The answers are here too, where the rows name them.
"""

import os

from .. import _C
from ._introspect import device_position
from ._row import row

#: ``torch.version.cuda``: a CUDA 12 that every version check libraries make
#: (CUDA 11 and later for bfloat16 and TF32) accepts; with NCCL_VERSION, the
#: pair of torch 2.1's CUDA 12 build, the oldest torch this package runs on.
CUDA_VERSION = "12.1"

#: ``torch.cuda.nccl.version()``: NCCL 2.10 and later can reduce bfloat16,
#: which DDP's bf16_compress_hook checks for; HCCL can too.
NCCL_VERSION = (2, 18, 1)

#: The compute capability: Ampere's (A100).
CAPABILITY = (8, 0)

#: ``torch.cuda.get_arch_list()``: the architecture of that capability, so
#: that a check of torch's build against the device's capability passes.
ARCH_LIST = ("sm_80",)

# Properties of a CUDA device that an NPU does not report, as an A100 of
# capability 8.0 has them: arithmetic on them (blocks per multiprocessor,
# bytes of shared memory) then gives what it gives on such a GPU, never a
# division by zero.
_AMPERE = {
    "multi_processor_count": 108,
    "max_threads_per_multi_processor": 2048,
    "warp_size": 32,
    "L2_cache_size": 40 * 1024 * 1024,
    "clock_rate": 1410000,  # kHz
    "memory_clock_rate": 1215000,  # kHz
    "memory_bus_width": 5120,
    "shared_memory_per_block": 48 * 1024,
    "shared_memory_per_multiprocessor": 164 * 1024,
    "regs_per_multiprocessor": 65536,
    "is_multi_gpu_board": 0,
    "pci_bus_id": 0,
    "pci_device_id": 0,
    "pci_domain_id": 0,
}


class CudaDeviceProperties:
    """``torch.cuda.get_device_properties(i)`` on the NPU: the fields of
    CUDA's ``_CudaDeviceProperties``.  What the NPU reports (name, memory,
    cores) is the NPU's; the capability is the policy's; the rest is
    ``_AMPERE``'s."""

    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count",
                 "is_integrated", "uuid", "gcnArchName") + tuple(
                     k for k in _AMPERE if k != "multi_processor_count")

    def __init__(self, npu, index):
        for key, value in _AMPERE.items():
            setattr(self, key, getattr(npu, key, value))
        self.name = npu.name
        self.major, self.minor = CAPABILITY
        self.total_memory = npu.total_memory
        # Ascend's AI cores where the NPU reports no multiprocessor count.
        cores = getattr(npu, "multi_processor_count", None) or getattr(npu, "cube_core_num", None)
        if cores:
            self.multi_processor_count = cores
        self.is_integrated = int(getattr(npu, "is_integrated", 0))
        # CUDA builds give the device's name here too (a ROCm field).
        self.gcnArchName = npu.name
        self.uuid = getattr(npu, "uuid", None) or _uuid(index)

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count}, uuid={self.uuid}, "
                f"L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


def _uuid(index):
    """A device's identity where the NPU gives none: stable for a machine
    and a physical device (what ASCEND_RT_VISIBLE_DEVICES selects), as a
    GPU's is."""
    import socket
    import uuid

    physical = index
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").split(",")
    if 0 <= index < len(visible) and visible[index].strip().isdigit():
        physical = int(visible[index])
    return uuid.uuid5(uuid.NAMESPACE_DNS, f"{socket.gethostname()}.npu{physical}")


def _index(device):
    import torch

    from .. import backends

    current = backends.device_module().current_device
    if device is None:
        return current()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        return current() if device.index is None else device.index
    return int(device)


def get_device_properties(device=None):
    """The NPU's own call checks the device (and raises for a bad one)."""
    from .. import backends

    return CudaDeviceProperties(backends.device_module().get_device_properties(device),
                                _index(device))


def get_device_capability(device=None):
    properties = get_device_properties(device)
    return properties.major, properties.minor


def get_arch_list():
    return list(ARCH_LIST)


def is_tf32_supported():
    """What capability 8.0 brings (HF32 on the NPU)."""
    return True


def nccl_version():
    """``torch._C._nccl_version()``: NCCL_VERSION packed as NCCL's code."""
    major, minor, patch = NCCL_VERSION
    return (major << 32) | (minor << 16) | patch


def nccl_version_suffix():
    return b""


# --- TF32 requests on an NPU with HF32 switches (torch_npu) ------------------
# torch keeps its own flags (reading them answers what was set); the NPU's
# switches follow each setter.  Defaults agree already: matmuls off, and
# convolutions on (cuDNN's allow_tf32, torch_npu's conv.allow_hf32).

def _following(original, switch, allowed):
    """original (torch's setter of a flag), then the NPU's HF32 switch
    ``switch`` ('matmul' or 'conv') set to allowed(value)."""
    def setter(value):
        import torch

        result = original(value)
        getattr(torch.npu, switch).allow_hf32 = allowed(value)
        return result

    setter.__name__ = setter.__qualname__ = getattr(original, "__name__", "setter")
    return setter


def matmul_tf32(original):
    """torch._C._set_cublas_allow_tf32, behind
    ``torch.backends.cuda.matmul.allow_tf32 = ...``."""
    return _following(original, "matmul", bool)


def conv_tf32(original):
    """torch._C._set_cudnn_allow_tf32, behind
    ``torch.backends.cudnn.allow_tf32 = ...`` and
    ``torch.backends.cudnn.flags(allow_tf32=...)``."""
    return _following(original, "conv", bool)


def matmul_precision(original):
    """torch._C._set_float32_matmul_precision, behind
    ``torch.set_float32_matmul_precision``: 'high' and 'medium' allow TF32
    matmuls on CUDA, 'highest' does not."""
    return _following(original, "matmul", lambda precision: precision != "highest")


def fp32_precision(original):
    """torch._C._set_fp32_precision_setter(backend, op, precision), behind
    torch's newer switches (``torch.backends.fp32_precision``,
    ``torch.backends.cuda.matmul.fp32_precision``,
    ``torch.backends.cudnn[.conv].fp32_precision``): a switch set sets
    those below it, and CUDA's matmuls and convolutions then take TF32 when
    theirs reads 'tf32'.  Both NPU switches follow what torch reads."""
    def setter(backend, op, precision):
        import torch

        result = original(backend, op, precision)
        for name in ("matmul", "conv"):
            tf32 = torch._C._get_fp32_precision_getter("cuda", name) == "tf32"
            # Written when it changes only: torch's own setters call this
            # one too (cudnn.flags), after the old switches set theirs.
            if _has_hf32(torch.npu, name) and getattr(torch.npu, name).allow_hf32 != tf32:
                getattr(torch.npu, name).allow_hf32 = tf32
        return result

    setter.__name__ = setter.__qualname__ = getattr(original, "__name__", "setter")
    return setter


def _set_cudnn_allow_tf32(value):
    import torch

    torch._C._set_cudnn_allow_tf32(value)


def cudnn_allow_tf32_property(_value):
    """CudnnModule.allow_tf32: torch's property holds the setter it was
    made with; this one calls it by name, so that setting the attribute
    goes through the mapped setter too.  (Read on the class, the property
    gives its value: it is taken from the class's dict.)"""
    import torch.backends.cudnn as cudnn

    prop = type(cudnn).__dict__["allow_tf32"]
    return type(prop)(prop.getter, _set_cudnn_allow_tf32)


# The torch.cuda functions answered here, with what the table says they
# give (cuda_module and unsupported leave them out).
FUNCTIONS = {
    "get_device_properties": (get_device_properties,
                              f"capability {CAPABILITY[0]}.{CAPABILITY[1]}, the npu's name, "
                              f"memory and cores"),
    "get_device_capability": (get_device_capability, str(CAPABILITY)),
    "get_arch_list": (get_arch_list, str(list(ARCH_LIST))),
    "is_tf32_supported": (is_tf32_supported, "True (HF32 on the NPU)"),
}


# --- the answers as a converted copy writes them (static/convert) ----------
# torch_npu as it is answers none of these questions as a GPU would (its
# get_device_capability() is None): converted code gets the policy's
# answers written in place of the question, or asks torch_npu what it has.

#: Questions answered by a constant: the call replaced by its answer.
ANSWERED_CALLS = {
    "torch.cuda.get_device_capability": repr(CAPABILITY),
    "torch.cuda.get_arch_list": repr(list(ARCH_LIST)),
    "torch.cuda.is_tf32_supported": repr(is_tf32_supported()),
}

#: Values answered by a constant: the name replaced by its answer.
ANSWERED_VALUES = {"torch.version.cuda": repr(CUDA_VERSION)}

#: Questions torch_npu answers itself, asked with no arguments (its own take
#: none: ``is_bf16_supported(including_emulation=...)`` is CUDA's).
WITHOUT_ARGUMENTS = ("torch.cuda.is_bf16_supported",)

#: The fields of ``get_device_properties(i)`` as converted code reads them:
#: torch_npu's own field (its name) where the npu reports it, else the
#: policy's constant, as CudaDeviceProperties answers.
PROPERTY_FIELDS = dict(
    {k: v for k, v in _AMPERE.items() if k != "multi_processor_count"},
    major=CAPABILITY[0], minor=CAPABILITY[1], is_integrated=0,
    name="name", total_memory="total_memory", gcnArchName="name",
    multi_processor_count="cube_core_num")


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
            torch.version, "cuda", f"{__name__}:CUDA_VERSION"),
        row("torch._C._nccl_version", f"NCCL {'.'.join(map(str, NCCL_VERSION))}", "constant",
            _C.MODE_REPLACE, torch._C, "_nccl_version", nccl_version),
        row("torch._C._nccl_version_suffix", "b''", "constant", _C.MODE_REPLACE, torch._C,
            "_nccl_version_suffix", nccl_version_suffix),
    ]
    if _has_hf32(npu, "matmul"):
        out.append(row("torch.backends.cuda.matmul.allow_tf32", "torch.npu.matmul.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_cublas_allow_tf32",
                       f"{__name__}:matmul_tf32()", kws=()))
        out.append(row("torch.set_float32_matmul_precision", "torch.npu.matmul.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_float32_matmul_precision",
                       f"{__name__}:matmul_precision()", kws=()))
    if _has_hf32(npu, "conv"):
        import torch.backends.cudnn as cudnn

        out.append(row("torch.backends.cudnn.allow_tf32", "torch.npu.conv.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_cudnn_allow_tf32",
                       f"{__name__}:conv_tf32()", kws=()))
        out.append(row("torch.backends.cudnn.allow_tf32 (attribute)",
                       "torch.npu.conv.allow_hf32", "property", _C.MODE_REPLACE,
                       type(cudnn), "allow_tf32", f"{__name__}:cudnn_allow_tf32_property()"))
    if (_has_hf32(npu, "matmul") or _has_hf32(npu, "conv")) and all(
            hasattr(torch._C, name) for name in ("_set_fp32_precision_setter",
                                                  "_get_fp32_precision_getter")):
        out.append(row("torch.backends.fp32_precision", "torch.npu.matmul/conv.allow_hf32",
                       "function", _C.MODE_REDIRECT, torch._C, "_set_fp32_precision_setter",
                       f"{__name__}:fp32_precision()", kws=()))
    return out

