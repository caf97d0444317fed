"""What the call-shape tests share (tests/test_call_shapes.py on the
virtual NPU's and the cpu backend's tables, tests/test_torch_lines.py on
the table torch_npu's release for the running torch gets): each row of a
table with its CUDA original and what a call of it reaches, and where the
latter takes CUDA's calls otherwise."""
import ast
import functools
import importlib
import inspect
import os
import sys

import torch

from transfer_to_npu import _C, _table
from transfer_to_npu._rules import call_shapes

# Rows whose function is called with the call's arguments.
_CALLED = (_C.MODE_REDIRECT, _C.MODE_HOOK, _C.MODE_UNSUPPORTED, _C.MODE_REPLACE)


def _owner(owner):
    """What a row patches, or None for a module not imported here (a
    library's: in the suite's process its tests import it, and it is
    checked too)."""
    if not isinstance(owner, str):
        return owner
    module, _, path = owner.partition(":")
    if module.partition(".")[0] not in ("torch", "transfer_to_npu") and module not in sys.modules:
        return None
    obj = importlib.import_module(module)
    for part in path.split(".") if path else ():
        obj = getattr(obj, part)
    return obj


@functools.lru_cache(maxsize=None)
def stubs():
    """{name: [inspect.Signature]} of torch._C's functions, from torch's
    stubs (torch/_C/__init__.pyi), an overload each, every parameter
    positional-only: whether a builtin takes one by keyword is not told
    there."""
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


def read(obj):
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
            for sig in stubs().get(getattr(obj, "__name__", None), [])
            if len(sig.parameters) >= bound]


def methods(cls):
    """The public methods torch's Python code defines for a class."""
    found = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("torch"):
            found.update(name for name, attr in vars(klass).items() if not name.startswith("_")
                         and (inspect.isfunction(attr) or isinstance(attr, (classmethod,
                                                                            staticmethod))))
    return sorted(found)


def method(cls, name):
    """What a call of cls's method takes, self left out (None: it has none
    of that name, or states nothing)."""
    try:
        attr = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    if isinstance(attr, (staticmethod, classmethod)):
        return call_shapes.signature(getattr(cls, name))
    found = call_shapes.signature(attr)
    if found is None or not (inspect.isfunction(call_shapes.original(attr))
                             or inspect.ismethoddescriptor(attr)):
        return found  # a stand-in's: stated without self
    return found.replace(parameters=list(found.parameters.values())[1:])


def pairs(rows, target_of=None, skip=()):
    """(name, the CUDA original, what a call of it reaches, whether the row
    adapts the call to it) of every row whose original is called with the
    call's arguments, and of the public methods of a class it maps (the
    counterpart None where it lacks one).  ``target_of(row)``: what a row's
    target is in a release's surface (only those rows are checked then)."""
    for r in rows:
        source, mode, owner, name, target = r[0], r[3], r[4], r[5], r[6]
        if mode not in _CALLED or (mode == _C.MODE_UNSUPPORTED and target is None):
            continue
        found = target_of(r) if target_of is not None else None
        if target_of is not None and found is None:
            continue  # not the release's: this process's own, checked where it runs
        owner = _owner(owner)
        if owner is None:
            continue
        try:
            original = call_shapes.original(inspect.getattr_static(owner, name))
        except AttributeError:
            continue  # what the table adds (torch._C._nccl_version on a build without it)
        # A rule's class made around torch_npu's counterpart takes the call,
        # and its methods' calls, as Adapted does (profiler.npu_profile).
        made_here = found is not None and isinstance(target, str) and target.endswith("()")
        adapted = isinstance(target, call_shapes.Adapted) or made_here
        if found is not None:
            target = found
        elif adapted:
            target = target._made()[0]
        elif isinstance(target, str):
            target = _table.resolve(target, original)
        if not callable(original) or not callable(target) or isinstance(target, type(os)) \
                or target is original:
            continue
        yield source, original, target, adapted
        if isinstance(original, type) and isinstance(target, type) and source not in skip and \
                (target_of is None or "__signature__" in vars(target)):  # a class read whole
            for m in methods(original):
                if hasattr(target, m) or target_of is None:  # a surface's class may inherit it
                    yield (f"{source}.{m}", (original, m),
                           (target, m) if hasattr(target, m) else None, made_here)


def mismatches(rows, device, intended, target_of=None, skip=()):
    """({name: [[parameter, what differs]]}, {sources whose parameters
    cannot be read}).
    ``intended``: {(name, parameter): why} of what differs by design ((name,
    None): a method the target lacks).  Where the row adapts the call
    (call_shapes.Keywords), a parameter is taken when it reaches one of the
    target's, or when it is CUDA_ONLY; one refused unless it is its default
    must be intended."""
    found, unread = {}, set()
    for source, original, target, adapted in pairs(rows, target_of, skip):
        if target is None:
            if (source, None) not in intended:
                found[source] = [[None, "no counterpart"]]
            continue
        if isinstance(original, tuple):
            mine, theirs = [method(*original)], [method(*target)]
            if mine == [None] or theirs == [None]:
                continue  # a method of torch's C classes: nothing to read it by
        else:
            mine, theirs = read(original), read(target)
        if not mine:
            unread.add(source)
            continue
        assert theirs, f"{source}: its target {target!r} states no parameters"
        if adapted:
            what = _not_taken(source, mine[0], theirs[0])
        else:
            what = min(([(p, w) for p, w in call_shapes.differences(shape, t, device)]
                        for shape in mine for t in theirs), key=len)
        what = [[p, w] for p, w in what if (source, p) not in intended]
        if what:
            found[source] = what
    return found, unread


def _not_taken(source, original, target):
    """[(parameter, why)] of CUDA's calls an adapted row does not take: a
    parameter left with no counterpart that is not CUDA_ONLY (refused
    unless it is its default), and what the target requires that CUDA's
    calls may not give."""
    keywords = call_shapes.Keywords(source, original, target, source)
    assert keywords.adapts, source
    out = [(p, "refused unless it is its default: no counterpart")
           for p, to in keywords.names.items()
           if to is None and p not in call_shapes.CUDA_ONLY.get(source, {})]
    return out + [(p, w) for p, w in call_shapes.differences(
        call_shapes.signature(original), call_shapes.signature(target))
        if w == "required here, not in the source"]
