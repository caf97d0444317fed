"""python -m transfer_to_npu runs an unedited script as python would."""
import json
import sys
import textwrap

import pytest

from conftest import run_python

SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    print("argv", sys.argv)
    print("path0", sys.path[0])
    print("name", __name__)
    print("device", torch.zeros(1, device="cuda").device)
    if "fail" in sys.argv:
        def inner():
            raise ValueError("boom")
        inner()
    sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
""")


@pytest.fixture
def script(tmp_path):
    d = tmp_path / "proj"
    d.mkdir()
    path = d / "train.py"
    path.write_text(SCRIPT)
    return path


def test_runs_as_python_would(script, tmp_path):
    proc = run_python(["-m", "transfer_to_npu", str(script), "--lr", "0.1", "7"], cwd=tmp_path)
    assert proc.returncode == 7, proc.stderr
    out = dict(l.split(" ", 1) for l in proc.stdout.splitlines())
    assert out["argv"] == repr([str(script), "--lr", "0.1", "7"])
    assert out["path0"] == str(script.parent)
    assert out["name"] == "__main__"
    assert out["device"] == "npu:0"


def test_traceback_points_at_the_users_lines(script):
    proc = run_python(["-m", "transfer_to_npu", str(script), "fail"])
    assert proc.returncode == 1
    tb = proc.stderr
    assert tb.startswith("Traceback (most recent call last):")
    assert f'File "{script}", line 11, in <module>' in tb
    assert f'File "{script}", line 10, in inner' in tb
    assert "runpy" not in tb and "__main__.py" not in tb
    assert tb.rstrip().endswith("ValueError: boom")


def test_log_and_report_flags(script, tmp_path):
    report = tmp_path / "r.json"
    proc = run_python(["-m", "transfer_to_npu", "--log", "1", "--report", str(report),
                       str(script)])
    assert proc.returncode == 0, proc.stderr
    assert f"{script}:7: torch.zeros(device='cuda')" in proc.stderr
    data = json.loads(report.read_text())
    assert data["mappings"][0]["sites"] == [f"{script}:7"]


def test_module_mode(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "run.py").write_text(
        "import sys, torch\nprint(sys.argv[1:], torch.ones(1).cuda().device)\n")
    proc = run_python(["-m", "transfer_to_npu", "-m", "pkg.run", "a", "b"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['a', 'b'] npu:0"


def test_list_prints_the_table():
    proc = run_python(["-m", "transfer_to_npu", "--list"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# ") and "mappings" in lines[0]
    import transfer_to_npu

    assert len(lines) - 1 == len(transfer_to_npu.mappings())
    assert any(l.split() == ["torch.cuda.synchronize", "function", "torch.npu.synchronize"]
               for l in lines)


def test_missing_script():
    proc = run_python(["-m", "transfer_to_npu", "no_such_script.py"])
    assert proc.returncode == 2
    assert "can't open file" in proc.stderr and "no_such_script.py" in proc.stderr


@pytest.mark.parametrize("module", ["missing_module", "os.nope", ".relative", "email",
                                    "pkg_without_main"])
def test_a_module_that_cannot_run_is_one_line_as_with_python(tmp_path, module):
    """`python -m` says in one line why a module cannot run (none of that
    name, a package without __main__...), exit status 1: so does
    `python -m transfer_to_npu -m`, without runpy's frames."""
    (tmp_path / "pkg_without_main").mkdir()
    (tmp_path / "pkg_without_main" / "__init__.py").write_text("")
    ours = run_python(["-m", "transfer_to_npu", "-m", module], cwd=tmp_path)
    python = run_python(["-m", module], cwd=tmp_path)
    assert python.returncode == 1 and len(python.stderr.splitlines()) == 1, python.stderr
    assert (ours.returncode, ours.stderr, ours.stdout) == (1, python.stderr, "")


def test_children_are_migrated(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import subprocess, sys
        code = "import torch; print(torch.zeros(1, device='cuda').device)"
        print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.strip())
    """))
    proc = run_python(["-m", "transfer_to_npu", str(script)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "npu:0"


PROBE = "import sys\nprint(repr((__file__, sys.argv)))\n"


def _as_python_and_as_ours(args, cwd):
    """What `python args` and `python -m transfer_to_npu args` print."""
    plain = run_python(list(args), cwd=cwd)
    ours = run_python(["-m", "transfer_to_npu", *args], cwd=cwd)
    assert plain.returncode == 0 and ours.returncode == 0, (plain.stderr, ours.stderr)
    return plain.stdout.strip().splitlines()[-1], ours.stdout.strip().splitlines()[-1]


def test_every_argument_after_the_script_is_the_scripts_even_ours(tmp_path):
    """Relative path in, absolute __file__ out, argv as given, and the
    script's options named like ours (--log, -m) left to it."""
    (tmp_path / "probe.py").write_text(PROBE)
    plain, ours = _as_python_and_as_ours(["probe.py", "--log", "2", "-m", "x", "--list"],
                                         tmp_path)
    assert ours == plain
    assert eval(ours)[0] == str(tmp_path / "probe.py")


def test_every_argument_after_the_module_is_the_modules(tmp_path):
    (tmp_path / "probe_mod.py").write_text(PROBE)
    plain, ours = _as_python_and_as_ours(["-m", "probe_mod", "--log", "2", "--flag", "x"],
                                         tmp_path)
    assert ours == plain


def test_a_launcher_module_gets_its_options(tmp_path):
    """python -m transfer_to_npu -m torch.distributed.run --nproc-per-node 1
    train.py: the launcher's options are the launcher's."""
    (tmp_path / "train.py").write_text(
        "import sys, torch\nprint('worker', sys.argv[1:], torch.ones(1).cuda().device)\n")
    proc = run_python(["-m", "transfer_to_npu", "--log", "0", "-m", "torch.distributed.run",
                       "--nproc-per-node", "1", "--standalone", "train.py", "--lr", "3"],
                      cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "worker ['--lr', '3'] npu:0" in proc.stdout
