"""Device specifications: exact parsing, what is rewritten and what is not."""
import re

import pytest
import torch

import transfer_to_npu
from conftest import calls, npu
from device_parity import SHAPES, SUFFIXES, beyond_eight_bits, differs, npu_spelling, outcome


@pytest.mark.parametrize("args, kwargs, expected", [
    (("cuda",), {}, "npu"),
    (("cuda:0",), {}, "npu:0"),
    (("cuda:1",), {}, "npu:1"),
    (("cuda", 1), {}, "npu:1"),
    (("cuda",), {"index": 2}, "npu:2"),
    ((), {"type": "cuda", "index": 1}, "npu:1"),
    ((), {"device": "cuda:3"}, "npu:3"),
    ((b"cuda:1",), {}, "npu:1"),
    ((), {"type": b"cuda", "index": 1}, "npu:1"),
])
def test_torch_device_cuda_becomes_npu(args, kwargs, expected):
    before = calls("torch.device")
    d = torch.device(*args, **kwargs)
    assert isinstance(d, torch.device)
    assert str(d) == expected
    assert calls("torch.device") == before + 1


def test_torch_device_other_types_untouched():
    before = calls("torch.device")
    assert str(torch.device("cpu")) == "cpu"
    assert str(torch.device("npu:0")) == "npu:0"
    assert str(torch.device("meta")) == "meta"
    assert torch.device(torch.device("cpu")) == torch.device("cpu")
    assert calls("torch.device") == before


def test_device_objects_made_before_migration():
    """CUDA devices made while migration was off (a module imported before
    the one line) are read by their type and index: each becomes its npu
    counterpart, every other device stays as it is."""
    transfer_to_npu.disable()
    try:
        cuda = [torch.device("cuda", i) for i in (0, 1, 5, 127)] + [torch.device("cuda")]
        others = [torch.device("meta"), torch.device("cpu"), torch.device("cpu", 3),
                  torch.device("npu", 2), torch.device("cpu", 127)]
    finally:
        transfer_to_npu.enable()
    for _ in range(3):  # the first reads verify the quick one
        assert [str(torch.device(d)) for d in cuda] == ["npu:0", "npu:1", "npu:5", "npu:127",
                                                       "npu"]
        assert [torch.device(d) for d in others] == others
        assert torch.ones(1).to(cuda[0]).device == npu(0)
        assert torch.ones(1).to(others[0]).device.type == "meta"
        assert torch.empty(1, device=cuda[0]).device == npu(0)
        assert torch.empty(1, device=others[1]).device.type == "cpu"


def test_the_callers_arguments_are_left_as_they_were():
    """torch.device(*spec) hands the constructor the caller's own tuple."""
    class Index(int):
        pass

    spec = ("cuda", Index(0))
    assert torch.device(*spec) == torch.device("npu", 0)
    stream_spec = ("cuda",)
    assert isinstance(torch.Stream(*stream_spec), torch.Stream)
    assert spec == ("cuda", 0) and stream_spec == ("cuda",)


def test_torch_device_is_still_the_type():
    d = torch.device("cuda:0")
    assert type(d) is torch.device
    assert d == torch.device("npu:0")
    assert d.type == "npu" and d.index == 0


@pytest.mark.parametrize("bad", ["cuda:x", "cuda:-1", "cuda:1:2", "cuda:", "cuda:01", "cuda:128"])
def test_invalid_cuda_strings_raise_naming_the_value(bad):
    for call in (lambda: torch.device(bad),
                 lambda: torch.zeros(1, device=bad),
                 lambda: torch.ones(1).to(bad),
                 lambda: torch.ones(1).to(device=bad)):
        with pytest.raises(transfer_to_npu.InvalidDeviceError) as info:
            call()
        assert repr(bad) in str(info.value)
        # torch raises RuntimeError for a bad device string; users of a
        # parser expect ValueError: both catch it.
        assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)


