"""The names of what the dump records, as msprobe spells them."""

import torch

def uninitialized(name):
    """Whether a function's result is memory not yet written (torch.empty,
    Tensor.new_empty...): no values to describe until a later call fills
    it."""
    return "empty" in name.rpartition(".")[2]


def api_names():
    """id(function) -> its name as msprobe spells it: torch.nn.functional's
    first (F.conv2d is torch.conv2d: "Functional.conv2d"), then torch's;
    wrappers of the migration are named for what they wrap."""
    from .._rules._introspect import original

    names = {}
    for prefix, module in (("Functional", torch.nn.functional), ("Torch", torch)):
        for attr in dir(module):
            if attr.startswith("_"):
                continue
            obj = getattr(module, attr, None)
            if callable(obj) and not isinstance(obj, type):
                for fn in (obj, original(obj)):
                    names.setdefault(id(fn), f"{prefix}.{attr}")
    return names


def fallback_name(func):
    name = getattr(func, "__name__", None) or type(func).__name__
    qualname = getattr(func, "__qualname__", "") or ""
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{name}"
    module = getattr(func, "__module__", "") or ""
    if module.startswith("torch.nn.functional"):
        return f"Functional.{name}"
    if module.startswith("torch.distributed"):
        return f"Distributed.{name}"
    return f"Torch.{name}"
