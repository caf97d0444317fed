"""CUDA-only packages served on the NPU while migrating: flash_attn's and
xformers' attention equal the reference attention, an apex O1 script with
FusedAdam and FusedLayerNorm trains, what has no counterpart fails naming
what to use, and a CUDA C++ extension fails listing its kernels."""
import json
import textwrap
from pathlib import Path

import pytest
import torch

import transfer_to_npu
from conftest import calls, npu, run_python

STAND_INS = Path(__file__).resolve().parent / "stand_ins"


def _reference(q, k, v, scale=None, keep=None, bias=None, softcap=0.0):
    """(B, S, H, D) attention written out, as flash_attn defines it; keep:
    (Sq, Sk) what each query sees."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if k.size(1) != q.size(1):
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
        v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
    scale = q.size(-1) ** -0.5 if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2)


def _inputs(b, sq, sk, hq, hk, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    cpu = [torch.randn(b, s, h, d, generator=g) for s, h in ((sq, hq), (sk, hk), (sk, hk))]
    return cpu, [t.npu().requires_grad_() for t in cpu], [t.clone().requires_grad_() for t in cpu]


def _same(out, ref, npu_inputs, cpu_inputs):
    assert out.device.type == "npu"
    torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
    g = torch.randn(ref.shape, generator=torch.Generator().manual_seed(9))
    out.backward(g.npu())
    ref.backward(g)
    for n, c in zip(npu_inputs, cpu_inputs):
        torch.testing.assert_close(n.grad.cpu(), c.grad, atol=1e-5, rtol=1e-5)


def _band(sq, sk, left, right):
    """flash_attn's window, aligned at the bottom right."""
    i = torch.arange(sq).unsqueeze(1) + sk - sq
    j = torch.arange(sk).unsqueeze(0)
    keep = torch.ones(sq, sk, dtype=torch.bool)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    return keep


@pytest.mark.parametrize("causal,window,sq,sk", [
    (False, (-1, -1), 5, 5), (True, (-1, -1), 5, 5), (True, (-1, -1), 3, 6),
    (False, (2, 1), 6, 6), (True, (2, -1), 6, 6)])
def test_flash_attn_func_equals_reference(migrated, causal, window, sq, sk):
    from flash_attn import flash_attn_func

    _, n, c = _inputs(2, sq, sk, 4, 2, 8)  # grouped-query attention
    before = calls("flash_attn.flash_attn_func")
    out = flash_attn_func(*n, softmax_scale=0.3, causal=causal, window_size=window)
    keep = _band(sq, sk, window[0], 0 if causal else window[1])
    _same(out, _reference(*c, 0.3, keep), n, c)
    assert calls("flash_attn.flash_attn_func") == before + 1


def test_flash_attn_softcap_alibi_lse_and_dropout(migrated):
    from flash_attn import flash_attn_func

    _, n, c = _inputs(1, 4, 4, 2, 2, 8)
    slopes = torch.tensor([0.5, 0.25])
    distance = (torch.arange(4).unsqueeze(1) - torch.arange(4).unsqueeze(0)).abs().float()
    out, lse, _ = flash_attn_func(*n, causal=True, softcap=5.0, alibi_slopes=slopes.npu(),
                                  return_attn_probs=True)
    bias = -slopes[:, None, None] * distance
    _same(out, _reference(*c, None, _band(4, 4, -1, 0), bias, softcap=5.0), n, c)
    assert lse.shape == (1, 2, 4) and lse.dtype == torch.float32
    # Dropout: the same seed gives the same output, and not the undropped one.
    torch.manual_seed(1)
    a = flash_attn_func(*n, dropout_p=0.5)
    torch.manual_seed(1)
    b = flash_attn_func(*n, dropout_p=0.5)
    assert torch.equal(a, b) and not torch.allclose(a, flash_attn_func(*n))


