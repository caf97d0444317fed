"""What is learnt from torch once per build is cached on disk, read back by
the next process, and never needed: a missing, corrupt or unwritable cache
only costs time."""
import glob
import json
import os

from conftest import run_python

PROBE = """
import torch, transfer_to_npu
x = torch.arange(4.0, device="cuda") + 1
print(torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "PrivateUse1"),
      torch.zeros(2, device="cuda").device, x.sum().item())
"""


def _run(cache_dir):
    proc = run_python(["-c", PROBE], env={"TRANSFER_TO_NPU_CACHE_DIR": str(cache_dir)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def _cache_file(cache_dir):
    files = glob.glob(os.path.join(str(cache_dir), "torch-*.json"))
    assert len(files) == 1, files
    return files[0]


def test_written_once_then_read(tmp_path):
    assert _run(tmp_path) == ["True", "npu:0", "10.0"]
    path = _cache_file(tmp_path)
    data = json.load(open(path))
    assert data["sections"]["takes_device"]["zeros"] is True
    assert "aten::add.Tensor" in data["sections"]["host_kernels"]["names"]
    # A process that finds the facts reads them rather than torch: with
    # add.Tensor taken out, the npu has no kernel of its own for it (the
    # generic fallback still runs it).
    data["sections"]["host_kernels"]["names"].remove("aten::add.Tensor")
    json.dump(data, open(path, "w"))
    assert _run(tmp_path) == ["False", "npu:0", "10.0"]


def test_corrupt_cache_is_learnt_again(tmp_path):
    _run(tmp_path)
    path = _cache_file(tmp_path)
    with open(path, "w") as f:
        f.write("{not json")
    assert _run(tmp_path) == ["True", "npu:0", "10.0"]
    assert "host_kernels" in json.load(open(path))["sections"]


def test_no_cache(tmp_path):
    proc = run_python(["-c", PROBE], env={"TRANSFER_TO_NPU_CACHE_DIR": ""},
                      cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "npu:0", "10.0"]


def test_unwritable_cache_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _run(blocker / "cache") == ["True", "npu:0", "10.0"]
