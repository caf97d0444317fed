"""init_process_group(backend='nccl') initialises HCCL."""
import pytest
import torch
import torch.distributed as dist

from conftest import calls


@pytest.fixture
def hccl_available():
    """The virtual NPU's hccl backend, or for this test a gloo stand-in
    when none is registered."""
    if "hccl" not in dist.Backend.backend_list:
        from torch.distributed import ProcessGroupGloo

        def create(store, rank, size, timeout):
            return ProcessGroupGloo(store, rank, size, timeout)

        dist.Backend.register_backend("hccl", create, devices=["cpu", "npu"])
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _init(backend, tmp_path, name="init"):
    init = tmp_path / name
    dist.init_process_group(backend=backend, init_method=f"file://{init}", world_size=1, rank=0)
    return init


@pytest.mark.parametrize("backend", ["nccl", "NCCL", dist.Backend.NCCL])
def test_nccl_becomes_hccl(backend, tmp_path, hccl_available):
    before = calls("torch.distributed.init_process_group")
    _init(backend, tmp_path)
    assert dist.get_backend() == "hccl"
    assert calls("torch.distributed.init_process_group") == before + 1


def test_nccl_positional(tmp_path, hccl_available):
    dist.init_process_group("nccl", f"file://{tmp_path / 'x'}", world_size=1, rank=0)
    assert dist.get_backend() == "hccl"


def test_mixed_backend_string(tmp_path, hccl_available):
    _init("cpu:gloo,cuda:nccl", tmp_path)
    assert dist.get_backend_config() == "cpu:gloo,npu:hccl"


def test_init_method_path_with_nccl_is_left_alone(tmp_path, hccl_available):
    before = calls("torch.distributed.init_process_group")
    init = _init("gloo", tmp_path, name="nccl_cuda_init")
    assert dist.get_backend() == "gloo"
    assert init.name == "nccl_cuda_init"
    assert calls("torch.distributed.init_process_group") == before


def test_same_function_under_both_names():
    import torch.distributed.distributed_c10d as c10d

    assert dist.init_process_group is c10d.init_process_group
    assert dist.init_process_group.__npu_source__ == "torch.distributed.init_process_group"
