"""Building and installing: a missing system header is one clear error that
names the package to install, and the wheel installs and runs in a fresh
environment, with nothing to compile."""
import glob
import os
import shutil
import subprocess
import sys

import pytest
import torch

# On the torch line of `make test` only: building and installing the extension, which needs no
# torch.
pytestmark = pytest.mark.main_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _copy_of_the_sources(tmp_path):
    src = tmp_path / "src-copy"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.so", "__pycache__", "*.egg-info"))
    return src


def _can_hide_system_headers():
    return shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_hide_system_headers(),
                    reason="needs a mount namespace (unshare -m) to hide /usr/include")
def test_a_missing_header_names_the_package_to_install(tmp_path):
    src = _copy_of_the_sources(tmp_path)
    # /usr/include hidden behind an empty file system, in a mount namespace
    # of the build's own.
    script = (f"mount -t tmpfs none /usr/include && cd {src} && "
              f"{sys.executable} setup.py -q build_ext --build-lib {tmp_path}/lib "
              f"--build-temp {tmp_path}/temp")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert "the C header uthash.h is missing" in proc.stderr
    assert "apt-get install uthash-dev" in proc.stderr
    assert "yum install uthash-devel" in proc.stderr
    assert "error:" not in proc.stderr  # no compiler run: the one message


def test_the_wheel_installs_and_runs_in_a_fresh_environment(tmp_path):
    src = _copy_of_the_sources(tmp_path)
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                            "--no-deps", "-w", str(dist), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    (wheel,) = glob.glob(str(dist / "transfer_to_npu-*.whl"))
    assert "-cp3" in os.path.basename(wheel)  # the compiled extension is in it
    venv = tmp_path / "venv"
    # torch from the installation the tests run on: the directory torch is
    # in, added to the new venv's path.  (Its system site-packages would be
    # the base interpreter's, which a venv's python is made from: not
    # where a venv's torch is.)  The wheel is all that is installed, from
    # the file, with no index and no compiler on the path.
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "tested_torch.pth"), "w") as pth:
        pth.write(os.path.dirname(os.path.dirname(torch.__file__)) + "\n")
    env = dict(os.environ, PATH=str(venv / "bin"), CC="false")
    env.pop("PYTHONPATH", None)
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                              "--ignore-installed",
                              wheel], capture_output=True, text=True, env=env, timeout=300)
    assert install.returncode == 0, install.stderr
    run = subprocess.run(
        [python, "-c", "import torch, transfer_to_npu\n"
                       "print(transfer_to_npu.__file__)\n"
                       "print(torch.ones(2, device='cuda').device)"],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert run.returncode == 0, run.stderr
    path, device = run.stdout.split()
    assert path.startswith(str(venv)) and device == "npu:0"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_sets_up_a_project_venv_and_the_demo_needs_only_torch(tmp_path):
    """Without PYTHON, the first target makes .venv from the system's
    python3 (whose pip a Debian/Ubuntu system refuses, PEP 668) after the
    Debian packages a venv needs; `make demo` installs the demo's stage
    only, `make test` the tests'.  PYTHON=... makes no venv."""
    src = _copy_of_the_sources(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MFLAGS")}

    def dry_run(*args):
        proc = subprocess.run(["make", "-n", *args], cwd=src, env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    demo = dry_run("demo")
    venv = f"{src}/.venv"
    assert "./scripts/install-deps.sh venv" in demo
    assert f"python3 -m venv {venv}" in demo
    assert f"PYTHON={venv}/bin/python ./scripts/install-deps.sh demo" in demo
    assert "install-deps.sh test" not in demo
    assert f"PYTHON={venv}/bin/python ./scripts/install-deps.sh test" in dry_run("test")
    given = dry_run("demo", f"PYTHON={sys.executable}")
    assert "-m venv" not in given and f"PYTHON={sys.executable} ./scripts/install-deps.sh demo" \
        in given
