"""What the served packages cost per call, on the virtual NPU: each served
function (flash_attn, xformers, torch_npu's fused operators, an apex
optimizer's step) called as the user's code calls it, through its row of
the mapping table, against the torch ops it runs, written out by hand for
the same case: what the row and the served function's own Python
(argument checks, layouts) add to them.  What a row alone adds is a case of
bench_overhead.py and bench_instructions.py (cases.py), within the
patcher's 50 ns budget for a redirected call.

Rounds alternate the two sides, a few milliseconds apart; what is added is
the median of the rounds' differences, over several processes (as in
bench_overhead.py).  Small shapes, so that the fixed costs show.
"""
import json
import os
import statistics
import sys
import timeit

from bench_overhead import REPEATS, ROUNDS, best, children

PROCESSES = int(os.environ.get("BENCH_PROCESSES", "3"))

SETUP = """
import torch, torch.nn.functional as F
import flash_attn, xformers.ops as xops, torch_npu
from apex.optimizers import FusedAdam
q = torch.randn(2, 16, 4, 32, device="cuda")
x = torch.randn(8, 64, device="cuda")
w = torch.ones(64, device="cuda")
r = torch.randn(1, 16, 1, 32, device="cuda")
causal = xops.LowerTriangularMask()
params = [torch.nn.Parameter(torch.randn(64, 64, device="cuda")) for _ in range(4)]
for p in params:
    p.grad = torch.randn_like(p)
served_adam = FusedAdam(params, lr=1e-3)
torch_adam = torch.optim.Adam(params, lr=1e-3, decoupled_weight_decay=True)
def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
def rotary(x, c, s):
    x1, x2 = x.chunk(2, dim=-1)
    return c * x + s * torch.cat((-x2, x1), dim=-1)
"""

# (label, served call, the ops it runs by hand)
CASES = [
    ("flash_attn_func(causal=True)", "flash_attn.flash_attn_func(q, q, q, causal=True)",
     "F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, q, q)), "
     "is_causal=True).transpose(1, 2)"),
    ("memory_efficient_attention(causal)",
     "xops.memory_efficient_attention(q, q, q, attn_bias=causal)",
     "F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, q, q)), "
     "is_causal=True).transpose(1, 2)"),
    ("torch_npu.npu_rms_norm", "torch_npu.npu_rms_norm(x, w)", "rms(x, w)"),
    ("torch_npu.npu_rotary_mul", "torch_npu.npu_rotary_mul(q, r, r)", "rotary(q, r, r)"),
    ("torch_npu.npu_swiglu", "torch_npu.npu_swiglu(x)", "F.silu(x[:, :32]) * x[:, 32:]"),
    ("apex FusedAdam.step() (4 params)", "served_adam.step()", "torch_adam.step()"),
]


def child():
    os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")
    import transfer_to_npu  # noqa: F401

    import torch

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    # One thread on the one core: a kernel's threads would wait for each
    # other whenever the machine's load deschedules one of them.
    torch.set_num_threads(1)
    env = {}
    exec(SETUP, env)
    out = []
    for _, served, ops in CASES:
        timers = [timeit.Timer(stmt, globals=env) for stmt in (served, ops)]
        once = timers[0].timeit(20) / 20
        number = max(20, min(20_000, int(0.003 / max(once, 1e-9))))
        rounds = []
        for r in range(ROUNDS):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            times = {i: best(timers[i], number) for i in order}
            rounds.append([times[0], times[1]])
        out.append(rounds)
    print(json.dumps(out))


def main():
    rounds = [[] for _ in CASES]
    results = children(os.path.abspath(__file__), PROCESSES)
    if results is None:
        return 1
    for found in results:
        for mine, theirs in zip(rounds, found):
            mine.extend(theirs)
    print(f"{'served call':<36} {'served':>10} {'ops by hand':>12} {'added':>10}   "
          f"(medians over rounds)")
    for (label, *_), case in zip(CASES, rounds):
        served = statistics.median(s for s, _ in case)
        ops = statistics.median(o for _, o in case)
        added = statistics.median(s - o for s, o in case)
        print(f"{label:<36} {served / 1e3:>8.2f}us {ops / 1e3:>10.2f}us {added / 1e3:>+8.2f}us "
              f"({added / ops:+.1%})")
    print()
    print(f"(each side the best of {REPEATS} runs in each of {ROUNDS} rounds in each of "
          f"{PROCESSES} processes, on one core, the virtual NPU)")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
