"""Running a script's reference and its migrated run, each dumped, for a
compare."""

import os
import shutil
import subprocess
import sys

from .dumps import _STEP, CompareError
from .summary import run

def _cuda_present():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _fresh(directory):
    """An empty dump directory: one compare wrote before is cleared; a
    directory holding anything else is the user's, and kept."""
    if os.path.isdir(directory):
        entries = os.listdir(directory)
        if any(not _STEP.match(e) for e in entries):
            raise CompareError(f"{directory} holds files that are not a dump: choose another "
                               f"--output")
        shutil.rmtree(directory)
    os.makedirs(directory)


def _launch(argv, env, log_path):
    with open(log_path, "wb") as log:
        proc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc.returncode


def _tail(path, lines=15):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run_script(opts, target, stream=sys.stdout):
    output = os.path.abspath(opts.output)
    os.makedirs(output, exist_ok=True)
    npu_dir, bench_dir = os.path.join(output, "npu"), os.path.join(output, "bench")
    _fresh(npu_dir)
    _fresh(bench_dir)
    reference = opts.reference
    if reference == "auto":
        reference = "cuda" if _cuda_present() else "cpu"
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TRANSFER_TO_NPU_DUMP") and k != "TRANSFER_TO_NPU"}
    base.update(PYTHONHASHSEED="0", TRANSFER_TO_NPU_DUMP_SEED=str(opts.seed))
    for option, variable in (("dump_steps", "TRANSFER_TO_NPU_DUMP_STEPS"),
                             ("dump_list", "TRANSFER_TO_NPU_DUMP_LIST"),
                             ("dump_tensors", "TRANSFER_TO_NPU_DUMP_TENSORS")):
        if getattr(opts, option):
            base[variable] = getattr(opts, option)
    ours = [sys.executable, "-m", __package__.rpartition(".")[0]]
    if reference == "cuda":
        # The original run: unmigrated even where the script imports us.
        bench_env = dict(base, TRANSFER_TO_NPU="0", TRANSFER_TO_NPU_DUMP=bench_dir)
        bench_argv = [sys.executable] + target
    else:
        # On the host, from the same table; torch_npu, if installed, is
        # not loaded by torch (its device would be the NPU's).
        bench_env = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        bench_argv = ours + ["--backend", "cpu", "--dump", bench_dir] + target
    npu_argv = ours + ["--dump", npu_dir] + target
    failed = []
    for side, argv, env, where in (("reference", bench_argv, bench_env, bench_dir),
                                   ("migrated", npu_argv, dict(base), npu_dir)):
        log = os.path.join(output, "bench.log" if side == "reference" else "npu.log")
        label = f"the reference run ({reference})" if side == "reference" else "the migrated run"
        stream.write(f"compare: {label}: {' '.join(argv[1:])} (output in {log})\n")
        stream.flush()
        code = _launch(argv, env, log)
        if code != 0:
            failed.append(side)
            stream.write(f"compare: {label} exited with status {code}; its last lines:\n"
                         f"{_tail(log)}\n")
    try:
        status = run(npu_dir, bench_dir, output, stream)
    except CompareError as exc:
        stream.write(f"compare: {exc}\n")
        return 2
    return 1 if failed else status
