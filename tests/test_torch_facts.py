"""What is learnt from torch once per build is cached on disk, read back by
the next process, and never needed: a missing, corrupt or unwritable cache
only costs time."""
import glob
import json
import os

import pytest

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


def _section_file(cache_dir, section):
    """The file of one section of facts: one directory per torch build."""
    builds = glob.glob(os.path.join(str(cache_dir), "torch-*"))
    assert len(builds) == 1, builds
    return os.path.join(builds[0], f"{section}.json")


def _forget_table(cache_dir):
    """Take out the mapping table kept beside the facts: the next process
    derives it, reading the facts the rules need."""
    tables = glob.glob(os.path.join(str(cache_dir), "torch-*", "table-*"))
    assert tables
    for path in tables:
        os.remove(path)


def test_written_once_then_read(tmp_path):
    assert _run(tmp_path) == ["True", "npu:0", "10.0"]
    builtins = json.load(open(_section_file(tmp_path, "device_builtins")))["facts"]
    assert "zeros" in builtins["torch"] and "add" not in builtins["torch"]
    assert "fftfreq" in builtins["torch.fft"]
    path = _section_file(tmp_path, "host_kernels")
    data = json.load(open(path))
    assert "aten::add.Tensor" in data["facts"]["names"]
    factories = json.load(open(_section_file(tmp_path, "backend_select")))["facts"]
    assert "aten::empty.memory_format" in factories["host_kernels"]
    assert "aten::_to_copy" in factories["names"]
    # A process that finds the facts reads them rather than torch: with
    # add.Tensor taken out, the npu has no kernel of its own for it (the
    # generic fallback still runs it).
    data["facts"]["names"].remove("aten::add.Tensor")
    json.dump(data, open(path, "w"))
    assert _run(tmp_path) == ["False", "npu:0", "10.0"]


def test_rules_read_which_builtins_take_a_device(tmp_path):
    # The torch.* functions given a device-argument row come from the cache
    # once it is written: with zeros taken out, torch.zeros is not mapped.
    _run(tmp_path)
    path = _section_file(tmp_path, "device_builtins")
    data = json.load(open(path))
    data["facts"]["torch"].remove("zeros")
    json.dump(data, open(path, "w"))
    _forget_table(tmp_path)
    probe = ("import torch, transfer_to_npu; print(sorted(m['source'] for m in "
             "transfer_to_npu.mappings() if m['source'] in ('torch.zeros', 'torch.ones')))")
    proc = run_python(["-c", probe], env={"TRANSFER_TO_NPU_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['torch.ones']"


def test_import_reads_only_what_it_needs(tmp_path):
    # The cpu kernels' list is for the first npu tensor, not for the import;
    # which builtins take a device, for deriving the mapping table, which
    # the import reads from its own file.
    _run(tmp_path)
    probe = ("import torch, transfer_to_npu; from transfer_to_npu import _torch_facts; "
             "print(sorted(_torch_facts._state['sections']))")
    proc = run_python(["-c", probe], env={"TRANSFER_TO_NPU_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['backend_select']"]
    _forget_table(tmp_path)
    proc = run_python(["-c", probe], env={"TRANSFER_TO_NPU_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['backend_select',", "'device_builtins']"]


@pytest.mark.parametrize("section", ["host_kernels", "backend_select", "device_builtins"])
def test_corrupt_cache_is_learnt_again(tmp_path, section):
    _run(tmp_path)
    path = _section_file(tmp_path, section)
    with open(path, "w") as f:
        f.write("{not json")
    _forget_table(tmp_path)  # so that every section is needed
    assert _run(tmp_path) == ["True", "npu:0", "10.0"]
    assert json.load(open(path))["facts"]


def test_no_cache(tmp_path):
    proc = run_python(["-c", PROBE], env={"TRANSFER_TO_NPU_CACHE_DIR": ""},
                      cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "npu:0", "10.0"]


def test_unwritable_cache_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert _run(blocker / "cache") == ["True", "npu:0", "10.0"]
