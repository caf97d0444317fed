"""Running a script's reference and its migrated run, each dumped, for a
compare (``compare -- script.py args``), or the migrated run alone with
each call checked by itself (``--per-call``).

The two runs start at once where the machine has two cores or more
(``--sequential`` runs one after the other), each with half of the
intra-op threads, the same on both sides (a kernel's sums may depend on
how many threads share them).  Each gets the same seed.  Ctrl-C stops
both, waits for them to write what they dumped, and compares that.

Nothing the user made is deleted: ``OUT/npu`` and ``OUT/bench`` are
cleared only when a compare made them (a mark inside says so); anything
else there ends the compare before it runs anything.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

from . import reference
from .dumps import CompareError, Dump
from .summary import Report

#: The file inside a dump directory that says a compare made it.
MARK = ".transfer_to_npu_compare"

# How long the runs get to write their dumps after Ctrl-C.
_GRACE = 60


def cuda_present():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def check_output(output):
    """The output directory, checked before anything runs (CompareError)."""
    if os.path.exists(output) and not os.path.isdir(output):
        raise CompareError(f"--output {output!r} is a file, not a directory")
    for side in ("npu", "bench"):
        place = os.path.join(output, side)
        if os.path.exists(place) and not os.path.isdir(place):
            raise CompareError(f"{place} is a file: choose another --output")
        if os.path.isdir(place) and os.listdir(place) and \
                not os.path.exists(os.path.join(place, MARK)):
            raise CompareError(f"{place} holds files this compare did not make (a dump of "
                               f"yours?): they are kept; choose another --output")


def _fresh(place):
    if os.path.isdir(place):
        shutil.rmtree(place)
    os.makedirs(place)
    with open(os.path.join(place, MARK), "w") as f:
        f.write("made by python -m transfer_to_npu compare; cleared by the next one\n")


def _environments(opts, output, reference_kind):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TRANSFER_TO_NPU_DUMP") and k not in ("TRANSFER_TO_NPU",
                                                                      reference.ENV)}
    base.update(PYTHONHASHSEED="0", TRANSFER_TO_NPU_DUMP_SEED=str(opts.seed))
    for option, variable in (("dump_steps", "TRANSFER_TO_NPU_DUMP_STEPS"),
                             ("dump_list", "TRANSFER_TO_NPU_DUMP_LIST"),
                             ("dump_tensors", "TRANSFER_TO_NPU_DUMP_TENSORS")):
        if getattr(opts, option):
            base[variable] = getattr(opts, option)
    ours = [sys.executable, "-m", __package__.rpartition(".")[0]]
    npu_dir, bench_dir = os.path.join(output, "npu"), os.path.join(output, "bench")
    npu_env = dict(base)
    if opts.per_call:
        npu_env["TRANSFER_TO_NPU_DUMP_CHECK"] = "1"
    sides = {"npu": (ours + ["--dump", npu_dir], npu_env)}
    if not opts.per_call:
        bench_env = dict(base)
        if opts.reference_precision == "fp32":
            bench_env[reference.ENV] = "fp32"
        # torch_npu, if installed, is not loaded by torch in the reference
        # (its device would be the NPU's).
        bench_env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        if reference_kind == "cuda":
            # The original run: unmigrated even where the script imports us.
            bench_env.update(TRANSFER_TO_NPU="0", TRANSFER_TO_NPU_DUMP=bench_dir)
            sides["bench"] = ([sys.executable], bench_env)
        elif reference_kind == "cpu":
            # On the host, from the same table.
            sides["bench"] = (ours + ["--backend", "cpu", "--dump", bench_dir], bench_env)
        else:
            # The machine's: chosen in the reference run, which imports torch.
            bench_env["TRANSFER_TO_NPU"] = "0"
            sides["bench"] = ([sys.executable, "-m", f"{__package__}.reference_run", bench_dir],
                              bench_env)
    return sides


def _threads(sides, at_once):
    """Half the intra-op threads each, when the runs share the machine."""
    if not at_once or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    for _, env in sides.values():
        env["OMP_NUM_THREADS"] = str(max(1, cores // len(sides)))


def run_script(opts, target, stream=sys.stdout):
    """Run the sides, compare what they dumped; return the exit status."""
    if os.path.exists(opts.output) and not os.path.isdir(opts.output):
        raise CompareError(f"--output {opts.output!r} is a file, not a directory")
    output = os.path.abspath(opts.output)
    check_output(output)
    kind = opts.reference
    if kind == "cuda" and not opts.per_call and not cuda_present():
        raise CompareError("--reference cuda: this machine has no GPU torch can use "
                           "(torch.cuda.is_available() is False); use --reference cpu")
    sides = _environments(opts, output, kind)
    cores = os.cpu_count() or 1
    at_once = len(sides) > 1 and not opts.sequential and cores >= 2
    _threads(sides, at_once)
    os.makedirs(output, exist_ok=True)
    for side in sides:
        _fresh(os.path.join(output, side))
    kinds = {"auto": "auto: CUDA, else the CPU", "cpu": "cpu",
             "cuda": "cuda"}
    labels = {"npu": "the migrated run",
              "bench": f"the reference run ({kinds[kind]}"
                       + (", float32" if opts.reference_precision == "fp32" else "") + ")"}
    procs, logs, read = {}, {}, {}
    interrupted = False
    try:
        for side in (("bench", "npu") if "bench" in sides else ("npu",)):
            argv, env = sides[side]
            logs[side] = os.path.join(output, f"{side}.log")
            stream.write(f"compare: {labels[side]}: {' '.join(argv[1:] + target)} "
                         f"(output in {logs[side]})\n")
            stream.flush()
            with open(logs[side], "wb") as log:
                procs[side] = subprocess.Popen(argv + target, env=env, stdout=log,
                                               stderr=subprocess.STDOUT)
            if not at_once:
                procs[side].wait()
        # A run's dump is read as soon as it ends, while the other may
        # still run (a core of the two is free then).
        running = dict(procs)
        while running:
            for side, proc in list(running.items()):
                if proc.poll() is not None:
                    del running[side]
                    read[side] = Dump.load(os.path.join(output, side), required=False)
            if running:
                time.sleep(0.05)
    except KeyboardInterrupt:
        interrupted = True
        _stop(procs)
    dumps = {}
    for side in sides:
        dump = read.get(side) if not interrupted else None
        if dump is None:
            dump = Dump.load(os.path.join(output, side), required=False)
        dump.returncode = procs[side].returncode if side in procs else None
        dumps[side] = dump
        if dump.returncode not in (0, None) and not interrupted:
            stream.write(f"compare: {labels[side]} exited with status {dump.returncode}; its "
                         f"last lines:\n{_tail(logs[side])}\n")
    return Report(dumps["npu"], dumps.get("bench"), interrupted=interrupted)


def _stop(procs):
    """After Ctrl-C: the runs get time to write what they dumped.  In this
    process group, they had it too; one still running a moment later is
    sent it (Ctrl-C sent here alone), once: a second would interrupt its
    writing."""
    deadline = time.monotonic() + 2
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.01, deadline - time.monotonic()))
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            try:
                proc.send_signal(signal.SIGINT)
            except OSError:
                pass
    deadline = time.monotonic() + _GRACE
    for proc in procs.values():
        while proc.poll() is None:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
            except KeyboardInterrupt:  # a second Ctrl-C: no more waiting
                proc.kill()


def _tail(path, lines=15):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""
