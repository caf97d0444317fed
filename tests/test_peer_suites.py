"""accelerate's own tests, run as its users run them on a GPU machine,
unedited, with TRANSFER_TO_NPU=1: every test that passes on the CPU passes
migrated.  Its tests pick their device as accelerate does (CUDA when it is
available, so the npu when migrating): migrated, its hooks, device maps,
big-model dispatch, data loaders and Accelerator run on the npu, and the
tests it keeps for GPUs run too.

The tests are not in accelerate's wheel: `make deps` keeps those of the
sdist of the accelerate installed in build/peer-suites/
(scripts/install-deps.sh)."""
import importlib.metadata
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, run_python

VERSION = importlib.metadata.version("accelerate")
SUITE = ROOT / "build" / "peer-suites" / f"accelerate-{VERSION}"
FILES = ["tests/test_hooks.py", "tests/test_modeling_utils.py", "tests/test_big_modeling.py",
         "tests/test_data_loader.py", "tests/test_accelerator.py"]
# Tests that fill the device's free memory to measure what dispatching a
# model takes (the virtual NPU's memory is the host's, which they would
# fill), and one that measures the machine's free memory, which the other
# session and other processes change.
NOT_RUN = "not tied_weights_memory and not free_memory_dereferences"
# The migrated failures that are the migration's nature, and why.
DIFFER = {
    "tests.test_accelerator.AcceleratorTester::test_env_var_device":
        "compares str(device) with 'cuda:64' (ACCELERATE_TORCH_DEVICE): the device is the "
        "npu's, and a test on a device's name is edited by hand",
}

# The session, with its address space bounded: a test that sizes a tensor
# by the free device memory fails rather than fill the host's. Not under
# AddressSanitizer (make sanitize), whose shadow memory alone is terabytes
# of address space.
SESSION = """
import os, resource, sys
if "libasan" not in os.environ.get("LD_PRELOAD", ""):
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def _outcomes(report):
    """{test id: 'passed', 'failure', 'error' or 'skipped'} from a JUnit XML
    report."""
    out = {}
    for case in ET.parse(report).iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        out[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return out


def _session(tmp_path, name, env):
    report = tmp_path / f"{name}.xml"
    # The suite's own settings (none), not this repository's.
    config = tmp_path / "pytest.ini"
    config.write_text("[pytest]\n")
    proc = run_python(["-c", SESSION, "-q", "-p", "no:cacheprovider", "-c", str(config),
                       "--rootdir", str(SUITE), "-k", NOT_RUN, f"--junitxml={report}", *FILES],
                      cwd=SUITE,
                      env={"OMP_NUM_THREADS": "1", "TRANSFER_TO_NPU_BACKEND": "virtual",
                           "PYTHONPATH": None, **env}, timeout=900)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return _outcomes(report)


def test_accelerate_suite_passes_migrated_where_it_passes_on_the_cpu(tmp_path):
    if not (SUITE / "tests").is_dir():
        pytest.skip(f"accelerate {VERSION}'s tests are not in {SUITE}: run `make deps`")
    pytest.importorskip("parameterized")
    with ThreadPoolExecutor(2) as pool:
        cpu, migrated = pool.map(lambda run: _session(tmp_path, *run),
                                 [("cpu", {"TRANSFER_TO_NPU": None}),
                                  ("migrated", {"TRANSFER_TO_NPU": "1"})])
    on_cpu = {t for t, outcome in cpu.items() if outcome == "passed"}
    assert len(on_cpu) >= 100, cpu
    lost = {t: migrated.get(t, "not run") for t in sorted(on_cpu)
            if migrated.get(t) != "passed"}
    assert lost.keys() == DIFFER.keys(), lost
    # The tests kept for GPUs ran on the npu.
    only_migrated = {t for t, outcome in migrated.items()
                     if outcome == "passed" and t not in on_cpu}
    assert "tests.test_big_modeling.BigModelingTester::test_dispatch_model_and_remove_hook" in (
        only_migrated), sorted(only_migrated)
    print(f"accelerate {VERSION}: {len(on_cpu)} pass on the CPU, "
          f"{sum(o == 'passed' for o in migrated.values())} migrated "
          f"({len(only_migrated)} of them GPU tests skipped on the CPU)")
