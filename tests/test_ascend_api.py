"""Code written for Ascend on the virtual NPU: ``import torch_npu`` gives
the virtual NPU as torch_npu's API while migrating (and only then, and
never in place of an installed torch_npu), its fused operators equal
their reference math forward and backward, and a script written for
Ascend trains."""
import json
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import transfer_to_npu
from conftest import EXAMPLES, calls, npu, run_python

STAND_INS = Path(__file__).resolve().parent / "stand_ins"


def test_torch_npu_exists_only_while_migrating():
    code = textwrap.dedent("""
        import importlib.util, sys
        assert importlib.util.find_spec("torch_npu") is None
        import transfer_to_npu, torch
        assert importlib.util.find_spec("torch_npu") is not None
        import torch_npu
        from torch_npu.contrib import transfer_to_npu as one_liner
        assert torch_npu.npu is torch.npu
        assert torch.ones(2).npu().device.type == "npu"
        transfer_to_npu.disable()
        assert "torch_npu" not in sys.modules
        try:
            import torch_npu
        except ModuleNotFoundError as exc:
            print("refused:", exc)
        transfer_to_npu.enable()
        import torch_npu
        print("again:", torch_npu.npu is torch.npu)
    """)
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert "refused: No module named 'torch_npu'" in proc.stdout
    assert "again: True" in proc.stdout


