"""Instructions added per call by the migration, counted by valgrind's
callgrind: a number that does not move with the machine's load, so a
regression in the wrappers shows as one.

The script runs itself under callgrind with instrumentation off through the
imports, and on only around two loops per API (the CUDA spelling, then the
direct npu call through the saved original), dumping the counts after
each; the difference per call is what the wrapper adds.  Needs valgrind
(`make tools`).
"""
import os
import shutil
import subprocess
import sys
import tempfile

CALLS = int(os.environ.get("BENCH_CALLS", "20000"))

CASES = [
    # label, migrated, direct
    ("x.to('cuda')", "x.to('cuda')", "to(x, 'npu')"),
    ("x.to(torch.float32)", "x.to(torch.float32)", "to(x, torch.float32)"),
    ("torch.empty(3)", "torch.empty(3)", "empty(3)"),
    ("torch.zeros(2, device='cuda')", "torch.zeros(2, device='cuda')",
     "zeros(2, device='npu')"),
    ("torch.cuda.synchronize()", "torch.cuda.synchronize()", "npu_sync()"),
    ("torch.cuda.is_available()", "torch.cuda.is_available()", "npu_available()"),
    ("torch.device('cuda', 0)", "torch.device('cuda', 0)", None),
]


def child():
    os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")
    import torch

    import transfer_to_npu

    def ctl(*args):
        subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    env = {"torch": torch, "x": torch.ones(4).to("cuda"),
           "to": torch.Tensor.to.__wrapped__, "empty": torch.empty.__wrapped__,
           "zeros": torch.zeros.__wrapped__, "npu_sync": torch.npu.synchronize,
           "npu_available": torch.npu.is_available}
    loop = "for _ in range({n}):\n    {stmt}\n"
    for label, migrated, direct in CASES:
        m = compile(loop.format(n=CALLS, stmt=migrated), "<bench>", "exec")
        exec(compile(loop.format(n=100, stmt=migrated), "<warm>", "exec"), env)
        if direct is None:
            # The constructor slot: the direct call is the original slot,
            # with migration off.
            d = compile(loop.format(n=CALLS, stmt="torch.device('npu', 0)"), "<bench>", "exec")
            ctl("-i", "on")
            exec(m, env)
            ctl("-d", f"migrated {label}")
            transfer_to_npu.disable()
            exec(d, env)
            ctl("-d", f"direct {label}")
            ctl("-i", "off")
            transfer_to_npu.enable()
            continue
        d = compile(loop.format(n=CALLS, stmt=direct), "<bench>", "exec")
        exec(compile(loop.format(n=100, stmt=direct), "<warm>", "exec"), env)
        ctl("-i", "on")
        exec(m, env)
        ctl("-d", f"migrated {label}")
        exec(d, env)
        ctl("-d", f"direct {label}")
        ctl("-i", "off")


def totals(prefix):
    out = {}
    for name in os.listdir(os.path.dirname(prefix)):
        path = os.path.join(os.path.dirname(prefix), name)
        if not name.startswith(os.path.basename(prefix) + "."):
            continue
        trigger = total = None
        with open(path) as f:
            for line in f:
                if line.startswith("desc: Trigger: dump "):
                    trigger = line[len("desc: Trigger: dump "):].strip()
                elif line.startswith("totals:"):
                    total = int(line.split()[1])
        if trigger is not None and total is not None:
            out[trigger] = total
    return out


def main():
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (make tools); instruction counts skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "callgrind.out")
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={prefix}", sys.executable, __file__, "--child"],
            capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return 1
        counts = totals(prefix)
    print(f"{'API (CUDA spelling)':<32} {'migrated':>10} {'direct':>10} {'added':>8}   "
          f"(instructions per call, {CALLS} calls)")
    for label, _, _ in CASES:
        m = counts[f"migrated {label}"] / CALLS
        d = counts[f"direct {label}"] / CALLS
        print(f"{label:<32} {m:>10.0f} {d:>10.0f} {m - d:>+8.0f}")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
