"""Advice for code that runs on the NPU as written, but could run better:
the ``advice_list`` report of analyze (convert leaves such code as it is),
ranked by what following it saves (``rank``).

* ``affinity``: a computation written by hand that one of torch_npu's fused
  operators does in one kernel (Ascend's "affinity APIs"), where it fits
  as written: attention (softmax of a matmul: ``scaled_dot_product_attention``,
  which torch_npu runs fused, or ``npu_fusion_attention``), RMSNorm over the
  last dimension, rotary embeddings of the half-rotation form, SwiGLU/GeGLU;
  torch's Adam/AdamW/SGD built with the options torch_npu's fused ones
  take.  Suggested only when the target torch_npu has the operator: the
  served one's (the table's ``torch_npu.*`` rows), or a release's
  (``--torch-npu``, its surface).  torch's own fused calls
  (``scaled_dot_product_attention``, ``nn.RMSNorm``) get none: torch_npu
  runs them on its kernels already;
* ``precision``: a dtype the NPU handles otherwise than a GPU, where it
  decides what trains: float16 autocast or ``.half()`` without loss scaling
  in the file (no inf/nan as an operator's input or output: overflow needs
  loss scaling), float64 computation (Ascend's AI cores have no float64
  arithmetic).

Tests get no advice: their speed is not the training's.  Each entry says
what torch_npu's documentation says; nothing here is guessed from timings.
"""

import ast

ADVICE = "advice"

# (what the code computes, the torch_npu name, what the fused one does)
_AFFINITY = {
    "attention": ("torch_npu.npu_fusion_attention",
                  "FlashAttention on Ascend: one fused kernel for scaled dot-product attention "
                  "(layouts BSH, SBH, BSND, BNSD, TND; causal and sparse masks)"),
    "rms_norm": ("torch_npu.npu_rms_norm", "RMSNorm in one fused kernel"),
    "rotary": ("torch_npu.npu_rotary_mul", "rotary position embedding (x * cos + "
               "rotate_half(x) * sin) in one fused kernel"),
    "swiglu": ("torch_npu.npu_swiglu", "SwiGLU (silu(a) * b over the two halves of the input) "
               "in one fused kernel"),
    "geglu": ("torch_npu.npu_geglu", "GeGLU (gelu(a) * b) in one fused kernel"),
    "Adam": ("torch_npu.optim.NpuFusedAdam", "Adam with the parameters and states fused into "
             "few tensors (as torch.optim.Adam; the parameters must not be reallocated)"),
    "AdamW": ("torch_npu.optim.NpuFusedAdamW", "AdamW with the parameters and states fused into "
              "few tensors (as torch.optim.AdamW; the parameters must not be reallocated)"),
    "SGD": ("torch_npu.optim.NpuFusedSGD", "SGD with the parameters and states fused into few "
            "tensors (as torch.optim.SGD; the parameters must not be reallocated)"),
}

# Optimizers with a fused counterpart in torch_npu.optim, and the options of
# torch's that the fused ones do not take.
_OPTIMIZERS = {"torch.optim.Adam": "Adam", "torch.optim.AdamW": "AdamW",
               "torch.optim.SGD": "SGD"}
_UNFUSED_OPTIONS = frozenset(("fused", "foreach", "capturable", "differentiable", "maximize",
                              "amsgrad"))

# Functions whose name says they rotate by the rotary embedding (Llama's,
# GPT-NeoX's, and transformers' spelling of them).
_ROTARY_FUNCTIONS = ("apply_rotary_pos_emb", "apply_rotary_emb", "rotate_half")

_SOFTMAX = ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax")
_SDPA = "torch.nn.functional.scaled_dot_product_attention"
_MATMUL = ("torch.matmul", "torch.bmm", "torch.einsum", "torch.baddbmm")

#: What an advice saves, most first: its position in advice_list.csv.
RANK = {"attention": 0, "rms_norm": 1, "rotary": 2, "swiglu": 3, "geglu": 3, "Adam": 4,
        "AdamW": 4, "SGD": 4, "precision": 5}

