"""Mixed precision on the virtual NPU: torch.autocast('npu') casts as CUDA's
autocast does, and GradScaler scales, unscales, skips and updates."""
import re
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from transfer_to_npu.backends import autocast_policy as autocast

LOW = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("low", LOW)
def test_lower_precision_ops_run_in_the_autocast_dtype(low):
    torch.manual_seed(0)
    layer = nn.Linear(8, 4).to("npu")
    x = torch.randn(3, 8, device="npu")
    image = torch.randn(1, 2, 6, 6, device="npu")
    kernel = torch.randn(3, 2, 3, 3, device="npu")
    with torch.autocast("npu", dtype=low):
        y = layer(x)
        outs = [y, x @ x.t(), torch.mm(x, x.t()), torch.bmm(x[None], x.t()[None]),
                F.conv2d(image, kernel), torch.matmul(x, x.t())]
    assert all(o.dtype == low and o.device.type == "npu" for o in outs)
    # Computed as the cpu computes the cast inputs.
    expected = F.linear(x.cpu().to(low), layer.weight.cpu().to(low), layer.bias.cpu().to(low))
    assert torch.equal(y.cpu(), expected)


@pytest.mark.parametrize("low", LOW)
@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
def test_ops_taking_a_list_of_tensors_cast_them(low):
    """einsum, multi_dot and chain_matmul get their operands as a list, as
    CUDA's autocast casts them; mixed operands do not fail."""
    torch.manual_seed(0)
    a, b = torch.randn(4, 8, device="npu"), torch.randn(8, 8, device="npu")
    with torch.autocast("npu", dtype=low):
        outs = [torch.einsum("ij,jk->ik", a, b), torch.einsum("ij,jk->ik", a @ b, b),
                torch.linalg.multi_dot([a, b, b]), torch.chain_matmul(a, b, b)]
    assert [o.dtype for o in outs] == [low] * 4
    expected = torch.einsum("ij,jk->ik", a.cpu().to(low), b.cpu().to(low))
    assert torch.equal(outs[0].cpu(), expected)


@pytest.mark.parametrize("low", LOW)
def test_fp32_ops_stay_float32(low):
    x = torch.randn(4, 8, device="npu")
    with torch.autocast("npu", dtype=low):
        h = x @ x.t()  # low precision
        assert h.dtype == low
        outs = [torch.softmax(h, -1), F.log_softmax(h, -1), h.exp(), h.log1p(), h.sum(),
                F.layer_norm(h, (4,)), F.mse_loss(h, h), torch.norm(h), h.pow(2),
                F.cross_entropy(h, torch.tensor([0, 1, 2, 3], device="npu")), h.cumsum(0)]
        assert [o.dtype for o in outs] == [torch.float32] * len(outs)
        # Outside the lists, ordinary type promotion.
        assert h.relu().dtype == low
        square = x[:, :4]
        assert (h + square).dtype == torch.float32
        # promote: the widest floating type of the inputs.
        assert torch.addcmul(h, h, h).dtype == low
        assert torch.addcmul(square, h, h).dtype == torch.float32
        # An explicit dtype is kept.
        assert h.sum(dtype=torch.float64).dtype == torch.float64


def test_binary_cross_entropy_is_refused_as_on_cuda():
    p = torch.rand(4, device="npu")
    with torch.autocast("npu", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)
        assert F.binary_cross_entropy_with_logits(p, p).dtype == torch.float32


def test_autocast_off_and_outside_changes_nothing():
    x = torch.randn(2, 2, device="npu")
    with torch.autocast("npu", dtype=torch.float16, enabled=False):
        assert (x @ x).dtype == torch.float32
    assert (x @ x).dtype == torch.float32
    with torch.autocast("npu", dtype=torch.float16):
        cpu = torch.randn(2, 2)
        assert (cpu @ cpu).dtype == torch.float32  # autocast('npu') leaves the cpu alone


@pytest.mark.filterwarnings("error:In npu autocast")
def test_float32_autocast_stays_on_and_casts_up():
    """autocast(dtype=torch.float32), which CUDA keeps on (nanoGPT's float32
    setting builds it), runs the ops it lists in float32 whatever their
    inputs, as torch_npu's does."""
    torch.manual_seed(0)
    layer = nn.Linear(4, 4).to("npu")
    x = torch.randn(2, 4, device="npu", dtype=torch.bfloat16)
    with torch.autocast("npu", dtype=torch.float32):
        assert torch.is_autocast_enabled("npu")
        y = layer(x)
    assert y.dtype == torch.float32
    assert torch.equal(y.cpu(), F.linear(x.cpu().float(), layer.weight.cpu(), layer.bias.cpu()))


def test_backward_through_autocast_gives_float32_grads():
    torch.manual_seed(0)
    layer = nn.Linear(8, 8).to("npu")
    x = torch.randn(4, 8, device="npu")
    with torch.autocast("npu", dtype=torch.bfloat16):
        loss = layer(x).float().pow(2).mean()
    loss.backward()
    assert layer.weight.grad.dtype == torch.float32
    assert layer.weight.grad.device.type == "npu"
    assert torch.isfinite(layer.weight.grad).all()


def test_a_weight_used_twice_gets_both_gradients():
    torch.manual_seed(0)
    layer = nn.Linear(4, 4, bias=False).to("npu")
    x = torch.randn(2, 4, device="npu")
    with torch.autocast("npu", dtype=torch.bfloat16):
        loss = layer(layer(x)).float().sum()
    loss.backward()
    with torch.no_grad():
        w = layer.weight.detach().to(torch.bfloat16).requires_grad_()
    expected = (x.to(torch.bfloat16) @ w.t() @ w.t()).float().sum()
    expected.backward()
    # Each use is cast afresh, so the two bfloat16 gradients are summed in
    # float32: equal to bfloat16 precision.
    assert torch.allclose(layer.weight.grad.cpu(), w.grad.float().cpu(), rtol=1e-2, atol=1e-2)


