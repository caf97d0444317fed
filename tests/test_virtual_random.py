"""Random numbers on the virtual NPU: each npu has its own generator, seeded
by torch.manual_seed and torch.npu.*, and random ops draw from it."""
import pickle

import pytest
import torch
import torch.nn as nn
import torch.utils.checkpoint as checkpoint

from conftest import npu, run_python


def test_manual_seed_seeds_the_npu():
    torch.manual_seed(7)
    a = torch.randn(5, device="npu")
    torch.manual_seed(7)
    b = torch.randn(5, device="npu")
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.npu.initial_seed() == 7


def test_same_seed_gives_the_cpus_numbers():
    torch.manual_seed(3)
    cpu = [torch.randn(6), torch.rand(6), torch.randint(0, 9, (6,)), torch.randperm(6)]
    torch.manual_seed(3)
    got = [torch.randn(6, device="npu"), torch.rand(6, device="npu"),
           torch.randint(0, 9, (6,), device="npu"), torch.randperm(6, device="npu")]
    for c, n in zip(cpu, got):
        assert n.device == npu(0) and torch.equal(n.cpu(), c)


def test_the_npu_stream_is_its_own():
    torch.manual_seed(0)
    expected = torch.randn(4)
    torch.manual_seed(0)
    torch.npu.manual_seed(123)              # seeds the npu only
    torch.randn(4, device="npu")            # draws on the npu only
    torch.empty(100, device="npu").normal_()
    assert torch.equal(torch.randn(4), expected)
    assert torch.npu.initial_seed() == 123 and torch.initial_seed() == 0


def test_seed_functions():
    torch.npu.manual_seed_all(11)
    assert torch.npu.initial_seed() == 11
    torch.npu.seed()
    first = torch.npu.initial_seed()
    torch.npu.seed_all()
    assert torch.npu.initial_seed() != first or torch.npu.initial_seed() != 11
    torch.npu.manual_seed(5)
    assert torch.npu.initial_seed() == 5


def test_rng_state_round_trip():
    torch.npu.manual_seed(1)
    state = torch.npu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    a = torch.rand(8, device="npu")
    torch.npu.set_rng_state(state)
    assert torch.equal(torch.rand(8, device="npu").cpu(), a.cpu())
    states = torch.npu.get_rng_state_all()
    assert len(states) == torch.npu.device_count()
    b = torch.rand(8, device="npu")
    torch.npu.set_rng_state_all(states)
    assert torch.equal(torch.rand(8, device="npu").cpu(), b.cpu())
    with pytest.raises(TypeError, match="new_state"):
        torch.npu.set_rng_state([1, 2, 3])


def test_fork_rng_on_the_npu():
    torch.npu.manual_seed(2)
    with torch.random.fork_rng(device_type="npu"):
        inside = torch.rand(3, device="npu")
    assert torch.equal(torch.rand(3, device="npu").cpu(), inside.cpu())


def test_npu_generator():
    g = torch.Generator(device="npu")
    assert g.device == npu(0)
    assert isinstance(g, torch.Generator)
    assert isinstance(torch.default_generator, torch.Generator)
    assert torch.Generator().device.type == "cpu"
    g.manual_seed(9)
    a = torch.randn(4, device="npu", generator=g)
    b = torch.empty(4, device="npu").uniform_(generator=g)
    g.manual_seed(9)
    assert torch.equal(torch.randn(4, device="npu", generator=g).cpu(), a.cpu())
    assert torch.equal(torch.empty(4, device="npu").uniform_(generator=g).cpu(), b.cpu())
    # A generator of its own: the default one is untouched.
    torch.npu.manual_seed(0)
    c = torch.randn(4, device="npu")
    torch.npu.manual_seed(0)
    torch.randn(4, device="npu", generator=g)
    assert torch.equal(torch.randn(4, device="npu").cpu(), c.cpu())
    # Pickled with its state.
    again = pickle.loads(pickle.dumps(g))
    assert again.device == npu(0)
    assert torch.equal(torch.rand(3, device="npu", generator=again).cpu(),
                       torch.rand(3, device="npu", generator=g).cpu())


def test_a_cpu_generator_on_the_npu_is_an_error():
    with pytest.raises(RuntimeError, match="'npu' device type for generator but found 'cpu'"):
        torch.randn(3, device="npu", generator=torch.Generator())


