"""Per-call cost of the migration: each wrapped API called in its CUDA
spelling (migrated) against the same call spelled for the npu and made
through torch's original objects (migration off), in one process, on the
virtual NPU (cases in cases.py).

Budgets: at most 50 ns added on the rewriting path, 20 ns on the
pass-through path.  Each side keeps its best time over rounds that
alternate migration on and off; instruction counts, which do not depend on
the machine's load, are in bench_instructions.py.
"""
import os
import sys
import timeit

os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")

import torch  # noqa: E402

import transfer_to_npu  # noqa: E402
from cases import CASES, environment  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
BUDGET_NS = {"rewrite": 50.0, "pass-through": 20.0}


def number_for(stmt, env):
    """Calls per timing: about 3 ms worth."""
    once = timeit.Timer(stmt, globals=env).timeit(200) / 200
    return max(100, min(100_000, int(0.003 / max(once, 1e-9))))


def best(timer, number):
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e9


def main():
    if hasattr(os, "sched_setaffinity"):
        # One core: no migrations between cores in the middle of a timing.
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    env = environment(torch)
    migrated, direct = [], []
    # Per case, rounds alternate migration on and off a few milliseconds
    # apart, so that a slow spell of the machine meets both sides; each side
    # keeps its best.
    for _, _, m_stmt, d_stmt in CASES:
        n = number_for(m_stmt, env)
        m_timer, d_timer = timeit.Timer(m_stmt, globals=env), timeit.Timer(d_stmt, globals=env)
        m_best = d_best = float("inf")
        for _ in range(ROUNDS):
            m_best = min(m_best, best(m_timer, n))
            transfer_to_npu.disable()
            try:
                d_best = min(d_best, best(d_timer, n))
            finally:
                transfer_to_npu.enable()
        migrated.append(m_best)
        direct.append(d_best)
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
    print(f"(best of {ROUNDS} x {REPEATS} runs each, on one core; python {sys.version.split()[0]}, "
          f"torch {torch.__version__}, backend {transfer_to_npu.backend})")


if __name__ == "__main__":
    main()
