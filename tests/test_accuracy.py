"""Accuracy: the dump of a run (--dump, TRANSFER_TO_NPU_DUMP) and compare,
of two dumps or of a script's reference run (the cpu backend here) and its
migrated run; docs/accuracy.md."""
import csv
import json
import math
import os
import re
import sys

import pytest

from conftest import EXAMPLES, ROOT, run_python
from transfer_to_npu.accuracy import verdicts

# A small transformer written for CUDA: data made on the host, no dropout
# (the reference's random numbers would be the host's), AdamW.  Its first
# argument (bf16) runs its forward under bf16 autocast.
TRANSFORMER = '''\
import sys
import torch, torch.nn as nn, torch.nn.functional as F

torch.manual_seed(0)
device = torch.device('cuda:0')
amp = sys.argv[1:] == ['bf16']


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, 50)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens))  # ENCODER
        h = F.leaky_relu(h, 0.01)  # LEAKY
        return self.head(h)


g = torch.Generator().manual_seed(0)
data = torch.randint(0, 50, (4, 4, 12), generator=g)
model = Tiny().to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step, tokens in enumerate(data):
    tokens = tokens.to(device)
    with torch.autocast('cuda', dtype=torch.bfloat16, enabled=amp):
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 50).float(), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
'''

# A small MLP written for CUDA: its losses, and a Ctrl-C at step 3 when
# asked (INTERRUPT=1).
MLP = '''\
import os, signal
import torch, torch.nn as nn, torch.nn.functional as F

torch.manual_seed(0)
device = torch.device('cuda')
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8).to(device)
y = torch.randint(0, 4, (32,)).to(device)
for step in range(6):
    h = model[0](x)
    if step == 3 and os.environ.get("INTERRUPT"):
        os.kill(os.getpid(), signal.SIGINT)
    loss = F.cross_entropy(model[2](model[1](h)), y)  # LOSS
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}", flush=True)
'''

DDP = '''\
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
device = torch.device("cuda", rank)
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device),
            device_ids=[rank])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(rank)
x = torch.randn(16, 8, generator=g).to(device)
y = torch.randint(0, 4, (16,), generator=g).to(device)
for step in range(3):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)  # ALL_REDUCE
    print(f"rank {rank} step {step} loss {loss.item():.6f} mean {mean.item() / 2:.6f}")
dist.destroy_process_group()
'''


