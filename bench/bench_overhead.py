"""Per-call cost of the migration: each wrapped API called in its CUDA
spelling (migrated) against the same call spelled for the npu and made
through torch's original objects (migration off), on the virtual NPU
(cases in cases.py).

Budgets: at most 50 ns added on the rewriting path, 20 ns on the
pass-through path.  Rounds alternate migration on and off, each side timed
a few milliseconds from the other; what is added is the median over rounds
of the difference within a round.  On a loaded machine a call's time moves
by more than these budgets from one moment to the next, and the two sides of
one round share the moment: the difference of each side's best time over
all rounds compares two lucky moments, which need not be alike.  A process
also has a memory layout of its own, which moves a call's time by a percent
or two for the whole process; the rounds are spread over several processes.
Instruction counts, which do not depend on the machine's load, are in
bench_instructions.py.
"""
import json
import os
import statistics
import subprocess
import sys
import timeit

PROCESSES = int(os.environ.get("BENCH_PROCESSES", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "12"))  # per process
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
BUDGET_NS = {"rewrite": 50.0, "pass-through": 20.0}


def number_for(stmt, env):
    """Calls per timing: about 3 ms worth."""
    once = timeit.Timer(stmt, globals=env).timeit(200) / 200
    return max(100, min(100_000, int(0.003 / max(once, 1e-9))))


def best(timer, number):
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e9


def child():
    """One process's rounds: per case, a list of (migrated, direct) ns."""
    os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")
    import torch

    import transfer_to_npu
    from cases import CASES, environment

    if hasattr(os, "sched_setaffinity"):
        # One core: no migrations between cores in the middle of a timing.
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    env = environment(torch)
    out = []
    # Per case, rounds alternate migration on and off, a few milliseconds
    # apart, taking turns at going first; each round gives both sides'
    # times at one moment of the machine's load.
    for _, _, m_stmt, d_stmt in CASES:
        n = number_for(m_stmt, env)
        m_timer, d_timer = timeit.Timer(m_stmt, globals=env), timeit.Timer(d_stmt, globals=env)
        rounds = []
        for r in range(ROUNDS):
            times = {}
            for side in (("m", "d") if r % 2 == 0 else ("d", "m")):
                if side == "m":
                    times[side] = best(m_timer, n)
                    continue
                transfer_to_npu.disable()
                try:
                    times[side] = best(d_timer, n)
                finally:
                    transfer_to_npu.enable()
            rounds.append((times["m"], times["d"]))
        out.append(rounds)
    print(json.dumps({"rounds": out, "torch": torch.__version__,
                      "backend": transfer_to_npu.backend}))


def children(script, processes):
    """What each of ``processes`` runs of ``script --child`` printed last (as
    JSON), or None when one failed (its error printed)."""
    found = []
    for _ in range(processes):
        proc = subprocess.run([sys.executable, script, "--child"], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return None
        found.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return found


def main():
    from cases import CASES

    rounds = [[] for _ in CASES]
    results = children(os.path.abspath(__file__), PROCESSES)
    if results is None:
        return 1
    for found in results:
        for mine, theirs in zip(rounds, found["rounds"]):
            mine.extend(theirs)
    print(f"{'API (CUDA spelling)':<36} {'path':<13} {'migrated':>10} {'npu, off':>10} "
          f"{'added':>8}  budget   (medians over rounds)")
    worst = {}
    for (label, path, _, _), case in zip(CASES, rounds):
        m = statistics.median(t for t, _ in case)
        d = statistics.median(t for _, t in case)
        added = statistics.median(a - b for a, b in case)
        worst[path] = max(worst.get(path, float("-inf")), added)
        print(f"{label:<36} {path:<13} {m:>8.1f}ns {d:>8.1f}ns {added:>+6.1f}ns  "
              f"{BUDGET_NS[path]:.0f}ns")
    print()
    for path, budget in BUDGET_NS.items():
        ok = worst[path] <= budget
        print(f"worst added on the {path} path: {worst[path]:+.1f} ns "
              f"({'within' if ok else 'OVER'} the {budget:.0f} ns budget)")
    print(f"(each side the best of {REPEATS} runs in each of {ROUNDS} rounds in each of "
          f"{PROCESSES} processes, on one core; added: the median of the rounds' differences; "
          f"python {sys.version.split()[0]}, torch {found['torch']}, backend {found['backend']})")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