def test_installed_torch_npu_is_never_shadowed():
    """An importable torch_npu (here the test stand-in) is the one
    `import torch_npu` gives, even on the virtual NPU."""
    code = ("import transfer_to_npu, torch_npu; "
            "print(transfer_to_npu.backend, getattr(torch_npu, 'STAND_IN', False))")
    proc = run_python(["-c", code], env={"PYTHONPATH": str(STAND_INS),
                                         "TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["virtual", "True"]


def test_other_torch_npu_modules_are_refused_by_name(migrated):
    import torch_npu

    with pytest.raises(ModuleNotFoundError, match=r"torch_npu\.dynamo .*Ascend's torch_npu"):
        import torch_npu.dynamo  # noqa: F401
    with pytest.raises(AttributeError, match="npu_ffn"):
        torch_npu.npu_ffn


def test_ascend_settings_are_accepted_and_checked(migrated):
    """What Ascend's scripts set at their start: on the virtual NPU, which
    has no graph compiler and one format, accepted and checked."""
    import torch_npu

    torch_npu.npu.set_compile_mode(jit_compile=False)
    torch.npu.config.allow_internal_format = False
    torch.npu.matmul.allow_hf32 = True
    assert torch.npu.matmul.allow_hf32 is True and torch.npu.conv.allow_hf32 is True
    torch.npu.matmul.allow_hf32 = False
    with pytest.raises(TypeError, match="jit_compile='no' must be a bool"):
        torch.npu.set_compile_mode(jit_compile="no")
    with pytest.raises(AttributeError, match="torch.npu.config has no setting 'allow_tf32'"):
        torch.npu.config.allow_tf32 = True


def test_ascend_script_trains_on_the_virtual_npu(tmp_path):
    """examples/ascend_train.py: `import torch_npu`, `.npu()`, torch_npu's
    AMP and fused operators, Ascend's one-liner; run unedited."""
    report = tmp_path / "report.json"
    proc = run_python(["-m", "transfer_to_npu", "--report", str(report),
                       str(EXAMPLES / "ascend_train.py"), "12"],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    losses = [float(line.split()[3]) for line in proc.stdout.splitlines()
              if line.startswith("step")]
    assert all(line.endswith("on npu:0") for line in proc.stdout.splitlines()
               if line.startswith("step"))
    assert losses[-1] < 0.5 * losses[0]
    used = {m["source"]: m["count"] for m in json.loads(report.read_text())["mappings"]}
    steps = 12
    assert used["torch_npu.npu_fusion_attention"] == 2 * steps
    assert used["torch_npu.npu_rms_norm"] == 4 * steps
    assert used["torch_npu.npu_swiglu"] == 2 * steps


# --- the fused operators against their reference math ----------------------

def _pair(*shape, dtype=torch.float32, seed=0):
    """The same random leaf tensor on the cpu and on the npu."""
    g = torch.Generator().manual_seed(seed)
    cpu = torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)
    return cpu.clone().requires_grad_(), cpu.to("npu").requires_grad_()


def _check(fn_npu, fn_ref, inputs, atol=1e-5, rtol=1e-5):
    """Forward and backward of fn_npu on npu inputs equal fn_ref's on the
    cpu ones."""
    out_ref = fn_ref(*[c for c, _ in inputs])
    out = fn_npu(*[n for _, n in inputs])
    assert out.device.type == "npu"
    torch.testing.assert_close(out.cpu(), out_ref, atol=atol, rtol=rtol)
    g = torch.randn(out_ref.shape, generator=torch.Generator().manual_seed(7)).to(out_ref.dtype)
    out_ref.backward(g)
    out.backward(g.npu())
    for c, n in inputs:
        torch.testing.assert_close(n.grad.cpu(), c.grad, atol=atol, rtol=rtol)


def test_npu_rms_norm(migrated):
    import torch_npu

    x, w = _pair(3, 5, 16), _pair(16, seed=1)
    before = calls("torch_npu.npu_rms_norm")

    def ref(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w

    _check(lambda x, w: torch_npu.npu_rms_norm(x, w, epsilon=1e-5)[0], ref, [x, w])
    y, rstd = torch_npu.npu_rms_norm(x[1].detach(), w[1].detach())
    assert rstd.shape == (3, 5, 1) and rstd.dtype == torch.float32
    assert calls("torch_npu.npu_rms_norm") == before + 2


@pytest.mark.parametrize("mode", ["half", "interleave"])
def test_npu_rotary_mul(migrated, mode):
    import torch_npu

    def ref(x, c, s):
        if mode == "half":
            rotated = torch.cat((-x[..., 8:], x[..., :8]), dim=-1)
        else:
            rotated = torch.empty_like(x)
            rotated[..., 0::2], rotated[..., 1::2] = -x[..., 1::2], x[..., 0::2]
        return c * x + s * rotated

    _check(lambda x, c, s: torch_npu.npu_rotary_mul(x, c, s, rotary_mode=mode), ref,
           [_pair(2, 3, 4, 16), _pair(1, 3, 1, 16, seed=1), _pair(1, 3, 1, 16, seed=2)])


def test_npu_swiglu_and_geglu(migrated):
    import torch_npu

    _check(lambda x: torch_npu.npu_swiglu(x, dim=-1),
           lambda x: F.silu(x[..., :6]) * x[..., 6:], [_pair(4, 12)])
    _check(lambda x: torch_npu.npu_swiglu(x, dim=0),
           lambda x: F.silu(x[:2]) * x[2:], [_pair(4, 12)])
    # The gate is the right half by default (diffusers' GEGLU), the left
    # one with activate_left; approximate=1 is gelu's tanh form.
    _check(lambda x: torch_npu.npu_geglu(x, dim=-1, approximate=1)[0],
           lambda x: x[..., :6] * F.gelu(x[..., 6:], approximate="tanh"), [_pair(4, 12)])
    _check(lambda x: torch_npu.npu_geglu(x, approximate=0, activate_left=True)[0],
           lambda x: F.gelu(x[..., :6]) * x[..., 6:], [_pair(4, 12)])


def _reference_attention(q, k, v, scale, keep=None, pse=None):
    """(B, N, S, D) attention written out; keep: what each query sees."""
    if k.size(1) != q.size(1):
        k = k.repeat_interleave(q.size(1) // k.size(1), dim=1)
        v = v.repeat_interleave(q.size(1) // v.size(1), dim=1)
    scores = q @ k.transpose(-2, -1)
    if pse is not None:
        scores = scores + pse
    scores = scores * scale
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _tril(sq, sk, offset=0):
    return torch.ones(sq, sk, dtype=torch.bool).tril(offset)


@pytest.mark.parametrize("layout", ["BNSD", "BSND", "BSH", "SBH"])
def test_npu_fusion_attention_layouts(migrated, layout):
    import torch_npu

    B, N, S, D = 2, 4, 6, 8
    to_layout = {"BNSD": lambda t: t, "BSND": lambda t: t.transpose(1, 2),
                 "BSH": lambda t: t.transpose(1, 2).reshape(B, S, N * D),
                 "SBH": lambda t: t.transpose(1, 2).reshape(B, S, N * D).transpose(0, 1)}[layout]
    from_layout = {"BNSD": lambda t: t, "BSND": lambda t: t.transpose(1, 2),
                   "BSH": lambda t: t.reshape(B, S, N, D).transpose(1, 2),
                   "SBH": lambda t: t.transpose(0, 1).reshape(B, S, N, D).transpose(1, 2)}[layout]
    inputs = [_pair(B, N, S, D, seed=i) for i in range(3)]

    def fused(q, k, v):
        out = torch_npu.npu_fusion_attention(to_layout(q), to_layout(k), to_layout(v), N, layout,
                                             scale=0.3)
        assert len(out) == 7 and out[1].shape == (B, N, S, 8) and out[1].dtype == torch.float32
        return from_layout(out[0])

    _check(fused, lambda q, k, v: _reference_attention(q, k, v, 0.3), inputs)


@pytest.mark.parametrize("sparse_mode,keep", [
    (0, None), (1, None),
    (2, _tril(4, 6)), (3, _tril(4, 6, 2)),
    (4, _tril(4, 6, 2 + 1) & ~_tril(4, 6, 2 - 2))])  # band: pre 1, next 1, bottom right
def test_npu_fusion_attention_masks(migrated, sparse_mode, keep):
    import torch_npu

    given = torch.rand(4, 6, generator=torch.Generator().manual_seed(3)) > 0.6
    given[:, 0] = False  # every query keeps a key
    compressed = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
    mask = given if sparse_mode in (0, 1) else compressed
    keep = ~given if keep is None else keep
    q, k, v = _pair(2, 4, 4, 8), _pair(2, 2, 6, 8, seed=1), _pair(2, 2, 6, 8, seed=2)  # GQA
    band = {"pre_tockens": 1, "next_tockens": 1} if sparse_mode == 4 else {}
    _check(lambda q, k, v: torch_npu.npu_fusion_attention(
               q, k, v, 4, "BNSD", atten_mask=mask.npu(), scale=0.5, sparse_mode=sparse_mode,
               **band)[0],
           lambda q, k, v: _reference_attention(q, k, v, 0.5, keep), [q, k, v])


def test_npu_fusion_attention_pse_and_varlen(migrated):
    import torch_npu

    pse = torch.randn(1, 4, 5, 5, generator=torch.Generator().manual_seed(4))
    _check(lambda q, k, v: torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD", pse=pse.npu(),
                                                          scale=0.25)[0],
           lambda q, k, v: _reference_attention(q, k, v, 0.25, pse=pse),
           [_pair(2, 4, 5, 8, seed=i) for i in range(3)])

    # TND: sequences of 3 and 5 tokens, each causal (transformers' varlen
    # flash attention on Ascend: sparse_mode 3 and the compressed mask).
    compressed = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1).npu()

    def fused(q, k, v):
        return torch_npu.npu_fusion_attention(q, k, v, 2, "TND", atten_mask=compressed,
                                              scale=0.4, actual_seq_qlen=(3, 8),
                                              actual_seq_kvlen=(3, 8), sparse_mode=3)[0]

    def ref(q, k, v):
        outs = []
        for a, b in ((0, 3), (3, 8)):
            t = [x[a:b].transpose(0, 1).unsqueeze(0) for x in (q, k, v)]
            outs.append(_reference_attention(*t, 0.4, _tril(b - a, b - a))[0].transpose(0, 1))
        return torch.cat(outs)

    _check(fused, ref, [_pair(8, 2, 4, seed=i) for i in range(3)])
    with pytest.raises(ValueError, match="actual_seq_qlen"):
        torch_npu.npu_fusion_attention(*(torch.ones(8, 2, 4, device="npu") for _ in range(3)), 2,
                                       "TND", actual_seq_qlen=(3, 7), actual_seq_kvlen=(3, 8))
    with pytest.raises(ValueError, match="input_layout='NSD'"):
        torch_npu.npu_fusion_attention(*(torch.ones(2, 3, 4, device="npu") for _ in range(3)), 2,
                                       "NSD")


def test_npu_apply_adam_w_is_adamw(migrated):
    """DeepSpeed's NPU FusedAdam: npu_apply_adam_w's step equals
    torch.optim.AdamW's."""
    import torch_npu

    p_ref = torch.randn(10, generator=torch.Generator().manual_seed(0))
    p = p_ref.clone().npu()
    m, v = torch.zeros(10, device="npu"), torch.zeros(10, device="npu")
    ref = torch.optim.AdamW([p_ref.requires_grad_()], lr=0.01, weight_decay=0.1, eps=1e-8)
    for step in range(1, 4):
        grad = torch.randn(10, generator=torch.Generator().manual_seed(step))
        p_ref.grad = grad.clone()
        ref.step()
        torch_npu.npu_apply_adam_w(0.9 ** step, 0.999 ** step, 0.01, 0.1, 0.9, 0.999, 1e-8,
                                   grad.npu(), None, False, False, out=(p, m, v))
    torch.testing.assert_close(p.cpu(), p_ref.detach())
    with pytest.raises(TypeError, match="out must be the tuple"):
        torch_npu.npu_apply_adam(0.9, 0.999, 0.01, 0.9, 0.999, 1e-8, p, False, False)


def test_fused_ops_are_rows_of_the_table(migrated):
    rows = {m["source"]: m for m in transfer_to_npu.mappings()}
    for name in ("npu_fusion_attention", "npu_rms_norm", "npu_rotary_mul", "npu_swiglu",
                 "npu_geglu", "npu_apply_adam", "npu_apply_adam_w"):
        assert rows[f"torch_npu.{name}"]["kind"] == "function"
    assert rows["torch_npu.optim.NpuFusedAdamW"]["target"] == "torch.optim.AdamW"


def test_npu_fused_adamw_is_torch_adamw(migrated):
    from torch_npu.optim import NpuFusedAdamW

    p = torch.nn.Parameter(torch.ones(3, device="npu"))
    opt = NpuFusedAdamW([p], lr=0.1)
    assert isinstance(opt, NpuFusedAdamW) and isinstance(opt, torch.optim.AdamW)
    p.grad = torch.ones(3, device="npu")
    opt.step()
    assert p.device == npu() and torch.all(p < 1)