_FLOAT64 = ("no float64 arithmetic on Ascend's AI cores: float64 ops run elsewhere or not at "
            "all (Ascend's guide: the chips do not support fp64)",
            "use float32 unless the precision is needed")
_FLOAT16 = ("float16 on the NPU takes no inf or nan as an operator's input or output (Ascend's "
            "guide): an overflow is not seen as inf, and nothing in this file scales the loss",
            "keep dynamic loss scaling (torch.amp.GradScaler) with float16, or train in bfloat16")
_FLOAT64_NAMES = ("torch.float64", "torch.double")
_FLOAT16_NAMES = ("torch.float16", "torch.half")


def rank(f):
    """Where an advice finding goes in the list: what it saves first."""
    return RANK.get(f.kind if f.kind == "precision" else _WHAT.get(f.api), len(RANK))


def advise(scan, fused):
    """Add the advice findings of a scan; fused: the torch_npu names the
    target has ("npu_rms_norm", "optim.NpuFusedAdamW"...)."""
    seen = set()

    def affinity(what, node, code=None, suggestion=None):
        name, does = _AFFINITY[what]
        if name[len("torch_npu."):] not in fused or (node.lineno, what) in seen:
            return
        seen.add((node.lineno, what))
        scan.add(ADVICE, "affinity", name, node, does, suggestion or f"use {name}", code=code)

    scaled = _scales_loss(scan)
    scores = None  # what the file's softmaxes may take: found at the first one
    for node in scan.calls:
        q = scan.qual(node.func)
        if q in _OPTIMIZERS:
            if not any(k.arg in _UNFUSED_OPTIONS for k in node.keywords):
                affinity(_OPTIMIZERS[q], node)
        elif q == "torch.rsqrt" and node.args and _squares_mean(node.args[0]):
            affinity("rms_norm", node)
        elif _is_softmax(scan, node, q):
            scores = _scores(scan) if scores is None else scores
            if scores != () and _holds_matmul(scan, node, scores):
                affinity("attention", node, suggestion="use "
                         "torch.nn.functional.scaled_dot_product_attention (torch_npu runs "
                         "it fused), or torch_npu.npu_fusion_attention")
        elif not scaled and _float16_training(scan, node, q):
            scan.add(ADVICE, "precision", "torch.float16", node, *_FLOAT16)
        elif _float64_compute(scan, node, q):
            scan.add(ADVICE, "precision", "torch.float64", node, *_FLOAT64)
    for node in scan.binops:
        if not isinstance(node.op, ast.Mult):
            continue
        for side in (node.left, node.right):
            if isinstance(side, ast.Call):
                q = scan.qual(side.func)
                if q == "torch.nn.functional.silu":
                    affinity("swiglu", node)
                elif q == "torch.nn.functional.gelu":
                    affinity("geglu", node)
    for node in scan.functions:
        if getattr(node, "name", None) in _ROTARY_FUNCTIONS and _half_rotation(node):
            affinity("rotary", node, code=f"def {node.name}(...)")


def _is_softmax(scan, node, q):
    if q in _SOFTMAX:
        return True
    return q is None and isinstance(node.func, ast.Attribute) and node.func.attr == "softmax"


def _holds_matmul(scan, call, scores=()):
    """Whether the scores a softmax takes come from a matmul (q @ k^T), in
    the expression or through a variable the file gives one."""
    target = call.args[0] if call.args else call.func.value \
        if isinstance(call.func, ast.Attribute) else None
    if target is None:
        return False
    if isinstance(target, ast.Name):
        return target.id in scores
    return _matmul(scan, target)


def _matmul(scan, expr):
    for n in ast.walk(expr):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            return True
        if isinstance(n, ast.Call) and scan.qual(n.func) in _MATMUL:
            return True
    return False


def _scores(scan):
    """The variables the file gives a matmul's result; () in a file that
    calls scaled_dot_product_attention, which writes attention by hand
    only as its fallback (timm's fused_attn switch)."""
    if any(scan.qual(n.func) == _SDPA for n in scan.calls):
        return ()
    return _matmul_names(scan)