def test_flash_attn_varlen_and_packed_equal_reference(migrated):
    from flash_attn import (flash_attn_kvpacked_func, flash_attn_qkvpacked_func,
                            flash_attn_varlen_func, flash_attn_varlen_qkvpacked_func)
    from flash_attn.bert_padding import pad_input, unpad_input

    # Two sequences of 3 and 5 tokens, packed.
    lens = [3, 5]
    g = torch.Generator().manual_seed(0)
    cpu = [torch.randn(8, 4, 8, generator=g) for _ in range(3)]
    n = [t.npu().requires_grad_() for t in cpu]
    c = [t.clone().requires_grad_() for t in cpu]
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    out = flash_attn_varlen_func(*n, cu.npu(), cu.npu(), 5, 5, causal=True)
    ref = torch.cat([_reference(*(t[a:b].unsqueeze(0) for t in c), None,
                                _band(b - a, b - a, -1, 0))[0]
                     for a, b in ((0, 3), (3, 8))])
    _same(out, ref, n, c)
    packed = flash_attn_varlen_qkvpacked_func(torch.stack([t.detach() for t in n], dim=1),
                                              cu.npu(), 5, causal=True)
    torch.testing.assert_close(packed.cpu(), ref.detach(), atol=1e-5, rtol=1e-5)

    _, n2, c2 = _inputs(2, 5, 5, 4, 4, 8, seed=3)
    qkv = torch.stack([t.detach() for t in n2], dim=2)
    ref2 = _reference(*(t.detach() for t in c2), None, _band(5, 5, -1, 0))
    torch.testing.assert_close(flash_attn_qkvpacked_func(qkv, causal=True).cpu(), ref2,
                               atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        flash_attn_kvpacked_func(n2[0].detach(), qkv[:, :, 1:], causal=True).cpu(), ref2,
        atol=1e-5, rtol=1e-5)

    # bert_padding: unpad a padded batch and pad it back.
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], device="npu")
    hidden = torch.randn(2, 5, 6, device="npu")
    unpadded, indices, cu_seqlens, max_len, _ = unpad_input(hidden, mask)
    assert unpadded.shape == (8, 6) and cu_seqlens.tolist() == [0, 3, 8] and max_len == 5
    torch.testing.assert_close(pad_input(unpadded, indices, 2, 5), hidden * mask[..., None])
    assert lens == [3, 5]


def test_xformers_memory_efficient_attention_equals_reference(migrated):
    import xformers.ops as xops
    from xformers.ops import fmha

    _, n, c = _inputs(2, 4, 6, 2, 2, 8)
    out = xops.memory_efficient_attention(*n, attn_bias=xops.LowerTriangularMask())
    top_left = torch.ones(4, 6, dtype=torch.bool).tril()
    _same(out, _reference(*c, None, top_left), n, c)

    _, n, c = _inputs(2, 4, 6, 2, 2, 8, seed=1)
    bottom_right = fmha.attn_bias.LowerTriangularFromBottomRightMask()
    out = xops.memory_efficient_attention(*n, attn_bias=bottom_right, scale=0.2)
    _same(out, _reference(*c, 0.2, _band(4, 6, -1, 0)), n, c)

    _, n, c = _inputs(1, 5, 5, 2, 2, 4, seed=2)
    bias = torch.randn(1, 2, 5, 5)
    out = xops.memory_efficient_attention(*n, attn_bias=xops.LowerTriangularMask().add_bias(
        bias.npu()))
    _same(out, _reference(*c, None, _band(5, 5, -1, 0), bias), n, c)

    # Packed sequences (batch 1): a block diagonal, causal within each block.
    _, n, c = _inputs(1, 7, 7, 2, 2, 4, seed=3)
    mask = fmha.BlockDiagonalMask.from_seqlens([3, 4]).make_causal()
    keep = torch.zeros(7, 7, dtype=torch.bool)
    keep[:3, :3] = torch.ones(3, 3, dtype=torch.bool).tril()
    keep[3:, 3:] = torch.ones(4, 4, dtype=torch.bool).tril()
    _same(xops.memory_efficient_attention(*n, attn_bias=mask), _reference(*c, None, keep), n, c)
    assert calls("xformers.ops.memory_efficient_attention") >= 4


