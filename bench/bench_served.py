"""What the served packages cost per call, on the virtual NPU: each served
function (flash_attn, xformers, torch_npu's fused operators, an apex
optimizer's step) called as the user's code calls it, through its row of
the mapping table, against

* its implementation called directly (the same function, no row): what
  the row adds, within the patcher's 50 ns budget for a redirected call;
* the torch ops it runs, written out by hand for the same case: what the
  served function's own Python adds to them (argument checks, layouts).

Rounds alternate the two sides, a few milliseconds apart; what is added is
the median of the rounds' differences, over several processes (as in
bench_overhead.py).  Small shapes, so that the fixed costs show.
"""
import json
import os
import statistics
import subprocess
import sys
import timeit

PROCESSES = int(os.environ.get("BENCH_PROCESSES", "3"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "12"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
ROW_BUDGET_NS = 50.0

SETUP = """
import torch, torch.nn.functional as F
import flash_attn, xformers.ops as xops, torch_npu
from apex.optimizers import FusedAdam
from transfer_to_npu.served import _flash, _fused_ops, _xformers, _optimizers
q = torch.randn(2, 16, 4, 32, device="cuda")
x = torch.randn(8, 64, device="cuda")
w = torch.ones(64, device="cuda")
r = torch.randn(1, 16, 1, 32, device="cuda")
causal = xops.LowerTriangularMask()
params = [torch.nn.Parameter(torch.randn(64, 64, device="cuda")) for _ in range(4)]
for p in params:
    p.grad = torch.randn_like(p)
served_adam = FusedAdam(params, lr=1e-3)
direct_adam = _optimizers.FusedAdam(params, lr=1e-3)
torch_adam = torch.optim.Adam(params, lr=1e-3, decoupled_weight_decay=True)
def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
def rotary(x, c, s):
    x1, x2 = x.chunk(2, dim=-1)
    return c * x + s * torch.cat((-x2, x1), dim=-1)
"""

# (label, served call, its implementation called directly, the ops by hand)
CASES = [
    ("flash_attn_func(causal=True)", "flash_attn.flash_attn_func(q, q, q, causal=True)",
     "_flash.flash_attn_func(q, q, q, causal=True)",
     "F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, q, q)), "
     "is_causal=True).transpose(1, 2)"),
    ("memory_efficient_attention(causal)",
     "xops.memory_efficient_attention(q, q, q, attn_bias=causal)",
     "_xformers.memory_efficient_attention(q, q, q, attn_bias=causal)",
     "F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, q, q)), "
     "is_causal=True).transpose(1, 2)"),
    ("torch_npu.npu_rms_norm", "torch_npu.npu_rms_norm(x, w)", "_fused_ops.npu_rms_norm(x, w)",
     "rms(x, w)"),
    ("torch_npu.npu_rotary_mul", "torch_npu.npu_rotary_mul(q, r, r)",
     "_fused_ops.npu_rotary_mul(q, r, r)", "rotary(q, r, r)"),
    ("torch_npu.npu_swiglu", "torch_npu.npu_swiglu(x)", "_fused_ops.npu_swiglu(x)",
     "F.silu(x[:, :32]) * x[:, 32:]"),
    ("apex FusedAdam.step() (4 params)", "served_adam.step()", "direct_adam.step()",
     "torch_adam.step()"),
]


def best(timer, number):
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e9


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
    for _, served, direct, ops in CASES:
        timers = [timeit.Timer(stmt, globals=env) for stmt in (served, direct, ops)]
        once = timers[0].timeit(20) / 20
        number = max(20, min(20_000, int(0.003 / max(once, 1e-9))))
        rounds = []
        for r in range(ROUNDS):
            order = (0, 1, 2) if r % 2 == 0 else (2, 1, 0)
            times = {i: best(timers[i], number) for i in order}
            rounds.append([times[0], times[1], times[2]])
        out.append(rounds)
    print(json.dumps(out))


def main():
    rounds = [[] for _ in CASES]
    for _ in range(PROCESSES):
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return 1
        for mine, theirs in zip(rounds, json.loads(proc.stdout.strip().splitlines()[-1])):
            mine.extend(theirs)
    print(f"{'served call':<36} {'served':>10} {'row adds':>9} {'ops by hand':>12} "
          f"{'served adds':>12}   (medians over rounds)")
    worst = float("-inf")
    for (label, *_), case in zip(CASES, rounds):
        served = statistics.median(s for s, _, _ in case)
        row = statistics.median(s - d for s, d, _ in case)
        ops = statistics.median(o for _, _, o in case)
        glue = statistics.median(s - o for s, _, o in case)
        worst = max(worst, row)
        print(f"{label:<36} {served / 1e3:>8.2f}us {row:>+7.1f}ns {ops / 1e3:>10.2f}us "
              f"{glue / 1e3:>+10.2f}us")
    print()
    print(f"worst added by a row: {worst:+.1f} ns ({'within' if worst <= ROW_BUDGET_NS else 'OVER'}"
          f" the {ROW_BUDGET_NS:.0f} ns budget)")
    print(f"(each side the best of {REPEATS} runs in each of {ROUNDS} rounds in each of "
          f"{PROCESSES} processes, on one core, the virtual NPU)")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
