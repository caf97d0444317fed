"""Tensor and Module methods: .cuda(), .is_cuda, .to(), .new_*(),
.pin_memory(device), .type('torch.cuda.FloatTensor'), Module.to_empty();
torch.set_default_device()."""

import functools

from .. import _C
from ._row import row

# Tensor methods that create a tensor on a device given by keyword.
TENSOR_NEW_METHODS = ("new_tensor", "new_empty", "new_empty_strided", "new_zeros", "new_ones",
                      "new_full")


def rows(torch):
    T, M = torch.Tensor, torch.nn.Module
    out = [
        row("torch.Tensor.cuda", "torch.Tensor.npu", "method", _C.MODE_REDIRECT, T, "cuda",
            T.npu, 1, True),
        row("torch.Tensor.is_cuda", "torch.Tensor.is_npu", "attribute", _C.MODE_ATTRIBUTE, T,
            "is_cuda", "is_npu"),
        row("torch.Tensor.to", "torch.Tensor.to", "device_arg", _C.MODE_DEVICE_ARG, T, "to",
            pos=1, binds=True),
        row("torch.nn.Module.cuda", "torch.nn.Module.npu", "method", _C.MODE_REDIRECT, M,
            "cuda", M.npu, 1, True),
        row("torch.nn.Module.to", "torch.nn.Module.to", "device_arg", _C.MODE_DEVICE_ARG, M,
            "to", pos=1, binds=True),
    ]
    for name in TENSOR_NEW_METHODS:
        out.append(row(f"torch.Tensor.{name}", f"torch.Tensor.{name}", "device_arg",
                       _C.MODE_DEVICE_ARG, T, name, binds=True))
    out += [
        row("torch.Tensor.pin_memory", "torch.Tensor.pin_memory", "device_arg",
            _C.MODE_DEVICE_ARG, T, "pin_memory", pos=1, binds=True),
        row("torch.nn.Module.to_empty", "torch.nn.Module.to_empty", "device_arg",
            _C.MODE_DEVICE_ARG, M, "to_empty", binds=True),
        row("torch.set_default_device", "torch.set_default_device", "device_arg",
            _C.MODE_DEVICE_ARG, torch, "set_default_device", pos=0),
        row("torch.Tensor.type('torch.cuda.<T>Tensor')", "torch.Tensor.to(device='npu', dtype)",
            "method", _C.MODE_REDIRECT, T, "type", _legacy_type(torch, T.type), binds=True,
            kws=()),
    ]
    return out


def _legacy_type(torch, original):
    """Tensor.type() with the legacy CUDA type names ('torch.cuda.FloatTensor',
    or the class torch.cuda.FloatTensor) meaning that dtype on the npu."""
    dtypes = {"torch.cuda.FloatTensor": torch.float32, "torch.cuda.DoubleTensor": torch.float64,
              "torch.cuda.HalfTensor": torch.float16, "torch.cuda.BFloat16Tensor": torch.bfloat16,
              "torch.cuda.ByteTensor": torch.uint8, "torch.cuda.CharTensor": torch.int8,
              "torch.cuda.ShortTensor": torch.int16, "torch.cuda.IntTensor": torch.int32,
              "torch.cuda.LongTensor": torch.int64, "torch.cuda.BoolTensor": torch.bool}

    @functools.wraps(original)
    def type(self, dtype=None, non_blocking=False, **kwargs):
        name = dtype if isinstance(dtype, str) else None
        if name is None and dtype is not None and hasattr(dtype, "__npu_source__"):
            name = dtype.__npu_source__  # torch.cuda.FloatTensor, the class
        if name in dtypes:
            return self.to(device="npu", dtype=dtypes[name], non_blocking=non_blocking)
        if dtype is None:
            result = original(self)
            if self.device.type == "npu":
                # The CUDA spelling of the type, as CUDA code compares it.
                for cuda_name, dt in dtypes.items():
                    if dt == self.dtype:
                        return cuda_name
            return result
        return original(self, dtype, non_blocking, **kwargs)

    return type
