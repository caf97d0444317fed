"""The virtual NPU computes what the cpu computes, op by op, and fails
cleanly where it cannot."""
import sys
import types
import unittest

import pytest
import torch
import torch.nn as nn

import transfer_to_npu
from conftest import run_python


def _same(cpu, dev):
    assert dev.device.type == "npu"
    assert cpu.dtype == dev.dtype and cpu.shape == dev.shape
    assert torch.equal(cpu, dev.cpu())


@pytest.mark.parametrize("fn", [
    lambda x, i: i & 1, lambda x, i: i | 2, lambda x, i: i ^ 3, lambda x, i: i << 1,
    lambda x, i: torch.remainder(i, 3), lambda x, i: torch.fmod(x, 2), lambda x, i: x % 0.5,
    lambda x, i: torch.copysign(x, -1), lambda x, i: torch.xlogy(2, x.abs()),
    lambda x, i: torch.where(x > 0, x, 0.0), lambda x, i: x.masked_fill(x > 0, 1),
    lambda x, i: torch.pow(2, x), lambda x, i: i // 2, lambda x, i: 1 - x,
    lambda x, i: i.float() / 3, lambda x, i: torch.bitwise_and(5, i),
], ids=lambda f: str(f.__code__.co_positions().__next__()))
def test_numbers_mixed_with_tensors(fn):
    """torch turns a number beside a tensor into a 'wrapped number' tensor,
    which reaches the npu's kernels as a plain number."""
    x = torch.linspace(-2, 2, 9)
    i = torch.arange(-4, 5)
    _same(fn(x, i), fn(x.to("npu"), i.to("npu")))


def test_type_promotion_with_numbers_is_the_cpus():
    i = torch.arange(4, dtype=torch.int32)
    h = torch.ones(4, dtype=torch.float16)
    for f in (lambda a: a + 2.5, lambda a: torch.remainder(a, 2.5), lambda a: a * True,
              lambda a: torch.fmod(a, 3)):
        for t in (i, h):
            _same(f(t), f(t.to("npu")))


def test_conjugate_and_negative_views():
    c = torch.tensor([1 + 2j, 3 - 4j, 5 + 6j])
    n = c.to("npu")
    _same(c.conj().resolve_conj(), n.conj().cpu().to("npu"))
    assert torch.equal(n.conj().cpu(), c.conj())
    _same(c.conj().view(3, 1) @ c.view(1, 3), n.conj().view(3, 1) @ n.view(1, 3))
    _same(torch.dot(c.conj(), c), torch.dot(n.conj(), n))
    _same(c.conj().imag.clone(), n.conj().imag.clone())
    assert n.conj()[1].item() == c.conj()[1].item()
    assert n.conj().imag[1].item() == c.conj().imag[1].item()
    _same(torch.fft.ifft(c), torch.fft.ifft(n))


def test_conjugate_aware_kernels_compute_as_on_the_cpu():
    """mm conjugates a conjugate view inside its BLAS call, which rounds
    otherwise than conjugating a copy first: to the bit, as on the cpu
    (torch.pca_lowrank's basis differed in the fifth digit)."""
    g = torch.Generator().manual_seed(3)
    for _ in range(10):
        a = torch.randn(3, 2, dtype=torch.complex64, generator=g) * 5
        q = torch.randn(2, 3, dtype=torch.complex64, generator=g).mT
        _same(a.mH @ q, a.to("npu").mH @ q.to("npu"))
    # And into a conjugate out= view, as the cpu's kernel does.
    outs = [torch.zeros(3, 3, dtype=torch.complex64, device=d) for d in ("cpu", "npu")]
    for out in outs:
        x = torch.ones(3, 3, dtype=torch.complex64, device=out.device) * (1 + 2j)
        torch.mm(x.conj(), x, out=out.conj())
    _same(*outs)


def test_out_tensor_is_reshaped_like_the_cpus():
    for size in ([0], [10]):
        out = torch.empty(size, device="npu")
        torch.logical_not(torch.zeros(1, 0, 3, device="npu"), out=out.bool()) if size == [0] \
            else None
        cpu_out, npu_out = torch.empty(size), torch.empty(size, device="npu")
        with pytest.warns(UserWarning) if size == [10] else _nothing():
            torch.add(torch.ones(3), 1, out=cpu_out)
            torch.add(torch.ones(3, device="npu"), 1, out=npu_out)
        _same(cpu_out, npu_out)
    assert torch.logical_not(torch.zeros(1, 0, 3, device="npu")).shape == (1, 0, 3)
    assert torch.eye(0, 2, device="npu").shape == (0, 2)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_mixed_devices():
    x = torch.arange(10.0, device="npu")
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(x.view(2, 5), torch.ones(5, 2))
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="npu") + torch.ones(3)
    # cpu scalars and cpu indices are fine, as on CUDA
    _same(torch.arange(10.0) + torch.tensor(1.0), x + torch.tensor(1.0))
    _same(torch.arange(10.0)[torch.tensor([1, 7])], x[torch.tensor([1, 7])])
    y = x.clone()
    y[torch.tensor([0, 1])] = torch.tensor(5.0, device="npu")
    assert y.cpu()[:2].tolist() == [5.0, 5.0]


