"""The mapping table's rows as the C core installs them: what a row names
by reference is resolved through the import system, a row that fails waits
for its module's next import, and what cannot be found fails its own call,
not the import."""
import pytest

from conftest import run_python


def _run(code):
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_references_reach_only_torch_and_this_package():
    from transfer_to_npu import _table

    assert _table.resolve("torch:cuda", None) is __import__("torch").cuda
    with pytest.raises(RuntimeError, match="'os:getcwd'.*not torch's"):
        _table.resolve("os:getcwd", None)
    with pytest.raises(RuntimeError, match="'torch:no_such_thing' cannot be found"):
        _table.resolve("torch:no_such_thing", None)
    with pytest.raises(RuntimeError, match="not transfer_to_npu's, to make a target"):
        _table.resolve("torch:cuda()", None)


def test_a_target_that_cannot_be_found_fails_its_call_not_the_import():
    """A row whose target is gone (a table the checks let through) raises,
    naming it, where that API is called; the rest works."""
    out = _run("""
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


def test_device_keywords_match_whatever_strings_a_row_names_them_with():
    """The keyword names of a row are compared with a call's by identity
    once interned: names made at run time (a rules file's) match as the
    table file's do."""
    out = _run("""
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


def test_a_deferred_row_that_fails_waits_for_the_next_import():
    out = _run("""
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


def test_a_held_factory_set_stays_torchs_after_disable():
    """Code that took torch's own _device_constructors before the import
    (torch's compiler does) gets the builtins from it, during migration and
    after."""
    out = _run("""
import torch, torch.utils._device
held = torch.utils._device._device_constructors
import transfer_to_npu
print(torch._C._VariableFunctions.ones in held())
transfer_to_npu.disable()
with torch.device("meta"):
    print(torch.ones(2).device)
""")
    assert out.split() == ["True", "meta"]


def test_the_core_refuses_to_be_disabled_while_installing():
    """Code a resolver runs can neither disable nor change the rows under
    enable(): it fails whole, and torch is left as it was."""
    out = _run("""
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
