"""Every API the table maps reaches a counterpart that takes the calls the
CUDA original takes: the same parameter names at the same places, the same
kinds (positional-only, keyword-only, ``*args``, ``**kwargs``), the same
defaults where a default is seen.  ``torch.cuda.stream(stream=s)`` reaches
``torch.npu.stream``, which must take ``stream=``.

Checked on the torch that runs (each torch line of CI), for the virtual
NPU's table and the cpu backend's (a compare's reference run).  Where a
builtin states no parameters, they are read from torch's stubs
(``torch/_C/__init__.pyi``) as positions only: whether it takes them by
keyword is not told there."""
import ast
import functools
import importlib
import inspect
import os
import sys

import pytest
import torch

from transfer_to_npu import _C, _rules, _table, backends
from transfer_to_npu._rules import call_shapes

# Rows whose function is called with the arguments as written.
_CALLED = (_C.MODE_REDIRECT, _C.MODE_HOOK, _C.MODE_UNSUPPORTED, _C.MODE_REPLACE)

# Sources whose parameters Python cannot read and torch's stubs do not
# state, with what is known of them.
UNREADABLE = {
    **{f"torch.cuda.{t}Tensor": "the legacy tensor types: C constructors, which take "
                                "(*sizes or data, device=None) as their targets do"
       for t in ("BFloat16", "Bool", "Byte", "Char", "Double", "Float", "Half", "Int", "Long",
                 "Short")},
}

# (source, parameter) -> why the target differs there by design; the call
# is still taken.  (source, None): a method the target lacks.
INTENDED = {
    ("torch.cuda.Event.ipc_handle", None): "CUDA IPC: an event shared with another process",
    ("torch.cuda.Event.from_ipc_handle", None): "CUDA IPC: an event shared with another process",
}


def _owner(owner):
    """What a row patches, or None for a library's not imported here (its
    tests import it: in the suite's process it is checked too)."""
    if not isinstance(owner, str):
        return owner
    module, _, path = owner.partition(":")
    if module.partition(".")[0] not in ("torch", "transfer_to_npu") and module not in sys.modules:
        return None
    obj = importlib.import_module(module)
    for part in path.split(".") if path else ():
        obj = getattr(obj, part)
    return obj


def _stubs():
    """{name: [inspect.Signature]} of torch._C's functions, from its stubs,
    every parameter positional-only (an overload each)."""
    path = os.path.join(os.path.dirname(torch.__file__), "_C", "__init__.pyi")
    if not os.path.exists(path):
        return {}
    out = {}
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args
            params = [inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_ONLY)
                      for a in args.posonlyargs + args.args]
            for i, d in enumerate(args.defaults, len(params) - len(args.defaults)):
                params[i] = params[i].replace(default=call_shapes.Text(ast.unparse(d)))
            out.setdefault(node.name, []).append(inspect.Signature(params))
    return out


def _read(obj, stubs):
    """[inspect.Signature] of what obj takes: its own, or its stubs' (a
    builtin's overloads; a partial of one, less what it binds)."""
    found = call_shapes.signature(obj)
    if found is not None:
        return [found]
    bound = 0
    if isinstance(obj, functools.partial) and not obj.keywords:
        obj, bound = obj.func, len(obj.args)
    if getattr(obj, "__module__", None) not in ("torch._C", "torch"):
        return []
    return [sig.replace(parameters=list(sig.parameters.values())[bound:])
            for sig in stubs.get(getattr(obj, "__name__", None), [])
            if len(sig.parameters) >= bound]


def _pairs(rows):
    """(name, the CUDA original, its counterpart) of every row whose
    original is called with the call's arguments, and of the public methods
    of a class it maps (its counterpart None when it lacks one)."""
    for r in rows:
        source, mode, owner, name, target = r[0], r[3], r[4], r[5], r[6]
        if mode not in _CALLED or (mode == _C.MODE_UNSUPPORTED and target is None):
            continue
        owner = _owner(owner)
        if owner is None:
            continue
        original = call_shapes.original(inspect.getattr_static(owner, name))
        if isinstance(target, str):
            target = _table.resolve(target, original)
        if not callable(original) or not callable(target) or isinstance(target, type(os)):
            continue
        yield source, original, target
        if isinstance(original, type) and isinstance(target, type) and source not in UNREADABLE:
            for method in _methods(original):
                yield f"{source}.{method}", getattr(original, method), getattr(target, method,
                                                                                  None)


def _methods(cls):
    """The public methods torch's Python code defines for a class."""
    found = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch"):
            found.update(name for name, attr in vars(klass).items() if not name.startswith("_")
                         and (inspect.isfunction(attr) or isinstance(attr, (classmethod,
                                                                            staticmethod))))
    return sorted(found)


def _mismatches(rows, device):
    """({name: [what differs]}, {sources whose parameters are unknown})."""
    stubs = _stubs()
    found, unread = {}, set()
    for source, original, target in _pairs(rows):
        if target is None:
            if (source, None) not in INTENDED:
                found[source] = ["no counterpart"]
            continue
        mine, theirs = _read(original, stubs), _read(target, stubs)
        if not mine:
            unread.add(source)
            continue
        if not theirs and "." in source[len("torch.cuda."):]:
            continue  # a method of torch's own C class: nothing to read it by
        assert theirs, f"{source}: its target {target!r} states no parameters"
        for shape in mine:
            options = [[(p, what) for p, what in call_shapes.differences(shape, t, device)
                        if (source, p) not in INTENDED] for t in theirs]
            best = min(options, key=len)
            if best:
                found.setdefault(source, []).extend(f"{p}: {what}" for p, what in best)
    return found, unread


def _derived(monkeypatch, backend):
    """The table's rows as the backend gets them (derived, not installed)."""
    monkeypatch.setattr(backends, "installed", backend)
    return _rules.derive(torch)[0]


@pytest.mark.parametrize("backend", ["virtual", "cpu"])
def test_every_target_takes_the_calls_cuda_takes(migrated, monkeypatch, backend):
    rows = _derived(monkeypatch, backend)
    found, unread = _mismatches(rows, backends.TARGETS[backend][0])
    assert found == {}
    assert unread == set(UNREADABLE) & {r[0] for r in rows}


def test_streams_by_keyword(migrated):
    """As a prefetcher writes it (timm's): the stream named by keyword."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(stream=s):
        assert torch.cuda.current_stream() == s
    assert torch.cuda.current_stream() != s
    with torch.cuda.StreamContext(stream=s):
        assert torch.cuda.current_stream() == s
    torch.cuda.set_stream(stream=s)
    assert torch.cuda.current_stream() == s
    torch.cuda.set_stream(torch.cuda.default_stream())
    assert torch.cuda.Event(enable_timing=True, external=False).query()
