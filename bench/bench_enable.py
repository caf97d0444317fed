"""Enable time, and what the log and the report cost.

* the first `import transfer_to_npu` in a process with torch imported: the
  NPU backend's registration with torch plus the patcher's enable;
* `transfer_to_npu.enable()` after `disable()`: the patcher alone (deriving
  the table from torch, installing every patch, rebinding names);
* the per-call cost of a rewritten call with the log and the report off, the
  report on, and the log on.
"""
import json
import os
import statistics
import subprocess
import sys

RUNS = int(os.environ.get("BENCH_RUNS", "7"))

FIRST_IMPORT = """
import time, json
import torch
t0 = time.perf_counter()
import transfer_to_npu
t1 = time.perf_counter()
cycles = []
for _ in range(20):
    transfer_to_npu.disable()
    t2 = time.perf_counter()
    transfer_to_npu.enable()
    cycles.append(time.perf_counter() - t2)
print(json.dumps({"import": t1 - t0, "enable": min(cycles)}))
"""

PER_CALL = """
import timeit, json
import transfer_to_npu, torch
x = torch.ones(2).to("cuda")
t = timeit.Timer("x.to('cuda')", globals={"x": x})
print(json.dumps({"ns": min(t.repeat(repeat=15, number=100000)) / 100000 * 1e9}))
"""


def run(code, env=None):
    full = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual", **(env or {}))
    for key in ("TRANSFER_TO_NPU_LOG", "TRANSFER_TO_NPU_REPORT", "TRANSFER_TO_NPU_LOG_FILE"):
        if env is None or key not in env:
            full.pop(key, None)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    results = [run(FIRST_IMPORT) for _ in range(RUNS)]
    first = statistics.median(r["import"] for r in results) * 1e3
    enable = statistics.median(r["enable"] for r in results) * 1e3
    print(f"first import transfer_to_npu (torch imported): {first:7.2f} ms  (median of {RUNS})")
    print(f"enable() again after disable():                 {enable:7.2f} ms  (budget 5 ms)")
    print()
    tmp = os.environ.get("TMPDIR", "/tmp")
    modes = [
        ("log and report off", {}),
        ("report on", {"TRANSFER_TO_NPU_REPORT": os.path.join(tmp, "ttn-bench-report.json")}),
        ("log level 1 (to a file)", {"TRANSFER_TO_NPU_LOG": "1",
                                     "TRANSFER_TO_NPU_LOG_FILE": os.path.join(tmp,
                                                                              "ttn-bench.log")}),
    ]
    base = None
    header = "x.to('cuda'), per call"
    print(f"{header:<28} {'ns':>8} {'vs off':>9}")
    for label, env in modes:
        ns = statistics.median(run(PER_CALL, env)["ns"] for _ in range(3))
        base = ns if base is None else base
        print(f"{label:<28} {ns:>8.1f} {ns - base:>+8.1f}")


if __name__ == "__main__":
    main()
