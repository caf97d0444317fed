"""enable(), disable(), is_enabled(), mappings(), backend: the public
contract."""
import textwrap

import pytest
import torch

import transfer_to_npu
from conftest import calls, run_python


def test_import_enables_on_the_virtual_npu():
    assert transfer_to_npu.is_enabled()
    assert transfer_to_npu.backend == "virtual"
    assert torch.npu.VIRTUAL is True


def test_enable_is_idempotent(migrated):
    before = {m["source"]: m["calls"] for m in transfer_to_npu.mappings()}
    transfer_to_npu.enable()
    transfer_to_npu.enable()
    import importlib
    importlib.import_module("transfer_to_npu")
    assert {m["source"]: m["calls"] for m in transfer_to_npu.mappings()} == before
    # Not wrapped twice: the wrapper's original is torch's own function.
    assert torch.zeros.__wrapped__ is torch._C._VariableFunctions.zeros


def test_mappings_shape():
    rows = transfer_to_npu.mappings()
    assert rows and all(set(r) == {"source", "target", "kind", "calls"} for r in rows)
    by_source = {r["source"]: r for r in rows}
    assert by_source["torch.cuda.synchronize"]["target"] == "torch.npu.synchronize"
    assert by_source["torch.cuda.synchronize"]["kind"] == "function"
    assert by_source["torch.Tensor.cuda"]["target"] == "torch.Tensor.npu"
    assert by_source["torch.device"]["kind"] == "constructor"
    assert len(by_source) == len(rows)


def test_mappings_count_calls():
    before = calls("torch.cuda.is_available")
    for _ in range(5):
        torch.cuda.is_available()
    assert calls("torch.cuda.is_available") == before + 5


class _CudaAsked(Exception):
    pass


def _refuse_cuda():
    raise _CudaAsked


def test_disable_then_enable(migrated, monkeypatch):
    wrapper = torch.zeros
    transfer_to_npu.disable()
    try:
        assert not transfer_to_npu.is_enabled()
        assert torch.zeros is torch._C._VariableFunctions.zeros
        assert "to" not in torch.Tensor.__dict__
        assert torch.device("cuda").type == "cuda"
        assert type(torch.Event(device="npu")) is torch.Event
        assert type(torch.Stream(device="npu")) is torch.Stream
        if not torch.backends.cuda.is_built():
            assert torch.cuda.is_available() is False
        # A reference kept from before behaves as the original now: it asks
        # torch to initialise CUDA (refused here: a machine's GPU is never
        # touched).
        assert wrapper(2).device.type == "cpu"
        monkeypatch.setattr(torch.cuda, "_lazy_init", _refuse_cuda)
        with pytest.raises(_CudaAsked):
            wrapper(2, device="cuda")
    finally:
        monkeypatch.undo()
        transfer_to_npu.enable()
    assert isinstance(torch.Stream(device="cuda"), torch.npu.Stream)
    before = calls("torch.zeros")
    assert torch.zeros(1, device="cuda").device.type == "npu"
    assert wrapper(1, device="cuda").device.type == "npu"
    assert calls("torch.zeros") == before + 2


def test_disable_restores_every_original_by_identity():
    """In a fresh interpreter: everything patched is the very object torch
    had before the import."""
    code = textwrap.dedent("""
        import torch, torch.nn, torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
        owners = {"torch": torch, "torch.cuda": torch.cuda, "Tensor": torch.Tensor,
                  "Module": torch.nn.Module, "dist": dist, "c10d": c10d}
        def snapshot():
            return {(o, k): v for o, obj in owners.items() for k, v in vars(obj).items()}
        before = snapshot()
        device_new = torch.device.__new__
        import transfer_to_npu
        during = snapshot()
        # Patched: replaced, or added where the class inherited the name.
        changed = [k for k, v in during.items() if k not in before or before[k] is not v]
        assert len(changed) > 50, changed
        assert torch.device("cuda:1").type == "npu"
        transfer_to_npu.disable()
        after = snapshot()
        # The npu device itself (torch.npu, Tensor.npu, ...) stays; every
        # patch is gone.
        bad = [k for k in before if k not in after or after[k] is not before[k]]
        bad += [k for k in changed if k not in before and k in after
                and type(after[k]).__module__ == "transfer_to_npu._C"
                and type(after[k]).__name__ != "NpuMethod"]  # Tensor.npu, the device's
        assert not bad, bad
        assert torch.device("cuda:1").type == "cuda"
        assert torch.device.__new__ == device_new
        print("restored", len(changed))
    """)
    proc = run_python(["-c", code])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("restored")


