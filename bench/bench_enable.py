"""Enable time, and what the log and the report cost.

* the first `import transfer_to_npu` in a process with torch imported, and
  its two parts: the NPU backend's initialisation (the virtual NPU making
  the npu device and registering the kernels of its factories) and the
  patcher's (importing its modules, deriving the table from torch,
  installing every patch);
* the first import's page faults: the memory it is the first to touch,
  a count that does not move with the machine's load (each costs time);
* the first npu tensor of the process, when the virtual NPU registers the
  rest of its kernels with torch (once per process), against the same
  call made again;
* `transfer_to_npu.enable()` after `disable()`: the patcher alone;
* the first import's parts: importlib's work per module, reading and
  unmarshalling the compiled modules, running their bodies, loading the C
  extension, and enable()'s own work;
* both with the log and the report off, the report on, and the log on;
  with the cache of the package's compiled modules empty; and with no cache
  at all (neither that one nor those of what is learnt from torch once per
  build: the mapping table and the facts the rules and the backend read);
* the per-call cost of a rewritten call in the same three settings.
"""
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

RUNS = int(os.environ.get("BENCH_RUNS", "7"))

FIRST_IMPORT = """
import gc, time, json, resource
import torch
# The full collection that importing torch makes due (tens of ms over its
# objects) is taken now, so that it is not timed as the import below.
gc.collect()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0 = time.perf_counter()
import transfer_to_npu
t1 = time.perf_counter()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
backend = transfer_to_npu._timings["backend"]
steps = {step: transfer_to_npu._timings[step] for step in transfer_to_npu._PATCH_STEPS}
cycles = []
for _ in range(20):
    transfer_to_npu.disable()
    t2 = time.perf_counter()
    transfer_to_npu.enable()
    cycles.append(time.perf_counter() - t2)
x = torch.ones(2)
t3 = time.perf_counter()
x.to("cuda")
t4 = time.perf_counter()
x.to("cuda")
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "backend": backend, "enable": min(cycles),
                  "first": t4 - t3, "again": t5 - t4, "steps": steps, "faults": faults}))
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


# Stands for a cache directory with the facts learnt from torch (the mapping
# table among them) and without the package's compiled code
# (facts_only_cache()).
FACTS_ONLY = "<facts only>"

MODES = [
    ("log and report off", {}),
    ("the same, code cache empty", {"TRANSFER_TO_NPU_CACHE_DIR": FACTS_ONLY}),
    ("the same, no cache (first run)", {"TRANSFER_TO_NPU_CACHE_DIR": ""}),
    ("report on", {"TRANSFER_TO_NPU_REPORT": "ttn-bench-report.json"}),
    ("log level 1 (to a file)", {"TRANSFER_TO_NPU_LOG": "1",
                                 "TRANSFER_TO_NPU_LOG_FILE": "ttn-bench.log"}),
]


def facts_only_cache():
    """A cache directory where a first run has learnt the facts and kept the
    mapping table, and whose
    code cache can be neither read nor written (its file's name is taken by
    a directory): every module is imported from its file, as without the
    code cache, plus the finder's look at each."""
    directory = tempfile.mkdtemp(prefix="ttn-bench-cache-")
    run(FIRST_IMPORT, {"TRANSFER_TO_NPU_CACHE_DIR": directory})
    for path in glob.glob(os.path.join(directory, "code-*")):
        os.remove(path)
        os.mkdir(path)
    return directory


def in_tmp(env, facts_only=None):
    tmp = os.environ.get("TMPDIR", "/tmp")
    env = {k: (facts_only if v == FACTS_ONLY else v) for k, v in env.items()}
    return {k: (os.path.join(tmp, v) if k.endswith(("_REPORT", "_FILE")) else v)
            for k, v in env.items()}


# Where the first import's time goes: importlib's own work per module
# (finding it, making the module), reading and unmarshalling the package's
# compiled modules, running their bodies, loading the C extension, and the
# work of enable() itself (making the npu device, deriving and installing
# the table), each module's nested imports counted in their own parts.
IMPORT_PARTS = """
import gc, json, sys, time
import torch
import importlib._bootstrap_external as external
bootstrap = sys.modules["_frozen_importlib"]
clock = time.perf_counter
inclusive, children, reading, bodies, stack = {}, {}, {}, {}, []
find_and_load = bootstrap._find_and_load

def timed_find_and_load(name, import_):
    stack.append(name)
    start = clock()
    try:
        return find_and_load(name, import_)
    finally:
        spent = clock() - start
        stack.pop()
        inclusive[name] = inclusive.get(name, 0) + spent
        if stack:
            children[stack[-1]] = children.get(stack[-1], 0) + spent

# Every source module's loader (the package's code cache's too) runs this.
def timed_exec_module(self, module):
    name = module.__name__
    start = clock()
    code = self.get_code(name)
    reading[name] = clock() - start
    before = children.get(name, 0)
    start = clock()
    exec(code, module.__dict__)
    bodies[name] = clock() - start - (children.get(name, 0) - before)

bootstrap._find_and_load = timed_find_and_load
external._LoaderBasics.exec_module = timed_exec_module
gc.collect()
start = clock()
import transfer_to_npu
total = clock() - start
ours = [n for n in inclusive if n.split(".")[0] == "transfer_to_npu"]
own = {n: inclusive[n] - children.get(n, 0) for n in ours}
top, ext = "transfer_to_npu", "transfer_to_npu._C"
print(json.dumps({
    "total": total, "modules": len(ours),
    "importlib": sum(own[n] - bodies.get(n, 0) - reading.get(n, 0) for n in ours if n != ext),
    "reading": sum(reading.get(n, 0) for n in ours),
    "bodies": sum(bodies.get(n, 0) for n in ours if n != top),
    "extension": own.get(ext, 0),
    "enable": bodies.get(top, 0)}))
"""

