"""TorchScript keeps working, and torch.compile runs migrated code."""
import copy

import pytest
import torch
import torch.nn as nn

import transfer_to_npu
from conftest import npu, run_python


@torch.jit.script
def _scale(x):
    return x * 2 + 1


@torch.jit.script
def _plus_cuda_ones(x):
    return x + torch.ones(3, device="cuda")


class _Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) + torch.zeros(3, device="cuda:0")


def test_script_runs_on_npu_tensors():
    x = torch.ones(3, device="cuda")
    y = _scale(x)
    assert y.device == npu(0) and y.cpu().tolist() == [3.0, 3.0, 3.0]


def test_script_with_cuda_constants():
    y = _plus_cuda_ones(torch.ones(3, device="cuda"))
    assert y.device == npu(0) and y.cpu().tolist() == [2.0, 2.0, 2.0]
    assert '"npu"' in str(_plus_cuda_ones.graph)


def test_scripted_module():
    m = torch.jit.script(_Scripted()).cuda()
    out = m(torch.ones(2, 3, device="cuda"))
    assert out.device == npu(0) and out.shape == (2, 3)


def test_scripted_class_resolves_names_where_it_is_defined():
    # torch.jit.script resolves a class's names in its caller's frame: the
    # migration's wrapper must not stand in for that frame.
    def add_one(x: int) -> int:
        return x + 1

    class Counter:
        def __init__(self, start: int):
            self.value = add_one(start)

        def bump(self) -> int:
            self.value = add_one(self.value)
            return self.value

    scripted = torch.jit.script(Counter)
    assert scripted(3).bump() == 5


