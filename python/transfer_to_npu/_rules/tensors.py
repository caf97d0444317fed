"""Tensor and Module methods: .cuda(), .is_cuda, .to(), .new_*()."""

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
    return out
