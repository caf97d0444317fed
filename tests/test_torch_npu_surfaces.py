"""The table against each torch_npu release line's API surface (the names
its wheel's sources define, python/transfer_to_npu/surfaces/, written by
scripts/torch_npu_surface.py): every torch.cuda name with an NPU
counterpart in that release is mapped, under its own name or another, and
no row targets a name the release lacks."""
import importlib.util
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import transfer_to_npu
from conftest import ROOT, run_python
from transfer_to_npu import _environment, _rules, surfaces
from transfer_to_npu._rules.identity import FUNCTIONS as IDENTITY

LINES = surfaces.lines()

# torch.cuda path -> the torch_npu.npu path of its counterpart, where the
# names differ or the counterpart is private (what Ascend's transfer_to_npu
# maps by hand).
RENAMED = {
    "CUDAGraph": "NPUGraph",
    "graphs.CUDAGraph": "graphs.NPUGraph",
    "CUDAPluggableAllocator": "NPUPluggableAllocator",
    "memory.CUDAPluggableAllocator": "memory.NPUPluggableAllocator",
    "memory._record_memory_history": "memory._record_memory_history",
    "memory._snapshot": "memory._snapshot",
    "memory._dump_snapshot": "memory._dump_snapshot",
}


def _names(data, module):
    return data["modules"].get(module, {"names": {}})["names"]


def _has(data, path, root="torch_npu.npu"):
    """Whether the release defines root.<path> (through its submodules)."""
    module, _, name = f"{root}.{path}".rpartition(".")
    return name in _names(data, module)


def _has_cuda(path):
    obj = torch.cuda
    for part in path.split("."):
        if part not in vars(obj):
            return False
        obj = vars(obj)[part]
    return True


@pytest.fixture(scope="module", params=LINES)
def release(request):
    """(surface data, the table derived against it: source -> entry)."""
    torch_npu, npu = surfaces.load(request.param)
    rows, _ = _rules.derive(torch, npu, torch_npu)
    return surfaces.read(request.param), {e["source"]: e for e in _rules.entries(rows)}


def test_a_surface_per_release_line():
    assert LINES[0] == "2.1" and {"2.5", "2.6", "2.13"} <= set(LINES)
    for line in LINES:
        data = surfaces.read(line)
        assert data["torch_npu"].startswith(line + ".")
        assert "synchronize" in _names(data, "torch_npu.npu")


def test_same_named_counterparts_are_mapped(release):
    data, table = release
    npu = _names(data, "torch_npu.npu")
    expected = [n for n in torch.cuda.__all__ if not n.startswith("_")
                and npu.get(n, ["object"])[0] in ("function", "class", "extension")]
    assert len(expected) > 40
    for name in expected:
        if name in IDENTITY:  # what CUDA code asks about the device: identity.py's answer
            assert table[f"torch.cuda.{name}"]["target"] == IDENTITY[name][1], name
            continue
        assert table[f"torch.cuda.{name}"]["target"] == f"torch.npu.{name}", name
    assert table["torch.cuda.default_generators"]["target"] == "torch.npu.default_generators"


def test_renamed_counterparts_are_mapped(release):
    data, table = release
    found = 0
    for cuda, npu in RENAMED.items():
        if _has_cuda(cuda) and _has(data, npu):
            entry = table[f"torch.cuda.{cuda}"]
            assert (entry["target"], entry["kind"]) == (
                f"torch.npu.{npu}", "class" if "Graph" in npu or "Allocator" in npu
                else "function"), cuda
            found += 1
    assert found >= 6  # every line has NPUGraph, the allocator and its history


def test_no_row_targets_a_name_the_release_lacks(release):
    data, table = release
    for entry in table.values():
        target = entry["target"]
        if target.startswith("torch.npu."):
            assert _has(data, target[len("torch.npu."):]), entry
        elif target.startswith("torch_npu."):
            assert _has(data, target.rpartition(".")[2],
                        root=target.rpartition(".")[0]), entry


def test_no_counterpart_is_reported_unsupported(release):
    data, table = release
    npu = _names(data, "torch_npu.npu")
    for entry in table.values():
        name = entry["source"][len("torch.cuda."):]
        if entry["kind"] == "unsupported" and "." not in name:
            assert name not in npu, entry


def test_profiler_is_torch_npus(release):
    _, table = release
    for name in ("profile", "schedule", "tensorboard_trace_handler", "ProfilerAction"):
        assert table[f"torch.profiler.{name}"]["target"] == f"torch_npu.profiler.{name}"


def test_derived_entries_are_the_c_tables(migrated):
    """What --list --torch-npu prints is made from rows as the C core makes
    its table."""
    keys = ("source", "target", "kind")
    table = [tuple(m[k] for k in keys) for m in migrated.mappings()]
    migrated.disable()  # torch as it was when the table was derived
    rows, _ = _rules.derive(torch)
    migrated.enable()
    # The environment's rows, installed before the others (_environment.py).
    rows = _environment.rows() + rows + _environment.backend_rows(migrated.backend)
    assert [tuple(e[k] for k in keys) for e in _rules.entries(rows)] == table


