"""Several virtual NPUs, device selection, and streams and events."""
import time

import pytest
import torch

import transfer_to_npu
from conftest import run_python


def _run(code, **env):
    proc = run_python(["-c", "import torch, transfer_to_npu\n" + code], env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_one_device_by_default():
    assert _run("print(torch.npu.device_count(), torch.npu.current_device())") == "1 0"


def test_count_set_by_the_environment_and_training_on_npu_1():
    out = _run(
        "import torch.nn as nn\n"
        "assert torch.npu.device_count() == 3\n"
        "torch.manual_seed(0)\n"
        "cpu = nn.Linear(4, 2); dev = nn.Linear(4, 2)\n"
        "dev.load_state_dict(cpu.state_dict()); dev.to('npu:1')\n"
        "x = torch.randn(5, 4)\n"
        "cpu(x).pow(2).sum().backward()\n"
        "loss = dev(x.to('npu:1')).pow(2).sum(); loss.backward()\n"
        "assert loss.device == torch.device('npu', 1)\n"
        "assert dev.weight.grad.device == torch.device('npu', 1)\n"
        "assert torch.allclose(dev.weight.grad.cpu(), cpu.weight.grad)\n"
        "opt = torch.optim.Adam(dev.parameters()); opt.step()\n"
        "assert next(iter(opt.state.values()))['exp_avg'].device == torch.device('npu', 1)\n"
        "torch.npu.set_device(2)\n"
        "assert torch.empty(1, device='npu').device == torch.device('npu', 2)\n"
        "with torch.npu.device(1):\n"
        "    assert torch.ones(1, device='npu').device == torch.device('npu', 1)\n"
        "print('ok')\n",
        TRANSFER_TO_NPU_VIRTUAL_DEVICES="3")
    assert out == "ok"


@pytest.mark.parametrize("local_world_size, setting, expected", [
    ("3", None, "3"),   # under a launcher: one per process of the node
    ("3", "2", "2"),    # the setting wins
    ("x", None, "1"),   # not a launcher's
    ("0", None, "1"),
])
def test_count_under_a_launcher(local_world_size, setting, expected):
    assert _run("print(torch.npu.device_count())", LOCAL_WORLD_SIZE=local_world_size,
                TRANSFER_TO_NPU_VIRTUAL_DEVICES=setting) == expected


def test_the_devices_of_a_job_that_ended_are_not_the_next_ones():
    """npus provided for a job (Lightning's devices=2) and given back: the
    next job of the process sees the node's one npu, current, and one
    generator state to save and restore (Lightning's isolate_rng)."""
    out = _run(
        "from transfer_to_npu.backends.virtual import devices\n"
        "token = devices.provide(2)\n"
        "torch.npu.set_device(1)\n"
        "assert torch.ones(1, device='npu').device.index == 1\n"
        "devices.withdraw(token)\n"
        "states = torch.npu.get_rng_state_all()\n"
        "torch.npu.set_rng_state_all(states)\n"
        "print(torch.npu.device_count(), torch.npu.current_device(), len(states),\n"
        "      torch.ones(1, device='npu').device)\n",
        TRANSFER_TO_NPU_VIRTUAL_DEVICES=None, LOCAL_WORLD_SIZE=None, LOCAL_SIZE=None,
        ASCEND_RT_VISIBLE_DEVICES=None)
    assert out == "1 0 1 npu:0"


def test_current_device_is_per_thread():
    # As with CUDA: a thread starts on device 0 whatever another one set,
    # and what it creates without an index goes to its own current device.
    out = _run(
        "import threading\n"
        "torch.cuda.set_device(1)\n"
        "x = torch.ones(2)\n"
        "seen = {}\n"
        "def fresh():\n"
        "    seen['fresh'] = (torch.cuda.current_device(), torch.zeros(1, device='cuda').device.index,\n"
        "                     x.cuda().device.index, torch.ones(1).to('cuda').device.index)\n"
        "def moved():\n"
        "    torch.cuda.set_device(0)\n"
        "    seen['moved'] = torch.empty(1, device='npu').device.index\n"
        "for target in (fresh, moved):\n"
        "    t = threading.Thread(target=target); t.start(); t.join()\n"
        "print(seen['fresh'], seen['moved'], torch.cuda.current_device(),\n"
        "      torch.zeros(1, device='cuda').device.index, x.npu().device.index)\n",
        TRANSFER_TO_NPU_VIRTUAL_DEVICES="2")
    assert out == "(0, 0, 0, 0) 0 1 1 1"


# Each spelling of "the current device" (no index) that torch resolves
# through the device guard rather than in a kernel.
INDEXLESS = {
    "to str": "x.to('cuda')",
    "to device": "x.to(torch.device('cuda'))",
    "to keyword": "x.to(device='cuda')",
    "to with dtype": "x.to('cuda', torch.float16)",
    "to npu str": "x.to('npu')",
    "to npu device": "x.to(torch.device('npu'))",
    "to a device made before": "x.to(made_before)",
    "Module.to": "next(torch.nn.Linear(2, 2).to('cuda').parameters())",
    "Module.to keyword": "next(torch.nn.Linear(2, 2).to(device=torch.device('cuda')).parameters())",
    "tensor": "torch.tensor([1.0], device='cuda')",
    "as_tensor": "torch.as_tensor([1.0], device='npu')",
    "new_tensor": "x.new_tensor([1.0], device='cuda')",
    "legacy type": "x.type('torch.cuda.FloatTensor')",
}


def test_a_device_without_index_is_the_current_one():
    # `set_device(local_rank); model.to('cuda')` is how DDP scripts place
    # each process's model: it must land on that device, not on device 0.
    out = _run(
        "x = torch.ones(2)\n"
        "made_before = torch.device('cuda')\n"
        f"spellings = {INDEXLESS!r}\n"
        "def where():\n"
        "    return [str(eval(code).device) for code in spellings.values()]\n"
        "torch.cuda.set_device(1)\n"
        "print(*where())\n"
        "with torch.cuda.device(0):\n"
        "    print(*where())\n"
        "print(*where())\n"
        "torch.cuda.set_device(0)\n"
        "print(*where())\n",
        TRANSFER_TO_NPU_VIRTUAL_DEVICES="2")
    lines = [dict(zip(INDEXLESS, line.split())) for line in out.splitlines()]
    expected = ["npu:1", "npu:0", "npu:1", "npu:0"]
    assert lines == [dict.fromkeys(INDEXLESS, device) for device in expected]


def test_torch_accelerator_is_the_npu():
    # Device-agnostic scripts (torch.accelerator, PyTorch >= 2.6) pick and
    # query the device through it: it must agree with torch.npu.
    out = _run(
        "A = torch.accelerator\n"
        "A.set_device_index(1)\n"
        "print(torch.npu.current_device(), A.current_device_index(),\n"
        "      torch.ones(1, device='npu').device)\n"
        "with A.device_index(0):\n"
        "    print(torch.npu.current_device(), A.current_device_index())\n"
        "print(A.current_device_index())\n"
        "A.synchronize(); A.synchronize('cuda:0'); A.synchronize(1)\n"
        "x = torch.empty(1024, device='npu:1')\n"
        "print(A.memory_allocated() == torch.npu.memory_allocated(1) >= 4096,\n"
        "      A.max_memory_allocated() >= 4096, A.get_memory_info() == torch.npu.mem_get_info(1))\n",
        TRANSFER_TO_NPU_VIRTUAL_DEVICES="2")
    assert out.splitlines() == ["1 1 npu:1", "0 0", "1", "True True True"]


def test_visible_devices_select_and_renumber():
    out = _run("print(torch.npu.device_count())\n"
               "x = torch.ones(1, device='npu:1'); print(x.device)",
               TRANSFER_TO_NPU_VIRTUAL_DEVICES="4", ASCEND_RT_VISIBLE_DEVICES="3,1")
    assert out.splitlines() == ["2", "npu:1"]


def test_a_missing_device_is_an_error():
    with pytest.raises(RuntimeError, match="npu:5"):
        torch.npu.set_device(5)
    with pytest.raises(RuntimeError, match="Invalid device"):
        torch.npu.get_device_properties(9)


# Every way of making a tensor on a device, as a function of the device.
MAKERS = {
    "torch.zeros": lambda d: torch.zeros(2, device=d),
    "torch.empty": lambda d: torch.empty(2, device=d),
    "torch.arange": lambda d: torch.arange(3, device=d),
    "torch.full": lambda d: torch.full((2,), 1.0, device=d),
    "torch.randn": lambda d: torch.randn(2, device=d),
    "torch.randint": lambda d: torch.randint(0, 5, (2,), device=d),
    "torch.tensor": lambda d: torch.tensor([1.0], device=d),
    "torch.ones_like": lambda d: torch.ones_like(torch.ones(2), device=d),
    "Tensor.new_zeros": lambda d: torch.ones(2).new_zeros(2, device=d),
    "Tensor.to": lambda d: torch.ones(2).to(d),
    "nn.Linear": lambda d: torch.nn.Linear(2, 2, device=d),
}


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("device", ["cuda:5", "npu:5", "cuda:127"])
def test_a_tensor_on_a_device_that_does_not_exist_is_refused(maker, device):
    """As CUDA: "invalid device ordinal", naming the device, never a tensor
    on it or an IndexError."""
    with pytest.raises(RuntimeError, match=r"Invalid device ordinal: npu:(5|127)\b"):
        MAKERS[maker](device)


def test_a_device_index_beyond_eight_bits_is_refused_not_wrapped():
    """torch keeps a device index in eight bits: torch.device('cuda', 128)
    would be npu:-128."""
    for index in (128, 300, 2 ** 70):
        with pytest.raises(RuntimeError, match=f"got {index}"):
            torch.device("cuda", index)
    assert torch.device("cuda", 127) == torch.device("npu", 127)


def test_a_negative_device_changes_nothing_as_with_cuda():
    before = torch.cuda.current_device()
    torch.cuda.set_device(-1)
    with torch.cuda.device(-1):
        assert torch.cuda.current_device() == before
    assert torch.cuda.current_device() == before


@pytest.mark.parametrize("visible", ["", "-1", "7", "-1,0"])
def test_cuda_visible_devices_that_name_no_device_leave_none(visible):
    out = _run("print(torch.cuda.is_available(), torch.cuda.device_count())\n"
               "try:\n    torch.ones(1, device='cuda')\nexcept RuntimeError as e:\n"
               "    print('Invalid device ordinal' in str(e))",
               CUDA_VISIBLE_DEVICES=visible, TRANSFER_TO_NPU_VIRTUAL_DEVICES="2")
    assert out.split() == ["False", "0", "True"]


def test_device_queries():
    assert torch.npu.get_device_name() == torch.npu.get_device_properties().name
    assert torch.npu.is_bf16_supported()
    assert torch.npu.is_available() and torch.npu.device_count() >= 1


# --- streams and events ------------------------------------------------------

def test_stream_context_makes_it_current():
    s = torch.npu.Stream()
    default = torch.npu.current_stream()
    assert default == torch.npu.default_stream()
    with torch.npu.stream(s):
        assert torch.npu.current_stream() is s
        y = torch.ones(3, device="npu") * 2
    assert torch.npu.current_stream() is default
    s.synchronize()
    assert s.query() and y.cpu().tolist() == [2, 2, 2]
    s.wait_stream(default)
    default.wait_event(s.record_event())


def test_event_elapsed_time_in_milliseconds():
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    start.record()
    time.sleep(0.05)
    x = torch.randn(64, 64, device="npu")
    x @ x
    end.record()
    end.synchronize()
    torch.npu.synchronize()
    ms = start.elapsed_time(end)
    assert 45 <= ms < 5000
    assert end.query()


def test_elapsed_time_needs_timing_and_recording():
    a, b = torch.npu.Event(), torch.npu.Event()
    a.record()
    b.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        a.elapsed_time(b)
    c, d = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="recorded"):
        c.elapsed_time(d)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda"), 0, None, "npu"])
