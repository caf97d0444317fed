"""Advice for code that runs on the NPU as written, but could run better:
the ``advice_list`` report of analyze (convert leaves such code as it is).

* ``affinity``: a computation one of torch_npu's fused operators does in
  one kernel (Ascend's "affinity APIs"): attention, RMSNorm, rotary
  embeddings, SwiGLU/GeGLU, Adam/AdamW/SGD.  Suggested only when the target
  torch_npu has the operator: the served one's (the table's
  ``torch_npu.*`` rows), or a release's (``--torch-npu``, its surface);
* ``precision``: a dtype the NPU handles otherwise than a GPU: float64
  (Ascend's AI cores have no float64 arithmetic) and float16 (no inf/nan
  as an operator's input or output: overflow needs loss scaling).

Each entry says what torch_npu's documentation says; nothing here is
guessed from timings.
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

_CALLS = {
    "torch.nn.functional.scaled_dot_product_attention": "attention",
    "torch.nn.RMSNorm": "rms_norm",
    "torch.nn.functional.rms_norm": "rms_norm",
    "torch.optim.Adam": "Adam",
    "torch.optim.AdamW": "AdamW",
    "torch.optim.SGD": "SGD",
}

# Functions whose name says they rotate by the rotary embedding (Llama's,
# GPT-NeoX's, and transformers' spelling of them).
_ROTARY_FUNCTIONS = ("apply_rotary_pos_emb", "apply_rotary_emb", "rotate_half")

_FLOAT64 = ("no float64 arithmetic on Ascend's AI cores: float64 ops run elsewhere or not at "
            "all (Ascend's guide: the chips do not support fp64)",
            "use float32 unless the precision is needed")
_FLOAT16 = ("float16 on the NPU takes no inf or nan as an operator's input or output (Ascend's "
            "guide): an overflow is not seen as inf",
            "keep dynamic loss scaling (torch.amp.GradScaler) with float16, or train in bfloat16")
_DTYPES = {
    "torch.float64": _FLOAT64, "torch.double": _FLOAT64,
    "torch.float16": _FLOAT16, "torch.half": _FLOAT16,
}
_METHODS = {"double": ("torch.Tensor.double",) + _FLOAT64,
            "half": ("torch.Tensor.half",) + _FLOAT16}


def advise(scan, fused):
    """Add the advice findings of a scan; fused: the torch_npu names the
    target has ("npu_rms_norm", "optim.NpuFusedAdamW"...)."""
    seen = set()

    def affinity(what, node, code=None):
        name, does = _AFFINITY[what]
        if name[len("torch_npu."):] not in fused or (node.lineno, what) in seen:
            return
        seen.add((node.lineno, what))
        scan.add(ADVICE, "affinity", name, node, does, f"use {name}", code=code)

    for node in scan.calls:
        q = scan.qual(node.func)
        if q is not None:
            if q in _CALLS:
                affinity(_CALLS[q], node)
            elif q == "torch.rsqrt" and node.args and _squares_mean(node.args[0]):
                affinity("rms_norm", node)
            elif q in ("torch.nn.functional.silu", "torch.nn.functional.gelu"):
                pass  # judged as a product below
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _METHODS and \
                not node.args and not node.keywords:
            api, why, use = _METHODS[node.func.attr]
            scan.add(ADVICE, "precision", api, node, why, use)
    for node in scan.binops:
        for side in (node.left, node.right):
            if isinstance(side, ast.Call):
                q = scan.qual(side.func)
                if q == "torch.nn.functional.silu":
                    affinity("swiglu", node)
                elif q == "torch.nn.functional.gelu":
                    affinity("geglu", node)
    for node in scan.functions:
        if getattr(node, "name", None) in _ROTARY_FUNCTIONS:
            affinity("rotary", node, code=f"def {node.name}(...)")
    for outer, root, nodes, attrs in scan.chains:
        q = scan.qual(outer)
        if q in _DTYPES:
            why, use = _DTYPES[q]
            scan.add(ADVICE, "precision", q, outer, why, use)


def _squares_mean(expr):
    """Whether an expression is RMSNorm's mean of squares plus epsilon:
    x.pow(2).mean(...) (or x ** 2, x * x) under an addition."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _squares_mean(expr.left) or _squares_mean(expr.right)
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "mean"):
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


def fused_names(rows=None, surface=None):
    """The torch_npu names a target has: the served torch_npu's (the
    table's torch_npu rows), or a release's operators (its surface)."""
    if surface is not None:
        return {name for name, entry in surface["modules"]["torch_npu"]["names"].items()
                if entry[0] == "op"}
    return {r[0][len("torch_npu."):] for r in rows or () if r[0].startswith("torch_npu.")}