def test_list_prints_a_releases_table():
    proc = run_python(["-m", "transfer_to_npu", "--list", "--torch-npu", "2.5"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# ") and "torch_npu 2.5.1" in lines[0]
    assert any(line.split() == ["torch.cuda.CUDAGraph", "class", "torch.npu.NPUGraph"]
               for line in lines)
    assert not any(line.startswith("torch.cuda.CUDAGraph ") and "unsupported" in line
                   for line in lines)


@pytest.mark.parametrize("value", ["2", "9.9", "latest", "2.x"])
def test_list_refuses_an_unknown_release(value):
    proc = run_python(["-m", "transfer_to_npu", "--list", "--torch-npu", value])
    assert proc.returncode == 2
    assert "--torch-npu" in proc.stderr and repr(value) in proc.stderr


def test_torch_npu_option_needs_list():
    proc = run_python(["-m", "transfer_to_npu", "--torch-npu", "2.5", "x.py"])
    assert proc.returncode == 2 and "--list" in proc.stderr


# --- the script that writes the surfaces -------------------------------------

def _script():
    spec = importlib.util.spec_from_file_location(
        "torch_npu_surface", ROOT / "scripts" / "torch_npu_surface.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


WHEEL = {
    "torch_npu/__init__.py": "import torch_npu.npu\n",
    "torch_npu/npu/__init__.py": (
        "__all__ = ['synchronize', 'NPUGraph', 'FloatTensor', 'seed', 'from_c']\n"
        "from typing import cast\n"
        "from .utils import synchronize\n"
        "from .graphs import NPUGraph\n"
        "def is_available():\n    return True\n"
        "from .random import *\n"
        "from torch_npu._C import from_c\n"
        "if cast:\n    def maybe(device, *, flag=False):\n        pass\n"
        "config = object()\n"
        "def __getattr__(name):\n    if name == 'lazy':\n        return 1\n"),
    "torch_npu/npu/utils.py": "def synchronize(device=None):\n    pass\n",
    "torch_npu/npu/graphs.py": "class NPUGraph:\n    def __init__(self, keep_graph=False):\n"
                               "        pass\n"
                               "    def replay(self):\n        pass\n"
                               "    @staticmethod\n    def pool(x: int = 1, *a, **kw):\n"
                               "        pass\n"
                               "class Sub(NPUGraph):\n    def __new__(cls, device=None):\n"
                               "        pass\n    def _private(self):\n        pass\n",
    "torch_npu/npu/random.py": "__all__ = ['seed']\nfrom . import is_available\n"
                               "def seed():\n    pass\n",
    "torch_npu/npu/memory.py": "def _record_memory_history(enabled='all', *args, **kw):\n"
                               "    pass\n",
    "torch_npu/csrc/aten/npu_functions.yaml": (
        "- func: npu_op(Tensor self, int[2] size=[1,1], float scale=1., *, str mode=\"a\", "
        "Reduction r=Mean) -> Tensor\n"
        "- func: npu_op.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
        "- func: npu_op.other(Tensor self, Tensor other) -> Tensor\n"),
}


def test_script_reads_names_kinds_and_parameters(tmp_path):
    script = _script()
    wheel = tmp_path / "torch_npu-9.9.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in WHEEL.items():
            z.writestr(name, text)
    modules = script.surface(script.Package(wheel))
    npu = modules["torch_npu.npu"]["names"]
    assert npu["synchronize"] == ["function", "(device=None)"]
    # A class: what a call of it takes, and its public methods.
    assert npu["NPUGraph"] == ["class", "(keep_graph=False)",
                               {"replay": "()", "pool": "(x=1, *a, **kw)"}]
    graphs = modules["torch_npu.npu.graphs"]["names"]
    assert graphs["Sub"] == ["class", "(device=None)", {"replay": "()", "pool": "(x=1, *a, **kw)"}]
    assert npu["maybe"] == ["function", "(device, *, flag=False)"]
    assert npu["seed"] == ["function", "()"]  # through the star import
    assert npu["FloatTensor"] == ["extension"]  # declared, defined in C
    assert npu["from_c"] == ["extension"]
    assert npu["cast"] == ["imported", "typing.cast"]
    assert npu["config"] == ["object"] and npu["lazy"] == ["object"]
    assert npu["memory"] == ["module"] and npu["graphs"] == ["module"]
    assert modules["torch_npu.npu.memory"]["names"]["_record_memory_history"] == [
        "function", "(enabled='all', *args, **kw)"]
    assert modules["torch_npu"]["names"]["npu_op"] == ["op"]
    # An operator's overloads as Python's binding takes them (out= of the
    # .out one a keyword of the operator's own).
    assert script.Package(wheel).ops["npu_op"] == [
        "(input, size=[1,1], scale=1., *, mode=\"a\", r='Mean', out=None)", "(input, other)"]
    # What the module's own import cycle had bound when it was read.
    assert modules["torch_npu.npu.random"]["names"]["is_available"][0] == "function"

    out = tmp_path / "torch_npu-9.9.json"
    script.write(out, "9.9.0", "9.9.0", modules)
    data = __import__("json").loads(out.read_text())
    assert data["modules"]["torch_npu.npu"]["names"] == npu
