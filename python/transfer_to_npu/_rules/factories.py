"""The device argument of torch.* functions, found in torch's op schemas."""

from .. import _C
from ._row import row

# Device-taking factories that are Python bindings without an op schema.
WITHOUT_SCHEMA = ("asarray",)


def _takes_device(torch, name):
    try:
        schemas = torch._C._jit_get_schemas_for_operator("aten::" + name)
    except RuntimeError:
        return False
    return any(arg.name == "device" for schema in schemas for arg in schema.arguments)


def rows(torch):
    """Every torch.* function whose op schema has a ``device`` argument."""
    out = []
    functions = torch._C._VariableFunctions
    names = [n for n in dir(functions) if not n.startswith("_") and _takes_device(torch, n)]
    for name in names + list(WITHOUT_SCHEMA):
        if hasattr(torch, name):
            out.append(row(f"torch.{name}", f"torch.{name}", "device_arg", _C.MODE_DEVICE_ARG,
                           torch, name))
    return out