def test_layer_norm_is_the_cpu_kernel():
    """torch would decompose native_layer_norm for a new device; the npu runs
    the cpu's kernel, bit for bit."""
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 7), torch.randn(7), torch.randn(7)
    f = nn.functional.layer_norm
    _same(f(x, (7,), w, b), f(x.to("npu"), (7,), w.to("npu"), b.to("npu")))
    _same(nn.functional.group_norm(x.view(2, 2, 7), 2),
          nn.functional.group_norm(x.view(2, 2, 7).to("npu"), 2))


class _LastHidden(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        out = self.rnn(x)
        return out[0] if isinstance(out, tuple) else out


class _Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, num_layers=2, batch_first=True)

    def forward(self, x):
        lengths = torch.tensor([5, 2, 4])  # on the cpu, as torch wants them
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=False)
        return nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True)[0]


@pytest.mark.parametrize("make,shape", [
    (lambda: _LastHidden(nn.LSTM(4, 6, num_layers=2, batch_first=True)), (3, 5, 4)),
    (lambda: _LastHidden(nn.GRU(4, 6, bidirectional=True)), (5, 3, 4)),
    (lambda: _LastHidden(nn.LSTMCell(4, 6)), (3, 4)),
    (lambda: nn.GRUCell(4, 6), (3, 4)),
    (_Packed, (3, 5, 4)),
    (lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), (2, 7, 16)),
], ids=["lstm", "gru", "lstm_cell", "gru_cell", "packed_lstm", "transformer"])
def test_training_steps_of_common_layers_equal_cpu(make, shape):
    """Recurrent layers take CUDA-only fused cells on any device but the cpu,
    and attention a per-device kernel choice: the npu must still train them
    as the cpu does."""
    torch.manual_seed(0)
    x = torch.randn(shape)
    results = []
    for device in ("cpu", "npu"):
        torch.manual_seed(1)
        model = make().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = model(x.to(device)).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results.append((losses, [p.detach().cpu() for p in model.parameters()]))
    (cpu_losses, cpu_params), (npu_losses, npu_params) = results
    assert npu_losses == pytest.approx(cpu_losses, rel=1e-5, abs=1e-6)
    for c, n in zip(cpu_params, npu_params):
        torch.testing.assert_close(n, c, rtol=1e-5, atol=1e-6)


