"""Per-call cost of the migration: each wrapped API called in its CUDA
spelling (migrated) against the same call spelled for the npu and made
through torch's original objects (migration off), in one process, on the
virtual NPU (cases in cases.py).

Budgets: at most 50 ns added on the rewriting path, 20 ns on the
pass-through path.  Times are the best of several repeats (the least
disturbed by the rest of the machine); instruction counts, which do not
depend on the machine's load, are in bench_instructions.py.
"""
import os
import sys
import timeit

os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")

import torch  # noqa: E402

import transfer_to_npu  # noqa: E402
from cases import CASES, environment  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "15"))
BUDGET_NS = {"rewrite": 50.0, "pass-through": 20.0}


def best_ns(stmt, env, number):
    timer = timeit.Timer(stmt, globals=env)
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e9


def number_for(stmt, env):
    """Calls per timing: about 20 ms worth."""
    once = timeit.Timer(stmt, globals=env).timeit(200) / 200
    return max(200, min(200_000, int(0.02 / max(once, 1e-9))))


def main():
    env = environment(torch)
    rows = []
    for label, path, migrated, direct in CASES:
        number = number_for(migrated, env)
        # Interleaved, so that drift in the machine's speed hits both.
        m = best_ns(migrated, env, number)
        transfer_to_npu.disable()
        try:
            d = best_ns(direct, env, number)
        finally:
            transfer_to_npu.enable()
        rows.append((label, path, m, d))
    print(f"{'API (CUDA spelling)':<36} {'path':<13} {'migrated':>10} {'npu, off':>10} "
          f"{'added':>8}  budget")
    worst = {}
    for label, path, m, d in rows:
        added = m - d
        worst[path] = max(worst.get(path, float("-inf")), added)
        print(f"{label:<36} {path:<13} {m:>8.1f}ns {d:>8.1f}ns {added:>+6.1f}ns  "
              f"{BUDGET_NS[path]:.0f}ns")
    print()
    for path, budget in BUDGET_NS.items():
        ok = worst[path] <= budget
        print(f"worst added on the {path} path: {worst[path]:+.1f} ns "
              f"({'within' if ok else 'OVER'} the {budget:.0f} ns budget)")
    print(f"(best of {REPEATS} repeats; python {sys.version.split()[0]}, torch {torch.__version__},"
          f" backend {transfer_to_npu.backend})")


if __name__ == "__main__":
    main()
