"""torch.save and torch.load of npu tensors, modules and checkpoints."""
import io

import pytest
import torch
import torch.nn as nn

from conftest import npu, run_python


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.register_buffer("steps", torch.tensor(7))


@pytest.fixture
def checkpoint():
    torch.manual_seed(0)
    model = Net().to("npu")
    opt = torch.optim.Adam(model.parameters())
    model.fc(torch.randn(4, 3, device="npu")).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
            "shared": [model.fc.weight, model.fc.weight[0]]}


def test_checkpoint_saved_on_npu_loads_on_npu(checkpoint):
    loaded = _roundtrip(checkpoint)  # weights_only=True, the default
    assert loaded["epoch"] == 3
    for key, value in checkpoint["model"].items():
        assert loaded["model"][key].device == npu(0)
        assert torch.equal(loaded["model"][key].cpu(), value.cpu())
    exp_avg = loaded["optimizer"]["state"][0]["exp_avg"]
    assert exp_avg.device == npu(0)
    weight, row = loaded["shared"]
    # A view still shares its base's storage after loading.
    assert row.untyped_storage().data_ptr() == weight.untyped_storage().data_ptr()
    with torch.no_grad():
        weight.fill_(1.0)
    assert row.cpu().tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("location", ["npu", "npu:0", torch.device("npu"),
                                      torch.device("npu", 0)])
def test_map_location_to_npu(checkpoint, location):
    loaded = _roundtrip(checkpoint, map_location=location)
    assert loaded["model"]["fc.weight"].device == npu(0)


@pytest.mark.parametrize("location", [
    "cpu", torch.device("cpu"), {"npu:0": "cpu"},
    lambda storage, loc: storage,  # the idiom that loads onto the cpu
])
def test_map_location_to_cpu(checkpoint, location):
    loaded = _roundtrip(checkpoint, map_location=location)
    weight = loaded["model"]["fc.weight"]
    assert weight.device.type == "cpu"
    assert torch.equal(weight, checkpoint["model"]["fc.weight"].cpu())


def test_map_location_dict_and_callable_with_npu_locations():
    cpu_saved = {"w": torch.arange(4.0)}
    loaded = _roundtrip(cpu_saved, map_location={"cpu": "npu:0"})
    assert loaded["w"].device == npu(0) and loaded["w"].cpu().tolist() == [0, 1, 2, 3]
    loaded = _roundtrip(cpu_saved, map_location=lambda storage, loc: storage.to(device="npu"))
    assert loaded["w"].device == npu(0)
    npu_saved = {"w": torch.arange(4.0, device="npu")}
    seen = []

    def keep(storage, loc):
        seen.append(loc)
        return storage.npu()

    loaded = _roundtrip(npu_saved, map_location=keep)
    assert seen == ["npu:0"] and loaded["w"].device == npu(0)


def test_whole_module_and_legacy_format(tmp_path):
    model = Net().to("npu")
    loaded = _roundtrip(model, weights_only=False)
    assert isinstance(loaded, Net) and loaded.fc.weight.device == npu(0)
    assert torch.equal(loaded.fc.weight.cpu(), model.fc.weight.cpu())
    path = tmp_path / "legacy.pt"
    torch.save({"w": model.fc.weight.detach()}, path, _use_new_zipfile_serialization=False)
    assert torch.load(path)["w"].device == npu(0)


def test_mmap_load(tmp_path, checkpoint):
    path = tmp_path / "ckpt.pt"
    torch.save(checkpoint["model"], path)
    loaded = torch.load(path, mmap=True)
    assert loaded["fc.weight"].device == npu(0)
    assert torch.equal(loaded["fc.weight"].cpu(), checkpoint["model"]["fc.weight"].cpu())


def test_load_state_dict_into_a_cpu_model(checkpoint):
    model = Net()
    model.load_state_dict(_roundtrip(checkpoint)["model"])
    assert model.fc.weight.device.type == "cpu"
    assert torch.equal(model.fc.weight, checkpoint["model"]["fc.weight"].cpu())


def test_saved_on_npu_1(tmp_path):
    path = tmp_path / "one.pt"
    code = (
        "import sys, torch, transfer_to_npu\n"
        "path = sys.argv[1]\n"
        "torch.save({'w': torch.ones(2, device='npu:1')}, path)\n"
        "assert torch.load(path)['w'].device == torch.device('npu', 1)\n"
        "assert torch.load(path, map_location='npu:0')['w'].device == torch.device('npu', 0)\n"
        "assert torch.load(path, map_location={'npu:1': 'npu:0'})['w'].device.index == 0\n"
        "print('ok')\n")
    proc = run_python(["-c", code, str(path)], env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr
    # On a machine with one npu, npu:1 is missing: the error names it.
    with pytest.raises(RuntimeError, match="NPU device 1"):
        torch.load(path)
    assert torch.load(path, map_location="npu")["w"].device == npu(0)
