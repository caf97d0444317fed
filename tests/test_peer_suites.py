"""The libraries' own test suites, run as their users run them on a GPU
machine, unedited, with TRANSFER_TO_NPU=1: every test that passes on the
CPU passes migrated, all in one pytest process (a test finds the process
as the tests before it left it).  Their tests pick their device as the
library does (CUDA when it is available, so the npu when migrating), and
the tests they keep for GPUs run too.

accelerate's tests come with its sdist (`make deps`); Lightning's and
transformers' are not in theirs: scripts/peer-suites.sh takes them from the
library's repository (a git directory or a tarball of the release's tree).
A suite is looked for under build/peer-suites/NAME-VERSION/, for the
version installed; one that is not there is skipped, naming the command
that puts it there.  The files are chosen for the mechanisms they reach,
not for their number."""
import importlib.metadata
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from conftest import ROOT, run_python

# On the torch line of `make test` only: the libraries' whole suites: their mechanisms are
# checked on every line by this suite's own tests.
pytestmark = pytest.mark.main_line

NAME_TEST = "a test on the device's name, edited by hand when migrating"


@dataclass
class Suite:
    package: str
    files: list
    # -k: the tests run (those that cannot run here, whatever the device,
    # left out, with the reason below).
    select: str
    # The tests passing on the CPU that fail migrated by the migration's
    # nature, and why.
    differ: dict
    # Tests kept for GPUs (skipped on the CPU) that the npu must pass.
    gpu_passes: set
    # Tests kept for GPUs that fail on the npu, and why.
    gpu_differ: dict
    at_least: int
    cwd: str = "."
    imports: tuple = ()
    fill: str = "scripts/peer-suites.sh {name} GIT_DIR_OR_TARBALL"
    env: dict = field(default_factory=dict)


