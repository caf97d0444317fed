"""The device argument of every factory function: derived from torch's op
schemas, each one exercised here as CUDA code writes it."""
import warnings

import pytest
import torch

import transfer_to_npu
from conftest import calls

X = torch.ones(2, 3)

# One sample call per device-taking factory; `d` is the device argument.
SAMPLES = {
    "arange": lambda d: torch.arange(5, device=d),
    "as_tensor": lambda d: torch.as_tensor([1, 2], device=d),
    "asarray": lambda d: torch.asarray([1, 2], device=d),
    "bartlett_window": lambda d: torch.bartlett_window(5, device=d),
    "blackman_window": lambda d: torch.blackman_window(5, device=d),
    "empty": lambda d: torch.empty(2, 3, device=d),
    "empty_like": lambda d: torch.empty_like(X, device=d),
    "empty_permuted": lambda d: torch.empty_permuted((2, 3), (1, 0), device=d),
    "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), device=d),
    "eye": lambda d: torch.eye(3, device=d),
    "full": lambda d: torch.full((2,), 7.0, device=d),
    "full_like": lambda d: torch.full_like(X, 7.0, device=d),
    "hamming_window": lambda d: torch.hamming_window(5, device=d),
    "hann_window": lambda d: torch.hann_window(5, device=d),
    "kaiser_window": lambda d: torch.kaiser_window(5, device=d),
    "linspace": lambda d: torch.linspace(0, 1, 5, device=d),
    "logspace": lambda d: torch.logspace(0, 1, 5, device=d),
    "normal": lambda d: torch.normal(0.0, 1.0, size=(3,), device=d),
    "ones": lambda d: torch.ones(2, device=d),
    "ones_like": lambda d: torch.ones_like(X, device=d),
    "rand": lambda d: torch.rand(2, device=d),
    "rand_like": lambda d: torch.rand_like(X, device=d),
    "randint": lambda d: torch.randint(0, 10, (3,), device=d),
    "randint_like": lambda d: torch.randint_like(X, 10, device=d),
    "randn": lambda d: torch.randn(2, device=d),
    "randn_like": lambda d: torch.randn_like(X, device=d),
    "randperm": lambda d: torch.randperm(5, device=d),
    "range": lambda d: torch.range(0, 4, device=d),
    "scalar_tensor": lambda d: torch.scalar_tensor(1.0, device=d),
    "tensor": lambda d: torch.tensor([1, 2], device=d),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
    "triu_indices": lambda d: torch.triu_indices(3, 3, device=d),
    "zeros": lambda d: torch.zeros(2, device=d),
    "zeros_like": lambda d: torch.zeros_like(X, device=d),
    "fft.fftfreq": lambda d: torch.fft.fftfreq(5, device=d),
    "fft.rfftfreq": lambda d: torch.fft.rfftfreq(5, device=d),
    "signal.windows.bartlett": lambda d: torch.signal.windows.bartlett(5, device=d),
    "signal.windows.blackman": lambda d: torch.signal.windows.blackman(5, device=d),
    "signal.windows.cosine": lambda d: torch.signal.windows.cosine(5, device=d),
    "signal.windows.exponential": lambda d: torch.signal.windows.exponential(5, device=d),
    "signal.windows.gaussian": lambda d: torch.signal.windows.gaussian(5, device=d),
    "signal.windows.general_cosine": lambda d: torch.signal.windows.general_cosine(
        5, a=[0.5, 0.5], device=d),
    "signal.windows.general_hamming": lambda d: torch.signal.windows.general_hamming(5, device=d),
    "signal.windows.hamming": lambda d: torch.signal.windows.hamming(5, device=d),
    "signal.windows.hann": lambda d: torch.signal.windows.hann(5, device=d),
    "signal.windows.kaiser": lambda d: torch.signal.windows.kaiser(5, device=d),
    "signal.windows.nuttall": lambda d: torch.signal.windows.nuttall(5, device=d),
}

# Mapped, but the virtual NPU has no sparse or quantized kernels: the call
# reaches the npu, and goes no further there.
UNSUPPORTED_ON_VIRTUAL = {
    "sparse_coo_tensor": lambda d: torch.sparse_coo_tensor(
        torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (3,), device=d),
    "sparse_csr_tensor": lambda d: torch.sparse_csr_tensor(
        torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), (2, 2), device=d),
    "sparse_bsc_tensor": None, "sparse_bsr_tensor": None, "sparse_csc_tensor": None,
    "sparse_compressed_tensor": None, "empty_quantized": None,
    "from_file": None,  # needs a file: see test_device_strings
}


