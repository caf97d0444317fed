"""Building and installing: a missing system header is one clear error that
names the package to install, and the wheel installs and runs in a fresh
environment, with nothing to compile."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _copy_of_the_sources(tmp_path):
    src = tmp_path / "src-copy"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.so", "__pycache__", "*.egg-info"))
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
    # torch from the machine's own installation; the wheel is all that is
    # installed, from the file, with no index and no compiler on the path.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = str(venv / "bin" / "python")
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