SUITES = {
    "accelerate": Suite(
        package="accelerate",
        files=["tests/test_hooks.py", "tests/test_modeling_utils.py",
               "tests/test_big_modeling.py", "tests/test_data_loader.py",
               "tests/test_accelerator.py"],
        # Tests that fill the device's free memory to measure what
        # dispatching a model takes (the virtual NPU's memory is the
        # host's, which they would fill), and one that measures the
        # machine's free memory, which the other session and other
        # processes change.
        select="not tied_weights_memory and not free_memory_dereferences",
        differ={
            "tests.test_accelerator.AcceleratorTester::test_env_var_device":
                "compares str(device) with 'cuda:64' (ACCELERATE_TORCH_DEVICE): " + NAME_TEST,
        },
        gpu_passes={
            "tests.test_big_modeling.BigModelingTester::test_dispatch_model_and_remove_hook"},
        gpu_differ={
            **{f"tests.test_accelerator.AcceleratorTester::test_get_state_dict_from_offload_{s}":
               "asserts the device type is 'cuda': " + NAME_TEST
               for s in ("use_safetensors", "use_pytorch")},
            "tests.test_accelerator.AcceleratorTester::test_setting_cpu_affinity":
                "sets the CPU affinity of a CUDA GPU through NVIDIA's NVML (nvidia-ml-py)",
        },
        at_least=100,
        imports=("parameterized",),
        fill="make deps"),
    # In one process, Trainers of devices=2 (test_amp_ddp) before those of
    # one device; AMP with a GradScaler and skipped optimizer steps, manual
    # optimization with several optimizers, checkpoints and their
    # map_location, the RNG states a Trainer saves and restores, device
    # parsing and memory statistics.
    "lightning": Suite(
        package="lightning",
        cwd="tests",
        files=["tests_pytorch/plugins/test_amp_plugins.py",
               "tests_pytorch/plugins/precision/test_amp.py",
               "tests_pytorch/plugins/precision/test_amp_integration.py",
               "tests_pytorch/trainer/optimization/test_manual_optimization.py",
               "tests_pytorch/core/test_saving.py",
               "tests_pytorch/accelerators/test_gpu.py",
               "tests_pytorch/models/test_gpu.py",
               "tests_pytorch/utilities/test_seed.py",
               "tests_pytorch/callbacks/test_device_stats_monitor.py"],
        # DeepSpeed's: 15 s for a dtype that test_gpu's others check.
        select="not deepspeed",
        differ={},
        gpu_passes={
            "tests_pytorch.plugins.test_amp_plugins::test_amp_skip_optimizer",
            "tests_pytorch.trainer.optimization.test_manual_optimization::"
            "test_multiple_optimizers_manual_amp[gpu]",
            "tests_pytorch.trainer.optimization.test_manual_optimization::"
            "test_multiple_optimizers_step[dict]",
            "tests_pytorch.plugins.precision.test_amp_integration::"
            "test_skip_training_step_with_grad_scaler",
            "tests_pytorch.core.test_saving::test_load_from_checkpoint_map_location_gpu_to_cpu[cpu]",
            "tests_pytorch.utilities.test_seed::test_isolate_rng[True]",
        },
        gpu_differ={
            "tests_pytorch.accelerators.test_gpu::test_get_nvidia_gpu_stats":
                "runs nvidia-smi",
            **{f"tests_pytorch.core.test_saving::test_load_from_checkpoint_map_location_{t}":
               "asserts the device type is 'cuda': " + NAME_TEST
               for t in ("automatic[cuda]", "gpu[None]", "gpu[cuda]", "gpu[map_location2]",
                         "gpu[<lambda>]", "gpu[map_location4]", "cpu_to_gpu[cuda]",
                         "cpu_to_gpu[map_location1]", "cpu_to_gpu[<lambda>]",
                         "cpu_to_gpu[map_location3]")},
            "tests_pytorch.core.test_saving::test_load_from_checkpoint_device_placement_with_"
            "extra_state": "asserts the device type is 'cuda': " + NAME_TEST,
        },
        at_least=50),
    # The models' common tests on a decoder, an encoder and a model with
    # rotary embeddings and grouped-query heads: attention (sdpa against
    # eager in fp16, with padding), generation drawing on the device's RNG
    # and with a static cache, training with gradient checkpointing, saving
    # and loading, and the GPU tests of big-model offloading.
    "transformers": Suite(
        package="transformers",
        files=["tests/models/gpt2/test_modeling_gpt2.py",
               "tests/models/bert/test_modeling_bert.py",
               "tests/models/llama/test_modeling_llama.py"],
        select="(eager_matches_sdpa_inference and fp16) or sdpa_can_dispatch or "
                 "training_gradient_checkpointing or static_cache or greedy_generate or "
                 "sample_generate or beam_search_generate or save_load or offload or "
                 "device_context_manager or flex_attention",
        differ={},
        gpu_passes={
            "tests.models.gpt2.test_modeling_gpt2.GPT2ModelTest::test_cpu_offload",
            "tests.models.llama.test_modeling_llama.LlamaModelTest::test_disk_offload_safetensors",
            "tests.models.bert.test_modeling_bert.BertModelTest::"
            "test_can_load_with_device_context_manager",
        },
        gpu_differ={
            "tests.models.llama.test_modeling_llama.LlamaModelTest::"
            "test_flex_attention_with_grads":
                "torch's flex_attention takes cuda, cpu, xpu, hpu and mps tensors only, and "
                "torch_npu has no FlexAttention either",
        },
        at_least=80,
        imports=("parameterized", "datasets")),
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


def _session(tmp_path, suite, where, kind, env):
    report = tmp_path / f"{kind}.xml"
    # The suite's own settings (none), not this repository's.
    config = tmp_path / "pytest.ini"
    config.write_text("[pytest]\n")
    proc = run_python(["-c", SESSION, "-q", "-p", "no:cacheprovider", "-c", str(config),
                       "--rootdir", str(where), "-k", suite.select, f"--junitxml={report}",
                       *suite.files],
                      cwd=where,
                      # Offline: what the suite would download fails at once.
                      env={"OMP_NUM_THREADS": "1", "TRANSFER_TO_NPU_BACKEND": "virtual",
                           "HF_HUB_OFFLINE": "1", "PYTHONPATH": None, **suite.env, **env},
                      timeout=900)
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return _outcomes(report)


@pytest.mark.parametrize("name", SUITES)
def test_suite_passes_migrated_where_it_passes_on_the_cpu(name, tmp_path):
    suite = SUITES[name]
    try:
        version = importlib.metadata.version(suite.package)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{suite.package} is not installed")
    where = ROOT / "build" / "peer-suites" / f"{name}-{version}"
    if not where.is_dir():
        pytest.skip(f"{name} {version}'s tests are not in {where}: run `{suite.fill.format(name=name)}`")
    for module in suite.imports:
        pytest.importorskip(module)
    where = where / suite.cwd
    start = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        cpu, migrated = pool.map(lambda run: _session(tmp_path, suite, where, *run),
                                 [("cpu", {"TRANSFER_TO_NPU": None}),
                                  ("migrated", {"TRANSFER_TO_NPU": "1"})])
    on_cpu = {t for t, outcome in cpu.items() if outcome == "passed"}
    assert len(on_cpu) >= suite.at_least, cpu
    lost = {t: migrated.get(t, "not run") for t in sorted(on_cpu)
            if migrated.get(t) != "passed"}
    assert lost.keys() == suite.differ.keys(), lost
    # The tests kept for GPUs ran on the npu.
    gpu = {t: outcome for t, outcome in migrated.items()
           if t not in cpu or cpu[t] == "skipped"}
    passed = {t for t, outcome in gpu.items() if outcome == "passed"}
    assert suite.gpu_passes <= passed, sorted(suite.gpu_passes - passed)
    failed = {t for t, outcome in gpu.items() if outcome in ("failure", "error")}
    assert failed <= suite.gpu_differ.keys(), sorted(failed - suite.gpu_differ.keys())
    print(f"{name} {version}: {len(on_cpu)} pass on the CPU, "
          f"{sum(o == 'passed' for o in migrated.values())} migrated "
          f"({len(passed)} of them GPU tests skipped on the CPU, {len(failed)} GPU tests "
          f"failing by the migration's nature) in {time.monotonic() - start:.0f} s")
