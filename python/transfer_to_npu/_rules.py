"""The rules: which CUDA spellings map to what on the NPU.

``rows(torch)`` derives the rows of the mapping table from the torch that is
running (its ``torch.cuda`` and ``torch.npu`` modules, its op schemas), so a
function torch adds is covered without editing a list.  The C core turns
each row into one table entry and one patch; the table it builds is the
single source of truth that mappings(), --list, the log and the report read.

A row is ``(source, target, kind, mode, owner, name, target_obj, pos, binds,
kws)``: ``owner.name`` is patched; ``pos`` is the index, among the arguments
the patched callable receives (self included for methods), of a positional
device (or backend) argument, -1 for none; ``binds`` says whether the
callable binds like a method when read from a class; ``kws`` names the
keyword arguments that take a device.
"""

import inspect
import types

from . import _C

# Extra device-taking factories that are Python bindings without an op schema.
_FACTORIES_WITHOUT_SCHEMA = ("asarray",)

# Tensor methods that create a tensor on a device given by keyword.
_TENSOR_NEW_METHODS = ("new_tensor", "new_empty", "new_empty_strided", "new_zeros", "new_ones",
                       "new_full")


def _row(source, target, kind, mode, owner, name, target_obj=None, pos=-1, binds=False,
         kws=("device",)):
    return (source, target, kind, mode, owner, name, target_obj, pos, binds, kws)


def _device_position(fn):
    """Position of a positional ``device`` parameter in fn's signature (a
    class's signature leaves self out, as its callers do)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return -1
    for i, p in enumerate(params):
        if p.name == "device" and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            return i
    return -1


def _cuda_module_rows(torch):
    """torch.cuda.X -> torch.npu.X for every public X both modules have."""
    rows = []
    cuda, npu = torch.cuda, torch.npu
    for name in sorted(dir(npu)):
        if name.startswith("_") or not hasattr(cuda, name):
            continue
        target = getattr(npu, name)
        if isinstance(target, types.ModuleType) or not callable(target):
            continue
        kind = "class" if isinstance(target, type) else "function"
        rows.append(_row(f"torch.cuda.{name}", f"torch.npu.{name}", kind, _C.MODE_REDIRECT, cuda,
                         name, target, _device_position(target)))
    return rows


def _tensor_rows(torch):
    T, M = torch.Tensor, torch.nn.Module
    rows = [
        _row("torch.Tensor.cuda", "torch.Tensor.npu", "method", _C.MODE_REDIRECT, T, "cuda",
             T.npu, 1, True),
        _row("torch.Tensor.is_cuda", "torch.Tensor.is_npu", "attribute", _C.MODE_ATTRIBUTE, T,
             "is_cuda", "is_npu"),
        _row("torch.Tensor.to", "torch.Tensor.to", "device_arg", _C.MODE_DEVICE_ARG, T, "to",
             pos=1, binds=True),
        _row("torch.nn.Module.cuda", "torch.nn.Module.npu", "method", _C.MODE_REDIRECT, M,
             "cuda", M.npu, 1, True),
        _row("torch.nn.Module.to", "torch.nn.Module.to", "device_arg", _C.MODE_DEVICE_ARG, M,
             "to", pos=1, binds=True),
    ]
    for name in _TENSOR_NEW_METHODS:
        rows.append(_row(f"torch.Tensor.{name}", f"torch.Tensor.{name}", "device_arg",
                         _C.MODE_DEVICE_ARG, T, name, binds=True))
    return rows


def _takes_device(torch, name):
    try:
        schemas = torch._C._jit_get_schemas_for_operator("aten::" + name)
    except RuntimeError:
        return False
    return any(arg.name == "device" for schema in schemas for arg in schema.arguments)


def _factory_rows(torch):
    """Every torch.* function whose op schema has a ``device`` argument."""
    rows = []
    functions = torch._C._VariableFunctions
    names = [n for n in dir(functions) if not n.startswith("_") and _takes_device(torch, n)]
    for name in names + list(_FACTORIES_WITHOUT_SCHEMA):
        if hasattr(torch, name):
            rows.append(_row(f"torch.{name}", f"torch.{name}", "device_arg",
                             _C.MODE_DEVICE_ARG, torch, name))
    return rows


def _distributed_rows(torch):
    if not torch.distributed.is_available():
        return []
    import torch.distributed.distributed_c10d as c10d

    rows = []
    # The same function object is bound in both modules; both names are
    # patched and share one table entry.
    for owner in (torch.distributed, c10d):
        rows.append(_row("torch.distributed.init_process_group",
                         "torch.distributed.init_process_group(backend='hccl')", "backend",
                         _C.MODE_BACKEND, owner, "init_process_group", pos=0,
                         kws=("device_id",)))
    return rows


def _serialization_rows(torch):
    # torch.load(f, map_location): position 1.  Only device specifications
    # are rewritten; the path in position 0 is never looked at.
    return [_row("torch.load", "torch.load", "device_arg", _C.MODE_DEVICE_ARG, torch, "load",
                 pos=1, kws=("map_location",))]


def rows(torch):
    """The mapping table's rows, for the torch that is running."""
    return ([_row("torch.device", "torch.device", "constructor", _C.MODE_CONSTRUCTOR, torch,
                  "device")]
            + _cuda_module_rows(torch) + _tensor_rows(torch) + _factory_rows(torch)
            + _distributed_rows(torch) + _serialization_rows(torch))
