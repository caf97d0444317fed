"""What the rules learn by looking at torch, done fast enough for every
process start.

* Parameter names of Python functions come from their code objects
  (inspect.signature costs tens of microseconds a call).
* Which ops take a device comes from torch's op schemas: several hundred
  lookups, fixed for a torch build, so they are cached on disk per build
  (``TRANSFER_TO_NPU_CACHE_DIR``, default ``~/.cache/transfer_to_npu``; an
  empty value turns the cache off).  A cache that cannot be read or written
  is simply not used.
"""

import hashlib
import inspect
import json
import os

_memo = {"key": None, "schemas": {}, "dirty": False, "path": None}


def _cache_dir():
    configured = os.environ.get("TRANSFER_TO_NPU_CACHE_DIR")
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "transfer_to_npu")


def _load(torch):
    key = f"{torch.__version__}|{getattr(torch.version, 'git_version', '')}"
    if _memo["key"] == key:
        return
    _memo.update(key=key, schemas={}, dirty=False, path=None)
    directory = _cache_dir()
    if directory is None:
        return
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    _memo["path"] = os.path.join(directory, f"op-schemas-{digest}.json")
    try:
        with open(_memo["path"]) as f:
            data = json.load(f)
        if data.get("key") == key and isinstance(data.get("takes_device"), dict):
            _memo["schemas"] = data["takes_device"]
    except (OSError, ValueError):
        pass


def save():
    """Write what was learnt this time, if anything."""
    if not _memo["dirty"] or _memo["path"] is None:
        return
    _memo["dirty"] = False
    tmp = f"{_memo['path']}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_memo["path"]), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"key": _memo["key"], "takes_device": _memo["schemas"]}, f)
        os.replace(tmp, _memo["path"])
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def op_takes_device(torch, name):
    """Whether any overload of aten::<name> has a ``device`` argument."""
    _load(torch)
    known = _memo["schemas"].get(name)
    if known is None:
        try:
            schemas = torch._C._jit_get_schemas_for_operator("aten::" + name)
        except RuntimeError:
            schemas = []
        known = any(arg.name == "device" for schema in schemas for arg in schema.arguments)
        _memo["schemas"][name] = known
        _memo["dirty"] = True
    return known


def _code(fn):
    fn = inspect.unwrap(fn) if hasattr(fn, "__wrapped__") else fn
    return getattr(fn, "__code__", None)


def _text_signature(fn):
    """(positional, keyword-only) names from a builtin's __text_signature__
    ("($self, device, /, *, flag=False)"), or None."""
    text = getattr(fn, "__text_signature__", None)
    if not text or not text.startswith("(") or not text.endswith(")"):
        return None
    positional, keyword, star = [], [], False
    for part in text[1:-1].split(","):
        name = part.strip().split("=")[0].strip()
        if name in ("/", "") or name.startswith("$"):
            continue
        if name.startswith("*"):
            star = True
            continue
        (keyword if star else positional).append(name)
    return positional, keyword


def parameters(fn):
    """(positional names, keyword-only names) of fn, self left out of a
    class's; None when they cannot be known."""
    skip = 0
    if isinstance(fn, type):
        fn = fn.__init__
        skip = 1
    code = _code(fn)
    if code is None:
        return _text_signature(fn)
    names = code.co_varnames
    n, k = code.co_argcount, code.co_kwonlyargcount
    return list(names[skip:n]), list(names[n:n + k])


def device_position(fn):
    """Position of a positional ``device`` parameter (as callers pass it: a
    class's self left out), or -1."""
    params = parameters(fn)
    if params is None or "device" not in params[0]:
        return -1
    return params[0].index("device")


def takes_device(fn):
    params = parameters(fn)
    return params is not None and ("device" in params[0] or "device" in params[1])