def test_invalid_device_error_is_an_exception_class_like_any_other():
    """What code does with an exception class of a library: catch it as
    either base, subclass it, pickle it (multiprocessing hands errors back
    that way), note on it, keep a weak reference to it."""
    import pickle
    import weakref

    error_type = transfer_to_npu.InvalidDeviceError
    assert error_type.__module__ == "transfer_to_npu"
    assert error_type.__name__ == error_type.__qualname__ == "InvalidDeviceError"
    assert "malformed" in error_type.__doc__
    assert error_type.__mro__[1:3] == (ValueError, RuntimeError)
    with pytest.raises(transfer_to_npu.InvalidDeviceError) as info:
        torch.device("cuda:x")
    error = info.value
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is error_type and again.args == error.args
    error.note = "seen"
    assert vars(error) == {"note": "seen"}
    ref = weakref.ref(error)
    assert ref() is error

    class Narrower(error_type):
        pass

    assert isinstance(Narrower("x"), ValueError) and str(Narrower("x")) == "x"


def test_invalid_string_error_names_argument_and_api():
    with pytest.raises(ValueError, match=r"'cuda:x' \(argument 'device' of torch\.zeros\)"):
        torch.zeros(1, device="cuda:x")


def test_not_a_cuda_type_is_left_for_torch_to_reject():
    # 'cudax' is not the type 'cuda': it is not rewritten, and torch's own
    # error names it.
    with pytest.raises(RuntimeError, match="cudax"):
        torch.zeros(1, device="cudax")
    with pytest.raises(RuntimeError, match="cudax"):
        torch.device("cudax")


def test_paths_containing_cuda_are_not_rewritten(tmp_path):
    missing = "/ckpt/cuda_run/model.pt"
    with pytest.raises(FileNotFoundError) as info:
        torch.load(missing)
    assert info.value.filename == missing

    run = tmp_path / "cuda_run"
    run.mkdir()
    path = run / "cuda:0"  # a file name that is a device string
    torch.save({"w": torch.arange(3)}, str(path))
    loaded = torch.load(str(path))
    assert torch.equal(loaded["w"], torch.arange(3))


def test_map_location_string_is_rewritten(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    before = calls("torch.load")
    for loc in ("cuda", "cuda:0", torch.device("cuda:0")):
        w = torch.load(path, map_location=loc)["w"]
        assert w.device == torch.device("npu:0")
        assert torch.equal(w.cpu(), torch.arange(4.0))
    w = torch.load(path, "cuda")["w"]
    assert w.device.type == "npu"
    assert calls("torch.load") == before + 3  # the torch.device was mapped when made


def test_non_device_strings_in_device_taking_calls_untouched(tmp_path, monkeypatch):
    # A dtype and a tensor in .to()'s first position are not devices.
    x = torch.ones(2)
    assert x.to(torch.float16).dtype == torch.float16
    assert x.to(torch.ones(1, dtype=torch.float64)).dtype == torch.float64
    # A file name that is a device string, in a device-taking factory.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cuda:0").write_bytes(bytes([7, 8, 9]))
    t = torch.from_file("cuda:0", size=3, dtype=torch.uint8, device="cuda")
    assert t.device.type == "npu" and t.cpu().tolist() == [7, 8, 9]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_device_arguments_are_refused_and_accepted_as_torch_does_for_the_npu(shape):
    """Every call shape, every spelling, as str and as bytes: the migrated
    call with 'cuda...' makes what torch's own call makes with 'npu...', or
    raises what it raises; an index above 127, which torch wraps, is
    refused naming the value (device_parity.py)."""
    call, index = SHAPES[shape]
    wrong = []
    for suffix in SUFFIXES:
        for spec in ("cuda" + suffix, ("cuda" + suffix).encode()):
            migrated, own = outcome(call, spec), outcome(call, npu_spelling(spec))
            if own[0] == "ok" and beyond_eight_bits(spec, index):
                if migrated[0] != "error" or not isinstance(migrated[1], RuntimeError) or \
                        not re.search(r"128|999", str(migrated[1])):
                    wrong.append(f"{spec!r}: {migrated}, where torch wraps the index")
                continue
            why = differs(migrated, own)
            if why is not None:
                wrong.append(f"{spec!r}: {why}")
    assert not wrong, f"{shape}: " + "; ".join(wrong)
