"""The mapping table: derived from the running torch by the rules at
enable(), then handed to the C core, which installs it.

A row may name what it redirects to by reference ("module:attr.path", or
"module:factory()" for what a rule makes around torch's own function, see
``_rules/_row.py``) rather than by the object: the C core resolves such a
reference through ``resolve`` when the row is installed, or when a wrapper
is first called, so that what a script never calls is never loaded.
"""

import importlib
import os

from . import _C

_PACKAGE = __name__.rpartition(".")[0]

# The modules a reference may start from: torch's, Ascend's and this
# package's (a rule's stand-ins and factories are this package's).
_ROOTS = ("torch", "torch_npu", _PACKAGE)

# This process's table, per backend: (rows, sources of the factories' rows).
_tables = {}


def rows(torch, backend):
    """The mapping table's rows for this torch and backend, then those of
    the user's rules file (TRANSFER_TO_NPU_RULES), read at every enable()."""
    table = _tables.get(backend)
    if table is None:
        from . import _rules

        derived, factories = _rules.derive(torch)
        table = _tables[backend] = (derived, frozenset(factories))
    return list(table[0]) + _user_rows(torch)


def factory_sources(backend):
    """The sources of the rows of torch's factories: compiled graphs may
    call their wrappers."""
    return _tables.get(backend, (None, frozenset()))[1]


def resolve(ref, original):
    """What a row's reference names (the C core asks): "module:attr.path",
    or for "module:factory()" what factory(original) makes."""
    factory = ref.endswith("()")
    path = ref[:-2] if factory else ref
    module_name, _, attrs = path.partition(":")
    try:
        if module_name.partition(".")[0] not in _ROOTS:
            raise ImportError(f"{module_name} is not torch's, torch_npu's or {_PACKAGE}'s")
        # Through the import system even when imported: a module another
        # thread is still running is waited for, not read half made.
        obj = importlib.import_module(module_name)
        for part in attrs.split(".") if attrs else ():
            obj = getattr(obj, part)
        if factory and not module_name.startswith(_PACKAGE + "."):
            raise ImportError(f"{module_name} is not {_PACKAGE}'s, to make a target")
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(f"{_PACKAGE}: the mapping table's {ref!r} cannot be found "
                           f"({exc})") from exc
    return obj(original) if factory else obj


def install(torch, rows):
    """Hand the rows to the C core.  TorchScript's compiler knows torch's
    builtins by identity: each wrapper of one is entered in its table as
    the op its original is (so that torch.ones in a scripted function
    compiles to aten::ones), before the wrapper is put in place."""
    from torch.jit import _builtins as builtins

    _C.enable(rows, resolve, builtins._get_builtin_table(), builtins._builtin_ops)


def _user_rows(torch):
    # The module of user rules loads only for a rules file.
    if not os.environ.get("TRANSFER_TO_NPU_RULES"):
        return []
    from ._rules import user

    return user.rows(torch)
