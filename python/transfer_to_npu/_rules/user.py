"""User rules: TRANSFER_TO_NPU_RULES=rules.json, in the format of the
offline migration tool's -r file (parsed and checked by the C core):

* FuncNameModifyRule {old_name, new_name}: calls of old_name call new_name;
* ArgsModifyRule {func_name, arg_idx, arg_new}: the positional argument
  arg_idx of func_name becomes arg_new;
* ModuleNameModifyRule {old_name, new_name, parent_module}: importing
  parent_module.old_name gives parent_module.new_name.

Names are full dotted paths.  A function in a module that is not imported
yet is patched when that module is imported.
"""

import importlib
import os
import sys

from .. import _C, _files
from ._row import row


class RulesError(ValueError):
    """A rules file that cannot be used: names the file, the rule and the
    field."""


def _module_part(parts):
    """How many leading parts of a dotted name, not imported yet, are
    modules: a top-level module that is not a package has only attributes
    after it; inside a package, the parts up to the first capitalised one
    (a class, by Python's naming conventions)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(parts[0])  # locates, does not run it
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations is None:
        return 1
    for i, part in enumerate(parts[:-1]):
        if part[:1].isupper():
            return max(i, 1)
    return len(parts) - 1


def _owner_spec(dotted):
    """("module[:attr.path]", name) for the attribute a dotted name names:
    its module is the longest imported prefix, else the module part of the
    name (patched when imported)."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:i])
        if module in sys.modules:
            inner = parts[i:-1]
            return module + (":" + ".".join(inner) if inner else ""), parts[-1]
    n = _module_part(parts)
    inner = parts[n:-1]
    return ".".join(parts[:n]) + (":" + ".".join(inner) if inner else ""), parts[-1]


def _resolve(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(f"no module of {dotted!r} can be imported")


def _lazy(dotted, where):
    """The function dotted names, resolved at the first call (its module may
    need what the script sets up first)."""
    found = []

    def call(*args, **kwargs):
        if not found:
            try:
                found.append(_resolve(dotted))
            except (ImportError, AttributeError) as exc:
                raise RulesError(f"{where}: new_name {dotted!r} cannot be found ({exc})") from exc
        return found[0](*args, **kwargs)

    call.__name__ = dotted.rpartition(".")[2]
    call.__qualname__ = dotted
    return call


def _binds(owner_spec):
    """Whether the owner is a class (its methods bind self): known when its
    module is imported, else judged by the name's capital."""
    module, _, path = owner_spec.partition(":")
    if not path:
        return False
    if module not in sys.modules:
        return path.rpartition(".")[2][:1].isupper()
    obj = sys.modules[module]
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return isinstance(obj, type)


def load(path):
    """The rules of the file at path, checked."""
    try:
        data = _files.read_regular(path)
    except OSError as exc:
        raise RulesError(f"TRANSFER_TO_NPU_RULES={path!r}: cannot read it ({exc.strerror})") \
            from None
    try:
        return _C.parse_rules(data)
    except ValueError as exc:
        raise RulesError(f"{path}: {exc}") from None


def rows(torch, path=None):
    path = os.environ.get("TRANSFER_TO_NPU_RULES") if path is None else path
    if not path:
        return []
    out = []
    for rule in load(path):
        kind, index = rule["kind"], rule["index"]
        where = f"{path}: {kind}[{index}]"
        if kind == "FuncNameModifyRule":
            owner, name = _owner_spec(rule["old_name"])
            binds = _binds(owner)
            out.append(row(rule["old_name"], rule["new_name"], "user_function", _C.MODE_REDIRECT,
                           owner, name, _lazy(rule["new_name"], where), binds=binds, kws=()))
        elif kind == "ArgsModifyRule":
            owner, name = _owner_spec(rule["func_name"])
            binds = _binds(owner)
            out.append(row(rule["func_name"],
                           f"{rule['func_name']}(argument {rule['arg_idx']} = {rule['arg_new']!r})",
                           "user_args", _C.MODE_ARG_REPLACE, owner, name, rule["arg_new"],
                           pos=rule["arg_idx"] + binds, binds=binds, kws=()))
        else:
            parent = rule["parent_module"]
            old = f"{parent}.{rule['old_name']}" if parent else rule["old_name"]
            new = f"{parent}.{rule['new_name']}" if parent else rule["new_name"]
            try:
                module = importlib.import_module(new)
            except ImportError as exc:
                raise RulesError(f"{where}: module {new!r} cannot be imported ({exc})") from None
            out.append(row(old, new, "user_module", _C.MODE_REPLACE, sys.modules, old, module))
            if parent:
                out.append(row(old, new, "user_module", _C.MODE_REPLACE, parent,
                               rule["old_name"], module))
    return out
