"""What CUDA code asks about the device (torch.version.cuda, the compute
capability, the device's properties, the NCCL version, TF32) gets the
identity policy's answers (_rules/identity.py), on the virtual NPU and on
torch_npu (the stand-in, tests/stand_ins/torch_npu), and the checks that
libraries make on them take a path that runs."""
import textwrap
import threading
import types
from pathlib import Path

import pytest
import torch

import transfer_to_npu
from conftest import run_python
from transfer_to_npu._rules import identity

STAND_INS = Path(__file__).resolve().parent / "stand_ins"

# CUDA's _CudaDeviceProperties fields and the types CUDA gives them.
FIELDS = {"name": str, "major": int, "minor": int, "total_memory": int,
          "multi_processor_count": int, "is_integrated": int, "is_multi_gpu_board": int,
          "max_threads_per_multi_processor": int, "gcnArchName": str, "warp_size": int,
          "L2_cache_size": int, "clock_rate": int, "memory_clock_rate": int,
          "memory_bus_width": int, "shared_memory_per_block": int,
          "shared_memory_per_multiprocessor": int, "regs_per_multiprocessor": int}


def test_cuda_version_and_capability():
    assert torch.version.cuda == "12.1"
    for device in (None, 0, "cuda", "cuda:0", torch.device("cuda", 0)):
        assert torch.cuda.get_device_capability(device) == (8, 0)
    major, minor = torch.cuda.get_device_capability()
    assert major * 10 + minor >= 80  # the shape of the check libraries make


def test_device_properties_have_every_cuda_field():
    props = torch.cuda.get_device_properties(0)
    for field, kind in FIELDS.items():
        value = getattr(props, field)
        assert isinstance(value, kind) and not isinstance(value, bool), (field, value)
    assert (props.major, props.minor) == (8, 0)
    assert props.name == torch.npu.get_device_name(0)
    assert props.total_memory == torch.npu.get_device_properties(0).total_memory
    assert props.multi_processor_count == torch.npu.get_device_properties(0).multi_processor_count
    assert props.warp_size == 32
    assert str(props.uuid) == str(torch.cuda.get_device_properties("cuda:0").uuid)
    assert "major=8, minor=0" in repr(props)


def test_properties_of_an_npu_that_reports_little():
    """torch_npu 2.5's properties have a name and a memory size only: the
    CUDA fields are there all the same."""
    npu = types.SimpleNamespace(name="Ascend910B2", total_memory=64 << 30, cube_core_num=24)
    props = identity.CudaDeviceProperties(npu, 1)
    for field, kind in FIELDS.items():
        assert isinstance(getattr(props, field), kind), field
    assert (props.name, props.total_memory, props.multi_processor_count) == (
        "Ascend910B2", 64 << 30, 24)
    assert props.uuid != identity.CudaDeviceProperties(npu, 0).uuid


def test_a_bad_device_is_the_npus_error():
    with pytest.raises(RuntimeError, match="npu:7.*TRANSFER_TO_NPU_VIRTUAL_DEVICES"):
        torch.cuda.get_device_capability(7)
    with pytest.raises(transfer_to_npu.InvalidDeviceError, match="cuda:x"):
        torch.cuda.get_device_properties("cuda:x")


def test_arch_list_tf32_and_nccl_version():
    assert torch.cuda.get_arch_list() == ["sm_80"]
    assert torch.cuda.is_tf32_supported() is True
    assert torch.cuda.nccl.version() == (2, 18, 1) >= (2, 10)
    assert torch._C._nccl_version() == (2 << 32) | (18 << 16) | 1