def test_scripted_class_in_a_module_imported_after_the_migration(tmp_path, monkeypatch):
    (tmp_path / "scripted_classes.py").write_text(
        "import torch\n"
        "def helper(x: int) -> int:\n"
        "    return x * 2\n"
        "@torch.jit.script\n"
        "class Doubler:\n"
        "    def __init__(self, x: int):\n"
        "        self.value = helper(x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import scripted_classes

    assert scripted_classes.Doubler(4).value == 8


def test_torch_distributed_optim_imports_after_the_migration():
    # It scripts its functional optimizers (classes) as it is imported.
    done = run_python(["-c", "import transfer_to_npu, torch\n"
                             "from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                             "print('imported')"])
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr


def test_trace():
    lin = nn.Linear(3, 2).cuda()
    traced = torch.jit.trace(lin, torch.ones(1, 3, device="cuda"))
    assert traced(torch.ones(4, 3, device="cuda")).device == npu(0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_gives_the_eager_result(backend):
    torch._dynamo.reset()
    torch.manual_seed(0)
    lin = nn.Linear(3, 2).cuda()

    def step(x):
        y = lin(x.to("cuda"))
        return (y * torch.ones(2, device="cuda")).relu().sum(0)

    x = torch.randn(4, 3)
    compiled = torch.compile(step, backend=backend)
    got = compiled(x)
    assert got.device == npu(0)
    assert torch.allclose(got.cpu(), step(x).cpu())


@pytest.mark.parametrize("settings", [{}, {"mode": "max-autotune"}, {"dynamic": True}])
def test_compile_by_default_trains_like_eager(settings):
    """torch.compile(model) with inductor, its default, as CUDA scripts
    write it: on the virtual NPU the graph runs the eager kernels."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).cuda()
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, **settings)
    x = torch.randn(5, 8, device="cuda")
    out = compiled(x)
    out.square().sum().backward()
    eager(x).square().sum().backward()
    assert out.device == npu(0)
    assert torch.allclose(out, eager(x))
    for a, b in zip(model.parameters(), eager.parameters()):
        assert torch.allclose(a.grad, b.grad)


def test_compile_decorator_and_module_compile():
    torch._dynamo.reset()

    @torch.compile
    def make(scale):
        return torch.ones(3, device="cuda") * scale

    assert make(torch.tensor(2.0)).tolist() == [2.0, 2.0, 2.0]
    lin = nn.Linear(3, 3).cuda()
    lin.compile()
    assert lin(torch.ones(1, 3, device="cuda")).device == npu(0)
    rows = {m["source"]: m for m in transfer_to_npu.mappings()}
    assert rows["torch.compile(backend='inductor')"]["target"] == \
        "torch.compile(backend='aot_eager')"


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_factories_inside_a_compiled_region_stay_in_its_graph(backend):
    """torch.arange(n, device=x.device) in a forward, as GPT-style models
    write it: one graph, so that fullgraph=True compiles."""
    torch._dynamo.reset()

    def forward(x):
        pos = torch.arange(x.shape[0], dtype=torch.float32, device=x.device)
        bias = torch.zeros(x.shape[0], device="cuda") + torch.full((1,), 0.5, device="cuda:0")
        return (x * 2 + pos + bias).sum()

    x = torch.randn(4, device="cuda", requires_grad=True)
    compiled = torch.compile(forward, backend=backend, fullgraph=True)
    out = compiled(x)
    out.backward()
    assert out.device == npu(0)
    assert torch.allclose(out, forward(x.detach()))
    assert x.grad.tolist() == [2.0] * 4
    explained = torch._dynamo.explain(forward)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)


def test_module_to_inside_a_compiled_region():
    """model.to('cuda') inside a compiled function: dynamo traces torch's
    Module.to and runs the migrated call that parses its device eagerly."""
    torch._dynamo.reset()
    lin = nn.Linear(2, 2)

    def step(x):
        lin.to("cuda")
        return lin(x.to("cuda"))

    out = torch.compile(step, backend="eager")(torch.ones(2))
    assert out.device == npu(0) and lin.weight.device == npu(0)
    assert torch.equal(out, lin(torch.ones(2, device="cuda")))


def test_dynamo_imported_after_the_migration():
    # Dynamo's polyfill of torch._C._nn._parse_to (where this torch has
    # one: not before 2.11) is made at its import, from whatever is there:
    # the migrated wrapper's original.  Torch's own registrations are no
    # migration of the user's: none logged or counted.
    out = run_python(["-c", "import torch, transfer_to_npu, torch._dynamo\n"
                      "try:\n"
                      "    from torch._dynamo.polyfills import torch_c_nn as p\n"
                      "except ImportError:\n"
                      "    p = None\n"
                      "print(p is None or p._parse_to_polyfill.__torch_dynamo_original__\n"
                      "      is torch._C._nn._parse_to.__wrapped__,\n"
                      "      sum(m['calls'] for m in transfer_to_npu.mappings()))"],
                     env={"TRANSFER_TO_NPU_LOG": "2"})
    assert out.stdout.split() == ["True", "0"], out.stderr
    assert "substitute_in_graph" not in out.stderr


def test_compiled_checkpoint_replays_dropout():
    """torch.utils.checkpoint around dropout in a compiled model: the
    backward recomputes the dropout with the RNG state the forward saved,
    so the gradient is the one of the mask the forward drew."""
    from torch.utils.checkpoint import checkpoint

    torch._dynamo.reset()
    torch.manual_seed(0)
    w = torch.randn(64, device="cuda", requires_grad=True)
    x = torch.randn(64, device="cuda")

    def block(w):
        return nn.functional.dropout(x * w, p=0.5, training=True)

    def forward(w):
        y = checkpoint(block, w, use_reentrant=False)
        return y, (y * y).sum()

    y, loss = torch.compile(forward, backend="aot_eager")(w)
    loss.backward()
    kept = (y != 0).float()
    assert 0 < kept.sum() < 64
    # d/dw of sum(y^2), y = mask * x * w / (1 - p)
    assert torch.allclose(w.grad, 2 * y * kept * x / 0.5)


FULLGRAPH = """
import sys
import torch
if sys.argv[1] == "dynamo first":
    import torch._dynamo
import transfer_to_npu

def by_device(x):
    return x * 3 if torch.is_autocast_enabled(x.device.type) else x + 1

def unnamed(x):
    return x.to(torch.get_autocast_gpu_dtype()) if torch.is_autocast_enabled() else x - 1

def cuda_dtype(x):
    return x.to(torch.get_autocast_dtype("cuda")) * torch.cuda.is_available()

def properties(x):
    return x * torch.cuda.get_device_properties(0).major

x = torch.ones(2, device="cuda")
out = []
for fn in (by_device, unnamed, cuda_dtype, properties):
    compiled = torch.compile(fn, fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        inside = compiled(x)
    outside = compiled(x)
    out.append(f"{fn.__name__} {inside.tolist()} {inside.dtype} {outside.tolist()} {outside.dtype}")
print("|".join(out))
"""


@pytest.mark.parametrize("order", ["dynamo first", "migration first"])
def test_wrappers_traced_in_a_full_graph(order):
    """Dynamo traces what a wrapper stands for (the migrated call), with
    dynamo imported before the migration or after it (its tables are made
    then, from what torch holds)."""
    proc = run_python(["-c", FULLGRAPH, order], timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().split("|") == [
        "by_device [3.0, 3.0] torch.float32 [2.0, 2.0] torch.float32",
        "unnamed [1.0, 1.0] torch.bfloat16 [0.0, 0.0] torch.float32",
        "cuda_dtype [1.0, 1.0] torch.bfloat16 [1.0, 1.0] torch.float16",
        "properties [8.0, 8.0] torch.float32 [8.0, 8.0] torch.float32"]
