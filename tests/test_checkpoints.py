"""Checkpoints: map_location as CUDA code writes it, and checkpoints written
on a CUDA machine."""
import pytest
import torch
import torch.serialization as serialization

from conftest import npu


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.arange(6.0).reshape(2, 3), "step": 7}, path)
    return path


class NotAllowed:
    """Not something weights_only=True loads."""


def _save_as_cuda(path, obj, tags, monkeypatch):
    """Write obj as a CUDA machine writes it: its storages tagged with
    `tags` in turn ('cuda:0', ...), in torch's own format."""
    tags = iter(tags)
    tagged = {}

    def location_tag(storage):
        key = storage.data_ptr()
        if key not in tagged:
            tagged[key] = next(tags)
        return tagged[key]

    monkeypatch.setattr(serialization, "location_tag", location_tag)
    torch.save(obj, path)
    monkeypatch.undo()
    return path


@pytest.fixture
def cuda_ckpt(tmp_path, monkeypatch):
    path = _save_as_cuda(tmp_path / "cuda_ckpt.pt", {"a": torch.arange(4.0), "b": torch.ones(2, 2)},
                         ["cuda:0", "cuda:0"], monkeypatch)
    assert b"cuda:0" in path.read_bytes()
    return path


@pytest.fixture
def two_gpu_ckpt(tmp_path, monkeypatch):
    path = _save_as_cuda(tmp_path / "two_gpu.pt", {"a": torch.arange(4.0), "b": torch.ones(2, 2)},
                         ["cuda:0", "cuda:1"], monkeypatch)
    assert b"cuda:1" in path.read_bytes()
    return path


@pytest.mark.parametrize("loc", ["cuda", "cuda:0", torch.device("cuda:0")])
def test_map_location_string_and_device(ckpt, loc):
    w = torch.load(ckpt, map_location=loc)["w"]
    assert w.device == npu(0) and torch.equal(w.cpu(), torch.arange(6.0).reshape(2, 3))


def test_map_location_dict_keys_and_values(ckpt, two_gpu_ckpt):
    # Values: 'cpu' -> 'cuda:0' means the npu.
    w = torch.load(ckpt, map_location={"cpu": "cuda:0"})["w"]
    assert w.device == npu(0)
    # Keys: a two-GPU checkpoint's storages, as the user names them.
    d = torch.load(two_gpu_ckpt, map_location={"cuda:0": "cpu", "cuda:1": "cuda:0"})
    assert d["a"].device.type == "cpu" and d["b"].device == npu(0)
    assert torch.equal(d["a"], torch.arange(4.0)) and torch.equal(d["b"].cpu(), torch.ones(2, 2))


def test_cuda_device_missing_on_npu_names_it(two_gpu_ckpt):
    with pytest.raises(RuntimeError, match="NPU device 1"):
        torch.load(two_gpu_ckpt)


def test_map_location_callable_calling_storage_cuda(ckpt):
    w = torch.load(ckpt, map_location=lambda storage, loc: storage.cuda())["w"]
    assert w.device == npu(0)
    w = torch.load(ckpt, map_location=lambda storage, loc: storage.cuda(0))["w"]
    assert w.device == npu(0)


def test_cuda_checkpoint_loads_on_npu_without_map_location(cuda_ckpt):
    d = torch.load(cuda_ckpt)
    assert d["a"].device == npu(0) and d["b"].device == npu(0)
    assert torch.equal(d["a"].cpu(), torch.arange(4.0))
    assert torch.equal(d["b"].cpu(), torch.ones(2, 2))


def test_weights_only_default_still_applies(tmp_path):
    path = tmp_path / "bad.pt"
    torch.save({"x": NotAllowed()}, path)
    with pytest.raises(Exception, match="weights_only"):
        torch.load(path, map_location="cuda")


def test_load_of_a_path_with_cuda_in_it(tmp_path):
    d = tmp_path / "cuda" / "cuda:0"
    d.mkdir(parents=True)
    path = d / "model_cuda.pt"
    torch.save(torch.ones(2), path)
    assert torch.load(str(path), map_location="cuda").device == npu(0)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0])
def test_safetensors_loads_onto_the_npu(tmp_path, device):
    # safetensors stages a load to CUDA in pinned host memory
    # (torch.empty(..., pin_memory=True)) before copying it over.
    safetensors = pytest.importorskip("safetensors.torch")
    weights = {"w": torch.randn(3, 4), "b": torch.arange(5, dtype=torch.int64)}
    path = str(tmp_path / "model.safetensors")
    safetensors.save_file(weights, path)
    loaded = safetensors.load_file(path, device=device)
    for name, value in weights.items():
        assert loaded[name].device == npu(0) and torch.equal(loaded[name].cpu(), value)
    with safetensors.safe_open(path, framework="pt", device=device) as f:
        assert torch.equal(f.get_tensor("w").cpu(), weights["w"])


def test_torch_finds_the_npu_as_the_accelerator():
    # CUDA is available once migrated, and torch's own question of which
    # accelerator there is answers the npu's device type, as the tensors'.
    assert torch._utils._get_available_device_type() == "npu"
    assert torch.accelerator.current_accelerator().type == "npu"


def test_distributed_checkpoint_of_npu_tensors(tmp_path):
    import torch.distributed.checkpoint as dcp

    state = {"w": torch.arange(6.0, device="cuda").reshape(2, 3),
             "b": torch.ones(4, device="cuda", dtype=torch.bfloat16)}
    dcp.save(state, checkpoint_id=tmp_path / "ckpt")
    loaded = {"w": torch.zeros(2, 3, device="cuda"),
              "b": torch.zeros(4, device="cuda", dtype=torch.bfloat16)}
    dcp.load(loaded, checkpoint_id=tmp_path / "ckpt")
    for name, value in state.items():
        assert loaded[name].device == npu(0)
        assert torch.equal(loaded[name].cpu(), value.cpu())
