"""Facts about the running torch build that take milliseconds to learn at
every process start (which builtins take a device, which ops have a cpu kernel),
cached on disk per build.

The cache is a directory per torch build in ``TRANSFER_TO_NPU_CACHE_DIR``
(default ``~/.cache/transfer_to_npu``; an empty value turns it off), with a
JSON file per section.  A
cache that cannot be read or written is simply not used: every fact can be
learnt again from torch.
"""

import json
import os

from ._code_cache import cache_dir, write_atomically

FORMAT = 3

# Each section is a file of its own, read when first asked for: the import
# reads only the small ones it needs, and the first npu tensor the rest.
_state = {"key": None, "directory": None, "sections": {}, "dirty": set()}


def _select(torch):
    key = f"{FORMAT}|{torch.__version__}|{getattr(torch.version, 'git_version', '')}"
    if _state["key"] == key:
        return
    directory = cache_dir()
    if directory is not None:
        # Named after the key itself (a hash costs more than reading a
        # section), made safe for a file name when it is not already.
        name = key.replace("|", "-")
        if not name.replace(".", "").replace("+", "").replace("-", "").isalnum():
            name = "".join(c if c.isalnum() or c in ".+-" else "_" for c in name)
        directory = os.path.join(directory, f"torch-{name}")
    _state.update(key=key, directory=directory, sections={}, dirty=set())


def _path(name):
    return os.path.join(_state["directory"], f"{name}.json")


def file_path(torch, name):
    """Where a cache file of this torch build called ``name`` goes (the
    mapping table's), or None when the caches are off."""
    _select(torch)
    directory = _state["directory"]
    return None if directory is None else os.path.join(directory, name)


def _read(name):
    if _state["directory"] is None:
        return {}
    try:
        # Bytes, in one read of the size stated, decoded by json itself: a
        # file object's layers cost more than reading a section.
        fd = os.open(_path(name), os.O_RDONLY)
        try:
            data = json.loads(os.read(fd, os.fstat(fd).st_size))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != _state["key"]:
        return {}
    facts = data.get("facts")
    return facts if isinstance(facts, dict) else {}


def section(torch, name):
    """The cached facts called ``name`` for this torch build: a dict to read
    and to fill (then call changed(name))."""
    _select(torch)
    facts = _state["sections"].get(name)
    if facts is None:
        facts = _state["sections"][name] = _read(name)
    return facts


def changed(name):
    _state["dirty"].add(name)


def save():
    """Write the sections learnt in this process, if any."""
    if not _state["dirty"] or _state["directory"] is None:
        return
    dirty, _state["dirty"] = _state["dirty"], set()
    for name in sorted(dirty):
        data = json.dumps({"key": _state["key"], "facts": _state["sections"][name]})
        write_atomically(_path(name), [data.encode()])