def test_xformers_bmk_and_bmghk_are_bmhk_folded(migrated):
    """(batch, seq, dim) is one head, (batch, seq, groups, heads, dim) the
    groups' heads side by side; the result has the query's layout."""
    import xformers.ops as xops

    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 5, 2, 3, 8, generator=g).npu() for _ in range(3))
    causal = xops.LowerTriangularMask()
    five = xops.memory_efficient_attention(q, k, v, attn_bias=causal)
    four = xops.memory_efficient_attention(*(t.reshape(2, 5, 6, 8) for t in (q, k, v)),
                                           attn_bias=causal)
    assert five.shape == (2, 5, 2, 3, 8) and four.shape == (2, 5, 6, 8)
    torch.testing.assert_close(five.reshape(2, 5, 6, 8), four)
    three = xops.memory_efficient_attention(q[:, :, 0, 0], k[:, :, 0, 0], v[:, :, 0, 0],
                                            attn_bias=causal)
    assert three.shape == (2, 5, 8)
    torch.testing.assert_close(three, four[:, :, 0])


def test_attention_rows_name_torchs_attention(migrated):
    rows = {m["source"]: m["target"] for m in transfer_to_npu.mappings()}
    for source in ("flash_attn.flash_attn_func", "flash_attn.flash_attn_varlen_func",
                   "xformers.ops.memory_efficient_attention"):
        assert rows[source] == "torch.nn.functional.scaled_dot_product_attention"


# --- apex ----------------------------------------------------------------

APEX_SCRIPT = textwrap.dedent("""
    # An apex training script, as written for CUDA.
    import sys
    import torch
    from apex import amp
    from apex.normalization import FusedLayerNorm
    from apex.optimizers import FusedAdam

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), FusedLayerNorm(32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).cuda()
    optimizer = FusedAdam(model.parameters(), lr=1e-2)
    model, optimizer = amp.initialize(model, optimizer, opt_level=sys.argv[1])
    x = torch.randn(64, 16).cuda()
    y = (x[:, :4] > 0).float().cuda()
    for step in range(30):
        out = model(x)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(out.float(), y)
        optimizer.zero_grad()
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == 29:
            print("step", step, "loss", loss.item(), out.dtype, out.device)
""")


# What the model's forward gives: O1 runs it under autocast; O2 casts its
# outputs to float32.
@pytest.mark.parametrize("opt_level, out_dtype", [("O1", "torch.float16"),
                                                  ("O2", "torch.float32")])
def test_apex_script_trains(tmp_path, opt_level, out_dtype):
    script = tmp_path / "apex_train.py"
    script.write_text(APEX_SCRIPT)
    report = tmp_path / "report.json"
    proc = run_python(["-m", "transfer_to_npu", "--report", str(report), str(script),
                       opt_level], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    lines = [line.split() for line in proc.stdout.splitlines() if line.startswith("step")]
    assert all(line[4:] == [out_dtype, "npu:0"] for line in lines)
    assert float(lines[-1][3]) < 0.5 * float(lines[0][3])
    used = {m["source"]: m["count"] for m in json.loads(report.read_text())["mappings"]}
    assert used["apex.amp.scale_loss"] == 30
    assert used["apex.optimizers.FusedAdam"] == used["apex.normalization.FusedLayerNorm"] == 1


def test_apex_loss_scaler_skips_an_overflowing_step(migrated):
    from apex import amp
    from apex.optimizers import FusedSGD

    model = torch.nn.Linear(2, 1).npu()
    opt = FusedSGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1")
    scale = amp.state_dict()["loss_scaler0"]["loss_scale"]
    weight = model.weight.detach().clone()
    loss = model(torch.ones(1, 2, device="npu")).float().sum() * float("inf")
    with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()
    opt.step()  # skipped: the gradients overflowed
    assert torch.equal(model.weight.detach(), weight)
    assert amp.state_dict()["loss_scaler0"]["loss_scale"] == scale / 2
    loss = model(torch.ones(1, 2, device="npu")).float().sum()
    opt.zero_grad()
    with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()
    opt.step()
    torch.testing.assert_close(model.weight.detach().cpu(), weight.cpu() - 0.1)
    with pytest.raises(RuntimeError, match="amp.initialize once"):
        amp.initialize(model, opt, opt_level="O1")
    with pytest.raises(RuntimeError, match="SGD was not passed through amp.initialize"):
        with amp.scale_loss(loss, torch.optim.SGD(model.parameters(), lr=0.1)):
            pass


def _convnet(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 2)).npu()


