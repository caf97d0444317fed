"""The mapping table as data: derived from torch by the rules, or read from
its cache.

A row names what it patches, and what it redirects to, by reference
("module:attr.path"; "module:factory()" for what a rule makes around
torch's own function, see ``_rules/_row.py``).  So the table of a torch
build is data: kept on disk beside the facts learnt from that build, and
read at the next start instead of importing the rules and looking at torch
again, which is most of the work of a first import.  The C core resolves
the references: an owner at enable() (or when its module is imported), a
value put in place and a class at enable(), and what a wrapper calls at its
first call, when the module holding it is imported (the parts of torch.npu
a script never calls are never loaded).

The file is used only while what it was derived from is as it was: the
torch build (the facts' directory), the interpreter, the backend and its
version, and the package's modules that the derivation ran (each checked
as the code cache checks a module).  A file that is missing, damaged,
stale, or that others could have written is derived again and rewritten;
the table is the same either way.
"""

import importlib
import marshal
import os
import sys
import zlib

from . import _C, _code_cache, _torch_facts

FORMAT = 1

_PACKAGE = __name__.rpartition(".")[0]

# The modules a reference starts from: torch's, Ascend's and this package's
# (a rule's stand-ins and factories are this package's).  What guards what
# a cached table names is the file's trust check (_code_cache.open_trusted).
_ROOTS = ("torch", "torch_npu", _PACKAGE)

# What marshal raises on damaged data.
_DAMAGED = (EOFError, ValueError, TypeError, OverflowError, MemoryError)

# This process's table, per backend: (rows, sources of the factories' rows,
# read from the file).
_tables = {}


def rows(torch, backend, fresh=False):
    """The mapping table's rows for this torch and backend, then those of
    the user's rules file (TRANSFER_TO_NPU_RULES), which are never cached.
    ``fresh``: derived again, whatever is cached."""
    table = None if fresh else _tables.get(backend)
    if table is None:
        table = (None if fresh else _load(torch, backend)) or _derive(torch, backend)
        _tables[backend] = table
    return list(table[0]) + _user_rows(torch)


def from_file(backend):
    """Whether the table in use was read from the cache file."""
    return _tables.get(backend, (None, None, False))[2]


def factory_sources(backend):
    """The sources of the rows of torch's factories: compiled graphs may
    call their wrappers."""
    return _tables.get(backend, (None, frozenset(), False))[1]


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


def after_enable(torch):
    """TorchScript's compiler knows torch's builtins by identity: each
    installed wrapper of one is entered in its table as the op its original
    is, so that torch.ones in a scripted function compiles to aten::ones."""
    from torch.jit import _builtins as builtins

    _C.alias_installed(builtins._get_builtin_table(), builtins._builtin_ops)


# --- derivation ------------------------------------------------------------

def _derive(torch, backend):
    from . import _rules
    from ._rules import _row

    derived, factories = _rules.derive(torch)
    encoded = _row.encode(derived)
    if encoded is None:
        # A row names an object that no path reaches: used as derived, not
        # kept for the next process.
        return derived, frozenset(factories), False
    _save(torch, backend, encoded, factories)
    return encoded, frozenset(factories), False


# --- the file --------------------------------------------------------------

# One table per installed copy of the package (the stamps of its files
# tell an edit, not another copy whose files stayed as they were).
_DIRECTORY = os.path.dirname(os.path.abspath(__file__))


def _file(torch, backend):
    return _torch_facts.file_path(
        torch, f"table-{backend}-{zlib.crc32(_DIRECTORY.encode()):08x}.marshal")


def _key(backend):
    version = getattr(sys.modules.get("torch_npu"), "__version__", "") if backend != "virtual" \
        else ""
    return (FORMAT, sys.implementation.cache_tag, _DIRECTORY, backend, str(version))


def _package_files():
    """The files of the package's modules imported so far: what the rules
    and the backend ran to derive the table."""
    files = []
    for name, module in list(sys.modules.items()):
        if name == _PACKAGE or name.startswith(_PACKAGE + "."):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                files.append(path)
    return sorted(files)


def _save(torch, backend, encoded, factories):
    path = _file(torch, backend)
    if path is None:
        return
    depends = tuple((f, _code_cache.stamp(f)) for f in _package_files())
    if any(stamp is None for _, stamp in depends):
        return
    data = marshal.dumps((_key(backend), depends, tuple(encoded), tuple(sorted(factories))))
    _code_cache.write_atomically(path, [data])


def _load(torch, backend):
    path = _file(torch, backend)
    data = None if path is None else _code_cache.read_trusted(path)
    if data is None:
        return None
    try:
        key, depends, table, factories = marshal.loads(data)
    except _DAMAGED:
        return None
    if key != _key(backend) or type(table) is not tuple or type(factories) is not tuple:
        return None
    try:
        if not all(_code_cache.stamp(f) == stamp for f, stamp in depends):
            return None
        factories = frozenset(factories)
    except (TypeError, ValueError):  # damaged
        return None
    # Rows of the wrong shape are the C core's to refuse (enable() then
    # derives the table again).
    return table, factories, True


def _user_rows(torch):
    # The module of user rules loads only for a rules file.
    if not os.environ.get("TRANSFER_TO_NPU_RULES"):
        return []
    from ._rules import user

    return user.rows(torch)
