"""What the migration costs a process at start, against what the user
waits for anyway (`import torch`):

* the first `import transfer_to_npu` with torch imported, its NPU backend
  part (the virtual NPU making the npu device and registering the kernels of
  its factories) and the patcher's (deriving the table from torch,
  installing every patch), in CPU time, which the machine's load moves
  less than wall time;
* `import torch` itself in the same processes, and the ratio;
* the first npu tensor of a process (the virtual NPU registering the rest
  of its kernels with torch), against the same call made again;
* `transfer_to_npu.enable()` after `disable()`: the patcher alone;
* with the log and the report off, the report on, and the log on, and the
  per-call cost of a rewritten call in the same settings.
"""
import json
import os
import statistics
import subprocess
import sys

RUNS = int(os.environ.get("BENCH_RUNS", "7"))

FIRST_IMPORT = """
import gc, json, time
t0 = time.process_time()
import torch
t1 = time.process_time()
# The full collection that importing torch makes due is taken now, so that
# it is not timed as the import below.
gc.collect()
t2 = time.process_time()
import transfer_to_npu
t3 = time.process_time()
steps = dict(transfer_to_npu._timings)
cycles = []
for _ in range(20):
    transfer_to_npu.disable()
    t = time.perf_counter()
    transfer_to_npu.enable()
    cycles.append(time.perf_counter() - t)
x = torch.ones(2)
t4 = time.perf_counter()
x.to("cuda")
t5 = time.perf_counter()
x.to("cuda")
t6 = time.perf_counter()
print(json.dumps({"torch": t1 - t0, "import": t3 - t2,
                  "backend": steps["backend"], "rows": steps["rows"], "enable": min(cycles),
                  "first": (t5 - t4) - (t6 - t5)}))
"""

PER_CALL = """
import timeit, json
import transfer_to_npu, torch
x = torch.ones(2).to("cuda")
t = timeit.Timer("x.to('cuda')", globals={"x": x})
print(json.dumps({"ns": min(t.repeat(repeat=15, number=100000)) / 100000 * 1e9}))
"""

MODES = [
    ("log and report off", {}),
    ("report on", {"TRANSFER_TO_NPU_REPORT": "ttn-bench-report.json"}),
    ("log level 1 (to a file)", {"TRANSFER_TO_NPU_LOG": "1",
                                 "TRANSFER_TO_NPU_LOG_FILE": "ttn-bench.log"}),
]


def run(code, env):
    full = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual")
    for key in ("TRANSFER_TO_NPU_LOG", "TRANSFER_TO_NPU_REPORT", "TRANSFER_TO_NPU_LOG_FILE"):
        full.pop(key, None)
    tmp = os.environ.get("TMPDIR", "/tmp")
    full.update((k, os.path.join(tmp, v) if k.endswith(("_REPORT", "_FILE")) else v)
                for k, v in env.items())
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    print(f"{'first import, torch imported (ms)':<30} {'import':>7} {'backend':>8} {'table':>6} "
          f"{'torch':>7} {'ratio':>6} {'enable()':>9} {'1st npu':>8}   (median of {RUNS})")
    # The modes take turns, so that a change in the machine's load falls on
    # all of them; one round first, unmeasured, warms the file system.
    rounds = [[run(FIRST_IMPORT, env) for _, env in MODES] for _ in range(RUNS + 1)][1:]
    for i, (label, _) in enumerate(MODES):
        results = [r[i] for r in rounds]

        def median(key):
            return statistics.median(r[key] for r in results) * 1e3

        ratio = statistics.median(r["import"] / r["torch"] for r in results)
        print(f"{label:<30} {median('import'):>7.2f} {median('backend'):>8.2f} "
              f"{median('rows'):>6.2f} "
              f"{median('torch'):>7.0f} {ratio:>6.1%} {median('enable'):>9.2f} "
              f"{median('first'):>8.2f}")
    print("(import, torch: CPU time; ratio: the first import against import torch in the\n"
          " same process; of the import, backend: installing the NPU backend, table:\n"
          " deriving the mapping table from torch (wall time); enable(): again after\n"
          " disable(); 1st npu: what the first\n"
          " x.to('cuda') of a process takes more than the second, registering the virtual\n"
          " NPU's other kernels)")
    print()
    base = None
    print(f"{'x.to(cuda), per call':<30} {'ns':>7} {'vs off':>8}")
    for label, env in MODES:
        ns = statistics.median(run(PER_CALL, env)["ns"] for _ in range(3))
        base = ns if base is None else base
        print(f"{label:<30} {ns:>7.1f} {ns - base:>+8.1f}")


if __name__ == "__main__":
    main()