def _same(a, b):
    if a.layout != torch.strided:
        a, b = a.to_dense(), b.to_dense()
    return a.shape == b.shape and a.dtype == b.dtype


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "torch.device"])
def test_factory_device_argument(name, device):
    d = torch.device("cuda:0") if device == "torch.device" else device
    before = calls(f"torch.{name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = SAMPLES[name](d)
        ref = SAMPLES[name]("cpu")
    assert out.device == torch.device("npu:0")
    assert _same(out.cpu(), ref)
    # A torch.device('cuda:0') was mapped when it was made, not here.
    assert calls(f"torch.{name}") == before + (device != "torch.device")
    if name == "eye":
        assert torch.equal(out.cpu(), ref)


def test_factory_values_equal_cpu():
    torch.manual_seed(3)
    a = torch.randn(5, device="cuda")
    torch.manual_seed(3)
    b = torch.randn(5)
    assert torch.equal(a.cpu(), b)
    assert torch.equal(torch.arange(7, device="cuda").cpu(), torch.arange(7))
    assert torch.equal(torch.eye(3, device="cuda").cpu(), torch.eye(3))


@pytest.mark.parametrize("name", ["sparse_coo_tensor", "sparse_csr_tensor"])
def test_sparse_reaches_the_npu(name):
    try:
        out = UNSUPPORTED_ON_VIRTUAL[name]("cuda")
    except NotImplementedError as exc:
        assert "npu" in str(exc)
    else:
        assert out.device == torch.device("npu:0")


# Device-taking constructors with tests of their own.
TESTED_ELSEWHERE = {"Generator",  # test_more_spellings.py
                    "Stream", "Event"}  # test_virtual_devices.py


def test_every_device_factory_has_a_sample():
    from transfer_to_npu._rules import factories

    mapped = {r[0][len("torch."):] for r in factories.rows(torch)}
    known = set(SAMPLES) | set(UNSUPPORTED_ON_VIRTUAL) | TESTED_ELSEWHERE
    assert mapped <= known, mapped - known
    assert {"zeros", "ones", "empty", "randn", "tensor", "arange", "full", "fft.fftfreq",
            "signal.windows.hann"} <= mapped


def test_cpu_factories_untouched():
    before = calls("torch.zeros")
    assert torch.zeros(2).device.type == "cpu"
    assert torch.zeros(2, device="cpu").device.type == "cpu"
    assert calls("torch.zeros") == before


def test_keyword_call_sites_each_decide_for_themselves():
    # A call site's keyword names are one tuple, which the wrapper remembers
    # when they hold no device (and no pin_memory): each site, each time, in
    # any order, still gets its own answer.
    f64 = torch.float64
    for _ in range(3):
        assert torch.ones(2, dtype=f64).device.type == "cpu"
        assert torch.ones(2, device="cuda").device.type == "npu"
        assert torch.ones(2, dtype=f64).device.type == "cpu"
        assert torch.ones(2, dtype=f64, device="cuda").device == torch.device("npu", 0)
        assert torch.ones(2, device="cpu", dtype=f64).device.type == "cpu"
        for kw in ({"dtype": f64}, {"dtype": f64, "device": "cuda:0"}, {"requires_grad": True}):
            made = torch.ones(2, **kw)
            assert made.device.type == ("npu" if "device" in kw else "cpu"), kw
        assert torch.ones(2, requires_grad=True).device.type == "cpu"
        assert torch.ones(2, pin_memory=True).is_pinned()
        assert torch.zeros(2, dtype=f64).device.type == "cpu"
        assert torch.zeros(2, dtype=f64, device="cuda").device.type == "npu"


@pytest.mark.parametrize("args, kwargs", [
    (("x",), {}),                       # no overload takes a str
    ((2,), {"bogus": 1}),               # no such keyword
    ((-1,), {}),                        # a negative size
    ((2,), {"dtype": "float64"}),       # a dtype given as a str
])
def test_wrapped_factory_raises_what_torch_raises(args, kwargs):
    # torch's factories are builtins the wrapper calls itself, arguments,
    # keywords and errors handed on as the interpreter hands them.
    original = torch.ones.__wrapped__
    with pytest.raises(Exception) as expected:
        original(*args, **kwargs)
    with pytest.raises(type(expected.value)) as got:
        torch.ones(*args, **kwargs)
    assert str(got.value) == str(expected.value)


def test_wrapped_factory_hands_on_every_argument():
    f64 = torch.float64
    made = torch.full((2, 3), 7.0, dtype=f64, requires_grad=True)
    assert made.dtype == f64 and made.requires_grad and made.shape == (2, 3)
    assert torch.equal(made.detach(), torch.full.__wrapped__((2, 3), 7.0, dtype=f64))
    assert torch.empty(0).shape == (0,) and torch.empty(()).shape == ()
    out = torch.empty(3)
    assert torch.zeros(3, out=out) is out and not out.any()
