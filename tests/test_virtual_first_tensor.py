"""The virtual NPU registers most of its kernels when the first npu tensor
is made, not at import: a process that never uses the npu (a DataLoader
worker, a tool run with TRANSFER_TO_NPU=1) does not pay for them.  Every
way to make that first tensor must work, on any thread."""
import pytest

from conftest import run_python

HAS = "torch._C._dispatch_has_kernel_for_dispatch_key"


def _run(code):
    proc = run_python(["-c", "import torch, transfer_to_npu\n" + code],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_registered_at_the_first_npu_tensor_only():
    out = _run(
        f"print({HAS}('aten::add.Tensor', 'PrivateUse1'),"
        f" {HAS}('aten::empty.memory_format', 'PrivateUse1'))\n"
        "torch.cuda.synchronize(); torch.cuda.is_available(); torch.device('cuda')\n"
        f"print({HAS}('aten::add.Tensor', 'PrivateUse1'))\n"
        "x = torch.zeros(2, device='cuda')\n"
        f"print({HAS}('aten::add.Tensor', 'PrivateUse1'), {HAS}('c10d::allreduce_', 'PrivateUse1'))\n"
        "print((x + 1).tolist())\n")
    assert out == ["False", "True", "False", "True", "True", "[1.0,", "1.0]"]


SAVED = """
import io
buf = io.BytesIO()
torch.save({"w": torch.arange(3.0)}, buf)
buf.seek(0)
"""

# Ways to make the first npu tensor of a process, each followed by ops that
# need the kernels registered then.
FIRST_TENSORS = {
    "factory": "t = torch.arange(3.0, device='cuda')",
    "empty": "t = torch.empty(3, device='cuda').fill_(1.0).cumsum(0) - 1",
    "to": "t = torch.arange(3.0).to('cuda')",
    "cuda()": "t = torch.arange(3.0).cuda()",
    "tensor()": "t = torch.tensor([0.0, 1.0, 2.0], device='cuda')",
    "module": "m = torch.nn.Linear(3, 3).cuda(); t = torch.arange(3.0).cuda()",
    "kaiser_window": "t = torch.kaiser_window(3, device='cuda') * 0 + torch.arange(3.0).cuda()",
    "tril_indices": "t = torch.tril_indices(3, 3, device='cuda')[0, [0, 1, 3]].float()",
    "storage": "s = torch.UntypedStorage(12, device='cuda'); "
               "t = torch.empty(0, device='cuda').set_(s, 0, (3,), (1,)).copy_(torch.arange(3.0))",
    "torch.load": SAVED + "t = torch.load(buf, map_location='cuda')['w']",
    "under with device": "with torch.device('cuda'):\n    t = torch.arange(3.0)",
}


@pytest.mark.parametrize("way", sorted(FIRST_TENSORS))
def test_first_npu_tensor_made_any_way(way):
    out = _run(FIRST_TENSORS[way] + "\n"
               "y = (t * 2).sum()\n"
               "print(t.device, y.item(), torch.nn.functional.softmax(t, 0).argmax().item())\n")
    assert out == ["npu:0", "6.0", "2"]


def test_first_npu_tensors_on_several_threads_at_once():
    out = _run(
        "import threading\n"
        "n = 6\n"
        "start = threading.Barrier(n)\n"
        "results = [None] * n\n"
        "def work(i):\n"
        "    start.wait()\n"
        "    x = torch.full((64,), float(i)).cuda()\n"
        "    results[i] = (x.device.type, (x * 2 + 1).sum().item())\n"
        "threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(results == [('npu', 64.0 * (2 * i + 1)) for i in range(n)])\n")
    assert out == ["True"]


def test_a_failed_registration_raises_and_is_tried_again():
    out = _run(
        "from transfer_to_npu.backends.virtual import ops\n"
        "register = ops.register\n"
        "def failing():\n"
        "    raise RuntimeError('registration failed')\n"
        "ops.register = failing\n"
        "try:\n"
        "    torch.ones(2).cuda()\n"
        "except RuntimeError as e:\n"
        "    print('raised:', e)\n"
        "ops.register = register\n"
        "print((torch.ones(2).cuda() + 1).tolist())\n")
    assert out == ["raised:", "registration", "failed", "[2.0,", "2.0]"]


def test_a_kernel_the_user_registers_before_the_first_tensor_stays_theirs():
    # Registered after the import, as it would override the virtual NPU's
    # own kernel had that been registered at import.
    out = _run(
        "lib = torch.library.Library('aten', 'IMPL')\n"
        "lib.impl('neg', lambda self: torch.full_like(self, 7.0), 'PrivateUse1')\n"
        "x = torch.ones(2).cuda()\n"
        "print(x.neg().tolist(), (x - 3).abs().tolist())\n")
    assert out == ["[7.0,", "7.0]", "[2.0,", "2.0]"]


def test_a_fork_while_another_thread_registers():
    # The child of a fork made while another thread holds the registration
    # (a DataLoader forking its workers) makes its own first npu tensor.
    out = _run(
        "import os, threading, time\n"
        "from transfer_to_npu.backends.virtual import registry\n"
        "held, release = threading.Event(), threading.Event()\n"
        "def registering():\n"
        "    with registry._completion:\n"
        "        held.set(); release.wait()\n"
        "t = threading.Thread(target=registering); t.start(); held.wait()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if (torch.ones(2).cuda() + 1).tolist() == [2.0, 2.0] else 1)\n"
        "release.set(); t.join()\n"
        "deadline = time.monotonic() + 60\n"
        "while time.monotonic() < deadline:\n"
        "    done, status = os.waitpid(pid, os.WNOHANG)\n"
        "    if done:\n"
        "        print('child', os.waitstatus_to_exitcode(status)); break\n"
        "    time.sleep(0.05)\n"
        "else:\n"
        "    os.kill(pid, 9); print('child hung')\n"
        "print((torch.ones(2).cuda() * 3).tolist())\n")
    assert out == ["child", "0", "[3.0,", "3.0]"]


def test_torch_library_knows_the_kernels_registered_for_the_npu():
    # torch.library keeps a record of the kernels registered through it: a
    # user's registration that must not override one (allow_override=False)
    # is refused for the virtual NPU's kernels as for anyone's.
    out = _run(
        "x = torch.zeros(2, device='cuda')\n"
        "lib = torch.library.Library('aten', 'IMPL')\n"
        "for op in ('add.Tensor', '_to_copy', 'is_pinned'):\n"
        "    key = 'CPU' if op == 'is_pinned' else 'PrivateUse1'\n"
        "    try:\n"
        "        lib.impl(op, lambda *a, **k: None, key, allow_override=False)\n"
        "    except RuntimeError as exc:\n"
        "        print('refused' if 'already a kernel registered' in str(exc) else exc)\n"
        "    else:\n"
        "        print('overridden')\n")
    assert out == ["refused"] * 3