def test_answers_are_the_same_from_every_thread_whatever_fails():
    """Nothing is swapped for the length of a call: a call that raises,
    on another thread, changes no answer."""
    results, errors = [], []

    def ask():
        for _ in range(200):
            results.append((torch.version.cuda, torch.cuda.get_device_capability(),
                            torch.cuda.is_available(), torch.cuda.nccl.version()))

    def fail():
        for _ in range(200):
            try:
                torch.cuda.get_device_properties(99)
            except RuntimeError as exc:
                errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)] + [
        threading.Thread(target=fail) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 400
    assert set(results) == {("12.1", (8, 0), True, (2, 18, 1))}


def test_disable_puts_torchs_answers_back():
    code = textwrap.dedent("""
        import torch
        original = torch.cuda.get_device_capability
        # torch's own answers: None and no NCCL on the CPU build, its CUDA's
        # on a CUDA build.
        answers = (torch.version.cuda, hasattr(torch._C, "_nccl_version"))
        import transfer_to_npu
        print(torch.version.cuda, torch.cuda.get_device_capability())
        transfer_to_npu.disable()
        print((torch.version.cuda, hasattr(torch._C, "_nccl_version")) == answers,
              torch.cuda.get_device_capability is original)
        transfer_to_npu.enable()
        print(torch.version.cuda, torch.cuda.nccl.version())
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["12.1 (8, 0)", "True True", "12.1 (2, 18, 1)"]


TF32_ON_TORCH_NPU = """
import transfer_to_npu, torch
matmul, conv = torch.npu.matmul, torch.npu.conv
print(transfer_to_npu.backend, matmul.allow_hf32, conv.allow_hf32)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = False
with torch.backends.cudnn.flags(enabled=True, allow_tf32=True):
    print("in flags", conv.allow_hf32)
print("after", conv.allow_hf32, torch.backends.cudnn.allow_tf32)
torch.set_float32_matmul_precision("highest")
print(matmul.history, conv.history, torch.backends.cuda.matmul.allow_tf32)
torch.set_float32_matmul_precision("high")
print(matmul.allow_hf32, torch.cuda.get_device_capability(), torch.version.cuda)
"""


def test_tf32_switches_are_the_npus_hf32_switches_on_torch_npu():
    proc = run_python(["-c", TF32_ON_TORCH_NPU], env={
        "PYTHONPATH": str(STAND_INS), "TRANSFER_TO_NPU_BACKEND": "torch_npu",
        "TRANSFER_TO_NPU_LOG": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "torch_npu False True",  # torch_npu's defaults, which are CUDA's
        "in flags True",
        "after False False",
        "[True, False] [False, True, False] False",
        "True (8, 0) 12.1"]
    assert ":5: torch.backends.cuda.matmul.allow_tf32 -> torch.npu.matmul.allow_hf32" in proc.stderr
    assert ":6: torch.backends.cudnn.allow_tf32 -> torch.npu.conv.allow_hf32" in proc.stderr


def test_tf32_switches_follow_on_the_virtual_npu():
    """The virtual NPU keeps torch_npu's HF32 switches (its host kernels are
    the CPU's whatever they say): a TF32 request shows there too."""
    matmul = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert torch.npu.matmul.allow_hf32 is True
        torch.backends.cuda.matmul.allow_tf32 = False
        assert torch.npu.matmul.allow_hf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul


FP32_PRECISION = """
import transfer_to_npu, torch
matmul, conv = torch.npu.matmul, torch.npu.conv
print(matmul.allow_hf32, conv.allow_hf32)
torch.backends.fp32_precision = "tf32"
print(matmul.allow_hf32, conv.allow_hf32)
torch.backends.cuda.matmul.fp32_precision = "ieee"
print(matmul.allow_hf32, conv.allow_hf32)
torch.backends.cudnn.conv.fp32_precision = "ieee"
print(matmul.allow_hf32, conv.allow_hf32)
"""


@pytest.mark.skipif(not hasattr(torch.backends, "fp32_precision"),
                    reason="torch before 2.9 has no fp32_precision switches")
@pytest.mark.parametrize("backend", ["virtual", "torch_npu"])
def test_fp32_precision_switches_are_the_npus_hf32_switches(backend):
    """torch's newer TF32 switches (a switch sets those below it): the
    NPU's HF32 switches read as CUDA's matmuls and convolutions would."""
    proc = run_python(["-c", FP32_PRECISION], env={
        "PYTHONPATH": str(STAND_INS), "TRANSFER_TO_NPU_BACKEND": backend,
        "TRANSFER_TO_NPU_LOG": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["False True", "True True", "False True", "False False"]
    assert ":5: torch.backends.fp32_precision -> torch.npu.matmul/conv.allow_hf32" in proc.stderr


TRAINER = """
import transfer_to_npu, torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        ids = torch.arange(i, i + 16) % 64
        return {{"input_ids": ids, "labels": ids}}

config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2)
model = GPT2LMHeadModel(config)
args = TrainingArguments(output_dir={out!r}, tf32=True, bf16=True, max_steps=2,
                         per_device_train_batch_size=4, report_to=[], save_strategy="no",
                         logging_steps=1, use_cpu=False)
print("tf32", torch.npu.matmul.allow_hf32, torch.npu.conv.allow_hf32)
result = Trainer(model=model, args=args, train_dataset=Tokens()).train()
print("device", next(model.parameters()).device, "loss", round(result.training_loss, 3) > 0)
"""


def test_transformers_training_arguments_with_tf32(tmp_path):
    """--tf32 requires an Ampere GPU and a CUDA torch: TrainingArguments
    sets the switches (transformers 4 the old ones, 5 torch's
    fp32_precision), the NPU's HF32 switches follow, and the Trainer trains
    on the npu."""
    pytest.importorskip("transformers")
    proc = run_python(["-c", TRAINER.format(out=str(tmp_path))],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "tf32 True True" in lines
    assert "device npu:0 loss True" in lines
