"""Tensor and Module methods: .cuda(), .is_cuda, .to(), .new_*(),
.pin_memory(device), .type('torch.cuda.FloatTensor'), Module.to_empty();
torch.set_default_device(), torch.set_default_tensor_type('torch.cuda.FloatTensor')."""

import functools

from .. import _C
from ._row import row

LEGACY_TYPE = "torch.Tensor.type('torch.cuda.<T>Tensor')"
LEGACY_DEFAULT_TYPE = "torch.set_default_tensor_type('torch.cuda.<T>Tensor')"

# Tensor methods that create a tensor on a device given by keyword.
TENSOR_NEW_METHODS = ("new_tensor", "new_empty", "new_empty_strided", "new_zeros", "new_ones",
                      "new_full")


def _device_methods():
    """Tensor.cuda(), Tensor.is_cuda and Module.cuda()'s counterparts on the
    target: the npu's (made by its registration), or the host's."""
    from .. import backends

    if backends.target_type() == "npu":
        return {"tensor": ("torch.Tensor.npu", "torch:Tensor.npu"), "is": "is_npu",
                "module": ("torch.nn.Module.npu", "torch.nn:Module.npu")}
    host = f"{backends.__name__}.cpu"
    return {"tensor": ("torch.Tensor.cpu", f"{host}:tensor_cuda"), "is": "is_cpu",
            "module": ("torch.nn.Module.cpu", f"{host}:module_cuda")}


def rows(torch):
    T, M = torch.Tensor, torch.nn.Module
    target = _device_methods()
    out = [
        row("torch.Tensor.cuda", target["tensor"][0], "method", _C.MODE_REDIRECT, T, "cuda",
            target["tensor"][1], 1, True),
        row("torch.Tensor.is_cuda", f"torch.Tensor.{target['is']}", "attribute",
            _C.MODE_ATTRIBUTE, T, "is_cuda", target["is"]),
        row("torch.Tensor.to", "torch.Tensor.to", "device_arg", _C.MODE_DEVICE_ARG, T, "to",
            pos=1, binds=True, device_objects=True, current_index=True),
        row("torch.nn.Module.cuda", target["module"][0], "method", _C.MODE_REDIRECT, M,
            "cuda", target["module"][1], 1, True),
        # Module.to (and overrides that keep the device, as Lightning's
        # does) hand their arguments to this builtin, looked up at every
        # call: patched there, Module.to stays torch's Python function, run
        # in its caller's frame, and any other reader of the device gets
        # the npu.
        row("torch.nn.Module.to", "torch.nn.Module.to", "device_arg", _C.MODE_DEVICE_ARG,
            torch._C._nn, "_parse_to", pos=0, device_objects=True, current_index=True),
    ]
    for name in TENSOR_NEW_METHODS:
        out.append(row(f"torch.Tensor.{name}", f"torch.Tensor.{name}", "device_arg",
                       _C.MODE_DEVICE_ARG, T, name, binds=True, device_objects=True,
                       current_index=True))
    out += [
        row("torch.Tensor.pin_memory", "torch.Tensor.pin_memory", "device_arg",
            _C.MODE_DEVICE_ARG, T, "pin_memory", pos=1, binds=True, device_objects=True),
        row("torch.nn.Module.to_empty", "torch.nn.Module.to_empty", "device_arg",
            _C.MODE_DEVICE_ARG, M, "to_empty", binds=True, current_index=True),
        row("torch.set_default_device", "torch.set_default_device", "device_arg",
            _C.MODE_DEVICE_ARG, torch, "set_default_device", pos=0),
        # Their functions count only the calls with a CUDA tensor type
        # (_C.hit): x.type(torch.int64) is no migration.
        row(LEGACY_TYPE, "torch.Tensor.to(device='npu', dtype)",
            "method", _C.MODE_HOOK, T, "type", f"{__name__}:legacy_type()", binds=True,
            kws=()),
        row(LEGACY_DEFAULT_TYPE,
            "torch.set_default_dtype(dtype); torch.set_default_device('npu')", "function",
            _C.MODE_HOOK, torch, "set_default_tensor_type",
            f"{__name__}:legacy_default_type()", kws=()),
    ]
    return out


def _legacy_dtypes(torch):
    """The legacy CUDA tensor type names and their dtypes."""
    return {f"torch.cuda.{name}": dtype for name, dtype in (
        ("FloatTensor", torch.float32), ("DoubleTensor", torch.float64),
        ("HalfTensor", torch.float16), ("BFloat16Tensor", torch.bfloat16),
        ("ByteTensor", torch.uint8), ("CharTensor", torch.int8),
        ("ShortTensor", torch.int16), ("IntTensor", torch.int32),
        ("LongTensor", torch.int64), ("BoolTensor", torch.bool))}


def _legacy_name(t):
    """'torch.cuda.FloatTensor' for that name or for the class it names (which
    the migration has made torch.npu's), else None."""
    if isinstance(t, str):
        return t
    if t is not None and hasattr(t, "__npu_source__"):
        return t.__npu_source__
    if isinstance(t, type) and getattr(t, "__module__", None) == "torch.npu":
        return f"torch.cuda.{t.__name__}"  # torch.npu.FloatTensor, written for the npu
    return None


def _spelled_cuda(t):
    """Whether a legacy type given is CUDA's spelling (not torch.npu's
    class of the same name)."""
    return isinstance(t, str) or hasattr(t, "__npu_source__")


def legacy_default_type(original):
    """torch.set_default_tensor_type() with a CUDA type: that dtype by
    default, on the npu by default, as torch itself advises in place of the
    deprecated call.  Any other type goes to torch, and undoes the npu
    default this function set."""
    import torch

    from .. import backends

    dtypes = _legacy_dtypes(torch)
    state = {"set_device": False}
    device = backends.target_type()

    @functools.wraps(original)
    def set_default_tensor_type(t):
        dtype = dtypes.get(_legacy_name(t))
        if dtype is None:
            original(t)
            if state["set_device"]:
                state["set_device"] = False
                torch.set_default_device(None)
            return
        if not dtype.is_floating_point:
            raise TypeError(
                f"set_default_tensor_type(t): t={t!r} is not a floating-point type; only "
                f"floating-point types are supported as the default type")
        if _spelled_cuda(t):
            _C.hit(LEGACY_DEFAULT_TYPE)
        torch.set_default_dtype(dtype)
        torch.set_default_device(device)
        state["set_device"] = True

    return set_default_tensor_type


def legacy_type(original):
    """Tensor.type() with the legacy CUDA type names ('torch.cuda.FloatTensor',
    or the class torch.cuda.FloatTensor) meaning that dtype on the npu."""
    import torch

    from .. import backends

    dtypes = _legacy_dtypes(torch)
    device = backends.target_type()

    @functools.wraps(original)
    def type(self, dtype=None, non_blocking=False, **kwargs):
        name = _legacy_name(dtype)
        if name in dtypes:
            if _spelled_cuda(dtype):
                _C.hit(LEGACY_TYPE)
            return self.to(device=device, dtype=dtypes[name], non_blocking=non_blocking)
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
