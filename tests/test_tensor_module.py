"""Tensor.cuda / is_cuda / to, Module.cuda / to, Tensor.new_*: every call
shape a CUDA script uses."""
import types

import pytest
import torch
import torch.nn as nn

from conftest import calls, npu


def test_tensor_cuda():
    x = torch.arange(4.0)
    for call in (lambda: x.cuda(), lambda: x.cuda(0), lambda: x.cuda("cuda:0"),
                 lambda: x.cuda(device=0), lambda: x.cuda(non_blocking=True),
                 lambda: torch.Tensor.cuda(x)):
        y = call()
        assert y.device == npu(0)
        assert torch.equal(y.cpu(), x)


def test_tensor_is_cuda():
    before = calls("torch.Tensor.is_cuda")
    assert torch.ones(1).cuda().is_cuda is True
    assert torch.ones(1).is_cuda is False
    assert calls("torch.Tensor.is_cuda") == before + 2


@pytest.mark.parametrize("call", [
    lambda x: x.to("cuda"),
    lambda x: x.to("cuda:0"),
    lambda x: x.to(torch.device("cuda")),
    lambda x: x.to(torch.device("cuda", 0)),
    lambda x: x.to(0),
    lambda x: x.to(device="cuda"),
    lambda x: x.to(device="cuda:0", dtype=torch.float64),
    lambda x: x.to("cuda", torch.float64),
    lambda x: x.to("cuda", non_blocking=True),
    lambda x: x.to(torch.ones(1, device="cuda")),
])
def test_tensor_to_every_shape(call):
    x = torch.arange(3.0)
    y = call(x)
    assert y.device == npu(0)
    assert torch.equal(y.cpu().float(), x)


def test_tensor_to_keeps_non_device_arguments():
    x = torch.arange(3.0)
    assert x.to(torch.float16).device.type == "cpu"
    assert x.to(dtype=torch.int32).dtype == torch.int32
    y = x.to("cuda")
    assert y.to("cpu").device.type == "cpu"
    assert y.to(torch.float16).device == npu(0)


def test_module_cuda_and_to():
    for call in (lambda m: m.cuda(), lambda m: m.cuda(0), lambda m: m.to("cuda"),
                 lambda m: m.to(torch.device("cuda:0")), lambda m: m.to(device="cuda"),
                 lambda m: m.to("cuda", torch.float64)):
        m = nn.Linear(3, 2)
        out = call(m)
        assert out is m
        assert all(p.device == npu(0) for p in m.parameters())


def test_module_to_counts_only_rewrites():
    before = calls("torch.nn.Module.to")
    m = nn.Linear(2, 2).to("cuda")
    m.to(torch.float64)
    assert calls("torch.nn.Module.to") == before + 1


def test_what_parses_module_to_arguments_gets_the_npu():
    # Module.to hands its arguments to torch._C._nn._parse_to, and so do
    # overrides that keep the device they were sent to (Lightning's
    # DeviceDtypeModuleMixin): they see the npu.
    class Keeps(nn.Linear):
        def to(self, *args, **kwargs):
            self.kept = torch._C._nn._parse_to(*args, **kwargs)[0]
            return super().to(*args, **kwargs)

    m = Keeps(2, 2).to("cuda:0")
    assert m.kept == npu(0) and m.weight.device == npu(0)
    packed = nn.utils.rnn.pack_padded_sequence(torch.ones(3, 2, 1), [3, 2]).to("cuda")
    assert packed.data.device == npu(0)
    assert torch._C._nn._parse_to("cuda", torch.float16) == \
        (torch.device("npu"), torch.float16, False, None)
    # Module.to itself is torch's Python function, unwrapped.
    assert type(nn.Module.__dict__["to"]) is types.FunctionType


@pytest.mark.parametrize("name, args", [
    ("new_tensor", ([1.0, 2.0],)), ("new_empty", ((2,),)), ("new_zeros", ((2,),)),
    ("new_ones", ((2,),)), ("new_full", ((2,), 5.0)), ("new_empty_strided", ((2,), (1,))),
])
def test_tensor_new_methods(name, args):
    before = calls(f"torch.Tensor.{name}")
    y = getattr(torch.ones(1), name)(*args, device="cuda")
    assert y.device == npu(0)
    assert calls(f"torch.Tensor.{name}") == before + 1


def test_wrapped_methods_bind_like_the_originals():
    x = torch.ones(2)
    bound = x.to
    assert bound("cuda").device == npu(0)
    assert torch.Tensor.to(x, "cuda").device == npu(0)
    assert torch.Tensor.to.__wrapped__ is torch._C.TensorBase.to


def test_training_step_on_npu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4).cuda()
    y = torch.randn(16, 1).cuda()
    losses = []
    for _ in range(20):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert all(p.grad.device == npu(0) for p in model.parameters())
