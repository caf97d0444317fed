"""The virtual NPU: real npu tensors in host memory, computed by the cpu's
kernels."""
import pytest
import torch
import torch.nn as nn

from conftest import npu, run_python


def test_tensors_are_plain_tensors_on_npu():
    x = torch.arange(6.0).reshape(2, 3).to("npu")
    assert type(x) is torch.Tensor
    assert x.device == npu(0) and x.is_npu
    assert x.data_ptr() != 0
    assert "device='npu:0'" in repr(x)


def test_ops_equal_cpu():
    torch.manual_seed(0)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    na, nb = a.to("npu"), b.to("npu")
    for f in (lambda x, y: x + y, lambda x, y: x @ y, lambda x, y: torch.tanh(x) * y,
              lambda x, y: torch.cat([x, y], 1), lambda x, y: (x > y).float().sum(0),
              lambda x, y: torch.softmax(x, -1), lambda x, y: x.t().contiguous() - y,
              lambda x, y: torch.where(x > 0, x, y), lambda x, y: x[1:5, ::2] * 3):
        assert torch.equal(f(na, nb).cpu(), f(a, b))


def test_views_share_npu_storage():
    x = torch.zeros(4, 4, device="npu")
    v = x[1]
    v.fill_(5.0)
    assert x.cpu()[1].tolist() == [5.0] * 4
    t = x.t()
    assert t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert t.is_contiguous() is False and t.stride() == (1, 4)
    flat = x.view(16)
    flat[0] = 7.0
    assert x.cpu()[0, 0].item() == 7.0
    assert x[2:].storage_offset() == 8


def test_in_place_and_out_return_the_same_tensor():
    x = torch.ones(3, device="npu")
    assert x.add_(1) is x
    out = torch.empty(3, device="npu")
    r = torch.add(x, x, out=out)
    assert r is out and out.cpu().tolist() == [4.0, 4.0, 4.0]


def test_out_tensor_that_must_grow():
    out = torch.empty(0, device="npu")
    torch.cat([torch.ones(2, device="npu"), torch.zeros(3, device="npu")], out=out)
    assert out.shape == (5,) and out.device == npu(0)
    assert out.cpu().tolist() == [1, 1, 0, 0, 0]


def test_copies_between_devices():
    x = torch.arange(5.0)
    n = x.to("npu")
    assert n.data_ptr() != x.data_ptr()
    back = n.cpu()
    assert torch.equal(back, x) and back.device.type == "cpu"
    m = torch.empty(5, device="npu")
    m.copy_(x)
    assert torch.equal(m.cpu(), x)
    c = torch.empty(5)
    c.copy_(n)
    assert torch.equal(c, x)


def test_resize_keeps_data_and_grows():
    t = torch.arange(4.0, device="npu")
    t.resize_(2, 2)
    assert t.shape == (2, 2) and t.cpu().flatten().tolist() == [0.0, 1.0, 2.0, 3.0]
    t.resize_(10)
    assert t.shape == (10,) and t.cpu()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_storage_freed_and_got_back_in_place():
    """What FSDP does with an unsharded parameter: its storage resized to 0
    and back while the parameter (a view) stays the same tensor, which sees
    what is written into the storage's new memory."""
    flat = torch.arange(6.0, device="npu")
    param = flat[2:].view(2, 2)
    storage = flat.untyped_storage()
    storage.resize_(0)
    assert storage.nbytes() == 0 and storage.size() == 0
    assert flat.untyped_storage().nbytes() == 0  # one storage, whoever asks
    storage.resize_(6 * 4)
    assert flat.untyped_storage().size() == 24
    flat.copy_(torch.arange(10.0, 16.0))
    assert param.cpu().tolist() == [[12.0, 13.0], [14.0, 15.0]]
    assert torch.ones(3).untyped_storage().resize_(0).nbytes() == 0  # the cpu's, as torch's


def test_set_shares_storage():
    src = torch.arange(6.0, device="npu")
    dst = torch.empty(0, device="npu")
    dst.set_(src.untyped_storage(), 2, (2, 2), (2, 1))
    assert dst.cpu().tolist() == [[2.0, 3.0], [4.0, 5.0]]
    src.fill_(1.0)
    assert dst.cpu().tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_autograd_matches_cpu():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x = torch.randn(2, 1, 8, 8)
    loss = model(x).logsumexp(1).sum()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.to("npu")
    nloss = model(x.to("npu")).logsumexp(1).sum()
    nloss.backward()
    assert torch.allclose(nloss.cpu(), loss, atol=1e-6)
    for p, g in zip(model.parameters(), grads):
        assert p.grad.device == npu(0)
        assert torch.allclose(p.grad.cpu(), g, atol=1e-6)