def _half_but_batch_norm(model):
    """What apex's O2 makes of a model, by hand."""
    for module in model.modules():
        if not isinstance(module, torch.nn.BatchNorm2d):
            module.to(torch.float16) if not list(module.children()) else None
    return model


def test_apex_o2_updates_float32_masters_of_a_float16_model(migrated):
    from apex import amp

    model = _convnet(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O2")
    assert [p.dtype for p in model.parameters()] == [torch.float16] * 2 + [torch.float32] * 2 + [
        torch.float16] * 2  # the batch norm stays float32
    masters = list(amp.master_params(opt))
    assert all(m.dtype == torch.float32 and m.device.type == "npu" for m in masters)
    weights = [m.detach().clone() for m in masters]
    x, y = torch.randn(5, 3, 6, 6, device="cuda"), torch.tensor([0, 1, 1, 0, 1], device="cuda")
    out = model(x)  # float32 in, float16 inside, float32 out
    assert out.dtype == torch.float32
    with amp.scale_loss(torch.nn.functional.cross_entropy(out, y), opt) as scaled:
        scaled.backward()

    # The same step by hand: the float16 model, its loss unscaled.
    reference = _half_but_batch_norm(_convnet(0))
    loss = torch.nn.functional.cross_entropy(reference(x.half()).float(), y)
    loss.backward()
    for master, ref in zip(masters, reference.parameters()):
        torch.testing.assert_close(master.grad, ref.grad.float(), rtol=1e-2, atol=1e-3)
    grads = [m.grad.clone() for m in masters]
    opt.step()
    for param, master, weight, grad in zip(model.parameters(), masters, weights, grads):
        torch.testing.assert_close(master, weight - 0.1 * grad)
        assert torch.equal(param, master.to(param.dtype))
        # A master's gradient is dropped at the step; a float32
        # parameter's own is zero_grad's to clear.
        assert (master.grad is None) == (param.dtype == torch.float16)
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_apex_o2_skips_an_overflowing_step(migrated):
    from apex import amp

    model, opt = amp.initialize(*(lambda m: (m, torch.optim.SGD(m.parameters(), lr=0.1)))(
        _convnet(1)), opt_level="O2")
    before = [p.detach().clone() for p in (*model.parameters(), *amp.master_params(opt))]
    x = torch.randn(2, 3, 6, 6, device="cuda")
    with amp.scale_loss(model(x).sum() * float("inf"), opt) as scaled:
        scaled.backward()
    opt.step()
    after = [p.detach() for p in (*model.parameters(), *amp.master_params(opt))]
    assert all(torch.equal(a, b) for a, b in zip(after, before))
    assert amp.state_dict()["loss_scaler0"]["loss_scale"] == 2.0 ** 15
    batch_norm = {id(p) for p in model[1].parameters()}  # float32, no masters
    assert all(m.grad is None for m in amp.master_params(opt) if id(m) not in batch_norm)


@pytest.mark.parametrize("delay_unscale", [False, True])
@pytest.mark.parametrize("opt_level", ["O1", "O2"])
def test_apex_accumulates_gradients_over_losses(migrated, opt_level, delay_unscale):
    """Two losses' backwards before a step, each in its scale_loss: the
    gradients are the sum of the two, unscaled, with or without
    delay_unscale on the first (a static scale: no overflow to skip)."""
    from apex import amp

    model = _convnet(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level=opt_level, loss_scale=128.0)
    batches = [torch.randn(3, 3, 6, 6, device="cuda") for _ in range(2)]
    for i, x in enumerate(batches):
        with amp.scale_loss(model(x).float().pow(2).mean(), opt,
                            delay_unscale=delay_unscale and i == 0) as scaled:
            scaled.backward()
    reference = _convnet(2)
    if opt_level == "O2":
        reference = _half_but_batch_norm(reference)
    for x in batches:
        with torch.autocast("cuda", dtype=torch.float16, enabled=opt_level == "O1"):
            out = reference(x.half() if opt_level == "O2" else x)
        out.float().pow(2).mean().backward()
    for mine, ref in zip(amp.master_params(opt), reference.parameters()):
        torch.testing.assert_close(mine.grad, ref.grad.float(), rtol=1e-2, atol=1e-3)


def test_apex_o3_is_float16_throughout(migrated):
    from apex import amp

    model = _convnet(3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O3", keep_batchnorm_fp32="True")
    assert {p.dtype for p in model[1].parameters()} == {torch.float32}
    model, opt = amp.initialize(*(lambda m: (m, torch.optim.SGD(m.parameters(), lr=0.1)))(
        _convnet(3)), opt_level="O3")
    assert {p.dtype for p in model.parameters()} == {torch.float16}
    assert list(amp.master_params(opt)) == list(model.parameters())
    weight = model[0].weight.detach().clone()
    with amp.scale_loss(model(torch.randn(2, 3, 6, 6, device="cuda")).sum(), opt) as scaled:
        assert scaled.dtype == torch.float32
        scaled.backward()
    opt.step()
    assert not torch.equal(model[0].weight, weight)
    assert model[0].weight.dtype == torch.float16


@pytest.mark.parametrize("decoupled_in_torch", [True, False])
def test_fused_adam_is_adamw_with_its_hooks_run_once(migrated, monkeypatch, decoupled_in_torch):
    """apex's default FusedAdam is AdamW; a step hook registered on it runs
    once a step, as on any torch optimizer, also where AdamW's decay is
    applied before Adam's step (torch before 2.6, no decoupled decay in
    Adam)."""
    from apex.optimizers import FusedAdam

    from transfer_to_npu.served import _optimizers

    monkeypatch.setattr(_optimizers, "_DECOUPLED", decoupled_in_torch)
    # A plain Adam made in the process: torch has then hooked Adam.step too.
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    w0 = torch.randn(5, generator=torch.Generator().manual_seed(0))
    grads = [torch.randn(5, generator=torch.Generator().manual_seed(i)) for i in (1, 2, 3)]
    mine, theirs = torch.nn.Parameter(w0.npu()), torch.nn.Parameter(w0.clone())
    opt = FusedAdam([mine], lr=0.1, weight_decay=0.1)
    reference = torch.optim.AdamW([theirs], lr=0.1, weight_decay=0.1)
    seen = []
    opt.register_step_pre_hook(lambda *_: seen.append("pre"))
    opt.register_step_post_hook(lambda *_: seen.append("post"))
    for grad in grads:
        mine.grad, theirs.grad = grad.npu(), grad.clone()
        opt.step()
        reference.step()
    assert seen == ["pre", "post"] * len(grads)
    torch.testing.assert_close(mine.detach().cpu(), theirs.detach())


def test_fused_lamb_and_norms(migrated):
    from apex.normalization import FusedRMSNorm
    from apex.optimizers import FusedLAMB

    norm = FusedRMSNorm(8, eps=1e-5).npu()
    x = torch.randn(3, 8)
    torch.testing.assert_close(norm(x.npu()).detach().cpu(),
                               x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
    # One LAMB step by hand: moments, bias correction, decoupled decay, and
    # the trust ratio ||w|| / ||update||.
    w0 = torch.randn(6, generator=torch.Generator().manual_seed(0))
    grad = torch.randn(6, generator=torch.Generator().manual_seed(1)) * 0.1
    p = torch.nn.Parameter(w0.npu())
    opt = FusedLAMB([p], lr=0.1, weight_decay=0.01, max_grad_norm=1.0)
    p.grad = grad.npu()
    opt.step()
    m, v = 0.1 * grad, 0.001 * grad * grad
    update = (m / 0.1) / ((v / 0.001).sqrt() + 1e-6) + 0.01 * w0
    expected = w0 - 0.1 * (w0.norm() / update.norm()) * update
    torch.testing.assert_close(p.detach().cpu(), expected)


def test_apex_without_counterpart_fails_naming_the_alternative(migrated):
    with pytest.raises(ModuleNotFoundError, match=r"apex\.contrib .*torch\.optim"):
        import apex.contrib.xentropy  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match="amp_C is a CUDA extension of apex"):
        import amp_C  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match=r"flash_attn\.ops\.rms_norm .*rotary"):
        import flash_attn.ops.rms_norm  # noqa: F401


def test_apex_parallel(migrated):
    from apex.parallel import DistributedDataParallel, convert_syncbn_model

    model = convert_syncbn_model(torch.nn.Sequential(torch.nn.BatchNorm1d(3)))
    assert isinstance(model[0], torch.nn.SyncBatchNorm)

    class MyDDP(DistributedDataParallel):  # a subclass, as training code makes
        pass

    assert issubclass(MyDDP, torch.nn.parallel.DistributedDataParallel)


# --- CUDA C++ extensions ----------------------------------------------------

CUDA_SOURCE = """
#include <cuda_runtime.h>
__global__ void add_kernel(const float* a, float* b, int n) { }
template <typename T>
__global__ void __launch_bounds__(256) scale_kernel(T* x, T s, int n) { }
__device__ float helper(float x) { return x; }
"""


def test_cuda_extension_fails_listing_its_kernels(migrated, tmp_path):
    from torch.utils import cpp_extension

    from transfer_to_npu._rules.cuda_extensions import CUDAExtensionError

    source = tmp_path / "kernels.cu"
    source.write_text(CUDA_SOURCE)
    with pytest.raises(CUDAExtensionError,
                       match=r"load\('my_ext'\).*Ascend port.*add_kernel \(kernels\.cu\), "
                             r"scale_kernel \(kernels\.cu\)$"):
        cpp_extension.load("my_ext", [str(tmp_path / "binding.cpp"), str(source)])
    with pytest.raises(CUDAExtensionError, match=r"add_kernel \(cuda_sources\)"):
        cpp_extension.load_inline("inline_ext", cpp_sources="", cuda_sources=CUDA_SOURCE)
    with pytest.raises(CUDAExtensionError, match="CUDAExtension"):
        cpp_extension.CUDAExtension("ext", [str(source)])
    assert calls("torch.utils.cpp_extension.load") >= 1


def test_cuda_extensions_in_the_report(tmp_path):
    (tmp_path / "k.cu").write_text(CUDA_SOURCE)
    script = tmp_path / "build_ext.py"
    script.write_text(textwrap.dedent(f"""
        import torch
        from torch.utils.cpp_extension import load
        try:
            load("fused_ops", [{str(tmp_path / "k.cu")!r}])
        except NotImplementedError as exc:
            print("refused")
    """))
    report = tmp_path / "report.json"
    proc = run_python(["-m", "transfer_to_npu", "--report", str(report), str(script)],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert "refused" in proc.stdout
    [ext] = json.loads(report.read_text())["cuda_extensions"]
    assert ext["extension"] == "fused_ops" and ext["site"] == f"{script}:5"
    assert [k["kernel"] for k in ext["kernels"]] == ["add_kernel", "scale_kernel"]


def test_served_packages_are_torchs_device(migrated):
    """The served modules exist only while migrating, as torch_npu does."""
    import flash_attn  # noqa: F401

    transfer_to_npu.disable()
    try:
        with pytest.raises(ModuleNotFoundError):
            import flash_attn  # noqa: F401,F811
    finally:
        transfer_to_npu.enable()
    import flash_attn  # noqa: F401,F811
    assert npu().type == "npu"


def test_served_packages_have_distribution_metadata(migrated):
    """importlib.metadata knows the served packages while migrating (as
    libraries check them), at the version of the interface served."""
    import importlib.metadata as metadata

    import apex
    import flash_attn
    import xformers

    for name, module in (("flash_attn", flash_attn), ("flash-attn", flash_attn),
                         ("xformers", xformers), ("apex", apex)):
        assert metadata.version(name) == module.__version__
    assert metadata.metadata("apex")["Name"] == "apex"
    assert metadata.packages_distributions()["flash_attn"] == ["flash_attn"]
    transfer_to_npu.disable()
    try:
        with pytest.raises(metadata.PackageNotFoundError):
            metadata.version("flash_attn")
    finally:
        transfer_to_npu.enable()


def test_installed_apex_served_only_in_place_of_nvidias(tmp_path):
    """NVIDIA's apex (a package with apex.amp) is served on the NPU; a
    package of the same name that is another project is left alone."""
    nvidia, other = tmp_path / "nvidia", tmp_path / "other"
    (nvidia / "apex" / "amp").mkdir(parents=True)
    (nvidia / "apex" / "__init__.py").write_text("raise ImportError('needs amp_C')\n")
    (nvidia / "apex" / "amp" / "__init__.py").write_text("")
    (other / "apex").mkdir(parents=True)
    (other / "apex" / "__init__.py").write_text("OTHER = True\n")
    code = "import transfer_to_npu, apex; print(getattr(apex, 'OTHER', False), apex.__name__)"
    for path, expected in ((nvidia, ["False", "transfer_to_npu.served.apex"]),
                           (other, ["True", "apex"])):
        proc = run_python(["-c", code], env={"PYTHONPATH": str(path),
                                             "TRANSFER_TO_NPU_BACKEND": "virtual"})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == expected


def test_attention_on_torch_npu_calls_npu_fusion_attention():
    """With Ascend's torch_npu (the test stand-in, whose
    npu_fusion_attention is the reference math), flash_attn's and xformers'
    attention are npu_fusion_attention's: its mask (what to drop), its
    position bias (added before scaling) and its layout, as they give it."""
    code = textwrap.dedent("""
        import torch, transfer_to_npu
        from flash_attn import flash_attn_func
        import xformers.ops as xops
        assert transfer_to_npu.backend == "torch_npu"
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 5, 4, 8, generator=g) for _ in range(3))
        slopes = torch.tensor([0.5, 0.25, 0.125, 0.1])
        def reference(keep, bias=None):
            s = (q.transpose(1, 2) @ k.transpose(1, 2).transpose(-2, -1)) * 0.3
            s = s if bias is None else s + bias
            s = s.masked_fill(~keep, float("-inf"))
            return (torch.softmax(s, -1) @ v.transpose(1, 2)).transpose(1, 2)
        i, j = torch.arange(5).unsqueeze(1), torch.arange(5).unsqueeze(0)
        out = flash_attn_func(q.npu(), k.npu(), v.npu(), softmax_scale=0.3, causal=True,
                              window_size=(2, -1), alibi_slopes=slopes.npu())
        ref = reference((j <= i) & (j >= i - 2), -slopes[:, None, None] * (i - j).abs())
        torch.testing.assert_close(out.cpu(), ref, atol=1e-5, rtol=1e-5)
        out = xops.memory_efficient_attention(q.npu(), k.npu(), v.npu(), scale=0.3,
                                              attn_bias=xops.LowerTriangularMask())
        torch.testing.assert_close(out.cpu(), reference(j <= i), atol=1e-5, rtol=1e-5)
        print("ok")
    """)
    proc = run_python(["-c", code], env={"PYTHONPATH": str(STAND_INS),
                                         "TRANSFER_TO_NPU_BACKEND": "torch_npu"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ok"]
