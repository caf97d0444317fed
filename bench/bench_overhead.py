"""Per-call cost of the migration: each wrapped API called in its CUDA
spelling (migrated) against the same call made directly on the npu through
the saved original, in one process, on the virtual NPU.

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
import torch.nn as nn  # noqa: E402

import transfer_to_npu  # noqa: E402

REPEATS = int(os.environ.get("BENCH_REPEATS", "15"))
BUDGET_NS = {"rewrite": 50.0, "pass-through": 20.0}


def best_ns(stmt, env, number):
    timer = timeit.Timer(stmt, globals=env)
    return min(timer.repeat(repeat=REPEATS, number=number)) / number * 1e9


def cases():
    x = torch.ones(4).to("cuda")
    model = nn.Linear(2, 2).to("cuda")
    dev = torch.device("cuda:0")
    env = {
        "torch": torch, "x": x, "model": model, "dev": dev,
        "to": torch.Tensor.to.__wrapped__,
        "module_to": nn.Module.to.__wrapped__,
        "empty": torch.empty.__wrapped__,
        "ones": torch.ones.__wrapped__,
        "npu_sync": torch.npu.synchronize,
        "npu_available": torch.npu.is_available,
        "npu_device_count": torch.npu.device_count,
        "npu_tensor": torch.Tensor.npu,
    }
    # (label, path, migrated statement, direct statement, calls per timing)
    return env, [
        ("x.to('cuda')", "rewrite", "x.to('cuda')", "to(x, 'npu')", 200_000),
        ("x.to('cuda:0')", "rewrite", "x.to('cuda:0')", "to(x, 'npu:0')", 200_000),
        ("x.to(device=dev)", "rewrite", "x.to(device=dev)", "to(x, device=dev)", 200_000),
        ("x.to(torch.float32)", "pass-through", "x.to(torch.float32)",
         "to(x, torch.float32)", 200_000),
        ("torch.empty(0, device='cuda')", "rewrite", "torch.empty(0, device='cuda')",
         "empty(0, device='npu')", 20_000),
        ("torch.empty(3)", "pass-through", "torch.empty(3)", "empty(3)", 200_000),
        ("torch.ones(2, dtype=torch.float64)", "pass-through",
         "torch.ones(2, dtype=torch.float64)", "ones(2, dtype=torch.float64)", 200_000),
        ("torch.cuda.synchronize()", "rewrite", "torch.cuda.synchronize()", "npu_sync()",
         200_000),
        ("torch.cuda.is_available()", "rewrite", "torch.cuda.is_available()",
         "npu_available()", 200_000),
        ("torch.cuda.device_count()", "rewrite", "torch.cuda.device_count()",
         "npu_device_count()", 200_000),
        ("x.cuda()", "rewrite", "x.cuda()", "npu_tensor(x)", 100_000),
        ("model.to('cuda')", "rewrite", "model.to('cuda')", "module_to(model, 'npu')", 5_000),
    ]


def device_ctor_case():
    """torch.device('cuda', 0) against torch.device('npu', 0) made by the
    original constructor (migration off)."""
    env = {"torch": torch}
    migrated = best_ns("torch.device('cuda', 0)", env, 200_000)
    passing = best_ns("torch.device('npu', 0)", env, 200_000)
    transfer_to_npu.disable()
    try:
        direct = best_ns("torch.device('npu', 0)", env, 200_000)
    finally:
        transfer_to_npu.enable()
    return [("torch.device('cuda', 0)", "rewrite", migrated, direct),
            ("torch.device('npu', 0)", "pass-through", passing, direct)]


def main():
    env, table = cases()
    rows = []
    for label, path, migrated, direct, number in table:
        # Interleaved, so that drift in the machine's speed hits both.
        m = best_ns(migrated, env, number)
        d = best_ns(direct, env, number)
        rows.append((label, path, m, d))
    rows += device_ctor_case()
    print(f"{'API (CUDA spelling)':<36} {'path':<13} {'migrated':>10} {'direct':>10} "
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
