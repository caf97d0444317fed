"""The Python versions pyproject.toml promises (requires-python) are those
the extension builds and loads on: its C sources, as setup.py lists them,
compiled and linked against each available interpreter's headers, then
loaded by that interpreter.  The version below the floor does not compile
(else the floor could go lower)."""
import ast
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# On the torch line of `make test` only: the extension on each Python, which needs no torch.
pytestmark = pytest.mark.main_line

ROOT = Path(__file__).resolve().parent.parent
CC = os.environ.get("CC", "gcc")


def _floor():
    text = (ROOT / "pyproject.toml").read_text()
    major, minor = re.search(r'requires-python\s*=\s*">=(\d+)\.(\d+)"', text).groups()
    return int(major), int(minor)


FLOOR = _floor()
# Every version from the floor to the newest CPython this was made on.
PROMISED = [(3, minor) for minor in range(FLOOR[1], 14)]


def _setup_literals():
    """SOURCES, include_dirs and the compile flags, read from setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("SOURCES", "extra_compile_args") \
                and node.targets[0].id not in found:
            found[node.targets[0].id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.keyword) and node.arg == "include_dirs":
            found["include_dirs"] = ast.literal_eval(node.value)
    return found


def _interpreter(version):
    """An interpreter of that version that runs: one pyenv built, or one on
    PATH (a pyenv shim of a version not selected fails, and is passed
    over)."""
    name = "python%d.%d" % version
    if sys.version_info[:2] == version:
        return sys.executable
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = sorted(glob.glob(os.path.join(pyenv, "versions", "%d.%d.*" % version, "bin",
                                               name)))
    for python in candidates[::-1] + [shutil.which(name)]:
        if python and subprocess.run([python, "-c", ""], capture_output=True).returncode == 0:
            return python
    return None


def _build(python, where):
    """Compile and link the extension for `python` in `where`; return
    (the compiler's result, the module's path)."""
    info = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['include']); "
                       "print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True, check=True).stdout.split("\n")
    setup = _setup_literals()
    target = where / ("_C" + info[1])
    command = [CC, "-shared", "-fPIC", "-O0", *setup["extra_compile_args"],
               *(f"-I{ROOT / d}" for d in setup["include_dirs"]), f"-I{info[0]}",
               *(str(ROOT / s) for s in setup["SOURCES"]), "-o", str(target)]
    return subprocess.run(command, capture_output=True, text=True), target


LOAD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("transfer_to_npu._C", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.is_enabled(), module.InvalidDeviceError.__name__)
"""


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """version -> (interpreter, compiler's result, module) for each version
    present, built side by side (a build is some ten seconds of one core)."""
    below = (FLOOR[0], FLOOR[1] - 1)
    found = {v: _interpreter(v) for v in PROMISED + [below]}
    present = [v for v, python in found.items() if python]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        made = pool.map(lambda v: _build(found[v], tmp_path_factory.mktemp("py%d%d" % v)),
                        present)
        return {v: (found[v],) + m for v, m in zip(present, made)}


@pytest.mark.parametrize("version", PROMISED, ids=lambda v: "%d.%d" % v)
def test_builds_and_loads(version, builds):
    if version not in builds:
        pytest.skip("no Python %d.%d here" % version)
    python, built, module = builds[version]
    assert built.returncode == 0, built.stderr
    assert " warning: " not in built.stderr, built.stderr
    loaded = subprocess.run([python, "-c", LOAD, str(module)], capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["False", "InvalidDeviceError"]


def test_floor_is_the_oldest_that_builds(builds):
    below = (FLOOR[0], FLOOR[1] - 1)
    if below not in builds:
        pytest.skip("no Python %d.%d here" % below)
    assert builds[below][1].returncode != 0


def test_classifiers_name_the_promised_versions():
    text = (ROOT / "pyproject.toml").read_text()
    named = sorted(tuple(map(int, v.split("."))) for v in
                   re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text))
    assert named == PROMISED
