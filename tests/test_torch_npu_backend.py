"""With Ascend's torch_npu installed, the migration targets it: its
torch.npu, its amp, its profiler and its hccl.  Tested with an
API-compatible stand-in package (tests/stand_ins/torch_npu)."""
import json
import textwrap
from pathlib import Path

import pytest

from conftest import run_python

STAND_INS = Path(__file__).resolve().parent / "stand_ins"

SCRIPT = textwrap.dedent("""
    import json, os, tempfile, warnings
    warnings.simplefilter("ignore", FutureWarning)
    import transfer_to_npu
    import torch, torch_npu
    import torch.distributed as dist

    out = {"backend": transfer_to_npu.backend,
           "torch.npu is torch_npu.npu": torch.npu is torch_npu.npu,
           "stand-in": getattr(torch_npu, "STAND_IN", False)}
    x = torch.zeros(2, device="cuda")
    out["tensor"] = str(x.device)
    torch.cuda.synchronize()
    torch.cuda.set_device(0)
    out["npu calls"] = list(torch_npu.npu.calls)

    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        y = torch.nn.Linear(2, 2).cuda()(torch.ones(1, 2, device="cuda"))
    out["amp made"] = list(torch_npu.npu.amp.made)
    out["scaler is torch_npu's"] = isinstance(scaler, torch_npu.npu.amp.GradScaler)
    out["autocast dtype"] = str(y.dtype)

    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        (x + 1).sum()
    out["profiler"] = torch_npu.profiler.used
    out["profile is torch_npu's"] = isinstance(prof, torch_npu.profiler.profile)

    dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), world_size=1,
                            rank=0)
    out["dist backend"] = dist.get_backend()
    t = torch.ones(3, device="cuda")
    dist.all_reduce(t)
    out["all_reduce"] = t.cpu().tolist()
    dist.destroy_process_group()
    graph = torch.cuda.CUDAGraph()
    torch.cuda.memory._record_memory_history("all")
    out["renamed"] = [type(graph).__name__, torch_npu.npu.calls[-1]]
    out["targets"] = sorted({m["target"].split(".")[1] for m in transfer_to_npu.mappings()
                             if m["source"].startswith("torch.cuda.")
                             and m["kind"] in ("function", "class")
                             and m["target"].startswith("torch.")})
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    script = tmp_path_factory.mktemp("torch_npu") / "train.py"
    script.write_text(SCRIPT)
    report = script.parent / "report.json"
    proc = run_python([str(script)], env={"PYTHONPATH": str(STAND_INS),
                                          "TRANSFER_TO_NPU_REPORT": str(report)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), json.loads(report.read_text())


def test_backend_is_torch_npu(result):
    out, report = result
    assert out["backend"] == "torch_npu" and out["stand-in"] is True
    assert out["torch.npu is torch_npu.npu"] is True
    assert report["backend"] == "torch_npu"
    assert out["tensor"] == "npu:0"


def test_cuda_calls_reach_torch_npu_npu(result):
    out, _ = result
    assert out["npu calls"] == ["synchronize", "set_device"]
    assert out["targets"] == ["npu"]


def test_renamed_counterparts_are_torch_npus(result):
    out, report = result
    assert out["renamed"] == ["NPUGraph", "_record_memory_history"]
    counted = {m["source"]: m["target"] for m in report["mappings"]}
    assert counted["torch.cuda.CUDAGraph"] == "torch.npu.NPUGraph"
    assert counted["torch.cuda.memory._record_memory_history"] == \
        "torch.npu.memory._record_memory_history"


def test_amp_is_torch_npus(result):
    out, _ = result
    assert out["amp made"] == ["GradScaler", "autocast"]
    assert out["scaler is torch_npu's"] is True
    assert out["autocast dtype"] == "torch.bfloat16"


def test_profiler_is_torch_npus(result):
    out, _ = result
    assert out["profiler"] == [["CPU", "NPU"]]
    assert out["profile is torch_npu's"] is True


def test_hccl_is_torch_npus(result):
    out, _ = result
    assert out["dist backend"] == "hccl"
    assert out["all_reduce"] == [1.0, 1.0, 1.0]


def test_forced_virtual_ignores_torch_npu(tmp_path):
    proc = run_python(["-c", "import transfer_to_npu, sys; print(transfer_to_npu.backend, "
                             "'torch_npu' in sys.modules)"],
                      env={"PYTHONPATH": str(STAND_INS), "TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["virtual", "False"]