def test_dropout_is_reproducible_under_a_seed():
    x = torch.ones(1000, device="npu")
    torch.manual_seed(4)
    a = nn.functional.dropout(x, 0.5)
    torch.manual_seed(4)
    b = nn.functional.dropout(x, 0.5)
    assert torch.equal(a.cpu(), b.cpu())
    assert 300 < int((a.cpu() == 0).sum()) < 700
    c = nn.functional.dropout(x, 0.5)
    assert not torch.equal(a.cpu(), c.cpu())
    # Drawn from the npu's generator, not the cpu's.
    torch.manual_seed(4)
    expected_cpu = torch.rand(3)
    torch.manual_seed(4)
    nn.functional.dropout(x, 0.5)
    assert torch.equal(torch.rand(3), expected_cpu)


class _OpsSeen(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.name())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_dropout_computes_the_cpus_values_the_cpus_way(p):
    """Under one seed the npu's dropout gives the cpu's values and
    gradients, through the ops the cpu runs: float noise multiplied in, not
    the fused kernel's boolean mask, whose cast to the input's dtype costs
    two passes over each activation."""
    x = torch.randn(4, 8, 16)
    results = {}
    for device in ("cpu", "npu"):
        leaf = x.detach().to(device).requires_grad_()
        torch.manual_seed(11)
        with _OpsSeen() as seen:
            out = nn.functional.dropout(leaf, p)
            out.pow(2).sum().backward()
        results[device] = (out.detach().cpu(), leaf.grad.cpu(), seen.names)
    (cpu_out, cpu_grad, cpu_ops), (npu_out, npu_grad, npu_ops) = results["cpu"], results["npu"]
    assert torch.equal(npu_out, cpu_out) and torch.equal(npu_grad, cpu_grad)
    assert npu_ops == cpu_ops
    assert "aten::native_dropout" not in npu_ops


def test_dropout_outside_training_and_its_errors_are_the_cpus():
    x = torch.ones(3, device="npu")
    assert torch.dropout(x, 0.5, False) is x
    with torch.inference_mode():
        torch.manual_seed(2)
        drawn = torch.dropout(torch.ones(100, device="npu"), 0.5, True)
    torch.manual_seed(2)
    assert torch.equal(drawn.cpu(), torch.dropout(torch.ones(100), 0.5, True))
    for device in ("cpu", "npu"):
        with pytest.raises(RuntimeError, match="between 0 and 1, but got 1.5"):
            torch.dropout(torch.ones(3, device=device), 1.5, True)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_replays_the_npu_rng(reentrant):
    torch.manual_seed(0)
    block = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 1)).to("npu")
    x = torch.randn(8, 16, device="npu", requires_grad=True)

    torch.npu.manual_seed(1)
    block(x).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    torch.npu.manual_seed(1)
    checkpoint.checkpoint(block, x, use_reentrant=reentrant).sum().backward()
    assert torch.equal(x.grad.cpu(), expected.cpu())


def test_generators_per_device(tmp_path):
    code = (
        "import torch, transfer_to_npu\n"
        "torch.manual_seed(5)\n"
        "a = torch.rand(3, device='npu:0'); b = torch.rand(3, device='npu:1')\n"
        "assert torch.equal(a.cpu(), b.cpu())\n"           # each npu seeded alike
        "torch.npu.manual_seed(6)\n"                          # the current npu only
        "with torch.npu.device(1): assert torch.npu.initial_seed() == 5\n"
        "assert torch.npu.initial_seed() == 6\n"
        "assert len(torch.npu.default_generators) == 2\n"
        "g = torch.Generator(device='npu:1'); assert g.device == torch.device('npu', 1)\n"
        "print('ok')\n")
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_threads_drawing_on_two_npus_keep_their_streams():
    """DataParallel's replicas run dropout on their npus at once."""
    code = (
        "import threading, torch, transfer_to_npu\n"
        "def draws(i):\n"
        "    x = torch.ones(50000, device=f'npu:{i}')\n"
        "    return [torch.nn.functional.dropout(x, 0.5).cpu() for _ in range(20)]\n"
        "torch.manual_seed(0); ref0 = draws(0)\n"
        "torch.manual_seed(0); ref1 = draws(1)\n"
        "torch.manual_seed(0)\n"
        "out = {}\n"
        "ts = [threading.Thread(target=lambda i=i: out.__setitem__(i, draws(i))) for i in (0, 1)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "same = all(torch.equal(a, b) for a, b in zip(out[0] + out[1], ref0 + ref1))\n"
        "print('same' if same else 'mixed')\n")
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "same"