def _matmul_names(scan):
    """The variables the file gives the result of a matmul (attn = q @ k.T
    * scale)."""
    return {t.id for node in scan.assigns if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name) and _matmul(scan, node.value)}


def _half_rotation(function):
    """Whether a rotary function is of the half-rotation form npu_rotary_mul
    computes (rotate_half's cat of -x2 and x1, x * cos + ...), not the
    complex-number one (view_as_complex)."""
    for n in ast.walk(function):
        if isinstance(n, ast.Attribute) and n.attr in ("view_as_complex", "polar"):
            return False
    return True


def _scales_loss(scan):
    """Whether the file scales the loss (a GradScaler, apex's scale_loss)."""
    return any(n.attr in ("GradScaler", "scale_loss") for n, *_ in scan.chains) or \
        any(n.id in ("GradScaler", "scale_loss") for n in scan.names)


def _float16_training(scan, node, q):
    """float16 autocast (torch.autocast(..., dtype=torch.float16)), or a
    model made float16 (.half())."""
    if q is not None and q.rpartition(".")[2] == "autocast":
        return any(k.arg == "dtype" and scan.qual(k.value) in _FLOAT16_NAMES
                   for k in node.keywords)
    return q is None and isinstance(node.func, ast.Attribute) and node.func.attr == "half" \
        and not node.args and not node.keywords


def _float64_compute(scan, node, q):
    """Tensors made or cast float64: x.double(), x.to(torch.float64),
    torch.zeros(..., dtype=torch.float64)."""
    func = node.func
    if isinstance(func, ast.Attribute) and q is None:
        if func.attr == "double" and not node.args and not node.keywords:
            return True
        if func.attr == "to" and any(scan.qual(a) in _FLOAT64_NAMES for a in node.args):
            return True
    # Made float64 on a device (on the host, float64 is the host's).
    return any(k.arg == "dtype" and scan.qual(k.value) in _FLOAT64_NAMES
               for k in node.keywords) and any(k.arg == "device" for k in node.keywords)


def _squares_mean(expr):
    """Whether an expression is RMSNorm's mean of squares plus epsilon over
    the last dimension, which npu_rms_norm normalizes: x.pow(2).mean(-1,
    keepdim=True) (or x ** 2, x * x) under an addition."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _squares_mean(expr.left) or _squares_mean(expr.right)
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "mean"):
        return False
    dims = expr.args[:1] + [k.value for k in expr.keywords if k.arg == "dim"]
    keep = [k.value for k in expr.keywords if k.arg == "keepdim"] + expr.args[1:2]
    if not (len(dims) == 1 and _is_last(dims[0]) and len(keep) == 1 and
            isinstance(keep[0], ast.Constant) and keep[0].value is True):
        return False
    inner = expr.func.value
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and \
            inner.func.attr == "pow" and inner.args and \
            isinstance(inner.args[0], ast.Constant) and inner.args[0].value == 2:
        return True
    return isinstance(inner, ast.BinOp) and (
        (isinstance(inner.op, ast.Pow) and isinstance(inner.right, ast.Constant)
         and inner.right.value == 2) or
        (isinstance(inner.op, ast.Mult) and ast.dump(inner.left) == ast.dump(inner.right)))


def _is_last(dim):
    """-1, or (-1,)."""
    if isinstance(dim, (ast.Tuple, ast.List)) and len(dim.elts) == 1:
        dim = dim.elts[0]
    return isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub) and \
        isinstance(dim.operand, ast.Constant) and dim.operand.value == 1


_WHAT = {name: what for what, (name, _) in _AFFINITY.items()}


def fused_names(rows=None, surface=None):
    """The torch_npu names a target has: the served torch_npu's (the
    table's torch_npu rows), or a release's operators (its surface)."""
    if surface is not None:
        return {name for name, entry in surface["modules"]["torch_npu"]["names"].items()
                if entry[0] == "op"}
    return {r[0][len("torch_npu."):] for r in rows or () if r[0].startswith("torch_npu.")}