def _sync_batch_norm_as_two_ranks(x, weight, bias, running, grad_out, eps=1e-5, momentum=0.1):
    """SyncBatchNorm's forward and backward on the npu, with x's batch split
    between two ranks and the collectives done by hand: its statistics ops,
    called as torch/nn/modules/_functions.py calls them."""
    halves, grads = x.chunk(2), grad_out.chunk(2)
    stats = [torch.batch_norm_stats(h, eps) for h in halves]
    mean_all = torch.stack([m for m, _ in stats])
    invstd_all = torch.stack([s for _, s in stats])
    counts = torch.tensor([float(h.numel() // h.size(1)) for h in halves], device=x.device)
    mean, invstd = torch.batch_norm_gather_stats_with_counts(
        x, mean_all, invstd_all, running[0], running[1], momentum, eps, counts)
    out = torch.cat([torch.batch_norm_elemt(h, weight, bias, mean, invstd, eps)
                     for h in halves])
    reduced = [torch.batch_norm_backward_reduce(g, h, mean, invstd, weight, True, True, True)
               for g, h in zip(grads, halves)]
    sum_dy = sum(r[0] for r in reduced)  # the all-reduce
    sum_dy_xmu = sum(r[1] for r in reduced)
    count = counts.to(torch.int32)
    grad_in = torch.cat([
        torch.batch_norm_backward_elemt(g, h, mean, invstd, weight, sum_dy, sum_dy_xmu, count)
        for g, h in zip(grads, halves)])
    return out, grad_in, sum(r[2] for r in reduced), sum(r[3] for r in reduced)


@pytest.mark.parametrize("shape,dtype,channels_last", [
    ((6, 3, 4, 5), torch.float32, False), ((6, 3, 4, 5), torch.float32, True),
    ((8, 5), torch.float64, False), ((4, 2, 7), torch.float16, False),
], ids=["nchw", "channels_last", "2d_double", "half"])
def test_sync_batch_norm_ops_equal_batch_norm_on_the_whole_batch(shape, dtype, channels_last):
    """SyncBatchNorm's statistics ops are CUDA kernels in torch: on the npu,
    two ranks' halves must normalise and differentiate as one BatchNorm does
    on the whole batch, and update the running statistics as it does."""
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64) * 3 + 1
    grad_out = torch.randn(shape, dtype=torch.float64)
    channels = shape[1]
    weight = torch.rand(channels, dtype=torch.float64) + 0.5
    bias = torch.randn(channels, dtype=torch.float64)
    cpu_x = x.clone().requires_grad_()
    cpu_w, cpu_b = weight.clone().requires_grad_(), bias.clone().requires_grad_()
    cpu_running = torch.zeros(channels, dtype=torch.float64), torch.ones(channels,
                                                                        dtype=torch.float64)
    expected = nn.functional.batch_norm(cpu_x, *cpu_running, cpu_w, cpu_b, training=True)
    expected.backward(grad_out)

    def npu(t, stat=False):
        t = t.to("npu", torch.float32 if stat and dtype != torch.float64 else dtype)
        return t.contiguous(memory_format=torch.channels_last) if channels_last and not stat else t

    running = npu(torch.zeros(channels), True), npu(torch.ones(channels), True)
    out, grad_in, grad_w, grad_b = _sync_batch_norm_as_two_ranks(
        npu(x), npu(weight, True), npu(bias, True), running, npu(grad_out))
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == torch.float16 else {"rtol": 1e-4,
                                                                       "atol": 1e-4}
    assert out.device.type == grad_in.device.type == "npu"
    assert out.dtype == grad_in.dtype == dtype
    for got, want in ((out, expected), (grad_in, cpu_x.grad), (grad_w, cpu_w.grad),
                      (grad_b, cpu_b.grad), (running[0], cpu_running[0]),
                      (running[1], cpu_running[1])):
        torch.testing.assert_close(got.cpu().double(), want.detach(), **tol)


def test_sync_batch_norm_stats_of_half_inputs_are_float():
    mean, invstd = torch.batch_norm_stats(torch.randn(4, 3, 2).half().to("npu"), 1e-5)
    assert mean.dtype == invstd.dtype == torch.float32 and mean.device.type == "npu"
    reduced = torch.batch_norm_backward_reduce(
        torch.ones(4, 3, 2, device="npu"), torch.ones(4, 3, 2, device="npu"), mean, invstd,
        None, False, False, False)
    assert reduced == (None, None, None, None)  # not asked for, as on CUDA


def test_sync_batch_norm_gather_stats_of_equal_counts():
    # The older op, every rank with the same count: as with the counts given.
    torch.manual_seed(0)
    x = torch.randn(6, 3, 4, device="npu")
    stats = [torch.batch_norm_stats(h, 1e-5) for h in x.chunk(2)]
    mean_all = torch.stack([m for m, _ in stats])
    invstd_all = torch.stack([s for _, s in stats])
    results = []
    for gather, count in ((torch.batch_norm_gather_stats, 12),
                          (torch.batch_norm_gather_stats_with_counts,
                           torch.tensor([12.0, 12.0], device="npu"))):
        running = torch.zeros(3, device="npu"), torch.ones(3, device="npu")
        results.append(gather(x, mean_all, invstd_all, *running, 0.1, 1e-5, count) + running)
    for got, want in zip(*results):
        assert got.device.type == "npu"
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(results[0][0].cpu(), x.cpu().mean((0, 2)))


def test_attention_runs_the_cpus_kernel():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 2, 5, 4).unbind(0)
    mask = torch.rand(5, 5) > 0.3
    # A query that may attend nothing (a padding token's): zeros, not NaN.
    padding = torch.ones(5, 5, dtype=torch.bool).tril()
    padding[:2] = False
    f = nn.functional.scaled_dot_product_attention
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": mask}, {"attn_mask": padding},
                   {"scale": 0.3}):
        on_npu = {a: b.to("npu") if isinstance(b, torch.Tensor) else b
                  for a, b in kwargs.items()}
        qc, qn = q.clone().requires_grad_(), q.to("npu").requires_grad_()
        expected = f(qc, k, v, **kwargs)
        got = f(qn, k.to("npu"), v.to("npu"), **on_npu)
        _same(expected.detach(), got.detach())
        assert not got.isnan().any()
        expected.sum().backward()
        got.sum().backward()
        _same(qc.grad, qn.grad)


def test_an_op_without_a_host_kernel_names_itself_and_the_device():
    x = torch.randn(2, 3, device="npu")
    # A CUDA-only op: PyTorch has no cpu kernel to run it with.
    with pytest.raises(NotImplementedError,
                       match=r"aten::_masked_scale.default is not supported on the virtual NPU "
                             r"\(npu:0\)"):
        torch.ops.aten._masked_scale(x, x > 0, 2.0)


