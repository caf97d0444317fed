"""A real code base converted, and its own tests run as on torch_npu as it
is (python -m transfer_to_npu --rehearse: the virtual NPU presented as
torch_npu, nothing of CUDA's mapped): every test that passes unconverted
on the CPU passes.

litgpt's package and tests come from its sdist (scripts/install-deps.sh
keeps them under build/peer-suites/); without them the test skips."""
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import ROOT, run_python
from test_peer_suites import _outcomes

from transfer_to_npu.static import convert

# On the torch line of `make test` only: the slow end-to-end form of what
# test_rehearsal.py checks on every line.
pytestmark = pytest.mark.main_line

LITGPT = ROOT / "build" / "peer-suites" / "litgpt-0.5.13"
# The files with litgpt's CUDA guards, mocks of torch.cuda, Lightning's
# 'cuda' accelerator and its nvidia-smi check.
FILES = ["tests/test_utils.py", "tests/test_validate.py", "tests/test_api.py"]


def _session(tmp_path, name, suite, env):
    report = tmp_path / f"{name}.xml"
    config = tmp_path / "pytest.ini"  # the suite's own settings (none), not this repository's
    config.write_text("[pytest]\n")
    proc = run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(config),
                       "--rootdir", str(suite), f"--junitxml={report}", *FILES], cwd=suite,
                      env={"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                           "TRANSFER_TO_NPU_BACKEND": "virtual", "PYTHONPATH": None, **env},
                      timeout=600)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return _outcomes(report)


def test_litgpt_converted_passes_as_on_torch_npu_where_it_passes_on_the_cpu(tmp_path):
    """Its device-count mocks follow the code they patch, its guards of
    Lightning's 'cuda' accelerator and of nvidia-smi stay with what they
    guard, its questions about the device get the runtime's answers."""
    if not (LITGPT / "tests").is_dir():
        pytest.skip(f"litgpt's tests are not in {LITGPT}: run `make deps`")
    report = convert.convert(str(LITGPT), str(tmp_path / "converted"))
    assert report.files > 80 and not report.skipped
    runs = [("cpu", LITGPT, {"TRANSFER_TO_NPU": None}),
            ("rehearsed", tmp_path / "converted", {"TRANSFER_TO_NPU": "rehearse"})]
    with ThreadPoolExecutor(2) as pool:
        cpu, rehearsed = pool.map(lambda run: _session(tmp_path, *run), runs)
    on_cpu = {t for t, outcome in cpu.items() if outcome == "passed"}
    assert len(on_cpu) >= 60 and "tests.test_utils::test_parse_devices" in on_cpu, cpu
    lost = {t: rehearsed.get(t, "not run") for t in sorted(on_cpu)
            if rehearsed.get(t) != "passed"}
    assert lost == {}
