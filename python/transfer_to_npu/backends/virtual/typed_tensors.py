"""The legacy typed tensor constructors of a device module:
``torch.npu.FloatTensor([1, 2, 3])``, ``torch.npu.LongTensor(2, 3)``.

Each is a class only so that ``isinstance(t, torch.npu.FloatTensor)`` asks
the question legacy code means: is ``t`` a float32 tensor on the npu?
"""

import torch

from . import devices

_DTYPES = {
    "FloatTensor": torch.float32,
    "DoubleTensor": torch.float64,
    "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16,
    "ByteTensor": torch.uint8,
    "CharTensor": torch.int8,
    "ShortTensor": torch.int16,
    "IntTensor": torch.int32,
    "LongTensor": torch.int64,
    "BoolTensor": torch.bool,
}

__all__ = list(_DTYPES)


class _TypedTensorMeta(type):
    def __instancecheck__(cls, obj):
        return (isinstance(obj, torch.Tensor) and obj.dtype == cls.dtype
                and obj.device.type == "npu")

    def __subclasscheck__(cls, sub):
        return sub is cls


def _construct(cls, *args, device=None):
    device = devices.as_device(device)
    if not args:
        return torch.empty(0, dtype=cls.dtype, device=device)
    if len(args) == 1 and isinstance(args[0], torch.Size):
        return torch.empty(args[0], dtype=cls.dtype, device=device)
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return torch.empty(args, dtype=cls.dtype, device=device)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, torch.Tensor):
            return data.to(device=device, dtype=cls.dtype)
        return torch.tensor(data, dtype=cls.dtype, device=device)
    raise TypeError(
        f"torch.npu.{cls.__name__}() takes sizes or one sequence of data, got {args!r}")


def _make(name, dtype):
    return _TypedTensorMeta(name, (), {
        "__new__": _construct,
        "__module__": "torch.npu",
        "__qualname__": name,
        "dtype": dtype,
        "is_npu": True,
        "__doc__": f"A {dtype} tensor on the current npu: {name}(*sizes) or {name}(data).",
    })


for _name, _dtype in _DTYPES.items():
    globals()[_name] = _make(_name, _dtype)
del _name, _dtype
