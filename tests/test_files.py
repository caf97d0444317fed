"""The files the package writes and reads (the log, the report, the rules
file), in a directory others may write to: nothing planted there is
followed, waited on, or replaced, and a report is written whole or not at
all, never lost to another process."""
import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import run_python

# On the torch line of `make test` only: the files the package writes and reads.
pytestmark = pytest.mark.main_line

STEP = "import torch, transfer_to_npu\nx = torch.ones(2, device='cuda')\nprint('done')\n"


def _run(env, code=STEP, timeout=120):
    return run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual", **env},
                      timeout=timeout)


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


def test_a_link_at_the_log_path_is_not_followed(tmp_path, victim):
    log = tmp_path / "ttn.log"
    log.symlink_to(victim)
    proc = _run({"TRANSFER_TO_NPU_LOG": "1", "TRANSFER_TO_NPU_LOG_FILE": str(log)})
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "precious\n"
    assert "cannot write the log" in proc.stderr and "torch.ones" in proc.stderr


def test_a_link_at_the_report_path_is_not_followed(tmp_path, victim):
    report = tmp_path / "report.json"
    report.symlink_to(victim)
    proc = _run({"TRANSFER_TO_NPU_REPORT": str(report)})
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "precious\n"
    assert report.is_symlink() and "cannot write the report" in proc.stderr


def test_the_reports_temporary_file_has_no_name_to_plant(tmp_path, victim):
    """A link at any name the report could be written through first (the
    old scheme's was the path plus the pid) is never opened."""
    from transfer_to_npu import _report

    report = tmp_path / "report.json"
    planted = tmp_path / f"report.json.tmp{os.getpid()}"
    planted.symlink_to(victim)
    _report.write_report(str(report))
    assert victim.read_text() == "precious\n"
    assert "mappings" in json.loads(report.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["victim.txt", "report.json", planted.name])


@pytest.mark.parametrize("what", ["log", "report", "rules"])
def test_a_fifo_is_not_waited_on(tmp_path, what):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    env = {"log": {"TRANSFER_TO_NPU_LOG": "1", "TRANSFER_TO_NPU_LOG_FILE": str(fifo)},
           "report": {"TRANSFER_TO_NPU_REPORT": str(fifo)},
           "rules": {"TRANSFER_TO_NPU_RULES": str(fifo)}}[what]
    proc = _run(env, timeout=60)  # a wait on the FIFO would time out
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    if what == "rules":
        assert proc.returncode != 0 and "not a regular file" in proc.stderr
    else:
        assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr
        assert f"cannot write the {what}" in proc.stderr


def test_a_device_as_the_rules_file_is_an_error_not_a_read_without_end():
    proc = _run({"TRANSFER_TO_NPU_RULES": "/dev/zero"}, timeout=60)
    assert proc.returncode != 0
    assert "/dev/zero" in proc.stderr and "not a regular file" in proc.stderr


def test_another_users_file_at_the_log_path_is_not_written(tmp_path):
    log = tmp_path / "ttn.log"
    log.write_text("theirs\n")
    os.chown(log, 12345, 12345)
    proc = _run({"TRANSFER_TO_NPU_LOG": "1", "TRANSFER_TO_NPU_LOG_FILE": str(log)})
    assert proc.returncode == 0, proc.stderr
    assert log.read_text() == "theirs\n" and "cannot write the log" in proc.stderr


def test_independent_processes_given_one_report_path_keep_both_reports(tmp_path):
    """Two runs at once (no launcher between them): the first to finish
    writes the path, the other beside it; neither report is lost."""
    report = tmp_path / "report.json"
    code = ("import sys, time, torch, transfer_to_npu\n"
            "torch.ones(1, device='cuda'); print('ready', flush=True); sys.stdin.readline()\n")
    env = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual", TRANSFER_TO_NPU_REPORT=str(report))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.communicate("\n", timeout=60)
        assert proc.returncode == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) == 2 and written[0] == "report.json", written
    assert written[1].startswith("report.json.pid")
    for name in written:
        assert json.loads((tmp_path / name).read_text())["backend"] == "virtual"


def test_a_killed_run_leaves_no_invalid_report(tmp_path):
    """SIGTERM ends a process without its exit handlers: the report path
    then holds nothing, never an empty or cut file (a report left there by
    an earlier run is this run's to replace, and is removed at start)."""
    report = tmp_path / "report.json"
    report.write_text('{"backend": "virtual", "mappings": []}\n')  # an earlier run's
    code = "import time, torch, transfer_to_npu\nprint('ready', flush=True)\ntime.sleep(60)\n"
    env = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual", TRANSFER_TO_NPU_REPORT=str(report))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert list(tmp_path.iterdir()) == []


def test_a_report_path_that_holds_another_file_keeps_it(tmp_path):
    """A report path naming a file that is not a report (a mistaken path:
    the user's script, their data) costs the user nothing: the file is
    kept, and the report is written beside it."""
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.ones(2).cuda().device)\n")
    env = dict(os.environ, TRANSFER_TO_NPU_BACKEND="virtual", TRANSFER_TO_NPU_REPORT=str(script))
    proc = subprocess.run([sys.executable, "-m", "transfer_to_npu", str(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "npu:0"
    assert script.read_text() == "import torch\nprint(torch.ones(2).cuda().device)\n"
    assert "not a report" in proc.stderr
    beside = [p for p in tmp_path.iterdir() if p.name.startswith("train.py.pid")]
    assert len(beside) == 1
    assert json.loads(beside[0].read_text())["mappings"][0]["source"] == "torch.Tensor.cuda"