def test_torch_stream_and_event_on_the_npu(device):
    """torch's device-generic classes, spelt for CUDA or for the
    accelerator: they are still those classes, and they work."""
    kw = {} if device is None else {"device": device}
    s = torch.Stream(**kw)
    assert isinstance(s, torch.Stream) and s.device == torch.device("npu", 0)
    start = torch.Event(**kw, enable_timing=True)
    end = torch.Event(**kw, enable_timing=True)
    assert isinstance(start, torch.Event) and start.device == torch.device("npu", 0)
    with torch.cuda.stream(s):
        assert torch.cuda.current_stream() is s
        start.record(s)
        time.sleep(0.02)
        end.record(s)
    s.wait_event(end)
    end.synchronize()
    s.synchronize()
    assert end.query() and 15 <= start.elapsed_time(end) < 5000
    assert isinstance(s.record_event(), torch.Event)
    with s as entered:  # torch.Stream's own context manager
        assert entered is s and torch.cuda.current_stream() is s
    assert torch.cuda.current_stream() is torch.cuda.default_stream()


def test_torch_stream_and_event_keep_torch_behaviour_elsewhere():
    assert type(torch.Event(device="cpu")) is torch.Event
    assert type(torch.Stream(device="cpu")) is torch.Stream

    class Timer(torch.Event):  # a subclass of the user's: only migrated
        pass

    assert type(Timer(device="cuda")) is Timer and Timer(device="cuda").device.type == "npu"
    assert type(Timer.__new__(Timer)) is Timer
    with pytest.raises(transfer_to_npu.InvalidDeviceError, match="cuda:x"):
        torch.Event(device="cuda:x")
    # torch's form for a stream it made is left to it
    rewrapped = torch.Stream(stream_id=0, device_index=0, device_type=0)
    assert type(rewrapped) is torch.Stream and rewrapped.device.type == "cpu"


def test_subclasses_of_torch_event_made_before_the_import():
    proc = run_python(["-c", "import torch\n"
                       "class Timer(torch.Event): pass\n"
                       "import transfer_to_npu\n"
                       "t = Timer(device='cuda')\n"
                       "transfer_to_npu.disable()\n"
                       "u = Timer.__new__(Timer, device='cpu')\n"
                       "print(type(t).__name__, t.device.type, type(u).__name__)"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Timer", "npu", "Timer"]


def test_torch_stream_of_another_device():
    out = _run("s = torch.Stream('cuda:1'); e = torch.Event(device=torch.device('cuda', 1))\n"
               "torch.cuda.set_device(1)\n"
               "print(s.device, e.device, torch.Stream().device, torch.Event().device)",
               TRANSFER_TO_NPU_VIRTUAL_DEVICES="2")
    assert out == "npu:1 npu:1 npu:1 npu:1"


def test_stream_of_another_device():
    out = _run("s = torch.npu.Stream(device=1)\n"
               "print(s.device, torch.npu.current_stream(1).device)",
               TRANSFER_TO_NPU_VIRTUAL_DEVICES="2")
    assert out == "npu:1 npu:1"
