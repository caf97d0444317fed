"""An exception raised by a Python hook that torch's autograd engine calls
(a tensor's or a node's hook, a saved tensor's unpack hook: checkpointing
runs the forward again there, a module's backward hook) reaches the
caller of backward() or grad() as itself, as on the CPU.  On a device
defined in Python the engine unwinds it through the device's stream guard,
which ended the process (std::terminate); each case runs in a process of
its own, so that a crash fails the test instead of the suite."""
import textwrap

import pytest

from conftest import run_python

CASES = {
    "tensor hook": "y = x * 2; y.register_hook(lambda g: fail()); y.sum().backward()",
    "leaf hook": "x.register_hook(lambda g: fail()); (x * 2).sum().backward()",
    "node hook": "y = x * 2; y.grad_fn.register_hook(lambda *a: fail()); y.sum().backward()",
    "node pre-hook": "y = x * 2; y.grad_fn.register_prehook(lambda *a: fail()); "
                     "y.sum().backward()",
    "post-accumulate hook": "x.register_post_accumulate_grad_hook(lambda p: fail()); "
                            "(x * 2).sum().backward()",
    "unpack hook": "with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: fail()):"
                   "\n    y = (x * x).sum()\ny.backward()",
    "module backward hook": "m = torch.nn.Linear(4, 4).cuda(); "
                            "m.register_full_backward_hook(lambda *a: fail()); "
                            "m(x).sum().backward()",
    "autograd.grad": "y = x * 2; y.register_hook(lambda g: fail()); torch.autograd.grad(y.sum(), x)",
    "checkpoint recomputation": "armed = []\n"
                                "def f(a):\n"
                                "    if armed: fail()\n"
                                "    return a.sin()\n"
                                "y = checkpoint(f, x, use_reentrant=False); armed.append(1)\n"
                                "y.sum().backward()",
    "custom Function": "Twice.apply(x).sum().backward()",
}

SCRIPT = """
import sys, traceback, torch
from torch.utils.checkpoint import checkpoint
if sys.argv[1] == "migrated":
    import transfer_to_npu
else:
    torch.Tensor.cuda = lambda self, *a, **k: self  # the same code, on the CPU

class Mine(Exception):
    pass

def fail():
    raise Mine("from the hook")

class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2
    @staticmethod
    def backward(ctx, g):
        fail()

x = torch.randn(4, 4).cuda().requires_grad_()
try:
    {case}
except Mine as e:
    frames = [f.name for f in traceback.extract_tb(e.__traceback__)]
    print("raised", e, "in fail" if "fail" in frames else "elsewhere")
# The next backward is unaffected.
z = torch.ones(4, 4).cuda().requires_grad_()
(z * 3).sum().backward()
print("then", z.grad.sum().item())
"""


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hooks_exception_reaches_the_caller(case):
    script = SCRIPT.format(case=textwrap.indent(CASES[case], "    ").strip())
    outputs = []
    for where in ("cpu", "migrated"):
        proc = run_python(["-c", script, where], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
        assert proc.returncode == 0, f"{where}: {proc.stderr[-3000:]}"
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] == "raised from the hook in fail\nthen 48.0\n"
