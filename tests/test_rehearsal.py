"""A converted copy runs on torch_npu as it is: rehearsed here on the
virtual NPU presented as torch_npu, with nothing of CUDA's mapped
(``python -m transfer_to_npu --rehearse``, ``TRANSFER_TO_NPU=rehearse``).

tests/data/patterns holds CUDA code in the shapes real code bases have
(litgpt's choice of Lightning's accelerator, its mocked device count and
GPU vendor check, vit-pytorch's flash attention set-up, timm's prefetch
loader and its device from the environment, x-transformers' skip of
pre-Ampere GPUs, gpt-neox's apex extension by name...): unedited through
the runtime migration, and converted then rehearsed, each pattern gives
the same result."""
import re
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, run_python

from transfer_to_npu.static import convert

PATTERNS = ROOT / "tests" / "data" / "patterns"

PROBE = textwrap.dedent("""\
    import importlib.util, os, subprocess, sys
    import torch
    import torch_npu
    import transfer_to_npu
    from torch_npu.optim import NpuFusedAdamW

    x = torch.ones(2, 4, device="npu")
    print("npu", torch.npu.is_available(), x.device,
          round(torch_npu.npu_rms_norm(x, x[0])[0].sum().item(), 3))
    print("cuda", torch.cuda.is_available(), torch.cuda.device_count())
    for make in (lambda: torch.ones(1).cuda(), lambda: torch.zeros(1, device="cuda")):
        try:
            make()
            print("cuda tensor made")
        except (AssertionError, RuntimeError) as exc:
            print("no cuda tensor")
    print("migrating", transfer_to_npu.is_enabled(), transfer_to_npu.mappings() == [])
    print("flash_attn", importlib.util.find_spec("flash_attn") is not None)
    child = subprocess.run([sys.executable, "-c", "import torch, torch_npu; "
                            "print(torch.npu.is_available(), torch.cuda.is_available())"],
                           capture_output=True, text=True)
    print("child", child.stdout.strip(), child.returncode)
    from torch_npu.contrib import transfer_to_npu as one_liner  # Ascend's migration, on
    print("one-liner", transfer_to_npu.is_enabled(), torch.cuda.is_available())
""")


def test_rehearsal_is_torch_npu_without_cuda_mapping(tmp_path):
    """torch_npu's API on the npu; CUDA's spellings as torch_npu leaves
    them (no CUDA here); the processes the script starts the same; the
    packages served only while migrating (flash_attn) absent."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    proc = run_python(["-m", "transfer_to_npu", "--rehearse", str(script)],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "npu True npu:0 8.0", "cuda False 0", "no cuda tensor", "no cuda tensor",
        "migrating False True", "flash_attn False", "child True False 0",
        "one-liner True True"]
    proc = run_python(["-m", "transfer_to_npu", "--rehearse", "--list"])
    assert proc.returncode == 2 and "--rehearse" in proc.stderr


LINE = re.compile(r"^([\w ]+): (.*)$", re.M)

# What each pattern gives, both ways: the meaning the original has on an
# Ampere GPU (or the path it takes without one, where the conversion leaves
# its test as written).
EXPECTED = {
    "torch imported": "True",
    "default device": "('npu', 3.0)",
    "guarded api": "[2.0, 2.0, 2.0]",
    "capability": "(8, 0)",
    "cuda version": "('12.1', True)",
    "bf16": "True",
    "memory known": "True",
    "flash config": "a100",
    "ampere test skipped": "False",
    "mocked count": "3",
    "vendor": "skipped",
    "vendor mocked off": "no gpus",
    "vendor mocked on": "unrecognized GARAGE GPU",
    "loader": "(True, 2.0)",
    "visible": "0",
    "extension": "None",
    "env device": "npu",
}


def test_patterns_both_ways(tmp_path):
    """Each pattern unedited through the runtime migration, and converted
    then rehearsed without it: the same result, the meaning the original
    has on a GPU."""
    report = convert.convert(str(PATTERNS), str(tmp_path / "converted"))
    env = {"TRANSFER_TO_NPU_BACKEND": "virtual", "PYTHONPATH": None}
    runs = [(["-m", "transfer_to_npu", str(PATTERNS / "main.py")], PATTERNS),
            (["-m", "transfer_to_npu", "--rehearse", str(tmp_path / "converted" / "main.py")],
             tmp_path / "converted")]
    with ThreadPoolExecutor(2) as pool:
        migrated, rehearsed = pool.map(lambda run: run_python(run[0], cwd=run[1], env=env), runs)
    for proc in (migrated, rehearsed):
        assert proc.returncode == 0, proc.stderr
    # Lightning's accelerator: migrated, its CUDA accelerator runs on the npu;
    # torch_npu as it is gives Lightning none, and the copy keeps the choice
    # the original makes without a GPU.
    assert dict(LINE.findall(migrated.stdout)) == dict(EXPECTED, accelerator="cuda")
    assert dict(LINE.findall(rehearsed.stdout)) == dict(EXPECTED, accelerator="cpu")
    # What stays as written is in the report, each test with what stops it.
    left = {(r["file"].rpartition("/")[2], r["line"], r["api"]) for r in report.rows("unsupported")
            if r["kind"] == "hand_edit"}
    assert {("util.py", 15, "torch.cuda.is_available"),    # guards accelerator = "cuda"
            ("util.py", 35, "torch.Tensor.is_cuda"),       # guards an NVTX range
            ("util.py", 43, "torch.cuda.is_available"),    # guards nvidia-smi
            } <= left
