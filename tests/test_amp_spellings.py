"""Mixed precision written every way CUDA code writes it runs on the npu."""
import warnings

import pytest
import torch
import torch.nn as nn

from conftest import calls, npu


@pytest.fixture(autouse=True)
def _quiet_deprecations():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


@pytest.mark.parametrize("make", [
    lambda: torch.autocast("cuda", dtype=torch.bfloat16),
    lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16),
    lambda: torch.amp.autocast("cuda", dtype=torch.bfloat16),
    lambda: torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16),
    lambda: torch.cuda.amp.autocast(dtype=torch.bfloat16),
])
def test_autocast_spellings_cast_on_npu(make):
    layer = nn.Linear(4, 4).to("cuda")
    x = torch.randn(2, 4, device="cuda")
    ctx = make()
    assert ctx.device == "npu"
    with ctx:
        assert torch.is_autocast_enabled("cuda")
        y = layer(x)
    assert y.device == npu(0) and y.dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cuda")


def test_autocast_as_decorator():
    @torch.autocast("cuda", dtype=torch.bfloat16)
    def f(a, b):
        return a @ b

    a = torch.randn(3, 3, device="cuda")
    assert f(a, a).dtype == torch.bfloat16


@pytest.mark.parametrize("make", [
    lambda: torch.amp.GradScaler("cuda"),
    lambda: torch.amp.GradScaler(device="cuda"),
    lambda: torch.amp.GradScaler(),  # its default device is "cuda"
    lambda: torch.cuda.amp.GradScaler(),
])
def test_grad_scaler_spellings_scale_on_npu(make):
    torch.manual_seed(0)
    model = nn.Linear(4, 1).to("cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = make()
    assert scaler._device == "npu"
    loss = model(torch.randn(8, 4, device="cuda")).pow(2).mean()
    scaled = scaler.scale(loss)
    assert scaled.device == npu(0)
    assert torch.allclose(scaled.cpu(), loss.detach().cpu() * scaler.get_scale())
    scaled.backward()
    before = [p.detach().cpu().clone() for p in model.parameters()]
    scaler.step(opt)
    scaler.update()
    after = [p.detach().cpu() for p in model.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(before, after))


def test_grad_scaler_default_device_restored_by_disable(migrated):
    migrated.disable()
    try:
        assert torch.amp.GradScaler.__init__.__defaults__[0] == "cuda"
    finally:
        migrated.enable()
    assert torch.amp.GradScaler.__init__.__defaults__[0] == "npu"


def test_custom_fwd_and_bwd_spellings():
    class Double(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, g):
            return g * 2

    class Triple(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda")
        def forward(ctx, x):
            return x * 3

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx, g):
            return g * 3

    x = torch.ones(3, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = Double.apply(x.to(torch.bfloat16))
        assert y.dtype == torch.float32  # cast_inputs applied under npu autocast
        z = Triple.apply(x)
    (y.sum() + z.sum()).backward()
    assert x.grad.cpu().tolist() == [5.0, 5.0, 5.0]


def test_autocast_state_functions_take_cuda():
    before = calls("torch.is_autocast_enabled")
    assert torch.is_autocast_enabled("cuda") is False
    assert torch.get_autocast_dtype("cuda") in (torch.float16, torch.bfloat16)
    assert torch.amp.is_autocast_available("cuda") is True
    assert calls("torch.is_autocast_enabled") == before + 1


def test_autocast_state_without_a_device_is_the_npus():
    # With no device named, torch's state functions are CUDA's.
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled()
        assert torch.get_autocast_gpu_dtype() == torch.bfloat16
        assert not torch.is_autocast_enabled("cpu")
    assert not torch.is_autocast_enabled()
    dtype = torch.get_autocast_dtype("npu")
    try:
        torch.set_autocast_enabled(True)
        torch.set_autocast_gpu_dtype(torch.bfloat16)
        assert torch.is_autocast_enabled("npu") and torch.get_autocast_dtype("npu") == torch.bfloat16
        assert not torch.is_autocast_enabled("cpu")
        torch.set_autocast_enabled(enabled=False)
        assert not torch.is_autocast_enabled(device_type="cuda")
    finally:
        torch.set_autocast_enabled("npu", False)
        torch.set_autocast_dtype("npu", dtype)