def test_import_before_torch_works():
    proc = run_python(["-c", "import transfer_to_npu, torch; "
                       "print(torch.zeros(1, device='cuda').device)"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "npu:0"


def test_backend_can_be_forced(tmp_path):
    proc = run_python(["-c", "import transfer_to_npu; print(transfer_to_npu.backend)"],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.stdout.strip() == "virtual", proc.stderr
    proc = run_python(["-c", "import transfer_to_npu"], env={"TRANSFER_TO_NPU_BACKEND": "bogus"})
    assert proc.returncode != 0 and "TRANSFER_TO_NPU_BACKEND" in proc.stderr
    assert "'bogus'" in proc.stderr
    proc = run_python(["-c", "import transfer_to_npu"],
                      env={"TRANSFER_TO_NPU_BACKEND": "torch_npu"})
    assert proc.returncode != 0 and "torch_npu cannot be imported" in proc.stderr


# --- all or nothing -----------------------------------------------------------

REFUSER = """
import sys, types
from torch.cuda import synchronize
class Refusing(types.ModuleType):
    def __setattr__(self, name, value):
        raise {error}(f"{{name}} is read-only")
sys.modules[__name__].__class__ = Refusing
"""

PROBE_STATE = """
import torch
original = [torch.cuda.synchronize]  # in a list: not a name that migration rebinds
try:
    import transfer_to_npu
    print("imported")
except Exception as e:
    print("failed", type(e).__name__)
import refuser
print(torch.device("cuda").type, torch.cuda.synchronize is original[0],
      refuser.synchronize is original[0])
"""


def _probe_state(tmp_path, error):
    (tmp_path / "refuser.py").write_text(REFUSER.format(error=error))
    code = "import torch, refuser\n" + PROBE_STATE
    # python -c puts the working directory first on sys.path.
    proc = run_python(["-c", code], cwd=str(tmp_path), env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_a_module_that_refuses_rebinding_keeps_its_name_and_the_rest_migrates(tmp_path):
    assert _probe_state(tmp_path, "AttributeError") == ["imported", "npu", "False", "True"]


def test_a_failed_import_leaves_torch_unpatched(tmp_path):
    """Any other error while patching fails the import whole: torch.device
    and torch.cuda are torch's own again."""
    assert _probe_state(tmp_path, "TypeError") == ["failed", "TypeError", "cuda", "True", "True"]


# A setting that fails the import, and the script's retry once it is fixed
# (as the setting's error says): the import in the script, or torch's with
# TRANSFER_TO_NPU=1.
RETRY = """
import os, sys
setting, value = sys.argv[1], sys.argv[2]
os.environ[setting] = value
try:
    import {first}
    print("imported")
except Exception as exc:
    print("failed", type(exc).__name__)
del os.environ[setting]
import torch, transfer_to_npu
print(transfer_to_npu.backend, torch.zeros(1, device="cuda").device,
      torch.cuda.synchronize is torch.npu.synchronize or "migrated")
"""


@pytest.mark.parametrize("first", ["transfer_to_npu", "torch"],
                         ids=["import transfer_to_npu", "TRANSFER_TO_NPU=1"])
@pytest.mark.parametrize("setting, value", [
    ("TRANSFER_TO_NPU_LOG", "7"), ("TRANSFER_TO_NPU_VIRTUAL_DEVICES", "abc"),
    ("TRANSFER_TO_NPU_BACKEND", "nope"), ("TRANSFER_TO_NPU_RULES", "RULES")])
def test_an_import_that_fails_on_a_setting_works_once_it_is_fixed(tmp_path, first, setting,
                                                                 value):
    """A setting the import refuses leaves nothing registered with torch:
    the import tried again in the same process, once the setting is fixed,
    migrates (torch's own import too, under TRANSFER_TO_NPU=1: it fails with
    the setting's error, and the retry finds torch imported)."""
    rules = tmp_path / "rules.json"
    rules.write_text('{"rules": {"Renames": []}}')
    proc = run_python(["-c", RETRY.format(first=first), setting,
                       str(rules) if value == "RULES" else value],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                           "TRANSFER_TO_NPU": "1" if first == "torch" else None})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("failed ") and lines[1] == "virtual npu:0 migrated", lines


def test_an_install_interrupted_half_way_is_taken_up_again(tmp_path):
    """The virtual NPU's install failing in a step (here torch.distributed
    refusing the hccl backend once): the import tried again installs the
    rest, where torch refused to register the first steps twice."""
    code = textwrap.dedent("""
        import torch, torch.distributed as dist
        register = dist.Backend.register_backend
        def once(*args, **kwargs):
            dist.Backend.register_backend = register
            raise RuntimeError("refused once")
        dist.Backend.register_backend = once
        try:
            import transfer_to_npu
        except RuntimeError as exc:
            print(exc)
        import transfer_to_npu
        print(torch.zeros(1, device="cuda").device, dist.is_nccl_available())
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["refused once", "npu:0 True"]


def test_keys_of_sys_modules_that_are_not_str_are_passed_over():
    proc = run_python(["-c", "import sys, torch\nsys.modules[42] = sys\nsys.modules[('a',)] = sys\n"
                             "import transfer_to_npu\nprint(torch.ones(1, device='cuda').device)"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["npu:0"]


def test_enable_and_disable_while_another_thread_imports_scripted_modules():
    """torch.distributed.optim compiles TorchScript at its import: a wrapper
    of a builtin is known to TorchScript before it is in place, so enabling
    and disabling meanwhile never breaks that import."""
    code = textwrap.dedent("""
        import importlib, sys, threading, torch, transfer_to_npu
        errors, stop = [], []
        def toggle():
            while not stop:
                transfer_to_npu.disable()
                transfer_to_npu.enable()
        t = threading.Thread(target=toggle)
        t.start()
        for _ in range(10):
            for name in [n for n in sys.modules if n.startswith("torch.distributed.optim")]:
                del sys.modules[name]
            try:
                importlib.import_module("torch.distributed.optim")
            except Exception as e:
                errors.append(repr(e)[:200])
        stop.append(True)
        t.join()
        print(errors)
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
