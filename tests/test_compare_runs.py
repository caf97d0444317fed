"""compare run on scripts as they are: a script written for CUDA, its
reference (the cpu backend here) and its migrated run, each dumped, then
compared; and each call of a migrated run checked by itself (--per-call).
The scripts are in tests/data/accuracy and tests/data/nanogpt, in the
shapes of nanoGPT, minGPT's trainer, pytorch/examples' mnist and
word_language_model, and with bugs planted where they must be found;
docs/accuracy.md says what each verdict means."""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, run_python

# On the torch line of `make test` only: compare's verdicts on whole scripts; the dump
# and the reference under them are checked on every line (test_accuracy.py).
pytestmark = pytest.mark.main_line

DATA = ROOT / "tests" / "data" / "accuracy"


def _compare(tmp_path, *argv, env=None, timeout=900):
    return run_python(["-m", "transfer_to_npu", "compare", *map(str, argv)], cwd=tmp_path,
                      env=env, timeout=timeout)


def _result(out):
    return json.loads((out / "compare_result.json").read_text())


def _line(path, marker):
    return next(i for i, l in enumerate(path.read_text().splitlines(), 1) if marker in l)


def _last(proc):
    """The line that says which exit status, and why."""
    return proc.stdout.rstrip().splitlines()[-2]


# --- scripts as they are: no false alarm -----------------------------------------


@pytest.mark.parametrize("script, args", [
    # nanoGPT's shape: 'cuda' in device (a string of its own), pinned
    # batches, bf16 autocast chosen by is_bf16_supported(), fused AdamW.
    (ROOT / "tests" / "data" / "nanogpt" / "train.py", []),
    # mnist's and minGPT's: torch.accelerator, a worker, pinning, dropout.
    (DATA / "trainer.py", []),
    # word_language_model's: no optimizer.step(), a loss read and fed back.
    (DATA / "manual_sgd.py", []),
])
def test_scripts_in_the_shapes_of_public_ones_compare_clean(tmp_path, script, args):
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", script, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _last(proc) == "compare: exit 0: nothing differs beyond noise"
    result = _result(out)
    assert result["same_program"] and not result["unmatched"] and not result["first_error"]
    assert not result["device_name_tests"] and not result["first_overflow"]["npu"]
    assert all(run["status"] == "finished" for side in result["runs"].values()
               for run in side.values())
    if script.name == "manual_sgd.py":
        # Every loss read, in order, though all in step 0.
        site = f"manual_sgd.py:{_line(script, '# LOSS')}"
        curve = result["curves"]["0"][site]
        assert len(curve["npu"]) == len(curve["bench"]) == 24
        assert {step for step, _ in curve["npu"]} == {0}
        assert "24 reads (NPU | bench | rel diff)" in proc.stdout


# --- planted bugs, found at their lines ------------------------------------------


def test_planted_bugs_are_found_at_their_lines(tmp_path):
    """A branch on a device name taken on CUDA only, gelu's tanh form on
    the NPU only, logits overflowing on both sides: each is named at its
    line, the test of a device name the script holds as a string is not."""
    script = DATA / "planted.py"
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", script, "branch,gelu,overflow")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = _result(out)
    branches = result["device_name_tests"]
    assert [b["site"] for b in branches] == [f"{script}:{_line(script, '# BRANCH')}"]
    assert (branches[0]["value"], branches[0]["here"], branches[0]["on_cuda"]) == \
        ("npu", False, True)
    first = result["first_divergence"]["0"]
    assert first["NPU Name"] == "Functional.gelu.0.forward.input.approximate"
    assert first["Result"] == "error" and first["Step"] == 0
    assert first["NPU_Stack_Info"] == f"{script}:{_line(script, '# GELU')}"
    overflow = result["first_overflow"]
    assert overflow["npu"]["0"]["site"] == f"{script}:{_line(script, '# OVERFLOW')}"
    assert overflow["npu"]["0"]["name"] == overflow["bench"]["0"]["name"]
    assert "the reference too: the original program overflows there" in proc.stdout
    last = _last(proc)
    for marker in ("# GELU", "# BRANCH", "# OVERFLOW"):
        assert f"{script}:{_line(script, marker)}" in last