def test_a_result_the_npu_cannot_hold_is_a_clear_error():
    x = torch.ones(3, device="npu")
    with pytest.raises(NotImplementedError,
                       match=r"aten\._to_sparse\.default returns a tensor the virtual NPU "
                             r"\(npu:0\) cannot hold"):
        x.to_sparse()
    assert (x + 1).cpu().tolist() == [2.0, 2.0, 2.0]


def test_errors_in_backward_do_not_crash():
    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("backward failed on purpose")

    x = torch.ones(3, device="npu", requires_grad=True)
    with pytest.raises(ValueError, match="on purpose"):
        Fails.apply(x).sum().backward()
    y = torch.ones(3, device="npu", requires_grad=True)
    with pytest.raises(RuntimeError):
        (y.view(3, 1) @ torch.ones(2, 2, device="npu")).sum().backward()
    code = ("import torch, transfer_to_npu\n"
            "x = torch.ones(3, device='npu:1', requires_grad=True)\n"
            "class F(torch.autograd.Function):\n"
            "    @staticmethod\n"
            "    def forward(ctx, x): return x * 2\n"
            "    @staticmethod\n"
            "    def backward(ctx, g): raise ValueError('no')\n"
            "try:\n"
            "    F.apply(x).sum().backward()\n"
            "except ValueError:\n"
            "    print('raised')\n")
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "raised"


# --- PyTorch's OpInfo database: every op, npu against cpu ---------------------

def _op_db():
    # The database's module imports expecttest, a test helper its samples do
    # not use; a stand-in lets it load where expecttest is not installed.
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            stub = types.ModuleType("expecttest")
            stub.TestCase = unittest.TestCase
            sys.modules["expecttest"] = stub
    # Loaded with the patches off: it deep-copies torch functions.
    transfer_to_npu.disable()
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    finally:
        transfer_to_npu.enable()
    return op_db


# Not comparable: the values are uninitialised memory; the input is moved as
# a compact copy, so a view reaching past it on the cpu has nothing beyond it
# on the npu; the op requires its argument on the cpu (as on CUDA).
_INCOMPARABLE = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                 "new_empty_strided", "as_strided", "tensor_split", "to", "sparse"}


def _to_npu(x):
    return x.to("npu") if isinstance(x, torch.Tensor) and x.layout == torch.strided else x


def _compare(expected, got):
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), type(got)
        assert got.device.type == "npu", got.device
        got = got.cpu()
        assert (expected.shape, expected.dtype) == (got.shape, got.dtype)
        if expected.is_floating_point() or expected.is_complex():
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)
        else:
            assert torch.equal(got, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(got)
        for e, g in zip(expected, got):
            _compare(e, g)
    elif isinstance(expected, float) and expected != expected:
        assert got != got
    else:
        assert expected == got


def _sweep(dtype, every, offset):
    failures = []
    ops = [op for op in _op_db() if op.name.split(".")[0] not in _INCOMPARABLE
           and op.name not in _INCOMPARABLE]
    for op in ops[offset::every]:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        torch.manual_seed(0)  # the same samples whatever ran before
        for sample in list(op.sample_inputs("cpu", dtype, requires_grad=False))[:2]:
            if any(isinstance(t, torch.Tensor) and t.layout != torch.strided
                   for t in (sample.input, *sample.args)):
                continue
            try:
                torch.manual_seed(0)
                expected = op(sample.input, *sample.args, **sample.kwargs)
            except Exception:
                continue  # the cpu refuses it too
            if isinstance(expected, torch.Tensor) and expected.layout != torch.strided:
                continue  # sparse layouts: not on the virtual NPU
            moved = sample.transform(_to_npu)
            if "device" in moved.kwargs:
                moved.kwargs = dict(moved.kwargs, device="npu")
            try:
                torch.manual_seed(0)
                _compare(expected, op(moved.input, *moved.args, **moved.kwargs))
            except Exception as error:  # noqa: BLE001 - reported below
                failures.append(f"{op.name} {op.variant_test_name} {dtype}: "
                                f"{type(error).__name__}: {str(error).splitlines()[0][:160]}")
    return failures


@pytest.mark.parametrize("dtype,every,offset", [
    (torch.float32, 4, 0),   # a quarter of the ops in float32
    (torch.int64, 8, 1),     # and an eighth in each of these
    (torch.bool, 8, 2),
    (torch.complex64, 8, 3),
], ids=["float32", "int64", "bool", "complex64"])
def test_opinfo_ops_equal_cpu(dtype, every, offset):
    failures = _sweep(dtype, every, offset)
    assert not failures, "\n".join(failures)
