"""The mapping table is data, kept per torch build and read back by the
next process instead of being derived again; what a row names is found
when it is first needed.  The table read is the table derived, and a
cache that is stale, damaged or not this user's is derived again."""
import glob
import marshal
import os

import pytest

import transfer_to_npu
from conftest import run_python

# The table, whether it came from the file, which of the package's modules
# the import loaded, and a migrated call.
PROBE = """
import sys, torch, transfer_to_npu
from transfer_to_npu import _table
loaded = sorted(n for n in sys.modules if n.startswith("transfer_to_npu."))
table = sorted((m["source"], m["target"], m["kind"]) for m in transfer_to_npu.mappings())
x = torch.ones(2, device="cuda") + 1
print(repr((_table.from_file(transfer_to_npu.backend), loaded, table, str(x.device))))
"""


def _run(cache_dir, site=None, code=PROBE, script=None):
    """Run code in a fresh interpreter (from the file `script`, when given:
    TorchScript reads the source of what it compiles)."""
    env = {"TRANSFER_TO_NPU_CACHE_DIR": str(cache_dir), "TRANSFER_TO_NPU_BACKEND": "virtual"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    if script is not None:
        script.write_text(code)
    proc = run_python([str(script)] if script is not None else ["-c", code], env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _probe(cache_dir, site=None):
    from_file, loaded, table, device = eval(_run(cache_dir, site).strip().splitlines()[-1])
    assert device == "npu:0"
    return from_file, set(loaded), table


def _table_file(cache_dir):
    (path,) = glob.glob(os.path.join(str(cache_dir), "torch-*", "table-virtual-*.marshal"))
    return path


def test_written_then_read_without_the_rules(tmp_path):
    first, loaded_first, derived = _probe(tmp_path)
    assert not first and "transfer_to_npu._rules.cuda_module" in loaded_first
    again, loaded, read = _probe(tmp_path)
    assert again and read == derived and len(read) > 200
    # Neither the rules nor the parts of torch.npu a row names are loaded.
    assert not any(n.startswith("transfer_to_npu._rules") for n in loaded)
    for part in ("streams", "memory", "typed_tensors", "device_objects"):
        assert f"transfer_to_npu.backends.virtual.{part}" not in loaded


def test_the_rows_read_are_the_rows_derived(tmp_path):
    _probe(tmp_path)
    out = _run(tmp_path, code="""
import torch, transfer_to_npu
from transfer_to_npu import _rules, _table
from transfer_to_npu._rules import _row
read = _table.rows(torch, "virtual")
transfer_to_npu.disable()
derived = _row.encode(_rules.derive(torch)[0])
transfer_to_npu.enable()
print(_table.from_file("virtual"), read == derived, len(read))
""")
    assert out.split()[:2] == ["True", "True"]


def _edit_rule(site, label):
    """Edit the DataLoader rule in a copy of the package: the row it makes."""
    path = site / "transfer_to_npu" / "_rules" / "data.py"
    path.write_text(path.read_text().replace(
        '"torch.utils.data.DataLoader", "device_arg"',
        f'"torch.utils.data.DataLoader ({label})", "device_arg"'))
    return ("torch.utils.data.DataLoader", f"torch.utils.data.DataLoader ({label})",
            "device_arg")


def test_an_edited_rule_is_derived_again(tmp_path, site):
    cache = tmp_path / "cache"
    _probe(cache, site)
    assert _probe(cache, site)[0]
    edited = _edit_rule(site, "edited")
    from_file, _, table = _probe(cache, site)
    assert not from_file and edited in table
    from_file, _, again = _probe(cache, site)
    assert from_file and again == table


def _rewrite(path, change):
    with open(path, "rb") as f:
        key, depends, table, factories = marshal.load(f)
    with open(path, "wb") as f:
        marshal.dump(change(key, depends, table, factories), f)


@pytest.mark.parametrize("how", [
    "empty", "not marshal", "cut", "another backend", "a stale dependency",
    "damaged parts", "a row out of range", "rows the core refuses", "a row naming nothing"])
def test_a_bad_table_is_derived_again_and_rewritten(tmp_path, how):
    _, _, derived = _probe(tmp_path)
    path = _table_file(tmp_path)
    data = open(path, "rb").read()
    if how == "empty":
        open(path, "wb").close()
    elif how == "not marshal":
        open(path, "wb").write(b"\xff" * 64)
    elif how == "cut":
        open(path, "wb").write(data[:len(data) // 2])
    elif how == "another backend":
        _rewrite(path, lambda k, d, t, f: (k[:-2] + ("torch_npu", "2.1"), d, t, f))
    elif how == "a stale dependency":
        _rewrite(path, lambda k, d, t, f: (k, ((d[0][0], (1, 2, 3)),) + d[1:], t, f))
    elif how == "damaged parts":
        _rewrite(path, lambda k, d, t, f: (k, d, t, ([1],)))
    elif how == "a row out of range":
        _rewrite(path, lambda k, d, t, f: (k, d, (t[0][:7] + (2 ** 40,) + t[0][8:],) + t[1:], f))
    elif how == "rows the core refuses":
        _rewrite(path, lambda k, d, t, f: (k, d, (("torch.cuda.x", 1),) + t, f))
    else:
        # Read, installed, and refused by the C core when it resolves the
        # value this row puts in place.
        bad = ("torch.cuda.bogus", "nowhere", "constant", transfer_to_npu._C.MODE_REPLACE,
               "torch.cuda", "bogus_name", "torch:no_such_thing", -1, False, (), False, False)
        _rewrite(path, lambda k, d, t, f: (k, d, t + (bad,), f))
    from_file, _, table = _probe(tmp_path)
    assert not from_file and table == derived
    from_file, _, table = _probe(tmp_path)
    assert from_file and table == derived


def test_a_table_others_may_have_written_is_not_used(tmp_path):
    _probe(tmp_path)
    path = _table_file(tmp_path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    os.chmod(path, 0o666)
    assert not _probe(tmp_path)[0]
    assert os.stat(path).st_mode & 0o777 == 0o600 and _probe(tmp_path)[0]


def test_off_with_the_other_caches(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert not _probe("")[0] and not _probe("")[0]
    assert os.listdir(tmp_path) == []


def test_what_a_row_names_loads_at_its_first_use(tmp_path):
    _probe(tmp_path)
    out = _run(tmp_path, script=tmp_path / "probe.py", code="""
import sys, torch, transfer_to_npu
def loaded(part):
    return f"transfer_to_npu.{part}" in sys.modules
parts = ("backends.virtual.streams", "backends.virtual.memory",
         "backends.virtual.typed_tensors", "backends.virtual.device_objects", "_rules.jit")
print([loaded(p) for p in parts])
with torch.cuda.device(0):
    name = torch.cuda.get_device_properties(0).name
print(loaded("backends.virtual.device_objects"), name == torch.npu.get_device_name())
s = torch.cuda.Stream()
e = torch.Event(device="cuda")
print(torch.cuda.memory_allocated() >= 0, isinstance(torch.ones(1).cuda(), torch.cuda.FloatTensor))
def add_ones(x):
    return x + torch.ones(2, device="cuda")
f = torch.jit.script(add_ones)
print(s.device, e.device, f(torch.ones(2, device="cuda")).tolist())
print([loaded(p) for p in parts])
""")
    lines = out.strip().splitlines()
    assert lines == ["[False, False, False, False, False]", "True True", "True True",
                     "npu:0 npu:0 [2.0, 2.0]", "[True, True, True, True, True]"]


def test_references_reach_only_torch_and_this_package():
    from transfer_to_npu import _table

    assert _table.resolve("torch:cuda", None) is __import__("torch").cuda
    with pytest.raises(RuntimeError, match="'os:getcwd'.*not torch's"):
        _table.resolve("os:getcwd", None)
    with pytest.raises(RuntimeError, match="'torch:no_such_thing' cannot be found"):
        _table.resolve("torch:no_such_thing", None)
    with pytest.raises(RuntimeError, match="not transfer_to_npu's, to make a target"):
        _table.resolve("torch:cuda()", None)


def test_a_target_that_cannot_be_found_fails_its_call_not_the_import(tmp_path):
    """A row whose target is gone (a table the checks let through) raises,
    naming it, where that API is called; the rest works."""
    out = _run(tmp_path, code="""
import torch, transfer_to_npu
from transfer_to_npu import _C, _table
rows = [r for r in _table.rows(torch, "virtual") if r[0] != "torch.cuda.synchronize"]
rows.append(("torch.cuda.synchronize", "torch.npu.gone", "function", _C.MODE_REDIRECT,
             "torch.cuda", "synchronize", "torch:npu.gone", -1, False, ()))
transfer_to_npu.disable()
_C.enable(rows, _table.resolve)
try:
    torch.cuda.synchronize()
except RuntimeError as e:
    print("raised", "'torch:npu.gone'" in str(e))
print(torch.ones(2, device="cuda").device, torch.cuda.is_available())
transfer_to_npu.disable()
transfer_to_npu.enable()
torch.cuda.synchronize()
print("restored")
""")
    assert out.split() == ["raised", "True", "npu:0", "True", "restored"]


def test_device_keywords_match_whatever_strings_a_row_names_them_with(tmp_path):
    """The keyword names of a row are compared with a call's by identity
    once interned: names made at run time (a rules file's) match as the
    table file's do."""
    out = _run(tmp_path, code="""
import torch, transfer_to_npu
from transfer_to_npu import _C, _table
made = "".join(["dev", "ice"])
rows = [r[:9] + ((made,),) + r[10:] if r[0] == "torch.ones" else r
        for r in _table.rows(torch, "virtual")]
transfer_to_npu.disable()
_C.enable(rows, _table.resolve)
print(torch.ones(2, device="cuda").device, torch.zeros(2, device="cuda").device)
""")
    assert out.split() == ["npu:0", "npu:0"]


def test_each_installed_copy_has_its_own_table(tmp_path, site):
    """Another copy of the package (a second environment), whose files
    stayed as they were, never runs this one's table."""
    cache = tmp_path / "cache"
    _probe(cache)
    edited = _edit_rule(site, "copy")
    from_file, _, table = _probe(cache, site)
    assert not from_file and edited in table
    assert _probe(cache)[0] and _probe(cache, site)[0]


def test_a_target_imported_by_another_thread_meanwhile_is_waited_for(tmp_path):
    _probe(tmp_path)
    out = _run(tmp_path, code="""
import sys, threading, time, torch, transfer_to_npu

class Slow:
    # Runs streams.py slowly, so that a second thread asks for it meanwhile.
    def find_spec(self, name, path=None, target=None):
        if name != "transfer_to_npu.backends.virtual.streams":
            return None
        sys.meta_path.remove(self)
        spec = __import__("importlib").util.find_spec(name)
        run = spec.loader.exec_module
        def exec_module(module):
            time.sleep(0.3)
            run(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Slow())
errors = []
def call(f):
    try:
        f()
    except Exception as e:
        errors.append(repr(e))
a = threading.Thread(target=call, args=(lambda: torch.cuda.current_stream(),))
b = threading.Thread(target=call, args=(lambda: torch.Stream("cuda"),))
a.start(); time.sleep(0.1); b.start(); a.join(); b.join()
print(errors)
""")
    assert out.strip() == "[]"


def test_a_deferred_row_that_fails_waits_for_the_next_import(tmp_path):
    out = _run(tmp_path, code="""
import torch, transfer_to_npu
from transfer_to_npu import _C, _table
failed = []
def resolve(ref, original):
    if ref.endswith("device_constructors()") and not failed:
        failed.append(ref)
        raise RuntimeError("resolution failed once")
    return _table.resolve(ref, original)
transfer_to_npu.disable()
_C.enable(_table.rows(torch, "virtual"), resolve)
try:
    import torch.utils._device
except RuntimeError as e:
    print("raised", e)
with torch.device("cuda"):
    print(torch.ones(1).device)
""")
    assert out.split() == ["raised", "resolution", "failed", "once", "npu:0"]


def test_a_held_factory_set_stays_torchs_after_disable(tmp_path):
    """Code that took torch's own _device_constructors before the import
    (torch's compiler does) gets the builtins from it, during migration and
    after."""
    out = _run(tmp_path, code="""
import torch, torch.utils._device
held = torch.utils._device._device_constructors
import transfer_to_npu
print(torch._C._VariableFunctions.ones in held())
transfer_to_npu.disable()
with torch.device("meta"):
    print(torch.ones(2).device)
""")
    assert out.split() == ["True", "meta"]


def test_a_reused_descriptor_never_feeds_the_code_cache(tmp_path):
    """A process that closes descriptors it did not open (a daemon) and
    opens another file under the number: modules imported later are read
    from their own files, never from that one."""
    _probe(tmp_path)
    _probe(tmp_path)  # the code cache holds every module
    out = _run(tmp_path, code="""
import marshal, os, tempfile, torch, transfer_to_npu
cache = transfer_to_npu._code_cache._cache
entry = cache.entries["transfer_to_npu.backends.virtual.streams"]
fd, offset = cache.fd, cache.code_start + entry[4]
os.close(fd)
decoy = os.path.join(tempfile.mkdtemp(), "decoy")
with open(decoy, "wb") as f:
    f.write(bytes(offset) + marshal.dumps(compile("print('DECOY RAN')", "decoy", "exec")))
assert os.open(decoy, os.O_RDONLY) == fd
print(torch.cuda.Stream().device)
""")
    assert out.split() == ["npu:0"]


def test_the_core_refuses_to_be_disabled_while_installing(tmp_path):
    """Code a resolver runs can neither disable nor change the rows under
    enable(): it fails whole, and torch is left as it was."""
    out = _run(tmp_path, code="""
import torch, transfer_to_npu
from transfer_to_npu import _C, _table
rows = _table.rows(torch, "virtual")
def disabling(ref, original):
    _C.disable()
def clearing(ref, original):
    rows.clear()
    return _table.resolve(ref, original)
original = torch.cuda.current_device
transfer_to_npu.disable()
original = torch.cuda.current_device
try:
    _C.enable(rows, disabling)
except RuntimeError as e:
    print("refused:", "being installed" in str(e))
print(_C.is_enabled(), torch.cuda.current_device is original, torch.device("cuda").type)
_C.enable(list(rows), clearing)
print(_C.is_enabled(), len(rows), torch.device("cuda").type,
      all(isinstance(m["source"], str) for m in transfer_to_npu.mappings()))
""")
    assert out.split() == ["refused:", "True", "False", "True", "cuda", "True", "0", "npu",
                           "True"]


def test_torch_npu_is_whole_from_the_first_npu_tensor(tmp_path):
    """Its lazy parts load at their first use or with the first npu tensor,
    which also takes its module __getattr__ away: the interpreter
    specialises no attribute look-up on a module that has one, and a
    training loop spells torch.npu.X after its first tensor."""
    _probe(tmp_path)
    out = _run(tmp_path, code="""
import torch, transfer_to_npu
print("__getattr__" in vars(torch.npu), "Stream" in dir(torch.npu))
x = torch.ones(1, device="cuda")
print("__getattr__" in vars(torch.npu), all(n in vars(torch.npu) for n in
      ("Stream", "memory_allocated", "FloatTensor", "memory")))
""")
    assert out.split() == ["True", "True", "False", "True"]
