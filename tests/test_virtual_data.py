"""Feeding the virtual NPU: pinned memory, DataLoader(pin_memory=True) with
worker processes, non_blocking copies."""
import gc

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from conftest import npu


def test_pin_memory_gives_a_pinned_copy():
    t = torch.arange(12.0).reshape(3, 4).t()  # not contiguous: strides kept
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert p.data_ptr() != t.data_ptr() and torch.equal(p, t) and p.stride() == t.stride()
    assert p[1:].is_pinned() and p.untyped_storage().is_pinned()
    assert p.pin_memory() is p  # already pinned
    assert torch.randn(4).untyped_storage().pin_memory().is_pinned()


def test_pinning_ends_with_the_memory():
    p = torch.ones(1 << 16).pin_memory()
    address = p.untyped_storage().data_ptr()
    from transfer_to_npu import _C

    assert _C.is_pinned(address)
    del p
    gc.collect()
    assert not _C.is_pinned(address)


def test_npu_tensors_are_not_pinned():
    x = torch.ones(3, device="npu")
    assert not x.is_pinned()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        x.pin_memory()


@pytest.mark.parametrize("make", [
    lambda: torch.empty(3, 4, pin_memory=True),
    lambda: torch.zeros(5, dtype=torch.float16, pin_memory=True),
    lambda: torch.full((2, 2), 7.0, pin_memory=True),
    lambda: torch.tensor([1.0, 2.0], pin_memory=True),
    lambda: torch.randn(3, pin_memory=True),
    lambda: torch.empty_like(torch.ones(2, 3), pin_memory=True),
    lambda: torch.ones(2).new_zeros((4,), pin_memory=True),
    lambda: torch.empty(3, device="cpu", pin_memory=True),
], ids=["empty", "zeros", "full", "tensor", "randn", "empty_like", "new_zeros", "cpu"])
def test_factories_make_pinned_memory(make):
    # The npu's pinned allocator is what torch asks for these.
    p = make()
    assert p.device.type == "cpu" and p.is_pinned()
    p.copy_(torch.arange(p.numel()).reshape(p.shape))  # empty ones may hold NaNs
    x = p.to("cuda", non_blocking=True)
    assert x.device == npu(0) and torch.equal(x.cpu(), p)


def test_pinned_factories_keep_their_arguments():
    p = torch.ones(2, 3, dtype=torch.float64, pin_memory=True, requires_grad=True)
    assert p.is_pinned() and p.requires_grad and p.is_leaf and p.dtype == torch.float64
    assert torch.equal(p.detach(), torch.ones(2, 3, dtype=torch.float64))
    assert not torch.empty(3, pin_memory=False).is_pinned()
    assert not torch.empty(3).is_pinned()


def test_pinned_factories_refuse_what_torch_refuses():
    with pytest.raises(RuntimeError, match="Only dense CPU tensors can be pinned"):
        torch.empty(3, device="cuda", pin_memory=True)
    with pytest.raises(TypeError, match="pin_memory"):
        torch.ones(2).to("cuda", pin_memory=True)


def test_non_blocking_copies():
    src = torch.randn(64, 8).pin_memory()
    x = src.to("npu", non_blocking=True)
    torch.npu.synchronize()
    assert x.device == npu(0) and torch.equal(x.cpu(), src)
    back = torch.empty(64, 8).pin_memory()
    back.copy_(x * 2, non_blocking=True)
    torch.npu.current_stream().synchronize()
    assert torch.equal(back, src * 2)
    y = torch.empty(64, 8, device="npu")
    y.copy_(src, non_blocking=True)
    assert torch.equal(y.cpu(), src)
    assert torch.equal(x.to("cpu", non_blocking=True), src)


class Squares(Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return {"x": torch.full((3,), float(i)), "y": torch.tensor(i * i)}


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_pin_memory(workers):
    loader = DataLoader(Squares(), batch_size=4, pin_memory=True, num_workers=workers)
    seen = []
    for batch in loader:
        assert batch["x"].is_pinned() and batch["y"].is_pinned()
        x = batch["x"].to("npu", non_blocking=True)
        y = batch["y"].to("npu", non_blocking=True)
        assert x.device == npu(0)
        seen.extend(zip(x[:, 0].cpu().tolist(), y.cpu().tolist()))
    assert seen == [(float(i), i * i) for i in range(10)]


def test_dataloader_pin_memory_device_npu():
    data = TensorDataset(torch.arange(8.0))
    loader = DataLoader(data, batch_size=4, pin_memory=True, pin_memory_device="npu")
    assert all(b[0].is_pinned() for b in loader)
