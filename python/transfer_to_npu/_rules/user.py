"""User rules: TRANSFER_TO_NPU_RULES=rules.json, in the format of the
offline migration tool's -r file (parsed and checked by the C core):

* FuncNameModifyRule {old_name, new_name}: calls of old_name call new_name;
* ArgsModifyRule {func_name, arg_idx, arg_new}: the positional argument
  arg_idx of func_name becomes arg_new;
* ModuleNameModifyRule {old_name, new_name, parent_module}: importing
  parent_module.old_name gives parent_module.new_name.

Names are full dotted paths.  A function in a module that is not imported
yet is patched when that module is imported.

Rules are for the user's own code and torch's: a rule that would patch the
standard library, an installed package (anything under the interpreter's
library and site-packages directories) or this package, a name that is not
a function (``torch.float32``), or rules that map a name back to itself are
refused when the file is read, naming the rule.
"""

import importlib
import importlib.util
import os
import site
import sys
import sysconfig

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


def _installed_dirs():
    """The directories of the standard library and of installed packages,
    of this interpreter and of the one its environment is made from."""
    dirs = set()
    for base in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        paths = sysconfig.get_paths(vars={"base": base, "platbase": base,
                                          "installed_base": base, "installed_platbase": base})
        dirs.update(paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib"))
    dirs.update(getattr(site, "getsitepackages", list)())
    if getattr(site, "ENABLE_USER_SITE", False):
        dirs.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def _locations(top):
    """Where top-level module ``top`` is (its file, or a package's
    directories), found without running it; () if it is nowhere."""
    module = sys.modules.get(top)
    if module is None:
        try:
            module = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return ()
        if module is None:
            return ()
        places = list(module.submodule_search_locations or []) or [module.origin]
    else:
        places = list(getattr(module, "__path__", [])) or [getattr(module, "__file__", None)]
    return tuple(os.path.realpath(p) for p in places if p and os.path.isabs(p))


def _not_the_users(dotted):
    """Why the module a dotted name starts in is neither the user's own nor
    torch's, or None."""
    top = dotted.partition(".")[0]
    if top == "torch":
        return None
    if top in ("transfer_to_npu", "_transfer_to_npu_boot"):
        return "this package's"
    if top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names:
        return "the standard library's"
    dirs = _installed_dirs()
    for place in _locations(top):
        if any(os.path.join(place, "").startswith(d) or place.startswith(d) for d in dirs):
            return f"an installed package's ({place})"
    return None


def _existing(dotted):
    """The object a dotted name names, when its module is imported already
    (nothing is imported to find it); None otherwise."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        obj = sys.modules.get(".".join(parts[:i]))
        if obj is None:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj
    return None


# The field of each kind that names what a rule patches.
_PATCHED = {"FuncNameModifyRule": "old_name", "ArgsModifyRule": "func_name",
            "ModuleNameModifyRule": "old_name"}


def _patched_name(rule):
    if rule["kind"] == "ModuleNameModifyRule" and rule["parent_module"]:
        return f"{rule['parent_module']}.{rule['old_name']}"
    return rule[_PATCHED[rule["kind"]]]


def _renamed_to(rule):
    if rule["kind"] == "ModuleNameModifyRule" and rule["parent_module"]:
        return f"{rule['parent_module']}.{rule['new_name']}"
    return rule["new_name"]


def check(path, rules):
    """Refuse, naming the rule, one that patches what is not the user's
    own or torch's, a name that is not a function, and renames that lead a
    name back to itself (its call would recurse without end)."""
    renames = {}
    for rule in rules:
        where = f"{path}: {rule['kind']}[{rule['index']}]"
        name, field = _patched_name(rule), _PATCHED[rule["kind"]]
        whose = _not_the_users(name)
        if whose is not None:
            raise RulesError(f"{where}: {field} {name!r} is {whose}; rules map the user's own "
                             f"code and torch's")
        if rule["kind"] != "ModuleNameModifyRule":
            found = _existing(name)
            if found is not None and not callable(found):
                raise RulesError(f"{where}: {field} {name!r} is not a function (a "
                                 f"{type(found).__module__}.{type(found).__qualname__}); rules "
                                 f"map functions")
        if rule["kind"] != "ArgsModifyRule":
            renames[(rule["kind"], name)] = (_renamed_to(rule), where)
    for (kind, start), (_, where) in renames.items():
        seen, name = [start], start
        while (kind, name) in renames:
            name = renames[(kind, name)][0]
            if name == start:
                raise RulesError(f"{where}: {' -> '.join(seen + [name])} maps {start!r} back to "
                                 f"itself")
            if name in seen:
                break  # a cycle that another rule starts
            seen.append(name)


def load(path):
    """The rules of the file at path, checked."""
    try:
        data = _files.read_regular(path)
    except OSError as exc:
        raise RulesError(f"TRANSFER_TO_NPU_RULES={path!r}: cannot read it ({exc.strerror})") \
            from None
    try:
        rules = _C.parse_rules(data)
    except ValueError as exc:
        raise RulesError(f"{path}: {exc}") from None
    check(path, rules)
    return rules


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
