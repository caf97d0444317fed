"""The mapping log, its exit summary, and the JSON report, from real runs."""
import json
import os
import re
import textwrap

import pytest

from conftest import run_python

SCRIPT = textwrap.dedent("""
    import transfer_to_npu
    import torch
    import torch.nn as nn

    for i in range(3):
        x = torch.zeros(2, device="cuda")      # line 7
        torch.cuda.synchronize()               # line 8
    m = nn.Linear(2, 2, device="cuda:0")       # line 9
    y = x.to("cuda")                           # line 10
    d = torch.device("cuda", 1)                # line 11
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def _lines(text):
    return [l for l in text.splitlines() if l.startswith("transfer_to_npu: ") and ".py:" in l]


def test_quiet_by_default(script):
    proc = run_python([str(script)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and "transfer_to_npu" not in proc.stderr


def test_level_1_logs_each_mapping_once_per_site(script):
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "1"})
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc.stderr)
    assert lines == [
        f"transfer_to_npu: {script}:7: torch.zeros(device='cuda') -> torch.zeros(device='npu')",
        f"transfer_to_npu: {script}:8: torch.cuda.synchronize -> torch.npu.synchronize",
        f"transfer_to_npu: {script}:9: torch.empty(device='cuda:0') -> torch.empty(device='npu:0')",
        f"transfer_to_npu: {script}:10: torch.Tensor.to(device='cuda') -> "
        f"torch.Tensor.to(device='npu')",
        f"transfer_to_npu: {script}:11: torch.device(type='cuda') -> torch.device(type='npu')",
    ]
    # One short line saying migration is on, then the summary at exit.
    assert proc.stderr.count("CUDA calls run on the npu") == 1
    summary = proc.stderr[proc.stderr.index("summary"):]
    assert re.search(r"\b3\s+1\s+torch\.cuda\.synchronize -> torch\.npu\.synchronize", summary)
    assert re.search(r"\b2\s+1\s+torch\.empty -> torch\.empty", summary)


def test_level_2_logs_every_call(script):
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "2"})
    lines = _lines(proc.stderr)
    assert sum("torch.cuda.synchronize" in l for l in lines) == 3
    assert sum("torch.empty" in l for l in lines) == 2  # weight and bias of the Linear


def test_every_call_logs_the_npu_spelling(tmp_path):
    # After the first call the rewrite comes from a cache (and torch's own
    # functions are handed a torch.device): the log still shows spellings.
    path = tmp_path / "loop.py"
    path.write_text("import transfer_to_npu, torch\n"
                    "x = torch.ones(2)\n"
                    "for _ in range(3):\n"
                    "    y = x.to('cuda'); z = torch.zeros(1, device='cuda:0')\n")
    proc = run_python([str(path)], env={"TRANSFER_TO_NPU_LOG": "2"})
    assert proc.returncode == 0, proc.stderr
    lines = _lines(proc.stderr)
    assert lines == [
        f"transfer_to_npu: {path}:4: torch.Tensor.to(device='cuda') -> torch.Tensor.to(device='npu')",
        f"transfer_to_npu: {path}:4: torch.zeros(device='cuda:0') -> torch.zeros(device='npu:0')",
    ] * 3


def test_an_argument_is_logged_once_after_the_name(tmp_path):
    """The line of a rewritten argument names the function, then the
    argument as the script gave it and as it was passed, where the target's
    name carries a note of its own (the backend it passes, what it is)."""
    path = tmp_path / "ddp.py"
    path.write_text(textwrap.dedent(f"""
        import transfer_to_npu
        import torch, torch.distributed as dist
        dist.init_process_group(backend="nccl", init_method="file://{tmp_path / 'store'}",
                                rank=0, world_size=1)
        dist.destroy_process_group()
        s = torch.Stream(device="cuda")
    """))
    proc = run_python([str(path)], env={"TRANSFER_TO_NPU_LOG": "1"})
    assert proc.returncode == 0, proc.stderr
    assert [l for l in _lines(proc.stderr) if "torch.device" not in l] == [
        f"transfer_to_npu: {path}:4: torch.distributed.init_process_group(backend='nccl') -> "
        f"torch.distributed.init_process_group(backend='hccl')",
        f"transfer_to_npu: {path}:7: torch.Stream(device='cuda') -> torch.Stream(device='npu')"]


def test_bad_level_is_a_clear_error(script):
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "verbose"})
    assert proc.returncode != 0
    assert "TRANSFER_TO_NPU_LOG must be 0, 1 or 2, got 'verbose'" in proc.stderr


def test_log_file(script, tmp_path):
    log = tmp_path / "migrate.log"
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "1",
                                          "TRANSFER_TO_NPU_LOG_FILE": str(log)})
    assert proc.returncode == 0, proc.stderr
    assert "transfer_to_npu" not in proc.stderr
    text = log.read_text()
    assert len(_lines(text)) == 5 and "summary" in text


def test_unwritable_log_file_falls_back_to_stderr(script, tmp_path):
    bad = tmp_path / "no" / "such" / "dir" / "m.log"
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "1",
                                          "TRANSFER_TO_NPU_LOG_FILE": str(bad)})
    assert proc.returncode == 0, proc.stderr
    assert f"cannot write the log to {str(bad)!r}" in proc.stderr
    assert len(_lines(proc.stderr)) == 5


# Runs a script with the size of the files it writes limited to LIMIT
# bytes, as a full disk limits them (the interpreter ignores SIGXFSZ: a
# write beyond the limit fails with EFBIG).  torch is imported first: its
# optional dependencies (dill, which datasets brings) need a temporary file
# at import.
LIMITED = ("import resource, runpy, sys, torch; limit = int(sys.argv.pop(1)); "
           "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); sys.argv.pop(0); "
           "runpy.run_path(sys.argv[0], run_name='__main__')")


@pytest.mark.parametrize("limit", [0, 400], ids=["full at start", "full mid-run"])
def test_a_full_disk_never_stops_or_floods_the_job(tmp_path, limit):
    """A log or report that cannot be written (a full disk, a file size
    limit), from the first line or once it has filled: the script runs to
    its end, the log goes on on stderr after one warning, the report's
    failure is one line at exit, and no traceback is printed."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch, transfer_to_npu
        for i in range(200):
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()
        print("done")
    """))
    log = tmp_path / "m.log"
    proc = run_python(["-c", LIMITED, str(limit), str(script)],
                      env={"TRANSFER_TO_NPU_LOG": "2", "TRANSFER_TO_NPU_LOG_FILE": str(log),
                           "TRANSFER_TO_NPU_REPORT": str(tmp_path / "report.json")})
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr[-3000:]
    assert proc.stderr.count(f"cannot write the log to {str(log)!r} (File too large)") == 1
    assert proc.stderr.count("could not write the summary or report") == 1
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    written = _lines(log.read_text()) + _lines(proc.stderr)
    assert len(written) == 400 and log.stat().st_size <= limit


def test_report(script, tmp_path):
    report = tmp_path / "report.json"
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_REPORT": str(report)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    data = json.loads(report.read_text())
    assert data["backend"] == "virtual"
    assert data["torch_version"].startswith("2.")
    by_source = {m["source"]: m for m in data["mappings"]}
    assert by_source["torch.cuda.synchronize"] == {
        "source": "torch.cuda.synchronize", "target": "torch.npu.synchronize", "count": 3,
        "sites": [f"{script}:8"]}
    assert by_source["torch.zeros"]["count"] == 3
    assert by_source["torch.empty"]["sites"] == [f"{script}:9"]
    assert by_source["torch.Tensor.to"]["count"] == 1
    assert data["unsupported"] == []


def test_unwritable_report_is_a_warning_not_a_crash(script, tmp_path):
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_REPORT": "/proc/no/report.json"})
    assert proc.returncode == 0, proc.stderr
    assert "cannot write the report to '/proc/no/report.json'" in proc.stderr


def test_processes_never_share_a_log_file(tmp_path):
    script = tmp_path / "spawn.py"
    script.write_text(textwrap.dedent("""
        import os, sys, subprocess
        import transfer_to_npu, torch
        torch.cuda.synchronize()
        if len(sys.argv) == 1:
            # A child interpreter, as a launcher starts its workers.
            env = dict(os.environ, RANK="1")
            subprocess.run([sys.executable, __file__, "child"], env=env, check=True)
            pid = os.fork()
            if pid == 0:
                torch.cuda.synchronize()
                torch.cuda.synchronize()
                os._exit(0)
            os.waitpid(pid, 0)
    """))
    log = tmp_path / "m.log"
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_LOG": "2",
                                          "TRANSFER_TO_NPU_LOG_FILE": str(log)})
    assert proc.returncode == 0, proc.stderr
    files = sorted(os.listdir(tmp_path))
    assert "m.log" in files and "m.log.rank1" in files
    forked = [f for f in files if f.startswith("m.log.pid")]
    assert len(forked) == 1
    assert len(_lines(log.read_text())) == 1
    assert len(_lines((tmp_path / "m.log.rank1").read_text())) == 1
    assert len(_lines((tmp_path / forked[0]).read_text())) == 2


def test_placeholders_in_paths(script, tmp_path):
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU_REPORT": str(tmp_path / "r{rank}.json"),
                                          "RANK": "3"})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r3.json").exists()


def test_a_forked_child_counts_its_own_calls_with_the_log_off():
    # mappings() in a data-loading worker counts the worker's calls, as its
    # log and report would, with or without them.
    code = textwrap.dedent("""
        import os
        import transfer_to_npu, torch
        def calls():
            return [m["calls"] for m in transfer_to_npu.mappings()
                    if m["source"] == "torch.cuda.synchronize"][0]
        for _ in range(3):
            torch.cuda.synchronize()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            torch.cuda.synchronize()
            os.write(w, str(calls()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print(os.read(r, 16).decode(), calls())
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_LOG": None,
                                         "TRANSFER_TO_NPU_REPORT": None,
                                         "TRANSFER_TO_NPU_LOG_FILE": None})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "3"]