def test_save_on_npu_loads_back_on_npu(tmp_path):
    path = tmp_path / "w.pt"
    w = torch.randn(3, 3, device="npu")
    torch.save({"w": w, "view": w[1]}, path)
    loaded = torch.load(path)
    assert loaded["w"].device == npu(0)
    assert torch.equal(loaded["w"].cpu(), w.cpu())
    assert torch.equal(loaded["view"].cpu(), w[1].cpu())
    cpu = torch.load(path, map_location="cpu")
    assert cpu["w"].device.type == "cpu" and torch.equal(cpu["w"], w.cpu())


def test_memory_is_accounted():
    base = torch.npu.memory_allocated()
    x = torch.empty(1000, device="npu")
    assert torch.npu.memory_allocated() == base + 4000
    del x
    assert torch.npu.memory_allocated() == base


def test_device_mismatch_is_an_error():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="npu") + torch.ones(3)


def test_npu_streams_are_torch_streams():
    s = torch.npu.Stream()
    assert isinstance(s, torch.Stream) and s.device == npu(0)
    t = torch.ones(2, device="npu")
    t.record_stream(s)  # torch's own check takes it
    assert s != torch.npu.Stream()


def test_cpu_parameter_data_set_to_an_npu_tensor():
    # What FSDP, DDP and `p.data = p.to(device)` do.
    p = nn.Parameter(torch.ones(3))
    p.data = p.to("npu")
    assert p.device == npu(0) and isinstance(p, nn.Parameter)
    p.data = p.cpu()
    assert p.device.type == "cpu"


# --- Tensor.npu() ---------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda x: x.npu(), lambda x: x.npu(None), lambda x: x.npu(0), lambda x: x.npu("npu:0"),
    lambda x: x.npu(non_blocking=True), lambda x: x.npu(memory_format=torch.contiguous_format),
    lambda x: x.npu(device=None, non_blocking=False), lambda x: torch.Tensor.npu(x),
    lambda x: x.cuda(), lambda x: x.cuda(non_blocking=True),
])
def test_tensor_npu_spellings(call):
    x = torch.arange(6.0).reshape(2, 3)
    y = call(x)
    assert y.device == npu(0) and torch.equal(y.cpu(), x)
    assert call(y) is y  # already there: the tensor itself


def test_tensor_npu_keeps_memory_format_and_names_bad_input():
    x = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last)
    assert x.npu().is_contiguous(memory_format=torch.channels_last)
    assert x.npu(memory_format=torch.contiguous_format).is_contiguous()
    with pytest.raises(RuntimeError, match="npu:7"):
        x.npu(7)
    with pytest.raises(TypeError):
        x.npu(bogus=1)


def test_tensor_npu_is_seen_by_torch_function_and_modes():
    seen = []

    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            seen.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    moved = torch.ones(2).as_subclass(Logged).npu()
    assert type(moved) is Logged and moved.device == npu(0)
    assert torch.Tensor.npu in seen

    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(("mode", func))
            return func(*args, **(kwargs or {}))

    with Mode():
        torch.ones(2).npu()
    assert ("mode", torch.Tensor.npu) in seen


def test_tensor_npu_describes_itself():
    import inspect

    assert list(inspect.signature(torch.Tensor.npu).parameters) == [
        "self", "device", "non_blocking", "memory_format"]
    assert torch.Tensor.npu.__name__ == "npu" and "npu" in torch.Tensor.npu.__doc__


INITIALIZED = """
import sys
import torch, transfer_to_npu
import torch.utils.checkpoint
seen = [torch.cuda.is_initialized(), torch.npu._initialized]
torch.cuda.device_count(), torch.cuda.is_available()  # do not initialise, as on CUDA
seen.append(torch.cuda.is_initialized())
{use}
seen.append(torch.cuda.is_initialized())
print(seen)
"""


@pytest.mark.parametrize("use", ["torch.ones(1, device='cuda')", "torch.zeros(2).cuda()",
                                 "torch.cuda.current_device()", "torch.cuda.set_device(0)",
                                 "torch.cuda.init()"])
def test_npu_is_initialized_at_its_first_use(use):
    """As CUDA is: Lightning refuses to fork a process where it is
    (strategy='ddp_fork'), and checkpoint saves its RNG state only then."""
    done = run_python(["-c", INITIALIZED.format(use=use)],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[False, False, False, True]", done.stdout


