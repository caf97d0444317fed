"""torch.cuda.* runs torch.npu.*: the device interfaces of the seed's table 1
and the typed tensor constructors of table 2, written as CUDA code writes
them."""
import textwrap
import typing

import pytest
import torch

import transfer_to_npu
from conftest import calls


def test_availability_and_devices():
    assert torch.cuda.is_available() is True
    assert torch.cuda.device_count() == torch.npu.device_count() >= 1
    assert torch.cuda.current_device() == torch.npu.current_device()
    torch.cuda.set_device(0)
    torch.cuda.set_device("cuda:0")
    torch.cuda.set_device(torch.device("cuda:0"))
    assert torch.cuda.current_device() == 0


def test_set_device_rejects_a_missing_device():
    with pytest.raises(RuntimeError, match="npu:7"):
        torch.cuda.set_device(7)


def test_synchronize():
    before = calls("torch.cuda.synchronize")
    torch.cuda.synchronize()
    torch.cuda.synchronize("cuda:0")
    assert calls("torch.cuda.synchronize") == before + 2


def test_device_context_manager():
    with torch.cuda.device(0):
        assert torch.cuda.current_device() == 0
    with torch.cuda.device("cuda:0"):
        x = torch.ones(1, device="cuda")
    assert x.device == torch.device("npu:0")


def test_streams_and_events():
    s = torch.cuda.Stream()
    assert isinstance(s, torch.cuda.Stream) and isinstance(s, torch.npu.Stream)
    with torch.cuda.stream(s):
        assert torch.cuda.current_stream() is s
        y = torch.ones(3, device="cuda") * 2
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    y = (y @ y).sum()
    end.record()
    torch.cuda.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert isinstance(start, torch.cuda.Event)


def test_classes_can_be_subclassed():
    class MyStream(torch.cuda.Stream):
        pass

    assert issubclass(MyStream, torch.npu.Stream)
    assert isinstance(MyStream(), torch.cuda.Stream)


def test_classes_in_annotations():
    """`torch.cuda.Stream | None` is evaluated when a module that annotates
    with it loads (transformers does, with torch.cuda.CUDAGraph)."""
    namespace = {"torch": torch}
    exec(textwrap.dedent("""
        class Buffers:
            stream: torch.cuda.Stream | None = None

            def graph(self, key: tuple[int, ...]) -> torch.cuda.CUDAGraph | None:
                return None

            def event(self) -> int | torch.cuda.Event:
                return 0
    """), namespace)
    hints = typing.get_type_hints(namespace["Buffers"])
    assert isinstance(torch.cuda.Stream(), hints["stream"])
    assert isinstance(None, hints["stream"])
    assert not isinstance(torch.ones(1), hints["stream"])
    assert isinstance(torch.cuda.Event(), torch.cuda.Event | None)
    with pytest.raises(TypeError):
        torch.cuda.synchronize | None  # a function has no union, migrated or not


@pytest.mark.parametrize("name, dtype", [
    ("FloatTensor", torch.float32), ("DoubleTensor", torch.float64),
    ("HalfTensor", torch.float16), ("BFloat16Tensor", torch.bfloat16),
    ("IntTensor", torch.int32), ("LongTensor", torch.int64), ("ShortTensor", torch.int16),
    ("CharTensor", torch.int8), ("ByteTensor", torch.uint8), ("BoolTensor", torch.bool),
])
def test_typed_tensor_constructors(name, dtype):
    cls = getattr(torch.cuda, name)
    t = cls([1, 2, 3])
    assert t.device == torch.device("npu:0") and t.dtype == dtype
    assert t.cpu().tolist() == torch.tensor([1, 2, 3], dtype=dtype).tolist()
    assert isinstance(t, cls)
    assert not isinstance(t.cpu(), cls)
    assert cls(2, 3).shape == (2, 3)


def test_seed_table_tensor_creation():
    # Table 2: torch.tensor([1,2,3], dtype=..., device='cuda').
    for dtype in (torch.long, torch.int, torch.half, torch.float, torch.bool):
        t = torch.tensor([1, 2, 3], dtype=dtype, device="cuda")
        assert t.device.type == "npu" and t.dtype == dtype


def test_memory_queries_redirect():
    x = torch.empty(1024, device="cuda")
    assert torch.cuda.memory_allocated() >= 4096
    assert torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()
    del x


def test_rng_functions_redirect():
    torch.cuda.manual_seed(123)
    a = torch.rand(4, device="cuda")
    torch.cuda.manual_seed_all(123)
    b = torch.rand(4, device="cuda")
    assert torch.equal(a.cpu(), b.cpu())
    state = torch.cuda.get_rng_state()
    c = torch.rand(4, device="cuda")
    torch.cuda.set_rng_state(state)
    assert torch.equal(torch.rand(4, device="cuda").cpu(), c.cpu())


def test_every_common_name_is_redirected():
    """Each public callable both torch.cuda and torch.npu have is mapped:
    to the npu's, or for what CUDA code asks about the device, to the
    identity policy's answer."""
    from transfer_to_npu._rules.identity import FUNCTIONS as IDENTITY

    sources = {m["source"] for m in transfer_to_npu.mappings()}
    for name in dir(torch.npu):
        target = getattr(torch.npu, name)
        if name.startswith("_") or not hasattr(torch.cuda, name) or not callable(target):
            continue
        if isinstance(target, type(torch)):
            continue
        assert f"torch.cuda.{name}" in sources
        expected = IDENTITY[name][0] if name in IDENTITY else target
        assert getattr(torch.cuda, name).__npu_target__ is expected
