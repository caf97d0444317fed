"""Per-call cost of the migration: each wrapped API called in its CUDA
spelling (migrated) against the same call spelled for the npu and made
through torch's original objects (migration off), in one process, on the
virtual NPU (cases in cases.py).

Budgets: at most 50 ns added on the rewriting path, 20 ns on the
pass-through path.  Each side keeps its best time over alternating blocks
of runs (migration on, off, on, off...); instruction counts, which do not
depend on the machine's load, are in bench_instructions.py.
"""
import os
import sys
import timeit

os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")

import torch  # noqa: E402

import transfer_to_npu  # noqa: E402
from cases import CASES, environment  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "9"))
BLOCKS = int(os.environ.get("BENCH_BLOCKS", "3"))
BUDGET_NS = {"rewrite": 50.0, "pass-through": 20.0}


def number_for(stmt, env):
    """Calls per timing: about 3 ms worth."""
    once = timeit.Timer(stmt, globals=env).timeit(200) / 200
    return max(100, min(100_000, int(0.003 / max(once, 1e-9))))


def _block(timers, numbers):
    """Best time per call of each statement, over REPEATS runs."""
    return [min(t.repeat(repeat=REPEATS, number=n)) / n * 1e9 for t, n in zip(timers, numbers)]


def main():
    env = environment(torch)
    numbers = [number_for(c[2], env) for c in CASES]
    m_timers = [timeit.Timer(c[2], globals=env) for c in CASES]
    d_timers = [timeit.Timer(c[3], globals=env) for c in CASES]
    migrated = [float("inf")] * len(CASES)
    direct = [float("inf")] * len(CASES)
    # Whole blocks alternate (migration on, off, on, off), so that a slow
    # spell of the machine cannot favour one side; each side keeps its best.
    for _ in range(BLOCKS):
        migrated = list(map(min, migrated, _block(m_timers, numbers)))
        transfer_to_npu.disable()
        try:
            direct = list(map(min, direct, _block(d_timers, numbers)))
        finally:
            transfer_to_npu.enable()
    print(f"{'API (CUDA spelling)':<36} {'path':<13} {'migrated':>10} {'npu, off':>10} "
          f"{'added':>8}  budget")
    worst = {}
    for (label, path, _, _), m, d in zip(CASES, migrated, direct):
        added = m - d
        worst[path] = max(worst.get(path, float("-inf")), added)
        print(f"{label:<36} {path:<13} {m:>8.1f}ns {d:>8.1f}ns {added:>+6.1f}ns  "
              f"{BUDGET_NS[path]:.0f}ns")
    print()
    for path, budget in BUDGET_NS.items():
        ok = worst[path] <= budget
        print(f"worst added on the {path} path: {worst[path]:+.1f} ns "
              f"({'within' if ok else 'OVER'} the {budget:.0f} ns budget)")
    print(f"(best of {BLOCKS} x {REPEATS} runs each; python {sys.version.split()[0]}, "
          f"torch {torch.__version__}, backend {transfer_to_npu.backend})")


if __name__ == "__main__":
    main()
