"""TorchScript keeps working (the reference migration disables it),
torch.compile writes the migrated factories into its graphs, and on the
virtual NPU torch.compile's default compiler, inductor, gives way to
aot_eager (backends/virtual/compiler.py).

Two things make scripted CUDA code run on the npu:

* the wrappers of torch functions are known to the TorchScript compiler as
  the same builtin ops as the functions they wrap (``torch.ones`` in a
  scripted function compiles to ``aten::ones`` again);
* ``torch.jit.script`` retargets the device constants of what it compiles:
  ``torch.ones(3, device='cuda')`` inside a scripted function becomes a
  ``Device`` constant "cuda", made "npu" here before the code first runs.

Dynamo cannot trace into a wrapper, so each call of one inside a compiled
region would end the graph there (and fail ``fullgraph=True``).  At the
first torch.compile, the wrappers of the factories (``torch.arange(n,
device=...)`` in a forward) are declared to it as functions to call in the
graph, as the functions they wrap are: it records the call, and tracing
it runs the wrapper, which rewrites the device, over fake tensors.

Random ops that a compiled graph recomputes (``torch.utils.checkpoint``
around dropout) are run by torch between a save and a restore of the RNG
state of their device, through the module of that device, known to torch
for CUDA and the CPU only: an npu tensor's device is answered as "cuda"
there, and ``torch.cuda.get_rng_state`` / ``set_rng_state`` are the npu's.

Any other wrapper called in a compiled region is traced as the migrated
call written in Python (``_traceable.py``): ``torch.is_autocast_enabled(
x.device.type)`` or ``torch.cuda.is_available()`` with ``fullgraph=True``.
That call reaches torch's builtin, which dynamo folds into a constant when
its table of such functions names it; the table is made at dynamo's
import, from what torch holds then, so when migrating it names the
wrappers: the builtins they wrap are entered in it too.

Dynamo makes its polyfills of torch's builtins at its import, from what
torch holds then; the one of ``torch._C._nn._parse_to`` (Module.to's
parser, migrated) is made for the builtin the wrapper wraps, so that
dynamo imports after enable() and a compiled ``model.to('cuda')`` runs
eagerly, migrated.
"""

import functools

from .. import _C
from . import _introspect
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
            # The C core's spelling of the target ("npu:1"; "cpu").
            node.s_("value", _C.npu_device_string(node.s("value")))


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


def script(original):
    """torch.jit.script retargeting the device constants of what it
    compiles."""
    import torch

    # torch.jit.script(obj, optimize, _frames_up, ...) resolves the names a
    # scripted class uses in the frame _frames_up above its caller's: one
    # more, past this wrapper, is the caller's own (a class in
    # torch.distributed.optim, scripted as that package is imported).
    frames_up = _positional_index(original, "_frames_up")

    @functools.wraps(original)
    def script(obj, *args, **kwargs):
        if frames_up is not None:
            if len(args) > frames_up:
                args = args[:frames_up] + (args[frames_up] + 1,) + args[frames_up + 1:]
            else:
                kwargs["_frames_up"] = kwargs.get("_frames_up", 0) + 1
        scripted = original(obj, *args, **kwargs)
        _retarget(torch, scripted)
        return scripted

    return script


def _positional_index(fn, name):
    """Where parameter ``name`` of fn falls among the arguments after the
    first, or None when fn has no such parameter."""
    import inspect

    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return names.index(name) - 1 if name in names[1:] else None


# The wrappers declared to dynamo, by id (held, so that no other object
# takes an id while it is here).
_declared = {}


def _declare_to_dynamo(torch):
    """The installed wrappers of torch's factories, which compiled graphs
    may call, declared to dynamo once each."""
    from .. import _table, backends

    sources = _table.factory_sources(backends.installed)
    for wrapper in _C.installed():
        if _declared.get(id(wrapper)) is not wrapper and wrapper.__npu_source__ in sources:
            torch.compiler.allow_in_graph(wrapper)
            _declared[id(wrapper)] = wrapper


def compile_(original):
    """torch.compile declaring the migrated factories to dynamo first and,
    on the virtual NPU, with aot_eager in place of inductor."""
    import torch

    from .. import backends

    virtual = backends.installed == "virtual"

    @functools.wraps(original)
    def compile(model=None, **kwargs):
        _declare_to_dynamo(torch)
        if virtual and kwargs.get("backend") in (None, "inductor"):
            from ..backends.virtual import compiler

            kwargs["backend"] = compiler.aot_eager
        return original(model, **kwargs)

    return compile


def _substitute_in_graph(original_fn, *args, **kwargs):
    """Dynamo's polyfills name torch's builtins as found at its import, a
    migrated one (torch._C._nn._parse_to, which Module.to calls) as its
    wrapper, which it refuses (not a function: importing dynamo would
    fail).  The polyfill goes to the builtin wrapped, and a call of the
    wrapper in a compiled region runs eagerly, migrated."""
    from torch._dynamo import decorators

    return _introspect.original(decorators.substitute_in_graph)(
        _introspect.original(original_fn), *args, **kwargs)


def with_originals(functions):
    """One of dynamo's tables of torch's functions (a dict keyed by
    function), naming also the functions its wrappers wrap."""
    if not isinstance(functions, dict):
        return functions
    out = dict(functions)
    for fn, value in functions.items():
        out.setdefault(_introspect.original(fn), value)
    return out


# Dynamo's tables of the functions it folds into constants while tracing.
_FOLDED = ("constant_fold_functions", "constant_fold_functions_need_guards")


def rng_device(original):
    """rng_prims.get_device answering "cuda" for the npu, whose RNG state
    torch then saves and restores through torch.cuda.  Some torch lines
    answer only for the devices they name (None for npu tensors alone)."""
    import torch

    @functools.wraps(original)
    def get_device(args, kwargs):
        device = original(args, kwargs)
        if device == "npu" or (device is None and any(
                isinstance(a, torch.Tensor) and a.device.type == "npu" for a in args)):
            return "cuda"
        return device

    return get_device


def rows(torch):
    import torch._prims.rng_prims as rng_prims
    import torch.jit

    from .. import backends

    virtual = backends.installed == "virtual"
    source, target = (("torch.compile(backend='inductor')", "torch.compile(backend='aot_eager')")
                      if virtual else
                      ("torch.compile", "torch.compile (migrated factories in the graph)"))
    return [row("torch.jit.script", "torch.jit.script (device constants on the npu)", "function",
                _C.MODE_REDIRECT, torch.jit, "script", f"{__name__}:script()", kws=()),
            row(source, target, "function", _C.MODE_REDIRECT, torch, "compile",
                f"{__name__}:compile_()", kws=()),
            # Torch's own use, not the user's: never counted or logged.
            row("torch._dynamo.decorators.substitute_in_graph",
                "torch._dynamo.decorators.substitute_in_graph (a migrated builtin's original)",
                "function", _C.MODE_HOOK, "torch._dynamo.decorators", "substitute_in_graph",
                _substitute_in_graph, kws=()),
            *[row(f"torch._dynamo.variables.torch.{name}",
                  f"torch._dynamo.variables.torch.{name} (the builtins the wrappers wrap too)",
                  "function", _C.MODE_REPLACE, "torch._dynamo.variables.torch", name,
                  f"{__name__}:with_originals()", kws=())
              for name in _FOLDED],
            row("torch._prims.rng_prims.get_device",
                "npu as cuda (RNG state saved and restored through torch.cuda)", "function",
                _C.MODE_REDIRECT, rng_prims, "get_device", f"{__name__}:rng_device()",
                kws=())]
