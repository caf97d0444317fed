"""The rest of the CUDA surface real scripts use: storages, default devices,
nn constructors, legacy types, backend flags, the profiler, data loading,
DataParallel, CUDA_VISIBLE_DEVICES."""
import textwrap

import pytest
import torch
import torch.nn as nn

from conftest import calls, npu, run_python


def test_nn_constructors_take_cuda():
    for layer in (nn.Linear(3, 4, device="cuda"), nn.Conv2d(1, 2, 3, device="cuda:0"),
                  nn.LayerNorm(4, device=torch.device("cuda")), nn.Embedding(5, 2, device="cuda")):
        assert all(p.device == npu(0) for p in layer.parameters())


def test_default_device_and_device_context():
    torch.set_default_device("cuda")
    try:
        assert torch.zeros(1).device == npu(0)
        assert nn.Linear(2, 2).weight.device == npu(0)
    finally:
        torch.set_default_device(None)
    assert torch.zeros(1).device.type == "cpu"
    with torch.device("cuda"):
        assert torch.ones(2).device == npu(0)
    assert torch.ones(2).device.type == "cpu"


def test_module_to_empty():
    with torch.device("meta"):
        m = nn.Linear(2, 3)
    m.to_empty(device="cuda")
    assert m.weight.device == npu(0)


LEGACY_TYPE = "torch.Tensor.type('torch.cuda.<T>Tensor')"
LEGACY_DEFAULT_TYPE = "torch.set_default_tensor_type('torch.cuda.<T>Tensor')"


def test_legacy_type_names():
    x = torch.ones(2)
    before = calls(LEGACY_TYPE)
    assert x.type(torch.cuda.FloatTensor).device == npu(0)
    h = x.type("torch.cuda.HalfTensor")
    assert h.device == npu(0) and h.dtype == torch.float16
    assert h.type() == "torch.cuda.HalfTensor"
    assert x.type() == "torch.FloatTensor"
    assert x.type(torch.float64).dtype == torch.float64
    assert x.type(torch.int64).dtype == torch.int64
    assert x.type("torch.LongTensor").dtype == torch.int64
    # Only the CUDA tensor types are migrations: a dtype or a CPU type is
    # Tensor.type as torch has it.
    assert calls(LEGACY_TYPE) - before == 2


@pytest.mark.filterwarnings("ignore:torch.set_default_tensor_type\\(\\) is deprecated")
def test_legacy_default_tensor_type():
    dtype = torch.get_default_dtype()
    try:
        before = calls(LEGACY_DEFAULT_TYPE)
        torch.set_default_tensor_type("torch.cuda.FloatTensor")
        x = torch.ones(2)
        assert x.device == npu(0) and x.dtype == torch.float32
        assert nn.Linear(2, 2).weight.device == npu(0)
        torch.set_default_tensor_type(torch.cuda.DoubleTensor)
        assert torch.zeros(1).dtype == torch.float64 and torch.zeros(1).device == npu(0)
        with pytest.raises(TypeError, match="torch.cuda.LongTensor"):
            torch.set_default_tensor_type("torch.cuda.LongTensor")
        # Back to a cpu type: the npu default goes with it.
        torch.set_default_tensor_type("torch.FloatTensor")
        assert torch.ones(1).device.type == "cpu" and torch.ones(1).dtype == torch.float32
        assert calls(LEGACY_DEFAULT_TYPE) - before == 2
    finally:
        torch.set_default_device(None)
        torch.set_default_dtype(dtype)


def test_default_generators_are_the_npus():
    generator = torch.cuda.default_generators[0]
    assert generator.device == npu(0)
    generator.manual_seed(3)
    first = torch.rand(2, device="cuda")
    torch.cuda.manual_seed(3)
    assert torch.equal(first, torch.rand(2, device="cuda"))


def test_generator_device():
    before = calls("torch.Generator")
    for spec in ("cuda", "cuda:0", torch.device("cuda")):
        g = torch.Generator(spec) if not isinstance(spec, str) else torch.Generator(device=spec)
        assert g.device == npu(0)
        g.manual_seed(5)
        assert torch.rand(2, generator=g, device="cuda").device == npu(0)
    assert isinstance(torch.Generator("cuda"), torch.Generator)
    assert torch.Generator().device.type == "cpu"
    assert torch.Generator(0).device == npu(0)  # an index: the accelerator's
    assert calls("torch.Generator") >= before + 3


def test_storages():
    s = torch.UntypedStorage(16, device="cuda")
    assert s.device == npu(0) and s.nbytes() == 16
    assert calls("torch.UntypedStorage") >= 1
    assert torch.UntypedStorage(8).cuda().device == npu(0)


def test_backend_flags_keep_working():
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    assert torch.backends.cudnn.benchmark is True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = False


def test_profiler_cuda_activity_records_the_npu():
    from torch.profiler import ProfilerActivity

    assert ProfilerActivity.CUDA == ProfilerActivity.PrivateUse1
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        (torch.ones(8, device="cuda") * 2).sum()
    assert any("mul" in e.name for e in prof.events())


def test_autograd_profiler_use_cuda():
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        torch.ones(4, device="cuda").sum()
    assert prof.use_device == "npu"


def test_dataloader_pin_memory_device():
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2,
                        pin_memory_device="cuda")
    assert loader.pin_memory_device == "npu"


def test_data_parallel_on_one_npu():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    ref = model(torch.ones(4, 3))
    dp = nn.DataParallel(model).cuda()
    out = dp(torch.ones(4, 3).cuda())
    assert out.device == npu(0)
    assert torch.allclose(out.cpu(), ref)


def test_comm_functions_on_npu():
    import torch.cuda.comm as comm

    x = torch.arange(6.0).reshape(3, 2)
    (b,) = comm.broadcast(x, [0])
    assert b.device == npu(0) and torch.equal(b.cpu(), x)
    parts = comm.scatter(x, [0], dim=0)
    assert torch.equal(comm.gather(parts, 0, -1), x)
    assert torch.equal(comm.reduce_add([x.cuda(), x.cuda()]).cpu(), 2 * x)


def test_cuda_visible_devices_becomes_ascend_visible_devices(tmp_path):
    code = ("import os, transfer_to_npu, torch; "
            "print(os.environ['ASCEND_RT_VISIBLE_DEVICES'], torch.cuda.device_count())")
    proc = run_python(["-c", code], env={"CUDA_VISIBLE_DEVICES": "2,3",
                                         "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "4"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2,3", "2"]
    proc = run_python(["-c", code], env={"CUDA_VISIBLE_DEVICES": "2,3",
                                         "ASCEND_RT_VISIBLE_DEVICES": "1",
                                         "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "4"})
    assert proc.stdout.split() == ["1", "1"], proc.stderr
