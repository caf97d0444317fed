"""Facts about the running torch build that take milliseconds to learn at
every process start (which ops take a device, which ops have a cpu kernel),
cached on disk per build.

The cache is a JSON file per torch build in ``TRANSFER_TO_NPU_CACHE_DIR``
(default ``~/.cache/transfer_to_npu``; an empty value turns it off).  A
cache that cannot be read or written is simply not used: every fact can be
learnt again from torch.
"""

import hashlib
import json
import os

FORMAT = 2

_state = {"key": None, "path": None, "sections": {}, "dirty": False}


def _cache_dir():
    configured = os.environ.get("TRANSFER_TO_NPU_CACHE_DIR")
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "transfer_to_npu")


def _load(torch):
    key = f"{FORMAT}|{torch.__version__}|{getattr(torch.version, 'git_version', '')}"
    if _state["key"] == key:
        return
    _state.update(key=key, path=None, sections={}, dirty=False)
    directory = _cache_dir()
    if directory is None:
        return
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    _state["path"] = os.path.join(directory, f"torch-{digest}.json")
    try:
        with open(_state["path"]) as f:
            data = json.load(f)
        if data.get("key") == key and isinstance(data.get("sections"), dict):
            _state["sections"] = data["sections"]
    except (OSError, ValueError):
        pass


def section(torch, name):
    """The cached facts called ``name`` for this torch build: a dict to read
    and to fill (then call changed())."""
    _load(torch)
    return _state["sections"].setdefault(name, {})


def known(torch, name, keys, learn):
    """Section ``name`` with a fact for each of ``keys``: those not cached
    yet are learnt (``learn(key)``) and kept."""
    facts = section(torch, name)
    missing = [key for key in keys if key not in facts]
    for key in missing:
        facts[key] = learn(key)
    if missing:
        changed()
    return facts


def changed():
    _state["dirty"] = True


def save():
    """Write the facts learnt in this process, if any (atomically: ranks of
    one job may write at once)."""
    if not _state["dirty"] or _state["path"] is None:
        return
    _state["dirty"] = False
    tmp = f"{_state['path']}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_state["path"]), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump({"key": _state["key"], "sections": _state["sections"]}, f)
        os.replace(tmp, _state["path"])
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