def import_parts():
    """Medians, in ms, of the first import's parts (IMPORT_PARTS)."""
    results = [run(IMPORT_PARTS) for _ in range(RUNS + 1)][1:]
    return {key: statistics.median(r[key] for r in results) * (1 if key == "modules" else 1e3)
            for key in results[0]}


def main():
    print(f"{'first import, torch imported (ms)':<34} {'total':>7} {'best':>6} {'backend':>8} "
          f"{'patcher':>8} {'enable()':>9} {'1st npu':>8} {'faults':>7}   (median of {RUNS})")
    facts_only = facts_only_cache()
    # The modes take turns, so that a change in the machine's load falls on
    # all of them; one round first, unmeasured, fills the caches a new
    # install lacks.
    envs = [in_tmp(env, facts_only) for _, env in MODES]
    rounds = [[run(FIRST_IMPORT, env) for env in envs] for _ in range(RUNS + 1)][1:]
    for i, (label, _) in enumerate(MODES):
        results = [r[i] for r in rounds]
        total = statistics.median(r["import"] for r in results) * 1e3
        best = min(r["import"] for r in results) * 1e3
        backend = statistics.median(r["backend"] for r in results) * 1e3
        patcher = statistics.median((r["import"] - r["backend"]) for r in results) * 1e3
        enable = statistics.median(r["enable"] for r in results) * 1e3
        first = statistics.median(r["first"] - r["again"] for r in results) * 1e3
        faults = statistics.median(r["faults"] for r in results)
        print(f"{label:<34} {total:>7.2f} {best:>6.2f} {backend:>8.2f} {patcher:>8.2f} "
              f"{enable:>9.2f} {first:>8.2f} {faults:>7.0f}")
    shutil.rmtree(facts_only, ignore_errors=True)
    print("(best: the fastest of the runs, the least disturbed by the machine's load;\n"
          " backend: the virtual NPU's device and factory kernels; patcher: the rest of the\n"
          " import; enable(): again after disable(), budget 5 ms; 1st npu: what the first\n"
          " x.to('cuda') of a process takes more than the second, registering the virtual\n"
          " NPU's other kernels; faults: the import's page faults, memory it is the first\n"
          " to touch; with torch imported and its objects collected)")
    off = [r[0] for r in rounds]
    print(f"the patcher's steps in it (log and report off, median of {RUNS}, ms): "
          + ", ".join(f"{step} {statistics.median(r['steps'][step] for r in off) * 1e3:.2f}"
                      for step in off[0]["steps"]))
    print(" (rows: the mapping table read from its cache; install: the C core patching;\n"
          " after_enable: TorchScript's builtins; rebind: the user's modules rescanned; the\n"
          " rest of the patcher's time is importing the package's modules and loading the\n"
          " extension)")
    parts = import_parts()
    print(f"its parts (log and report off, median of {RUNS}; timing them adds to the total):")
    print(f"  importlib's work for the package's {parts['modules']:.0f} modules "
          f"{parts['importlib']:.2f}, reading and unmarshalling them {parts['reading']:.2f},\n"
          f"  running their bodies {parts['bodies']:.2f}, loading the C extension "
          f"{parts['extension']:.2f}, enable()'s own work {parts['enable']:.2f}; "
          f"total {parts['total']:.2f}")
    print()
    base = None
    header = "x.to('cuda'), per call"
    print(f"{header:<34} {'ns':>7} {'vs off':>8}")
    for label, env in MODES:
        if "TRANSFER_TO_NPU_CACHE_DIR" in env:
            continue  # the cache is read at import only
        ns = statistics.median(run(PER_CALL, in_tmp(env))["ns"] for _ in range(3))
        base = ns if base is None else base
        print(f"{label:<34} {ns:>7.1f} {ns - base:>+8.1f}")


if __name__ == "__main__":
    main()
