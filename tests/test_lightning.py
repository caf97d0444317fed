"""Lightning's CUDA accelerator takes the device the migration made (with
a stand-in of its accelerator: tests/stand_ins/lightning)."""
import textwrap
from pathlib import Path

import pytest

from conftest import run_python

STAND_INS = Path(__file__).resolve().parent / "stand_ins"

SCRIPT = """
import torch
{first}
{second}
from lightning.pytorch.accelerators.cuda import CUDAAccelerator, MisconfigurationException

accelerator = CUDAAccelerator()
(device,) = accelerator.get_parallel_devices([1])
accelerator.setup_device(device)
print(device, torch.npu.current_device())
try:
    accelerator.setup_device(torch.device("cpu"))
except MisconfigurationException as error:
    print("refused:", error)
original = CUDAAccelerator.__dict__["setup_device"].__wrapped__
transfer_to_npu.disable()
print(CUDAAccelerator.__dict__["setup_device"] is original)
"""


@pytest.mark.parametrize("lightning_first", [False, True])
def test_cuda_accelerator_sets_up_the_npu(lightning_first):
    imports = ["import transfer_to_npu", "import lightning.pytorch.accelerators.cuda"]
    if lightning_first:
        imports.reverse()
    code = textwrap.dedent(SCRIPT.format(first=imports[0], second=imports[1]))
    proc = run_python(["-c", code], env={"PYTHONPATH": str(STAND_INS),
                                         "TRANSFER_TO_NPU_BACKEND": "virtual",
                                         "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["npu:1 1", "refused: Device should be GPU, got cpu instead",
                                        "True"]


SETS_DEVICE = """
from unittest import mock
import transfer_to_npu
import torch
from lightning.pytorch.accelerators import CUDAAccelerator

with mock.patch("torch.cuda.set_device") as set_device:
    CUDAAccelerator().setup_device(torch.device("cuda", 1))
print(set_device.call_args_list)
"""


def test_cuda_accelerator_sets_the_device_through_torch_cuda():
    """As on a GPU, Lightning makes its device current with
    torch.cuda.set_device (migrated): what patches or counts that call
    sees it."""
    pytest.importorskip("lightning")
    proc = run_python(["-c", SETS_DEVICE], env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                                                "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2",
                                                "PYTHONPATH": None})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[call(device(type='npu', index=1))]"


MAP_LOCATION = """
import io
from unittest import mock
import transfer_to_npu
import torch
from lightning.pytorch.core import saving

buffer = io.BytesIO()
torch.save({"weight": torch.ones(2, device="cuda")}, buffer)
for devices in (1, 0):
    buffer.seek(0)
    with mock.patch("lightning.pytorch.accelerators.cuda.num_cuda_devices", lambda: devices):
        print(torch.load(buffer, map_location=saving._default_map_location)["weight"].device)
"""


def test_a_checkpoint_of_the_npu_goes_to_the_cpu_without_a_device():
    """Lightning's default map_location, which load_from_checkpoint uses,
    sends the npu's storages to the cpu when its CUDA accelerator finds no
    device, as it sends a GPU's."""
    pytest.importorskip("lightning")
    proc = run_python(["-c", MAP_LOCATION], env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                                                 "PYTHONPATH": None})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["npu:0", "cpu"]
