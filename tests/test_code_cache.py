"""The package's compiled modules are cached in one file and read back by
the next process; an edited module is read from its file, and the cache
never changes what runs."""
import glob
import os

import pytest

from conftest import run_python

# Which of the package's modules the process ran without reading their
# files (.py or .pyc), a migrated call to show that it works, and what an
# edit of _rules/data.py changes.
PROBE = """
import sys
opened = set()
sys.addaudithook(lambda event, args: event == "open" and opened.add(args[0]))
import torch, transfer_to_npu
x = torch.ones(2, device="cuda")
from transfer_to_npu._rules import data  # not imported when the table is cached
cached = sorted(n for n, m in list(sys.modules.items()) if n.startswith("transfer_to_npu.")
                and str(getattr(m, "__file__", "")).endswith(".py")
                and not {m.__file__, m.__cached__} & opened)
print(x.device, getattr(data, "EDITED", None), data.__doc__.split()[0], " ".join(cached))
"""

# Imported before the cache is read.
NEVER_CACHED = {"transfer_to_npu", "transfer_to_npu._code_cache"}


def _run(cache_dir, site=None, args=("-c", PROBE)):
    env = {"TRANSFER_TO_NPU_CACHE_DIR": str(cache_dir), "TRANSFER_TO_NPU_BACKEND": "virtual"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    proc = run_python(list(args), env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _probe(cache_dir, site=None):
    """(EDITED of _rules/data.py, the first word of its docstring, the
    modules run from the cache)."""
    device, edited, doc, *cached = _run(cache_dir, site).split()
    assert device == "npu:0"
    return edited, doc, set(cached)


def _code_files(cache_dir):
    return glob.glob(os.path.join(str(cache_dir), "code-*"))


def test_written_at_exit_then_read(tmp_path):
    edited, _, cached = _probe(tmp_path)
    assert cached == set() and len(_code_files(tmp_path)) == 1
    edited, _, cached = _probe(tmp_path)
    assert "transfer_to_npu._rules.data" in cached and "transfer_to_npu.backends.virtual" in cached
    assert not cached & NEVER_CACHED and "transfer_to_npu._torch_facts" in cached
    # Modules first imported later (at the first npu tensor) are in it too.
    assert "transfer_to_npu.backends.virtual.ops" in cached


def test_an_edited_module_is_read_from_its_file(tmp_path, site):
    cache = tmp_path / "cache"
    _probe(cache, site)
    assert "transfer_to_npu._rules.data" in _probe(cache, site)[2]
    with open(site / "transfer_to_npu" / "_rules" / "data.py", "a") as f:
        f.write("\nEDITED = 'yes'\n")
    edited, _, cached = _probe(cache, site)
    assert edited == "yes" and "transfer_to_npu._rules.data" not in cached
    assert "transfer_to_npu._rules.tensors" in cached
    # The cache was rewritten with the edited module's code.
    edited, _, cached = _probe(cache, site)
    assert edited == "yes" and "transfer_to_npu._rules.data" in cached


def _data_py(site):
    return site / "transfer_to_npu" / "_rules" / "data.py"


def test_an_edit_of_the_same_size_and_mtime_is_seen(tmp_path, site):
    """As a reinstall that keeps mtimes (tar, cp -p) leaves it: the ctime
    tells."""
    cache = tmp_path / "cache"
    _probe(cache, site)
    edited, doc, cached = _probe(cache, site)
    assert doc == "Data" and "transfer_to_npu._rules.data" in cached
    path = _data_py(site)
    before = os.stat(path)
    text = path.read_text()
    path.write_text(text.replace('"""Data loading', '"""Xata loading', 1))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_size == before.st_size
    edited, doc, cached = _probe(cache, site)
    assert doc == "Xata" and "transfer_to_npu._rules.data" not in cached


def test_a_touched_module_is_read_again(tmp_path, site):
    cache = tmp_path / "cache"
    _probe(cache, site)
    assert "transfer_to_npu._rules.data" in _probe(cache, site)[2]
    os.utime(_data_py(site))
    assert "transfer_to_npu._rules.data" not in _probe(cache, site)[2]
    assert "transfer_to_npu._rules.data" in _probe(cache, site)[2]


@pytest.mark.parametrize("planted", ["a FIFO", "a link to a good cache"])
def test_a_planted_file_is_neither_waited_on_nor_followed(tmp_path, planted):
    _probe(tmp_path)
    (path,) = _code_files(tmp_path)
    good = tmp_path / "elsewhere"
    os.rename(path, good)
    if planted == "a FIFO":
        os.mkfifo(path)
    else:
        os.symlink(good, path)
    env = {"TRANSFER_TO_NPU_CACHE_DIR": str(tmp_path), "TRANSFER_TO_NPU_BACKEND": "virtual"}
    proc = run_python(["-c", PROBE], env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[3:] == []


def test_one_cache_per_copy_of_the_package(tmp_path, site):
    _probe(tmp_path)
    _probe(tmp_path, site)
    assert len(_code_files(tmp_path)) == 2
    with open(site / "transfer_to_npu" / "_rules" / "data.py", "a") as f:
        f.write("\nEDITED = 'copy'\n")
    assert _probe(tmp_path, site)[0] == "copy"
    assert _probe(tmp_path)[0] == "None"


# The module whose entry "one short entry" damages.
ONE_DAMAGED = "transfer_to_npu._rules.data"


def _damage(path, how):
    """Rewrite the cache file at path, damaged."""
    import marshal

    with open(path, "rb") as f:
        data = f.read()
    length = int.from_bytes(data[:8], "little")
    key, index = marshal.loads(data[8:8 + length])
    code = data[8 + length:]
    if how == "truncated":
        return data[:len(data) // 2]
    if how == "garbage":
        return b"not a cache"
    if how == "short entries":
        index = {name: entry[:2] for name, entry in index.items()}
    elif how == "one short entry":
        # Not the last entry, which says where the file ends.
        assert list(index)[-1] != ONE_DAMAGED
        index[ONE_DAMAGED] = index[ONE_DAMAGED][:2]
    elif how == "offsets past the end":
        index = {name: entry[:4] + (len(code), 10) for name, entry in index.items()}
    elif how == "fields of the wrong type":
        index = {name: (1,) + entry[1:4] + ("0", None) for name, entry in index.items()}
    elif how == "damaged code":
        code = bytes(len(code))
    header = marshal.dumps((key, index))
    return len(header).to_bytes(8, "little") + header + code


@pytest.mark.parametrize("how", ["", "garbage", "truncated", "short entries",
                                 "offsets past the end", "fields of the wrong type",
                                 "damaged code"])
def test_a_bad_cache_is_ignored_and_rewritten(tmp_path, how):
    _probe(tmp_path)
    (path,) = _code_files(tmp_path)
    content = _damage(path, how) if how else b""
    with open(path, "wb") as f:
        f.write(content)
    assert _probe(tmp_path)[2] == set()
    assert "transfer_to_npu._rules.data" in _probe(tmp_path)[2]


def test_a_damaged_entry_costs_its_module_alone(tmp_path):
    """Entries are checked as they are used: one damaged entry has its
    module read from its file, and the rest of the cache still serves."""
    _probe(tmp_path)
    (path,) = _code_files(tmp_path)
    content = _damage(path, "one short entry")
    with open(path, "wb") as f:
        f.write(content)
    cached = _probe(tmp_path)[2]
    assert ONE_DAMAGED not in cached and "transfer_to_npu.backends.virtual" in cached
    assert ONE_DAMAGED in _probe(tmp_path)[2]  # written again


@pytest.mark.parametrize("other", ["writable by others", "owned by another user"])
def test_a_cache_others_may_have_written_is_not_run(tmp_path, other):
    _probe(tmp_path)
    (path,) = _code_files(tmp_path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    if other == "writable by others":
        os.chmod(path, 0o666)
    elif os.getuid() == 0:
        os.chown(path, 65534, -1)
    else:
        pytest.skip("only root can give a file away")
    assert _probe(tmp_path)[2] == set()
    # Written again, as this user's alone.
    assert os.stat(path).st_uid == os.getuid() and os.stat(path).st_mode & 0o777 == 0o600
    assert "transfer_to_npu._rules.data" in _probe(tmp_path)[2]


def test_off_with_the_other_caches(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    edited, _, cached = _probe("")
    assert cached == set() and os.listdir(tmp_path) == []


def test_cached_modules_have_their_source(tmp_path):
    """Tracebacks, inspect and `python -m transfer_to_npu` see the files."""
    _probe(tmp_path)
    out = _run(tmp_path, args=("-c", """
import inspect, sys, traceback
opened = set()
sys.addaudithook(lambda event, args: event == "open" and opened.add(args[0]))
import transfer_to_npu
from transfer_to_npu._rules import cuda_module as m
assert not {m.__file__, m.__cached__} & opened  # run from the cache
print(m.__file__ == m.rows.__code__.co_filename == inspect.getsourcefile(m.rows))
print("def rows" in inspect.getsource(m.rows))
try:
    m.rows(None)
except AttributeError:
    print(any(f.filename == m.__file__ and f.line for f in traceback.extract_tb(sys.exc_info()[2])))
# What the import system gives a module read from its file: a module has no
# __path__, a package its directory.
import importlib.util, os
p = sys.modules["transfer_to_npu._rules"]
assert not {p.__file__, p.__cached__} & opened
print(all(x.__cached__ == importlib.util.cache_from_source(x.__file__) and x.__loader__ is
          x.__spec__.loader and x.__spec__.origin == x.__file__ for x in (m, p)),
      not hasattr(m, "__path__"), p.__path__ == [os.path.dirname(p.__file__)],
      m.__package__ == p.__package__ == p.__name__)
"""))
    assert out.split() == ["True"] * 7
    assert "torch.cuda.synchronize" in _run(tmp_path, args=("-m", "transfer_to_npu", "--list"))


def test_a_file_is_stated_as_os_stat_states_it(tmp_path):
    # Entries written by one way of stating a file are checked by the other
    # (os.stat where the C core has no stamp): the three numbers must agree.
    target = tmp_path / "module.py"
    target.write_text("x = 1\n")
    os.utime(target, ns=(1_000_000_001, 1_234_567_891_011_121_314))
    out = _run(tmp_path / "cache", args=("-c", f"""
import os, pathlib
from transfer_to_npu import _code_cache
path = {str(target)!r}
st = os.stat(path)
print(_code_cache._stamp(path) == (st.st_mtime_ns, st.st_size, st.st_ctime_ns),
      _code_cache._stamp(pathlib.Path(path)) == _code_cache._stamp(path),
      _code_cache._stamp(path + ".missing"), _code_cache._stamp("a\\0b"))
"""))
    assert out.split() == ["True", "True", "None", "None"]
