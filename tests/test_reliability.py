"""Reliability: bad input, threads, processes, repeated enabling, leaks,
and a broken environment.  Nothing here may crash the interpreter."""
import gc
import importlib
import sys
import textwrap

import pytest
import torch
import torch.nn as nn

import transfer_to_npu
from conftest import calls, npu, run_python

BAD_STRINGS = ["cuda:x", "cuda:-1", "cuda:1:2", "cuda:", "cuda: 0", "cuda:0 ", "cuda:01"]

# Every kind of device-taking call, as a function of the device argument.
CALLS = {
    "torch.device": lambda d: torch.device(d),
    "torch.zeros": lambda d: torch.zeros(1, device=d),
    "torch.tensor": lambda d: torch.tensor([1.0], device=d),
    "Tensor.to(pos)": lambda d: torch.ones(1).to(d),
    "Tensor.to(kw)": lambda d: torch.ones(1).to(device=d),
    "Tensor.cuda": lambda d: torch.ones(1).cuda(d),
    "Tensor.new_zeros": lambda d: torch.ones(1).new_zeros(2, device=d),
    "Module.to": lambda d: nn.Linear(1, 1).to(d),
    "torch.cuda.set_device": lambda d: torch.cuda.set_device(d),
    "torch.cuda.synchronize": lambda d: torch.cuda.synchronize(d),
    "torch.load": lambda d: torch.load(__file__ + ".missing", map_location=d),
    "torch.UntypedStorage": lambda d: torch.UntypedStorage(4, device=d),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("bad", BAD_STRINGS)
def test_malformed_cuda_strings_raise_naming_the_value(call, bad):
    with pytest.raises(Exception) as info:
        CALLS[call](bad)
    assert repr(bad) in str(info.value) or bad in str(info.value), str(info.value)
    assert isinstance(info.value, (ValueError, RuntimeError))


def _outcome(fn):
    try:
        result = fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "returned", type(result).__name__


@pytest.mark.parametrize("call", sorted(set(CALLS) - {"torch.load", "Tensor.cuda",
                                                       "torch.cuda.set_device",
                                                       "torch.cuda.synchronize"}))
@pytest.mark.parametrize("bad", [3.5, object(), ["cuda"], {"cuda": 0}, 1j])
def test_wrong_types_behave_as_in_torch(migrated, call, bad):
    """A value of the wrong type is no device specification: the call does
    what torch does with it, error or not."""
    migrated.disable()
    try:
        plain = _outcome(lambda: CALLS[call](bad))
    finally:
        migrated.enable()
    assert _outcome(lambda: CALLS[call](bad)) == plain


def test_values_that_are_not_device_specs_are_untouched():
    # Strings that merely contain "cuda" reach torch as they were written.
    for spec in ("cudax", "CUDA", " cuda", "cuda_0", "/data/cuda:0/x"):
        with pytest.raises(RuntimeError) as info:
            torch.zeros(1, device=spec)
        assert spec in str(info.value)


def test_rescanning_modules_refuses_names_it_cannot_compare_without_running_code():
    """rebind() reads sys.modules in place, which holds only while choosing
    the modules runs no code: a package name whose comparison could (a str
    subclass, any object) is refused first, naming it."""
    from transfer_to_npu import _C

    compared = []

    class Name(str):
        def __eq__(self, other):
            compared.append(other)
            return False

        __hash__ = str.__hash__

    for skip in (frozenset({Name("torch")}), frozenset({"torch", 3})):
        with pytest.raises(TypeError, match="skip must hold str package names"):
            _C.rebind({"torch": torch}, skip, ())
    with pytest.raises(TypeError, match="keep must hold str prefixes"):
        _C.rebind({"torch": torch}, frozenset({"torch"}), (b"torch.",))
    assert compared == []


def test_threads_count_exactly_with_the_log_on(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text(textwrap.dedent("""
        import threading
        import transfer_to_npu, torch

        x = torch.ones(2).to("cuda")
        errors = []

        def work():
            try:
                for _ in range(100_000):
                    y = x.to("cuda")
                    assert y is x
                torch.cuda.synchronize()
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        calls = {m["source"]: m["calls"] for m in transfer_to_npu.mappings()}
        print(calls["torch.Tensor.to"], calls["torch.cuda.synchronize"])
    """))
    log = tmp_path / "m.log"
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "1",
                                          "TRANSFER_TO_NPU_LOG_FILE": str(log)}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["800001", "8"]
    lines = [l for l in log.read_text().splitlines() if "threads.py:" in l]
    assert len(lines) == 3  # one per mapping and call site


def test_enable_and_disable_while_threads_call(tmp_path):
    script = tmp_path / "toggle.py"
    script.write_text(textwrap.dedent("""
        import threading
        import transfer_to_npu, torch

        stop = threading.Event()
        errors = []

        def work():
            while not stop.is_set():
                try:
                    d = torch.device("cuda:0")
                    assert d.type in ("cuda", "npu")
                    torch.cuda.is_available()
                    torch.zeros(1, device="cpu")
                except Exception as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in range(200):
            transfer_to_npu.disable()
            transfer_to_npu.enable()
        stop.set()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert torch.device("cuda").type == "npu"
        assert torch.zeros.__wrapped__ is torch._C._VariableFunctions.zeros
        print("ok")
    """))
    proc = run_python([str(script)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_fork_after_enable(tmp_path):
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import os
        import transfer_to_npu, torch
        from torch.utils.data import DataLoader, Dataset

        class Data(Dataset):
            def __len__(self):
                return 4
            def __getitem__(self, i):
                return torch.full((2,), float(i)), str(torch.device("cuda"))

        pid = os.fork()
        if pid == 0:
            ok = torch.ones(2).to("cuda").device.type == "npu"
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        loader = DataLoader(Data(), batch_size=2, num_workers=2,
                            multiprocessing_context="fork")
        seen = [(b[0].sum().item(), tuple(b[1])) for b in loader]
        assert seen == [(2.0, ("npu", "npu")), (10.0, ("npu", "npu"))], seen
        print("ok")
    """))
    proc = run_python([str(script)], timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_import_twice_reload_and_cycles(migrated):
    import transfer_to_npu as again

    assert again is transfer_to_npu
    importlib.import_module("transfer_to_npu")
    reloaded = importlib.reload(transfer_to_npu)
    assert reloaded.backend == "virtual" and reloaded.is_enabled()
    zeros_original = torch._C._VariableFunctions.zeros
    to_original = torch._C.TensorBase.to
    for _ in range(10):
        transfer_to_npu.disable()
        assert torch.zeros is zeros_original
        assert "to" not in torch.Tensor.__dict__ and torch.Tensor.to is to_original
        assert torch.device("cuda").type == "cuda"
        transfer_to_npu.enable()
        assert torch.zeros.__wrapped__ is zeros_original
        assert torch.Tensor.to.__wrapped__ is to_original
    before = calls("torch.zeros")
    torch.zeros(1, device="cuda")
    assert calls("torch.zeros") == before + 1


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_a_million_calls_leak_nothing():
    x = torch.ones(2).to("cuda")
    spec = "cuda:0"
    dev = torch.device("cuda")
    m = nn.Linear(1, 1)

    def run(n):
        for _ in range(n):
            x.to(spec)               # rewrite
            x.to(torch.float32)      # pass-through
            x.to(dev)                # a device object
            torch.device("cuda", 0)  # the constructor slot
            torch.cuda.is_available()
            x.is_cuda
        m.to(spec)

    run(20_000)  # warm: caches, allocator pools
    gc.collect()
    refs = (sys.getrefcount(x), sys.getrefcount(spec), sys.getrefcount(dev))
    before = _rss_kb()
    run(1_000_000 // 6)
    gc.collect()
    assert _rss_kb() - before < 2048, "resident memory grew"
    assert (sys.getrefcount(x), sys.getrefcount(spec), sys.getrefcount(dev)) == refs


def test_refcounts_of_arguments_and_results():
    x = torch.ones(2)
    spec = "cuda:0"
    y = x.to(spec)
    # torch's factories are builtins the wrapper calls itself, with a tuple
    # and a dict of its own making.
    shape, f64 = (2, 3), torch.float64
    objects = (x, spec, y, shape, f64)
    counts = [sys.getrefcount(obj) for obj in objects]
    for _ in range(1000):
        z = x.to(spec)
        w = y.to(spec)
        t = torch.zeros(1, device=spec)
        e = torch.empty(shape)
        o = torch.ones(shape, dtype=f64)
    del z, w, t, e, o
    assert [sys.getrefcount(obj) for obj in objects] == counts


def test_torch_missing_is_a_clear_error():
    proc = run_python(["-c", "import sys; sys.modules['torch'] = None; import transfer_to_npu"])
    assert proc.returncode != 0
    assert "transfer_to_npu needs PyTorch 2.1 or newer, and it cannot be imported" in proc.stderr


def test_torch_too_old_is_a_clear_error(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("__version__ = '1.13.1'\n")
    proc = run_python(["-c", "import transfer_to_npu"], env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode != 0
    assert "needs PyTorch 2.1 or newer, found 1.13.1" in proc.stderr


def test_broken_torch_npu_falls_back_to_the_virtual_npu(tmp_path):
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(
        "raise ImportError('libascendcl.so: cannot open shared object file')\n")
    proc = run_python(["-c", "import transfer_to_npu; print(transfer_to_npu.backend)"],
                      env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "virtual"
    assert "torch_npu is installed but failed to import (libascendcl.so" in proc.stderr
    proc = run_python(["-c", "import transfer_to_npu"],
                      env={"PYTHONPATH": str(tmp_path), "TRANSFER_TO_NPU_BACKEND": "torch_npu"})
    assert proc.returncode != 0 and "libascendcl.so" in proc.stderr


def test_wrappers_copy_and_pickle_like_the_functions_they_stand_for():
    import copy
    import pickle

    assert copy.copy(torch.ones) is torch.ones
    assert copy.deepcopy(torch.ones) is torch.ones
    assert copy.deepcopy({"f": torch.zeros, "g": torch.cuda.synchronize})["f"] is torch.zeros
    assert pickle.loads(pickle.dumps(torch.zeros)) is torch.zeros
    assert pickle.loads(pickle.dumps(torch.cuda.synchronize)) is torch.cuda.synchronize
    # A builtin migrated for the API that calls it (Module.to's parser).
    parse_to = torch._C._nn._parse_to
    assert pickle.loads(pickle.dumps(parse_to)) is parse_to is not torch.nn.Module.to
