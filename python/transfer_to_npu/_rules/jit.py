"""TorchScript keeps working (the reference migration disables it), and
on the virtual NPU torch.compile's default compiler, inductor, gives way to
aot_eager (backends/virtual/compiler.py).

Two things make scripted CUDA code run on the npu:

* the wrappers of torch functions are known to the TorchScript compiler as
  the same builtin ops as the functions they wrap (``torch.ones`` in a
  scripted function compiles to ``aten::ones`` again);
* ``torch.jit.script`` retargets the device constants of what it compiles:
  ``torch.ones(3, device='cuda')`` inside a scripted function becomes a
  ``Device`` constant "cuda", made "npu" here before the code first runs.
"""

import functools

from .. import _C
from ._row import row


def _is_cuda_device_constant(node):
    if node.kind() != "prim::Constant" or not node.hasAttribute("value"):
        return False
    if node.kindOf("value") != "s" or str(node.output().type()) != "Device":
        return False
    value = node.s("value")
    return value == "cuda" or value.startswith("cuda:")


def _retarget_nodes(nodes):
    for node in nodes:
        for block in node.blocks():
            _retarget_nodes(block.nodes())
        if _is_cuda_device_constant(node):
            node.s_("value", "npu" + node.s("value")[len("cuda"):])


def _retarget(torch, scripted):
    """Rewrite the CUDA device constants of a ScriptFunction or
    ScriptModule (all its methods and submodules)."""
    if isinstance(scripted, torch.jit.ScriptFunction):
        _retarget_nodes(scripted.graph.nodes())
    elif isinstance(scripted, torch.jit.ScriptModule):
        for module in scripted.modules():
            c = module._c
            for method in c._method_names():
                _retarget_nodes(c._get_method(method).graph.nodes())


def _script(torch, original):
    @functools.wraps(original)
    def script(obj, *args, **kwargs):
        scripted = original(obj, *args, **kwargs)
        _retarget(torch, scripted)
        return scripted

    return script


def _compile(original):
    @functools.wraps(original)
    def compile(model=None, **kwargs):
        if kwargs.get("backend") in (None, "inductor"):
            from ..backends.virtual import compiler

            kwargs["backend"] = compiler.aot_eager
        return original(model, **kwargs)

    return compile


def rows(torch):
    import torch.jit

    from .. import backends

    out = [row("torch.jit.script", "torch.jit.script (device constants on the npu)", "function",
               _C.MODE_REDIRECT, torch.jit, "script", _script(torch, torch.jit.script), kws=())]
    if backends.installed == "virtual":
        out.append(row("torch.compile(backend='inductor')", "torch.compile(backend='aot_eager')",
                       "function", _C.MODE_REDIRECT, torch, "compile", _compile(torch.compile),
                       kws=()))
    return out


def register_builtins(torch, installed):
    """Make the TorchScript compiler see each installed wrapper as the
    builtin op its original is."""
    import torch.jit._builtins as builtins

    table = builtins._get_builtin_table()
    for wrapper in installed:
        original = getattr(wrapper, "__wrapped__", None)
        op = table.get(id(original)) if original is not None else None
        if op is not None and id(wrapper) not in table:
            # The list keeps the wrapper alive, so its id stays its own.
            builtins._builtin_ops.append((wrapper, op))
            table[id(wrapper)] = op