_POLICIES = {"AT_FORALL_LOWER_PRECISION_FP": autocast.LOWER_PRECISION_FP,
             "AT_FORALL_FP32": autocast.FP32,
             "AT_FORALL_FP32_SET_OPT_DTYPE": autocast.FP32_SET_OPT_DTYPE,
             "AT_FORALL_PROMOTE": autocast.PROMOTE}


def test_npu_autocasts_the_ops_cuda_autocasts():
    """What the npu casts is what this torch's CUDA autocast casts: an op
    has an npu autocast kernel exactly when it has a CUDA one (rms_norm
    became an fp32 op in torch 2.12: before it, CUDA keeps its dtype), and
    every op CUDA autocasts has a policy here (but cuDNN's own, which the
    npu has no kernel of)."""
    torch.ones(1, device="npu")  # the kernels are registered at the first npu tensor
    cuda = autocast.cuda_autocast_ops()
    named = set(autocast.FP32_APPEND_DTYPE).union(autocast.BANNED, *_POLICIES.values())
    assert {op for op in cuda if "cudnn" not in op} <= named
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for op in named:
        try:
            npu_casts = has(f"aten::{op}", "AutocastPrivateUse1")
        except RuntimeError:  # no such op in this torch
            npu_casts = False
        assert npu_casts == (op in cuda), op
    x = torch.randn(2, 8, device="npu").to(torch.bfloat16)
    with torch.autocast("npu", dtype=torch.bfloat16):
        y = F.rms_norm(x, (8,))
    assert y.dtype == (torch.float32 if "rms_norm" in cuda else torch.bfloat16)


def test_casting_lists_equal_atens():
    """Each op's policy is ATen's own for CUDA (ATen/autocast_mode.h of the
    torch that runs), for the ops this torch autocasts."""
    header = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
    if not header.exists():
        pytest.skip("torch's headers are not installed")
    text = header.read_text()
    cuda = autocast.cuda_autocast_ops()

    def listed(macro):
        body = re.search(rf"#define {macro}\(_\)(.*?)\n\n", text, re.S).group(1)
        entries = re.findall(r"_\(([^)]*)\)", body)
        return {".".join(p.strip() for p in m.split(",")) for m in entries}

    lists = {macro: listed(macro) for macro in _POLICIES}
    in_lists = set().union(*lists.values())
    for macro, ops in _POLICIES.items():
        # (What CUDA registers outside these lists, 2.14's
        # linalg_matrix_sqrth, has the policy its kernel casts with.)
        assert set(ops) & in_lists & cuda == lists[macro], macro
    appended = set(re.findall(r'"(norm\.[A-Za-z_]+)"', text))
    assert set(autocast.FP32_APPEND_DTYPE) & cuda == appended


def test_npu_amp_module():
    from torch.npu.amp import GradScaler, autocast

    assert torch.npu.amp.autocast is autocast
    layer = nn.Linear(2, 2).to("npu")
    with autocast(dtype=torch.bfloat16):
        assert layer(torch.ones(1, 2, device="npu")).dtype == torch.bfloat16
    assert GradScaler().get_scale() == 2.0 ** 16


def _scaled_run(scaler, device, grads_to_poison=(), steps=3):
    torch.manual_seed(0)
    model = nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4).to(device)
    scales, weights = [], []
    for i in range(steps):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        scaler.scale(loss).backward()
        if i in grads_to_poison:
            model.weight.grad[0, 0] = float("inf") if i % 2 else float("nan")
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(model.weight.detach().cpu().clone())
    return scales, weights


@pytest.mark.parametrize("make", [lambda: torch.amp.GradScaler("npu", growth_interval=1),
                                  lambda: torch.npu.amp.GradScaler(growth_interval=1)])
def test_grad_scaler_scales_skips_and_updates(make):
    scales, weights = _scaled_run(make(), "npu", grads_to_poison=(1, 2), steps=4)
    init = 2.0 ** 16
    # Step 0 is finite: the scale grows; steps 1 (nan) and 2 (inf) are
    # skipped and halve it; step 3 grows it again.
    assert scales == [init * 2, init, init / 2, init]
    assert torch.equal(weights[1], weights[0]) and torch.equal(weights[2], weights[0])
    assert not torch.equal(weights[3], weights[2])


def test_grad_scaler_on_npu_equals_cpu():
    npu = _scaled_run(torch.amp.GradScaler("npu", growth_interval=2), "npu", (1,), steps=5)
    cpu = _scaled_run(torch.amp.GradScaler("cpu", growth_interval=2), "cpu", (1,), steps=5)
    assert npu[0] == cpu[0]
    assert all(torch.equal(a, b) for a, b in zip(npu[1], cpu[1]))


def test_grad_scaler_unscale_gives_true_gradients():
    torch.manual_seed(0)
    model = nn.Linear(3, 1).to("npu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 3, device="npu")
    model(x).sum().backward()
    expected = model.weight.grad.clone()
    opt.zero_grad()
    scaler = torch.amp.GradScaler("npu", init_scale=1024.0)
    scaler.scale(model(x).sum()).backward()
    assert torch.allclose(model.weight.grad, expected * 1024)
    scaler.unscale_(opt)
    assert torch.allclose(model.weight.grad, expected)
