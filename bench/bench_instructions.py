"""Instructions added per call by the migration, counted by valgrind's
callgrind: a number that does not move with the machine's load, so a
regression in the wrappers shows as one.

The script runs itself under callgrind with instrumentation off through the
imports, and on only around the loops of each case (cases.py): the CUDA
spelling with migration on, then the npu spelling with migration off.  Each
side runs a loop of N calls and one of 2N, and its cost per call is the
difference over N, which leaves out the control commands around the loops;
the difference between the sides is what migration adds.  Then, each in a
process of its own: the end-to-end training step of bench_e2e_step.py,
migrated and written for the npu by hand, whose ratio the wall clock
gives only to within the machine's noise; and the first import's count,
with torch imported.  Needs valgrind (`make tools`).
"""
import gc
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES, environment  # noqa: E402

CALLS = int(os.environ.get("BENCH_CALLS", "5000"))


def ctl(*args):
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def import_child():
    """The first `import transfer_to_npu` with torch imported, in a window
    of its own; an empty window before it counts what the control commands
    around a window cost."""
    import torch  # noqa: F401

    gc.collect()
    for tag in ("empty", "import"):
        ctl("-z")
        ctl("-i", "on")
        if tag == "import":
            import transfer_to_npu  # noqa: F401
        ctl("-d", tag)
        ctl("-i", "off")


def child():
    import torch

    import transfer_to_npu

    env = environment(torch)
    loop = "for _ in range({n}):\n    {stmt}\n"

    def measure(stmt, tag):
        """Dump the counts of a loop of CALLS calls and of one of 2 * CALLS:
        the control commands around each window cost the same, so their
        difference is CALLS calls alone.  The collector is off in the
        loops, as timeit has it: a collection falls at a different call in
        each loop and costs what the heap holds, not what the call does."""
        exec(compile(loop.format(n=50, stmt=stmt), "<warm>", "exec"), env)
        for n in (CALLS, 2 * CALLS):
            code = compile(loop.format(n=n, stmt=stmt), f"<{tag}>", "exec")
            gc.collect()
            gc.disable()
            try:
                ctl("-z")
                ctl("-i", "on")
                exec(code, env)
                ctl("-d", f"{tag}x{n}")
                ctl("-i", "off")
            finally:
                gc.enable()

    # Dump names are kept plain: callgrind_control passes them on unquoted.
    for i, (label, path, migrated, direct) in enumerate(CASES):
        measure(migrated, f"migrated{i}")
        transfer_to_npu.disable()
        try:
            measure(direct, f"direct{i}")
        finally:
            transfer_to_npu.enable()


def e2e_child():
    """The seed's CNN training step written for CUDA and migrated, and the
    same step written for the npu with migration off (bench_e2e_step.py's
    two sides, training one model): a window of one step each, in turns,
    after a first turn that is not counted (its windows hold what a first
    call in a window costs callgrind)."""
    import torch

    import transfer_to_npu
    from seed_cnn import make_step, make_training

    torch.set_num_threads(1)
    training = make_training("npu:0")
    sides = (("migrated", make_step(training, "cuda:0"), True),
             ("by_hand", make_step(training, "npu:0"), False))
    gc.collect()
    gc.disable()
    for turn in ("warm", "1", "2"):
        for tag, step, migrated in sides:
            if not migrated:
                transfer_to_npu.disable()  # a script for the npu runs without the patcher
            try:
                step()
                ctl("-z")
                ctl("-i", "on")
                step()
                ctl("-d", f"{tag}{turn}")
                ctl("-i", "off")
            finally:
                if not migrated:
                    transfer_to_npu.enable()


def totals(directory):
    out = {}
    for name in os.listdir(directory):
        trigger = total = None
        with open(os.path.join(directory, name)) as f:
            for line in f:
                if line.startswith("desc: Trigger: dump "):
                    trigger = line[len("desc: Trigger: dump "):].strip()
                elif line.startswith("totals:"):
                    total = int(line.split()[1])
        if trigger is not None and total is not None:
            out[trigger] = total
    return out


def per_call(counts, tag):
    return (counts[f"{tag}x{2 * CALLS}"] - counts[f"{tag}x{CALLS}"]) / CALLS


# One hash seed: dicts laid out alike in every run, so that the same code
# gives the same counts.
ENV = {"TRANSFER_TO_NPU_BACKEND": "virtual", **os.environ, "PYTHONHASHSEED": "0"}


def counted(mode):
    """Run this script under callgrind with `mode`; the totals of its dumps,
    or None when it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={os.path.join(tmp, 'callgrind.out')}", sys.executable,
             os.path.abspath(__file__), mode], capture_output=True, text=True, env=ENV)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            return None
        return totals(tmp)


def main():
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (make tools); instruction counts skipped")
        return 0
    counts = counted("--child")
    if counts is None:
        return 1
    print(f"{'API (CUDA spelling)':<36} {'path':<13} {'migrated':>9} {'npu, off':>9} "
          f"{'added':>7}   (instructions per call, {CALLS} calls)")
    for i, (label, path, _, _) in enumerate(CASES):
        m, d = (per_call(counts, f"{side}{i}") for side in ("migrated", "direct"))
        print(f"{label:<36} {path:<13} {m:>9.0f} {d:>9.0f} {m - d:>+7.0f}")
    counts = counted("--e2e")
    if counts is None:
        return 1
    m, h = ((counts[f"{tag}1"] + counts[f"{tag}2"]) / 2 for tag in ("migrated", "by_hand"))
    print(f"end to end, the seed's CNN training step (bench_e2e_step.py's two sides): "
          f"migrated {m / 1e6:.2f} M, by hand {h / 1e6:.2f} M instructions a step, "
          f"{m - h:+.0f}; ratio {m / h:.5f} (budget 1.01)")
    # A run of its own first fills the on-disk caches, as any earlier run would.
    subprocess.run([sys.executable, "-c", "import torch, transfer_to_npu"], env=ENV, check=True)
    counts = counted("--import")
    if counts is None:
        return 1
    print(f"first import of transfer_to_npu, torch imported: "
          f"{(counts['import'] - counts['empty']) / 1e6:.2f} M instructions")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    elif "--import" in sys.argv:
        import_child()
    elif "--e2e" in sys.argv:
        e2e_child()
    else:
        sys.exit(main())