def test_a_failed_run_is_reported_and_compared_up_to_its_end(tmp_path):
    """The reference fails at its third step: exit 3, its exception and
    the script's own line in the summary and the JSON, the calls before
    compared, what the migrated run made after them not reached (not
    another program)."""
    script = DATA / "fails.py"
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", script, env={"FAIL_WHERE": "reference"})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    site = f"{script}:{_line(script, '# FAILS')}"
    assert _last(proc) == (f"compare: exit 3: the reference run failed (IndexError at {site}); "
                           f"the calls before it are compared above")
    result = _result(out)
    bench = result["runs"]["bench"]["0"]
    assert bench["status"] == "failed" and bench["exception"]["site"] == site
    assert bench["exception"]["code"] == "out = out[99]  # FAILS"
    assert result["runs"]["npu"]["0"]["status"] == "finished"
    assert result["same_program"] and not result["unmatched"] and not result["only"]["npu"]
    assert result["not_reached"]["npu"] > 0 and result["matched"] > 10
    assert "NOT THE SAME PROGRAM" not in proc.stdout


# --- precision -----------------------------------------------------------------


def test_reference_in_full_precision_names_the_autocast_line(tmp_path):
    """--reference-precision fp32: the reference computes in float32, the
    summary says the policies differ and where autocast is entered, and
    every value is judged by bfloat16's thresholds."""
    from test_accuracy import TRANSFORMER

    script = tmp_path / "tiny.py"
    script.write_text(TRANSFORMER)
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--reference-precision", "fp32", "--", script,
                    "bf16")
    # Adam's first step divides each gradient by its size: where bfloat16
    # and float32 gradients of a bias at zero differ in sign, so do the
    # steps, beyond any dtype's thresholds (a difference of precision the
    # summary now explains).
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    autocast = next(i for i, l in enumerate(TRANSFORMER.splitlines(), 1)
                    if "torch.autocast(" in l)
    assert (f"precision: the reference computes in float32 (--reference-precision fp32), the "
            f"migrated run under autocast (torch.bfloat16) entered at {script}:{autocast}: the "
            f"policies differ, and every value is judged by torch.bfloat16's thresholds") \
        in proc.stdout
    result = _result(out)
    assert result["precision"]["floor"] == "torch.bfloat16"
    assert result["runs"]["bench"]["0"]["reference_precision"] == "fp32"
    # The forward in bfloat16 against float32: within bfloat16's
    # thresholds, the dtypes differing by choice, not as a warning.
    with open(out / "compare_result.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["Step"] == "0"]
    forward = rows[:next(i for i, r in enumerate(rows) if r["NPU Name"].startswith("Optimizer."))]
    assert any(r["NPU Dtype"] == "torch.bfloat16" and r["Bench Dtype"] == "torch.float32"
               for r in forward)
    assert {r["Result"] for r in forward if "backward" not in r["NPU Name"]} <= {"pass", "N/A"}


# --- each call by itself ---------------------------------------------------------


def test_per_call_check_names_each_wrong_kernel(tmp_path):
    """Two kernels of the NPU made wrong on purpose: the first's error
    reaches everything after it; each call run again on the host names
    both, and the calls between them pass."""
    script = DATA / "wrong_kernels.py"
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--per-call", "--", script)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert not (out / "bench").exists() and "the reference run" not in proc.stdout
    checks = _result(out)["per_call"]
    errors = [(c["name"], c["site"]) for c in checks if c["Result"] == "error"]
    assert errors == [("Functional.gelu.0.forward", f"{script}:{_line(script, '# GELU')}"),
                      ("Functional.silu.0.forward", f"{script}:{_line(script, '# SILU')}")]
    assert not [c for c in checks if c["name"].startswith(("Tensor.matmul", "Torch.tanh"))]
    counts = json.loads((out / "npu" / "step0" / "rank0" / "check.json").read_text())["counts"]
    assert counts["pass"] >= 4 and counts["error"] == 2


def test_noise_drawn_on_the_device_compares_clean(tmp_path):
    """A VAE's reparameterization (torch.randn_like of a device tensor):
    both runs of a compare draw the device's numbers on the host, so the
    reference draws what the migrated run draws."""
    out = tmp_path / "out"
    proc = _compare(tmp_path, "--output", out, "--", DATA / "device_noise.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _last(proc) == "compare: exit 0: nothing differs beyond noise"


def test_a_random_draw_first_apart_is_named_as_one(tmp_path):
    """Dumps made apart draw alike with the same --dump-seed; not seeded,
    their devices' generators draw other numbers, and where the first
    values apart are such a draw the summary says so."""
    script = DATA / "device_noise.py"
    for seed in ("0", None):
        for name, backend in (("npu", "virtual"), ("bench", "cpu")):
            argv = ["-m", "transfer_to_npu", "--backend", backend, "--dump", f"{name}{seed}"]
            argv += ["--dump-seed", seed] if seed else []
            proc = run_python(argv + [str(script)], cwd=tmp_path)
            assert proc.returncode == 0, proc.stderr
        out = tmp_path / f"out{seed}"
        proc = _compare(tmp_path, f"npu{seed}", f"bench{seed}", "--output", out)
        if seed:
            assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first = _result(out)["first_divergence"]["0"]
    assert first["NPU Name"].startswith("Torch.randn_like.0.forward.output")
    assert first["NPU_Stack_Info"] == f"{script}:{_line(script, '# DRAW')}"
    assert "Torch.randn_like draws random numbers" in proc.stdout
    assert "a random draw (Torch.randn_like)" in _last(proc)


def test_a_single_dump_names_its_first_overflow(tmp_path):
    script = DATA / "planted.py"
    proc = run_python(["-m", "transfer_to_npu", "--dump", "d", str(script), "overflow"],
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = _compare(tmp_path, "d", "--output", "out")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    site = f"{script}:{_line(script, '# OVERFLOW')}"
    # How many of the 64 are nan (inf - inf in a sum) is the host's BLAS's.
    found = re.search(rf"first inf/nan: Tensor\.matmul\.1\.forward \(step 4\) at {re.escape(site)}: "
                      rf"its output holds (?:(\d+) nan, )?(\d+) inf \(torch\.float32\), its inputs "
                      rf"are finite", proc.stdout)
    assert found, proc.stdout
    assert int(found.group(1) or 0) + int(found.group(2)) == 64
    assert _last(proc) == f"compare: exit 1: inf/nan first at {site}"


# --- edges -----------------------------------------------------------------------


def test_usage_errors_end_the_compare_before_anything_runs(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    mine = tmp_path / "out" / "npu" / "step0" / "rank0"
    mine.mkdir(parents=True)
    (mine / "dump.json").write_text("{}")  # a dump of the user's own
    for output, message in (
            ("file", "--output 'file' is a file, not a directory"),
            ("out", f"{tmp_path / 'out' / 'npu'} holds files this compare did not make (a "
                    f"dump of yours?): they are kept; choose another --output")):
        proc = _compare(tmp_path, "--output", output, "--", "script.py")
        assert proc.returncode == 2
        assert proc.stderr.splitlines() == [f"compare: error: {message}"] and not proc.stdout
    assert (mine / "dump.json").read_text() == "{}"
    assert sorted(os.listdir(tmp_path / "out")) == ["npu"]


def test_ctrl_c_writes_what_was_compared(tmp_path):
    """Ctrl-C (SIGINT to the compare's process group, as a terminal sends
    it): both runs write what they dumped, the compare compares it, writes
    its files and says so in one line, with no traceback."""
    script = DATA / "fails.py"
    slow = tmp_path / "slow.py"
    slow.write_text(script.read_text().replace("range(5)", "range(10 ** 6)").replace(
        "x[step]", "x[step % 5]"))
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("TRANSFER_TO_NPU", None)
    proc = subprocess.Popen([sys.executable, "-m", "transfer_to_npu", "compare", "--output",
                             str(out), "--", str(slow)], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            logs = [out / "npu.log", out / "bench.log"]
            if all(p.exists() and p.read_text().count("loss") >= 3 for p in logs):
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stdout + stderr
    assert stdout.rstrip().splitlines()[-2] == \
        "compare: exit 130: interrupted: what was compared before is written"
    result = _result(out)
    assert result["matched"] > 0 and result["same_program"]
    assert all(run["status"] == "interrupted" for side in result["runs"].values()
               for run in side.values())
