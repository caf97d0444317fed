"""CUDA APIs with no NPU counterpart: a no-op where harmless, an error where
results would be wrong; either way one warning per call site and an entry
in the report."""
import json
import textwrap

import pytest
import torch

import transfer_to_npu
from conftest import calls, run_python


def _warnings_for(fn):
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [w for w in seen if "no NPU counterpart" in str(w.message)]


def test_nvtx_is_a_noop_warned_once_per_site():
    def two_calls_one_site():
        for _ in range(2):
            torch.cuda.nvtx.range_push("step")  # one call site
            torch.cuda.nvtx.range_pop()

    first = _warnings_for(two_calls_one_site)
    assert sorted(str(w.message).split()[1] for w in first) == [
        "torch.cuda.nvtx.range_pop", "torch.cuda.nvtx.range_push"]
    assert all(w.filename == __file__ for w in first)
    assert _warnings_for(two_calls_one_site) == []  # the same sites: no more warnings
    with torch.cuda.nvtx.range("block"):
        x = torch.ones(1, device="cuda")
    assert x.device.type == "npu"


def test_memory_fraction_is_checked_then_skipped():
    seen = _warnings_for(lambda: torch.cuda.set_per_process_memory_fraction(0.5, 0))
    assert len(seen) == 1  # the virtual NPU has no cap to set
    with pytest.raises(ValueError, match="fraction=1.5"):
        torch.cuda.set_per_process_memory_fraction(1.5)
    with pytest.raises(TypeError, match="fraction=1"):
        torch.cuda.set_per_process_memory_fraction(1)


def test_cuda_graphs_raise():
    with pytest.raises(NotImplementedError, match="torch.cuda.CUDAGraph has no NPU counterpart"):
        torch.cuda.CUDAGraph()
    with pytest.raises(NotImplementedError, match="CUDA graphs"):
        torch.cuda.make_graphed_callables(lambda x: x, (torch.ones(1),))
    # Still the class for isinstance.
    assert not isinstance(object(), torch.cuda.CUDAGraph)


def test_jiterator_raises():
    with pytest.raises(NotImplementedError, match="jiterator"):
        torch.cuda.jiterator._create_jit_fn("template <typename T> T f(T x) { return x; }")


def test_stream_capture_query_is_exact():
    assert torch.cuda.is_current_stream_capturing() is False


def test_counted_and_reported(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import transfer_to_npu, torch
        for _ in range(3):
            torch.cuda.nvtx.mark("m")
        try:
            torch.cuda.CUDAGraph()
        except NotImplementedError:
            pass
    """))
    report = tmp_path / "report.json"
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_REPORT": str(report)})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    by_api = {u["api"]: u for u in data["unsupported"]}
    assert by_api["torch.cuda.nvtx.mark"]["count"] == 3
    assert by_api["torch.cuda.nvtx.mark"]["sites"] == [f"{script}:4"]
    assert by_api["torch.cuda.CUDAGraph"]["count"] == 1
    assert all(m["source"] != "torch.cuda.nvtx.mark" for m in data["mappings"])
    assert proc.stderr.count("torch.cuda.nvtx.mark has no NPU counterpart") == 1


def test_every_unsupported_entry_is_in_the_table():
    rows = {m["source"]: m for m in transfer_to_npu.mappings()}
    for name in ("torch.cuda.nvtx.range_push", "torch.cuda.CUDAGraph", "torch.cuda.cudart"):
        assert rows[name]["kind"] == "unsupported"
    before = calls("torch.cuda.nvtx.mark")
    torch.cuda.nvtx.mark("x")
    assert calls("torch.cuda.nvtx.mark") == before + 1
