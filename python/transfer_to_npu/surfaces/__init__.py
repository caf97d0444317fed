"""torch_npu's API surface per release line, as data.

Each ``torch_npu-<line>.json`` beside this module holds the names the
mapping table depends on (``torch_npu.npu`` and its submodules,
``torch_npu.profiler``, ``torch_npu.distributed``), read from the line's
newest wheel by ``scripts/torch_npu_surface.py``.  ``load(line)`` presents a
surface as modules standing for ``torch_npu`` and ``torch.npu``, so that the
rules derive the table a given torch_npu would get, on a machine without it
(``python -m transfer_to_npu --list --torch-npu 2.5``).  Nothing they hold
can run: they have names, kinds and parameters only (and a class its
methods').
"""

import inspect
import json
import os
import types

_DIRECTORY = os.path.dirname(os.path.abspath(__file__))


def lines():
    """The release lines with a surface file, oldest first ("2.1", ...)."""
    found = [f[len("torch_npu-"):-len(".json")] for f in os.listdir(_DIRECTORY)
             if f.startswith("torch_npu-") and f.endswith(".json")]
    return sorted(found, key=_line_key)


def _line_key(line):
    return tuple(int(p) for p in line.split("."))


def path(line):
    """The surface file of a release line ("2.5", or a release "2.5.1.post1",
    whose line is its first two numbers)."""
    if not isinstance(line, str) or not all(p.isdigit() for p in line.split(".")[:2]) \
            or line.count(".") < 1:
        raise ValueError(f"torch_npu version must be a release line such as '2.5', got {line!r}")
    short = ".".join(line.split(".")[:2])
    file = os.path.join(_DIRECTORY, f"torch_npu-{short}.json")
    if not os.path.exists(file):
        raise ValueError(f"torch_npu {line!r} is not a known release line (known: "
                         f"{', '.join(lines())})")
    return file


def read(line):
    with open(path(line), encoding="utf-8") as f:
        return json.load(f)


class _Named:
    """A callable's stand-in: its name and parameters (as a builtin states
    their names, in __text_signature__; whole, in __signature__), no body."""

    def __init__(self, name, text):
        self.__name__ = self.__qualname__ = name
        if text is not None:
            self.__signature__ = _signature(text)
            self.__text_signature__ = _names(self.__signature__)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"{self.__name__} is a name read from torch_npu's sources")


def _signature(text):
    from .._rules.call_shapes import from_text

    return from_text(text)


def _names(signature):
    """"(a, b, *, c)": the names of the positional and keyword-only
    parameters, as __text_signature__ states them."""
    kinds = inspect.Parameter
    positional = [p.name for p in signature.parameters.values()
                  if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    keyword = [p.name for p in signature.parameters.values() if p.kind is kinds.KEYWORD_ONLY]
    return "(" + ", ".join(positional + (["*"] + keyword if keyword else [])) + ")"


def _value(module_name, name, entry):
    """The stand-in of a name: a function's, an operator's or a class's
    (what a call of it takes, its methods) with the parameters recorded."""
    kind = entry[0]
    if kind == "function":
        return _Named(name, entry[1])
    if kind == "op":
        return _Named(name, None)
    if kind in ("class", "extension") and (kind == "class" or name[:1].isupper()):
        # torch_npu's extension defines classes (its tensor types): a
        # capitalised name it declares is taken for one.
        namespace = {"__module__": module_name}
        if kind == "class":
            namespace["__init__"] = _Named("__init__", entry[1])
            if entry[1] is not None:
                namespace["__signature__"] = namespace["__init__"].__signature__
            for method, text in (entry[2] if len(entry) > 2 else {}).items():
                namespace[method] = _Named(method, text)
        return type(name, (), namespace)
    if kind == "module":
        return types.ModuleType(f"{module_name}.{name}")
    return object()  # data, or what another package defines


def _module(name, data):
    module = types.ModuleType(name)
    if data["__all__"] is not None:
        module.__all__ = list(data["__all__"])
    for attr, entry in data["names"].items():
        setattr(module, attr, _value(name, attr, entry))
    return module


def load(line):
    """(torch_npu, npu): modules standing for the package and for its
    ``npu`` module (torch.npu) of the given release line; the submodules
    the surface records are attributes of their parents."""
    data = read(line)
    made = {name: _module(name, module) for name, module in data["modules"].items()}
    root = made.setdefault("torch_npu", types.ModuleType("torch_npu"))
    root.__version__ = data["torch_npu"]
    for name in sorted(made, key=len):
        parent, _, attr = name.rpartition(".")
        if parent in made:
            setattr(made[parent], attr, made[name])
    return root, made["torch_npu.npu"]
