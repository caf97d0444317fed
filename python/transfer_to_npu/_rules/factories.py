"""The device argument of torch.*, torch.fft.* and torch.signal.windows.*
functions, found in torch's op schemas and function signatures."""

import inspect

from .. import _C
from ._introspect import op_takes_device, ops_taking_device, takes_device
from ._row import row

# Device-taking factories that are Python bindings without an op schema.
WITHOUT_SCHEMA = ("asarray",)


def _module_rows(module, prefix, schema_prefix, torch):
    """Rows for the public functions of a module that take a device: a
    builtin by its op schema (aten::<schema_prefix><name>), a Python
    function by its signature."""
    out = []
    for name in sorted(dir(module)):
        fn = getattr(module, name)
        if hasattr(fn, "__npu_source__"):
            fn = fn.__wrapped__  # already migrated: judge the original
        if name.startswith("_") or not callable(fn) or isinstance(fn, type):
            continue
        builtin = inspect.isbuiltin(fn)
        if builtin:
            takes = op_takes_device(torch, schema_prefix + name)
        else:
            takes = inspect.isfunction(fn) and takes_device(fn)
        if takes:
            out.append(row(f"{prefix}.{name}", f"{prefix}.{name}", "device_arg",
                           _C.MODE_DEVICE_ARG, module, name, device_objects=builtin))
    return out


def rows(torch):
    """Every torch.* function whose op schema has a ``device`` argument, and
    those of torch.fft and torch.signal.windows."""
    out = []
    functions = torch._C._VariableFunctions
    names = ops_taking_device(torch, [n for n in dir(functions) if not n.startswith("_")])
    for name in names + list(WITHOUT_SCHEMA):
        if hasattr(torch, name):
            # Builtins whose device arguments torch parses as a Device (every
            # "device" argument of an op schema is typed Device).
            out.append(row(f"torch.{name}", f"torch.{name}", "device_arg", _C.MODE_DEVICE_ARG,
                           torch, name, device_objects=inspect.isbuiltin(getattr(torch, name))))
    out += _module_rows(torch.fft, "torch.fft", "fft_", torch)
    out += _module_rows(torch.signal.windows, "torch.signal.windows", "", torch)
    out += _generator_rows(torch)
    return out


def _generator_rows(torch):
    """torch.Generator(device='cuda'): torch.Generator is a C type whose
    class is made by a Python metaclass, so its construction is the
    metaclass's __call__(cls, device): wrapped there, the class itself stays
    torch's (isinstance, subclasses)."""
    meta = type(torch.Generator)
    if meta is type:
        return []
    return [row("torch.Generator", "torch.Generator", "device_arg", _C.MODE_DEVICE_ARG, meta,
                "__call__", pos=1, binds=True)]