def _line(script, marker):
    return next(i for i, l in enumerate(script.splitlines(), 1) if marker in l)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _dump(tmp_path, script, out, env=None, args=()):
    proc = run_python(["-m", "transfer_to_npu", "--dump", str(out), str(script), *args],
                      cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def _compare(tmp_path, *argv, env=None, timeout=900):
    return run_python(["-m", "transfer_to_npu", "compare", *map(str, argv)], cwd=tmp_path,
                      env=env, timeout=timeout)


def _result(out):
    return json.loads((out / "compare_result.json").read_text())


def _rows(out):
    """Every row of a compare (compare_result.json holds those that do not
    pass)."""
    with open(out / "compare_result.csv", newline="") as f:
        return list(csv.DictReader(f))


def _losses(text):
    return [float(v) for v in re.findall(r"loss ([0-9.]+)", text)]


# --- the dump ----------------------------------------------------------------


def test_dump_off_installs_nothing(tmp_path):
    """No TRANSFER_TO_NPU_DUMP: the dump module is never imported, and no
    torch function mode, module hook or optimizer hook is installed."""
    check = (
        "import sys, torch, transfer_to_npu\n"
        "from torch.nn.modules import module\n"
        "from torch.optim import optimizer\n"
        "m = torch.nn.Linear(2, 2).cuda()\n"
        "o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "m(torch.ones(1, 2).cuda()).sum().backward(); o.step()\n"
        "print('accuracy' in sys.modules.get('transfer_to_npu').__dict__,\n"
        "      'transfer_to_npu.accuracy.dump' in sys.modules,\n"
        "      'transfer_to_npu.accuracy.compare' in sys.modules,\n"
        "      torch._C._len_torch_function_stack(),\n"
        "      len(module._global_forward_pre_hooks), len(module._global_forward_hooks),\n"
        "      len(optimizer._global_optimizer_pre_hooks),\n"
        "      len(optimizer._global_optimizer_post_hooks))\n")
    for env in ({}, {"TRANSFER_TO_NPU": "1"}):
        proc = run_python(["-c", check], cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["False", "False", "False", "0", "0", "0", "0", "0"]
    # And on, the same check sees the dump's mode and hooks.
    proc = run_python(["-c", check], cwd=tmp_path,
                      env={"TRANSFER_TO_NPU_DUMP": str(tmp_path / "d")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True", "False", "1", "1", "1", "1", "1"]


def test_dump_layout_names_and_numerics(tmp_path):
    script = _write(tmp_path, "mlp.py", MLP)
    plain = run_python(["-m", "transfer_to_npu", str(script)], cwd=tmp_path)
    dumped = _dump(tmp_path, script, tmp_path / "d")
    # The dump changes nothing the run computes.
    assert _losses(dumped.stdout) == _losses(plain.stdout) and len(_losses(plain.stdout)) == 6
    steps = sorted(os.listdir(tmp_path / "d"))
    # Six optimizer steps, then the last reads; and how the run went.
    assert steps == ["run"] + [f"step{i}" for i in range(7)]
    run = json.loads((tmp_path / "d" / "run" / "rank0.json").read_text())
    assert (run["status"], run["steps"], run["exception"]) == ("finished", 7, None)
    place = tmp_path / "d" / "step1" / "rank0"
    assert sorted(os.listdir(place)) == ["construct.json", "dump.json", "scalars.json",
                                         "stack.json"]
    dump = json.loads((place / "dump.json").read_text())
    assert (dump["task"], dump["level"], dump["framework"]) == ("statistics", "mix", "pytorch")
    data, stack = dump["data"], json.loads((place / "stack.json").read_text())
    construct = json.loads((place / "construct.json").read_text())
    names = list(data)
    for name in ("Functional.linear.0.forward", "Module.Linear.forward.0",
                 "Functional.relu.0.forward", "Functional.cross_entropy.0.forward",
                 "Functional.cross_entropy.0.backward", "Functional.linear.1.backward",
                 "Optimizer.SGD.step.0.forward", "Tensor.item.0.forward"):
        assert name in names, names
    # A module's record follows the calls it makes (its output is known then).
    assert names.index("Functional.linear.0.forward") < names.index("Module.Linear.forward.0")
    assert construct["Functional.linear.0.forward"] == "Module.Linear.forward.0"
    loss_line = _line(MLP, "# LOSS")
    assert stack["Functional.cross_entropy.0.forward"] == f"{script}:{loss_line}"
    out = data["Functional.cross_entropy.0.forward"]["output"][0]
    assert list(out)[:10] == ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm",
                              "nan_count", "inf_count", "requires_grad"]
    assert out["dtype"] == "torch.float32" and out["shape"] == []
    assert out["Max"] == out["Min"] == out["Mean"] == out["Norm"]
    weight = data["Functional.linear.0.forward"]["input_args"][1]
    assert weight["shape"] == [16, 8] and weight["Max"] >= weight["Mean"] >= weight["Min"]
    assert data["Functional.cross_entropy.0.backward"]["input"][0]["Max"] == 1.0
    optimizer = data["Optimizer.SGD.step.0.forward"]
    assert len(optimizer["input_args"]) == len(optimizer["output"]) == 4  # grads, parameters
    # The loss printed at step 0 is read at step 1 (after its optimizer step).
    scalars = json.loads((place / "scalars.json").read_text())
    assert [s["value"] for s in scalars] == pytest.approx([_losses(plain.stdout)[0]], abs=1e-6)
    assert scalars[0]["site"] == f"{script}:{_line(MLP, 'print(')}"


def test_dump_options(tmp_path):
    script = _write(tmp_path, "mlp.py", MLP)
    options = {"TRANSFER_TO_NPU_DUMP_STEPS": "2",
               "TRANSFER_TO_NPU_DUMP_LIST": "Functional.*,Module.*",
               "TRANSFER_TO_NPU_DUMP_TENSORS": "Functional.relu.*"}
    _dump(tmp_path, script, tmp_path / "d", env=options)
    place = tmp_path / "d" / "step2" / "rank0"
    dump = json.loads((place / "dump.json").read_text())
    assert dump["task"] == "tensor"
    assert dump["data"] and all(n.startswith(("Functional.", "Module.")) for n in dump["data"])
    relu = dump["data"]["Functional.relu.0.forward"]["output"][0]
    assert relu["data_name"] == "Functional.relu.0.forward.output.0.pt"
    assert (place / "dump_tensor_data" / relu["data_name"]).exists()
    # Other steps keep their scalars only.
    assert not (tmp_path / "d" / "step1" / "rank0" / "dump.json").exists() or \
        not json.loads((tmp_path / "d" / "step1" / "rank0" / "dump.json").read_text())["data"]
    assert json.loads((tmp_path / "d" / "step1" / "rank0" / "scalars.json").read_text())
    # With both sides' tensors kept, compare measures them element by element.
    _dump(tmp_path, script, tmp_path / "ref", env=dict(options, TRANSFER_TO_NPU_BACKEND="cpu"))
    proc = _compare(tmp_path, "d", "ref", "--output", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    relu = [r for r in _rows(tmp_path / "out")
            if r["NPU Name"] == "Functional.relu.0.forward.output.0"]
    assert len(relu) == 1 and float(relu[0]["Cosine"]) == 1.0
    assert float(relu[0]["MaxAbsErr"]) == 0.0
    proc = run_python(["-m", "transfer_to_npu", "--dump", "d", "--dump-steps", "2-x",
                       str(script)], cwd=tmp_path)
    assert proc.returncode != 0
    assert "TRANSFER_TO_NPU_DUMP_STEPS='2-x': '2-x' is not a step or a range" in proc.stderr
    proc = run_python(["-m", "transfer_to_npu", "--dump-steps", "2", str(script)], cwd=tmp_path)
    assert proc.returncode == 2 and "--dump-steps goes with --dump" in proc.stderr


def test_unmigrated_dump(tmp_path):
    """TRANSFER_TO_NPU=0: the run is dumped unmigrated, even where the
    script imports transfer_to_npu (the original run on CUDA)."""
    script = _write(tmp_path, "plain.py", (
        "import torch, transfer_to_npu\n"
        "x = torch.ones(3) * 2\n"
        "print(transfer_to_npu.is_enabled(), (x + 1).sum().item())\n"))
    proc = run_python([str(script)], cwd=tmp_path,
                      env={"TRANSFER_TO_NPU": "0", "TRANSFER_TO_NPU_DUMP": str(tmp_path / "d")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "9.0"]
    data = json.loads((tmp_path / "d" / "step0" / "rank0" / "dump.json").read_text())["data"]
    assert "Tensor.add.0.forward" in data and "Tensor.sum.0.forward" in data


def test_ctrl_c_leaves_a_readable_partial_dump(tmp_path):
    script = _write(tmp_path, "mlp.py", MLP)
    proc = run_python(["-m", "transfer_to_npu", "--dump", "part", str(script)], cwd=tmp_path,
                      env={"INTERRUPT": "1"})
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr
    assert sorted(os.listdir(tmp_path / "part")) == ["run"] + [f"step{i}" for i in range(4)]
    run = json.loads((tmp_path / "part" / "run" / "rank0.json").read_text())
    assert run["status"] == "interrupted" and run["exception"]["type"] == "KeyboardInterrupt"
    assert run["exception"]["site"] == f"{script}:{_line(MLP, 'os.kill(')}"
    for step in range(4):
        place = tmp_path / "part" / f"step{step}" / "rank0"
        # Whole files, each; scalars.json where the step read a loss (a
        # loss is read after optimizer.step(), in the next step).
        assert sorted(os.listdir(place)) == ["construct.json", "dump.json"] + \
            (["scalars.json"] if step > 0 else []) + ["stack.json"]
        for name in os.listdir(place):
            json.loads((place / name).read_text())
    open_step = json.loads((tmp_path / "part" / "step3" / "rank0" / "dump.json").read_text())
    # The calls made before the interrupt, and nothing after it.
    assert "Functional.linear.0.forward" in open_step["data"]
    assert "Functional.cross_entropy.0.forward" not in open_step["data"]
    _dump(tmp_path, script, tmp_path / "full")
    # Compared, what the interrupted run made matches; what the full one
    # made after it is not reached, not a difference (nor another program).
    proc = _compare(tmp_path, "part", "full", "--output", "out")
    assert proc.returncode == 3, proc.stdout
    assert "runs: migrated interrupted in step 3: KeyboardInterrupt" in proc.stdout
    result = _result(tmp_path / "out")
    assert result["same_program"] and not result["unmatched"] and not result["only"]["bench"]
    assert result["not_reached"]["bench"] > 0 and not result["first_divergence"]
    assert proc.stdout.rstrip().splitlines()[-2].startswith(
        "compare: exit 3: the migrated run failed (KeyboardInterrupt at")


# --- the cpu backend ---------------------------------------------------------


# What CUDA code asks and does, printed: the reference (the cpu backend) must
# answer as a GPU machine does, and compute what the virtual NPU computes.
AS_ON_A_GPU = """\
import torch, transfer_to_npu
import torch.distributed as dist
print(transfer_to_npu.backend, torch.cuda.is_available(), torch.cuda.device_count(),
      dist.is_nccl_available())
acc = torch.accelerator
print('accelerator', acc.is_available(), acc.current_accelerator().type, acc.device_count(),
      acc.current_device_index())
# Pinned memory, and a DataLoader pinning in its thread, with a worker.
x = torch.arange(6.).pin_memory()
print('pinned', x.is_pinned(), torch.ones(2).is_pinned(), torch.empty(3, pin_memory=True).is_pinned())
data = torch.utils.data.TensorDataset(torch.arange(8.).view(4, 2))
loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=1, pin_memory=True)
print('batches', [(b.is_pinned(), b.tolist()) for (b,) in loader])
# The precision policy kept, CUDA's lists and default dtype; values to the bit.
torch.manual_seed(0)
m = torch.nn.Linear(8, 8).cuda()
a = torch.randn(4, 8).cuda()
with torch.autocast('cuda'):
    y = m(a)
    e = torch.exp(y)
    c = torch.cat([a, a])
    print('autocast', y.dtype, e.dtype, c.dtype, torch.get_autocast_gpu_dtype(),
          torch.is_autocast_enabled())
with torch.autocast('cuda', dtype=torch.bfloat16):
    z = m(a).float().softmax(-1)
print('values', y.float().sum().item().hex(), z.sum(0).tolist())
s = torch.amp.GradScaler('cuda')
s.scale(z.sum()).backward(); s.step(torch.optim.SGD(m.parameters(), lr=0.1)); s.update()
print('scaler', s.get_scale(), m.weight.sum().item().hex())
"""


def test_reference_answers_as_a_gpu_machine(tmp_path):
    """The cpu backend (the reference of a compare without a GPU) answers
    what CUDA code asks as a GPU machine does, consistently, and computes
    what the virtual NPU computes, to the bit: pinned memory and a pinning
    DataLoader with a worker, torch.accelerator, the autocast policy with
    CUDA's lists and default dtype."""
    script = _write(tmp_path, "gpu.py", AS_ON_A_GPU)
    out = {}
    for backend in ("cpu", "virtual"):
        proc = run_python([str(script)], cwd=tmp_path,
                          env={"TRANSFER_TO_NPU": "1", "TRANSFER_TO_NPU_BACKEND": backend})
        assert proc.returncode == 0, proc.stderr
        out[backend] = proc.stdout.splitlines()
    cpu, virtual = out["cpu"], out["virtual"]
    assert cpu[0] == "cpu True 1 True" and virtual[0] == "virtual True 1 True"
    assert cpu[1] == "accelerator True cpu 1 0" and virtual[1] == "accelerator True npu 1 0"
    assert cpu[2] == "pinned True False True"
    assert cpu[3] == ("batches [(True, [[0.0, 1.0], [2.0, 3.0]]), "
                      "(True, [[4.0, 5.0], [6.0, 7.0]])]")
    assert cpu[4].startswith("autocast torch.float16 torch.float32 torch.float32 torch.float16 True")
    assert cpu[2:] == virtual[2:]


# Random draws on the device, every way a script makes them: by a device
# argument, from a device tensor, in place, in nn.init, inside torch's own
# modules and kernels (attention's and the LSTM's dropout), recomputed by a
# checkpoint, from a generator of the script's own; and the host's after.
DRAWS = """\
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
torch.manual_seed(0)
dev = torch.device('cuda')
def show(name, t):
    print(name, t.detach().float().cpu().flatten()[:6].tolist())
x = torch.ones(4, 8, device=dev)
show('randn_like', torch.randn_like(x))
show('randn', torch.randn(2, 3, device='cuda'))
show('host', torch.randn(3))
show('dropout', nn.Dropout(0.5)(x))
show('dropout2d', F.dropout2d(torch.ones(2, 4, 3, 3, device=dev), 0.5))
show('alpha', F.alpha_dropout(x, 0.2, training=True))
show('kaiming', nn.init.kaiming_uniform_(torch.empty(3, 4, device=dev)))
show('orthogonal', nn.init.orthogonal_(torch.empty(4, 4, device=dev)))
show('bernoulli', torch.bernoulli(torch.full((6,), 0.5, device=dev)))
show('multinomial', torch.multinomial(torch.ones(10, device=dev), 4))
show('randperm', torch.randperm(8, device=dev))
show('view', torch.zeros(4, 4, device=dev)[:, 1:3].normal_())
g = torch.Generator(device='cuda')
g.manual_seed(7)
show('own generator', torch.randn(4, device='cuda', generator=g))
leaf = torch.randn(3, device=dev, requires_grad=True)
print('leaf', leaf.is_leaf, leaf.requires_grad, leaf.device.type)
q = torch.randn(5, 1, 8, device=dev)
show('mha', nn.MultiheadAttention(8, 2, dropout=0.5).to(dev)(q, q, q)[0])
show('sdpa', F.scaled_dot_product_attention(q, q, q, dropout_p=0.5))
# The npu's LSTM cell is fused (CUDA's kernel): its sums round apart.
print('lstm', [round(v, 4) for v in nn.LSTM(8, 8, 2, dropout=0.5).to(dev)(q)[0][0, 0].tolist()])
lin = nn.Linear(8, 8).to(dev)
inp = torch.randn(4, 8, device=dev, requires_grad=True)
checkpoint(lambda t: F.dropout(lin(t), 0.5), inp, use_reentrant=False).sum().backward()
show('checkpoint', inp.grad)
show('host after', torch.randn(3))
"""


def test_a_seeded_dump_draws_the_devices_random_numbers_on_the_host(tmp_path):
    """In a compare's runs (a seeded dump) every random number on the
    device is drawn on the host, from the host's generator, in program
    order: the reference and the migrated run draw the same numbers,
    wherever the draw is made.  A plain run keeps the device's generator,
    which leaves the host's stream alone."""
    import torch

    script = _write(tmp_path, "draws.py", DRAWS)
    out = {}
    for backend in ("cpu", "virtual"):
        proc = run_python(["-m", "transfer_to_npu", "--backend", backend, "--dump",
                           f"d_{backend}", "--dump-seed", "0", str(script)], cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out[backend] = proc.stdout.splitlines()
    assert len(out["virtual"]) == 19 and "leaf True True npu" in out["virtual"]
    assert [line.replace(" cpu", " npu") for line in out["cpu"]] == out["virtual"]
    plain = run_python(["-m", "transfer_to_npu", str(script)], cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    torch.manual_seed(0)
    first = f"host {torch.randn(3).tolist()}"
    assert first in plain.stdout.splitlines() and first not in out["virtual"]


def test_cpu_backend_runs_cuda_code_on_the_host(tmp_path):
    script = _write(tmp_path, "host.py", (
        "import torch, transfer_to_npu\n"
        "x = torch.randn(4, 4, device='cuda:1')\n"
        "m = torch.nn.Linear(4, 4).cuda()\n"
        "torch.cuda.synchronize(); torch.cuda.manual_seed_all(1)\n"
        "print(transfer_to_npu.backend, x.device, torch.device('cuda', 3), x.is_cuda,\n"
        "      next(m.parameters()).device, torch.cuda.get_device_capability())\n"
        # torch's own question which device type is available: the host's.
        "from torch._utils import _get_available_device_type as available\n"
        "print(available())\n"
        # Arguments torch judges itself (an index of an int subclass), as
        # it judges them for the host; the host is one device, whatever the
        # index.
        "class Index(int): pass\n"
        "print(torch.device('cuda', Index(1)), torch.device(b'cuda', index=Index(0)))\n"))
    proc = run_python([str(script)], cwd=tmp_path,
                      env={"TRANSFER_TO_NPU": "1", "TRANSFER_TO_NPU_BACKEND": "cpu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["cpu", "cpu", "cpu", "True", "cpu", "(8,", "0)", "None",
                                   "cpu", "cpu"]
    listing = run_python(["-m", "transfer_to_npu", "--backend", "cpu", "--list"], cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "mappings, cpu backend" in listing.stdout.splitlines()[0]
    assert re.search(r"^torch\.cuda\.synchronize +function +transfer_to_npu\.backends\.cpu\."
                     r"synchronize$", listing.stdout, re.M)


def test_target_set_only_while_disabled(tmp_path):
    import transfer_to_npu
    from transfer_to_npu import _C

    assert transfer_to_npu.is_enabled()
    with pytest.raises(RuntimeError, match="disable"):
        _C.set_target("cpu", "gloo", False)
    proc = run_python(["-c", (
        "import transfer_to_npu\n"
        "from transfer_to_npu import _C\n"
        "transfer_to_npu.disable()\n"
        "for bad in (('toolong', 'gloo'), ('cpu', 'GLOO'), ('', 'gloo')):\n"
        "    try:\n"
        "        _C.set_target(bad[0], bad[1], False)\n"
        "    except ValueError as e:\n"
        "        print(e)\n"
        "_C.set_target('cpu', 'gloo', False)\n"
        "print(_C.npu_device_string('cuda:3'), _C.hccl_backend_string('cpu:gloo,cuda:nccl'))\n")],
        cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("set_target(device='toolong', backend='gloo'): each must be 1 to 4 "
                        "lower-case letters")
    assert len(lines) == 4 and lines[3] == "cpu cpu:gloo,cpu:gloo"


# --- compare -----------------------------------------------------------------


def _descriptor(dtype="torch.float32", shape=(4,), mx=1.0, mn=-1.0, mean=0.0, norm=2.0,
                nan=0, inf=0):
    return {"type": "torch.Tensor", "dtype": dtype, "shape": list(shape), "Max": mx, "Min": mn,
            "Mean": mean, "Norm": norm, "nan_count": nan, "inf_count": inf}


class _Part:
    tensor_dir = None


@pytest.mark.parametrize("bench, npu, verdict, message", [
    ({}, {}, "pass", ""),
    ({}, {"mean": 3e-6}, "pass", ""),                      # a mean near zero: noise
    ({}, {"mx": 1.00002}, "warning", "above 1e-05"),
    ({}, {"mx": 1.001}, "error", "above 0.0001"),          # float32 off by 1e-3: an error
    ({"dtype": "torch.bfloat16"}, {"dtype": "torch.bfloat16", "mx": 1.01}, "pass", ""),
    ({"dtype": "torch.bfloat16"}, {"dtype": "torch.bfloat16", "mx": 1.05}, "warning", ""),
    ({"dtype": "torch.float16"}, {"dtype": "torch.float16", "mx": 1.01}, "warning", ""),
    ({}, {"dtype": "torch.bfloat16", "mx": 1.01}, "warning", "dtypes differ: torch.bfloat16"),
    ({}, {"shape": (5,)}, "error", "shapes differ"),
    ({}, {"mx": math.nan, "nan": 1}, "error", "NaN/Inf on the NPU side only"),
    ({"mx": math.nan, "nan": 2}, {"mx": math.nan, "nan": 1}, "warning", "counts differ"),
    ({"dtype": "torch.int64"}, {"dtype": "torch.int64", "mx": 2.0}, "error", "integer"),
])
def test_verdicts(bench, npu, verdict, message):
    _, got, text = verdicts.compare_tensor(_descriptor(**npu), _descriptor(**bench), _Part(), _Part())
    assert got == verdict, text
    assert message in text


def _value(v):
    return {"type": type(v).__name__, "value": v}


@pytest.mark.parametrize("npu, bench, verdict", [
    (3.4488050937652590, 3.4488048553466797, None),   # a float read back, 1 ulp of float32 apart
    (math.nan, math.nan, None),
    ("npu:0", "cpu", None),                            # each run's own device
    (0.2, 0.01, "error"),                               # another negative_slope
    ("tanh", "none", "error"),                          # another gelu
    (1.00002, 1.0, "warning"),
    (3, 4, "error"),
])
def test_argument_verdicts(npu, bench, verdict):
    found = verdicts.compare_value(_value(npu), _value(bench))
    assert (found and found[1]) == verdict, found


def test_seed_example_matches_its_cpu_reference(tmp_path):
    out = tmp_path / "out"
    # Two runs of the seed's 500 steps: a loaded machine takes its time.
    proc = _compare(tmp_path, "--output", out, "--dump-steps", "0-1,499", "--",
                    EXAMPLES / "train_cnn.py", timeout=2400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reference (cpu) finished (" in proc.stdout
    assert "every matched call agrees (pass)" in proc.stdout
    result = _result(out)
    assert result["same_program"] and not result["unmatched"] and not result["first_error"]
    rows = _rows(out)
    assert {r["Result"] for r in rows} <= {"pass", "N/A"}
    assert any(r["NPU Name"].startswith("Functional.conv2d.0.forward") for r in rows)
    losses = result["curves"]["0"]["train_cnn.py:77"]
    assert len(losses["npu"]) == len(losses["bench"]) == 10
    assert losses["npu"] == losses["bench"]
    assert (out / "npu.log").read_text().count("outputs on npu:0") == 10
    assert (out / "bench.log").read_text().count("outputs on cpu") == 10


def test_transformer_matches_its_cpu_reference(tmp_path):
    script = _write(tmp_path, "tiny.py", TRANSFORMER)
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(out)
    assert result["matched"] == result["calls"]["npu"] == result["calls"]["bench"] > 100
    assert not result["first_divergence"]
    assert (out / "summary.txt").read_text() in proc.stdout


def test_a_perturbed_function_is_located(tmp_path):
    """A user rule that changes one call's argument on the migrated side:
    the first divergence is that call, at its line."""
    script = _write(tmp_path, "tiny.py", TRANSFORMER)
    rules = _write(tmp_path, "rules.json", json.dumps({"rules": {"ArgsModifyRule": [
        {"func_name": "torch.nn.functional.leaky_relu", "arg_idx": 1, "arg_new": 0.2}]}}))
    _dump(tmp_path, script, tmp_path / "npu", env={"TRANSFER_TO_NPU_RULES": str(rules)})
    _dump(tmp_path, script, tmp_path / "bench", env={"TRANSFER_TO_NPU_BACKEND": "cpu"})
    proc = _compare(tmp_path, "npu", "bench", "--output", "out")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = _result(tmp_path / "out")["first_divergence"]["0"]
    assert first["NPU Name"].startswith("Functional.leaky_relu.0.forward.")
    assert first["NPU_Stack_Info"] == f"{script}:{_line(TRANSFORMER, '# LEAKY')}"
    assert first["Step"] == 0
    assert (f"first divergence: Functional.leaky_relu.0.forward.input.negative_slope (step 0) "
            f"at {script}:{_line(TRANSFORMER, '# LEAKY')}") in proc.stdout
    # Another argument makes it another call: the first error.
    error = _result(tmp_path / "out")["first_error"]["0"]
    assert error["NPU Name"] == "Functional.leaky_relu.0.forward.input.negative_slope"


def test_bf16_autocast_kept_by_the_reference(tmp_path):
    """The script under bf16 autocast: the cpu reference keeps the
    precision policy (CUDA's lists, on the host's autocast), so the two
    runs agree to the bit, gradients included."""
    script = _write(tmp_path, "tiny.py", TRANSFORMER)
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", script, "bf16")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = _result(out)
    assert not result["first_divergence"] and not result["unmatched"]
    rows = _rows(out)
    bf16 = [r for r in rows if r["NPU Dtype"] == "torch.bfloat16"]
    assert bf16 and all(r["Bench Dtype"] == "torch.bfloat16" for r in bf16)
    assert all(float(r["Error"]) == 0 for r in rows if r["Error"])


def test_ddp_is_compared_rank_by_rank(tmp_path):
    script = _write(tmp_path, "ddp.py", DDP)
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", "-m", "torch.distributed.run",
                    "--standalone", "--nproc-per-node", "2", script,
                    env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for side in ("npu", "bench"):
        assert sorted(os.listdir(out / side / "step0")) == ["rank0", "rank1"]
    assert "rank 0:" in proc.stdout and "rank 1:" in proc.stdout
    result = _result(out)
    rows = _rows(out)
    assert {r["Rank"] for r in rows} == {"0", "1"}
    # The collective, per rank under msprobe's name: its input (each
    # rank's loss) and output (their sum, the same on both ranks).
    reduced = {(r["Rank"], r["NPU Name"].rpartition(".")[0].rpartition(".")[2]): r for r in rows
               if r["NPU Name"].startswith("Distributed.all_reduce.0.forward.")}
    assert set(reduced) == {(rank, where) for rank in ("0", "1") for where in ("input", "output")}
    assert all(r["Result"] == "pass" and r["NPU_Stack_Info"].endswith(
        f"ddp.py:{_line(DDP, '# ALL_REDUCE')}") for r in reduced.values())
    assert reduced["0", "output"]["NPU max"] == reduced["1", "output"]["NPU max"]
    assert reduced["0", "input"]["NPU max"] != reduced["1", "input"]["NPU max"]
    curves = result["curves"]
    site = f"ddp.py:{_line(DDP, 'print(')}"
    assert curves["0"][site]["npu"] == curves["0"][site]["bench"]
    # Each rank trains on its own data: two curves.
    assert curves["0"][site]["npu"] != curves["1"][site]["npu"]


def test_dumps_of_different_models_do_not_match(tmp_path):
    _dump(tmp_path, _write(tmp_path, "mlp.py", MLP), tmp_path / "a")
    _dump(tmp_path, _write(tmp_path, "tiny.py", TRANSFORMER), tmp_path / "b")
    proc = _compare(tmp_path, "a", "b", "--output", "out")
    assert proc.returncode == 1
    assert "NOT THE SAME PROGRAM: only" in proc.stdout
    assert "these dumps record different models or scripts" in proc.stdout
    assert _result(tmp_path / "out")["same_program"] is False


def test_compare_refuses_what_is_not_a_dump(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = _compare(tmp_path, "empty", "missing", "--output", "out")
    assert proc.returncode == 2
    assert "empty: no dump in it (step*/rank*/dump.json" in proc.stderr
    proc = _compare(tmp_path, "one", "two", "three", "--output", "out")
    assert proc.returncode == 2 and "one or two dumps are needed" in proc.stderr


def test_curves_png(tmp_path):
    pytest.importorskip("matplotlib")
    script = _write(tmp_path, "mlp.py", MLP)
    _dump(tmp_path, script, tmp_path / "a")
    _dump(tmp_path, script, tmp_path / "b", env={"TRANSFER_TO_NPU_BACKEND": "cpu"})
    proc = _compare(tmp_path, "a", "b", "--output", "out")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "out" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"



def test_equal_records_give_the_rows_a_verdict_gives(tmp_path, monkeypatch):
    """Calls recorded alike on both sides skip the verdict's arithmetic:
    their rows are those the verdict gives."""
    from transfer_to_npu.accuracy import dumps, matching

    script = _write(tmp_path, "mlp.py", MLP)
    _dump(tmp_path, script, tmp_path / "a")
    _dump(tmp_path, script, tmp_path / "b", env={"TRANSFER_TO_NPU_BACKEND": "cpu"})
    npu, bench = dumps.Dump.load(str(tmp_path / "a")), dumps.Dump.load(str(tmp_path / "b"))
    fast = matching.compare_dumps(npu, bench).rows

    class Unequal(dict):
        def __eq__(self, other):
            return False

    compare_call = matching._compare_call
    monkeypatch.setattr(matching, "_compare_call", lambda res, rank, step, n, b, nc, bc:
                        compare_call(res, rank, step, n, b, (nc[0], Unequal(nc[1])), bc))
    slow = matching.compare_dumps(npu, bench).rows
    assert len(fast) > 100 and fast == slow


def test_cuda_reference_is_the_script_unmigrated(tmp_path, monkeypatch, capsys):
    """--reference cuda: the reference is the script as it is, unmigrated.
    Without a GPU it is refused before anything runs; the path is run here
    with the check told there is one (a script that takes the GPU when
    there is one: the host's CPU unmigrated, the virtual NPU migrated)."""
    from transfer_to_npu.accuracy import compare, runs

    script = _write(tmp_path, "either.py", MLP.replace(
        "device = torch.device('cuda')",
        "import transfer_to_npu\n"
        "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
        "print('migrated', transfer_to_npu.is_enabled(), device)"))
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--reference", "cuda", "--", script)
    assert proc.returncode == 2 and not out.exists()
    assert proc.stderr.strip().splitlines() == [
        "compare: error: --reference cuda: this machine has no GPU torch can use "
        "(torch.cuda.is_available() is False); use --reference cpu"]
    monkeypatch.setattr(runs, "cuda_present", lambda: True)
    monkeypatch.chdir(tmp_path)
    status = compare.main(["--output", str(out), "--reference", "cuda", "--", str(script)])
    stdout = capsys.readouterr().out
    assert status == 0, stdout
    assert "compare: the reference run (cuda)" in stdout
    assert "migrated False cpu" in (out / "bench.log").read_text()
    assert "migrated True npu" in (out / "npu.log").read_text()
    assert _result(out)["matched"] > 0 and not _result(out)["first_divergence"]


# --- mechanisms, in this process -------------------------------------------------

BRANCHES = '''\
import torch


def run(x, device, backend, checked=False):
    out = []
    if x.device.type == 'cuda':  # TORCH-MADE
        out.append('device')
    if checked and x.device.type == 'cuda':  # NOT-EVALUATED
        out.append('never')
    if 'cuda' in device:  # HELD
        out.append('held')
    if backend == 'nccl':  # HELD-BACKEND
        out.append('nccl')
    if str(x.device).startswith('cuda'):  # STR
        out.append('str')
    return out
'''


@pytest.mark.parametrize("how", ["compiled", "traced"])
def test_device_name_tests_that_ran_and_go_another_way(tmp_path, how):
    """The value a test compares with a CUDA name, seen as its line runs:
    named when the migration made it (an npu tensor's device type), not
    when the script holds it as a string, nor where the test is not
    evaluated (after `and` of a false).  compiled: the user's code compiled
    with its tests watched (the script our runner runs, the modules it
    imports); traced: code compiled before the dump began, watched by the
    trace function."""
    from transfer_to_npu.accuracy import branches

    path = _write(tmp_path, "tests_of_names.py", BRANCHES)
    tracer = branches.Tracer("npu", "hccl")
    import torch

    x = torch.ones(2, device="cuda")
    saved = sys.gettrace()
    sys.settrace(None)
    namespace = {}
    try:
        if how == "compiled":
            tracer.install()
            code = branches.compile_user(BRANCHES.encode(), str(path))
            run = next(c for c in code.co_consts if getattr(c, "co_name", None) == "run")
            assert branches.HOOK in run.co_names  # the tests' subjects pass through ours
            exec(code, namespace)
        else:
            exec(compile(BRANCHES, str(path), "exec"), namespace)
            assert tracer.start()
        found = namespace["run"](x, "cuda", "nccl")
    finally:
        tracer.stop()
        sys.settrace(saved)
    assert found == ["held", "nccl"]
    named = sorted((f["site"], f["value"], f["here"], f["on_cuda"])
                   for f in tracer.findings.values())
    assert named == sorted([(f"{path}:{_line(BRANCHES, '# TORCH-MADE')}", "npu", False, True),
                            (f"{path}:{_line(BRANCHES, '# STR')}", "npu:0", False, True)])
    # Stopped: the rewritten code runs on, watched no more.
    assert namespace["run"](x, "cuda", "nccl") == ["held", "nccl"]


def test_device_name_tests_in_imported_modules(tmp_path, monkeypatch):
    """A user's module imported while a dump watches: its tests are watched
    too; its line numbers are the file's (a traceback reads right), and no
    bytecode of the rewriting is cached for a later run."""
    from transfer_to_npu.accuracy import branches

    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    text = BRANCHES + "\n\ndef fails():\n    raise ValueError('here')  # RAISES\n"
    _write(pkg, "helpers.py", text)
    monkeypatch.syspath_prepend(str(tmp_path))
    tracer = branches.Tracer("npu", "hccl")
    import torch

    tracer.install()
    try:
        from userpkg import helpers

        assert helpers.run(torch.ones(1, device="cuda"), "npu", "nccl") == ["nccl"]
        with pytest.raises(ValueError) as info:
            helpers.fails()
    finally:
        tracer.stop()
        sys.modules.pop("userpkg.helpers", None)
        sys.modules.pop("userpkg", None)
    assert info.traceback[-1].lineno + 1 == _line(text, "# RAISES")
    named = {f["site"] for f in tracer.findings.values()}
    assert f"{pkg / 'helpers.py'}:{_line(BRANCHES, '# TORCH-MADE')}" in named
    cached = list((pkg / "__pycache__").glob("helpers*")) if (pkg / "__pycache__").exists() else []
    assert not cached
    assert branches.HOOK not in (pkg / "helpers.py").read_text()


def test_device_name_tests_of_a_script_that_started_before_the_dump(tmp_path):
    """A process whose script imports torch itself (a rank torchrun
    starts, TRANSFER_TO_NPU_DUMP with python train.py): its code was
    compiled before the dump began, and the trace watches it, the lines of
    the module running already included."""
    script = ROOT / "tests" / "data" / "accuracy" / "planted.py"
    proc = run_python([str(script), "branch"], cwd=tmp_path,
                      env={"TRANSFER_TO_NPU": "1", "TRANSFER_TO_NPU_DUMP": str(tmp_path / "d")})
    assert proc.returncode == 0, proc.stderr
    found = json.loads((tmp_path / "d" / "run" / "rank0.json").read_text())["branches"]
    assert [(f["site"], f["value"]) for f in found] == \
        [(f"{script}:{_line(script.read_text(), '# BRANCH')}", "npu")]


def test_per_call_verdicts():
    """A call judged alone against the host's float64: a float32 kernel's
    rounding and long sums pass, a half type's rounding passes, gelu's tanh
    form in place of erf is an error, an inf the host does not compute is
    one, integers must be equal."""
    import torch

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 4096, generator=g), torch.randn(4096, 64, generator=g)
    exact = a.double() @ b.double()
    assert verdicts.per_call(a @ b, exact)["Result"] == "pass"
    assert verdicts.per_call((a @ b).bfloat16(), exact)["Result"] == "pass"
    x = torch.randn(1000, generator=g)
    erf = torch.nn.functional.gelu(x.double())
    wrong = verdicts.per_call(torch.nn.functional.gelu(x, approximate="tanh"), erf)
    assert wrong["Result"] == "error" and "(torch.float32)" in wrong["Message"]
    inf = torch.nn.functional.gelu(x)
    inf[3] = math.inf
    assert verdicts.per_call(inf, erf)["Message"] == "1 inf/nan where the host computes finite values"
    assert verdicts.per_call(torch.tensor([1, 2]), torch.tensor([1, 3]))["Result"] == "error"


def test_undumped_steps_compute_no_statistics(tmp_path, monkeypatch):
    """--dump-steps: a step left out computes no statistic (its calls are
    named and counted, nothing more)."""
    import torch
    from transfer_to_npu.accuracy import dump

    computed = []
    monkeypatch.setattr(dump.Recorder, "stats", lambda self, t: computed.append(t) or None)
    model = torch.nn.Linear(4, 4).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    dump.start(dump.Settings(str(tmp_path / "d"), steps=frozenset({1})))
    try:
        for step in range(3):
            if step == 1:
                assert not computed
            model(torch.ones(2, 4, device="cuda")).sum().backward()
            opt.step()
            if step == 1:
                assert computed
                computed.clear()
    finally:
        dump.stop()
    assert not computed
