"""Shared fixtures.  Importing transfer_to_npu migrates this test process,
as the one line does in a user's script; tests that disable it put it
back."""
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import transfer_to_npu

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture
def site(tmp_path):
    """A copy of the installed package, to edit."""
    site = tmp_path / "site"
    shutil.copytree(os.path.dirname(transfer_to_npu.__file__), site / "transfer_to_npu",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return site


@pytest.fixture
def migrated():
    """transfer_to_npu enabled, whatever the test does to it."""
    transfer_to_npu.enable()
    yield transfer_to_npu
    transfer_to_npu.enable()


def calls(source):
    """How many calls of `source` the table has counted."""
    for m in transfer_to_npu.mappings():
        if m["source"] == source:
            return m["calls"]
    raise KeyError(source)


# torch 2.10's gloo prints a line to stdout for every group it connects, in
# every process: torch's output, not the script's.  It is written piece by
# piece, so where processes share a pipe the pieces of one rank's line can
# fall between another's; run_torchrun gives each rank a stdout of its own.
_GLOO = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
                   r"Expected number of connected peer ranks is : \d+\n", re.M)


def run_python(args, cwd=None, env=None, timeout=300):
    """Run a fresh interpreter (``env`` adds to this one's environment, and
    unsets a name given None); return the completed process.  It runs in a
    session of its own, so that on a timeout everything it started (the
    workers of a launcher) is killed with it."""
    full_env = dict(os.environ)
    full_env.pop("TRANSFER_TO_NPU", None)
    for name, value in (env or {}).items():  # None: unset
        if value is None:
            full_env.pop(name, None)
        else:
            full_env[name] = value
    with subprocess.Popen([sys.executable, *args], cwd=cwd, env=full_env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, _GLOO.sub("", stdout), stderr)


def run_torchrun(tmp_path, script, nproc=2, env=None, timeout=240):
    """Run the text of a script on ``nproc`` processes under torchrun, on
    the virtual NPU (``env`` adds to the environment, as in run_python).
    Each rank writes to a stdout of its own; the result's stdout is theirs,
    rank after rank."""
    path = tmp_path / "job.py"
    path.write_text(script)
    logs = tmp_path / "torchrun-logs"
    proc = run_python(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                       str(nproc), "--log-dir", str(logs), "--redirects", "1", str(path)],
                      cwd=tmp_path, env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                                         "OMP_NUM_THREADS": "1", **(env or {})},
                      timeout=timeout)
    # <log-dir>/<run id>/attempt_0/<local rank>/stdout.log: torchrun restarts
    # nothing here, so there is one attempt.
    outs = {int(f.parent.name): f.read_text() for f in logs.glob("*/attempt_0/*/stdout.log")}
    proc.stdout += "".join(_GLOO.sub("", outs[rank]) for rank in sorted(outs))
    return proc


def npu(index=0):
    return torch.device("npu", index)
