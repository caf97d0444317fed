"""Verdicts on a pair of recorded values: a tensor's statistics (or its
elements, where both sides kept it) and a plain argument, with thresholds
per dtype (docs/accuracy.md)."""

import math
import os
import re

# Verdict thresholds on a row's error (docs/accuracy.md): (pass, warning)
# per dtype; above the second, an error.  float32 kernels of two devices
# part by 1e-7 to 1e-6 per op (the order of their sums), which grows over
# steps: an op off by 1e-4 of its magnitude computes something else.  The
# half types round at 1e-3 (float16) and 8e-3 (bfloat16) per op.
THRESHOLDS = {
    "torch.float64": (1e-10, 1e-7),
    "torch.complex128": (1e-10, 1e-7),
    "torch.float32": (1e-5, 1e-4),
    "torch.complex64": (1e-5, 1e-4),
    "torch.float16": (2e-3, 2e-2),
    "torch.bfloat16": (1.6e-2, 1e-1),
}
# Dtypes of less precision come later: the threshold of a pair is the
# looser one's.
_PRECISION = ("torch.float64", "torch.complex128", "torch.float32", "torch.complex64",
              "torch.float16", "torch.bfloat16")

PASS, WARNING, ERROR, NA = "pass", "warning", "error", "N/A"


STATS = ("Max", "Min", "Mean", "Norm")


# The calls whose values are draws from a generator: two runs draw the same
# numbers only from generators of one kind in one state.
_RANDOM = frozenset((
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
    "normal", "normal_", "uniform_", "bernoulli", "bernoulli_", "multinomial", "poisson",
    "exponential_", "geometric_", "log_normal_", "cauchy_", "random_", "rrelu", "rrelu_",
    "dropout", "dropout_", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
    "feature_alpha_dropout", "native_dropout",
))


def random_draw(name):
    """The API of a recorded output ("Torch.randn_like.0.forward.output.0")
    when it is a draw of random numbers, else None (the gradient that flows
    into a dropout is not one)."""
    kind, _, rest = name.partition(".")
    api, _, rest = rest.partition(".")
    if kind in ("Torch", "Tensor", "Functional") and api in _RANDOM \
            and ".forward.output" in f".{rest}":
        return f"{kind}.{api}"
    return None


# --- comparing tensors ---------------------------------------------------------

# Arguments compared by value (a device is not: it is the run's own).
_VALUE_TYPES = frozenset(("int", "float", "bool", "str", "NoneType", "torch.dtype",
                          "torch.Size"))


def items(record):
    """(label, descriptor) of each tensor and each plain value of a call,
    in order."""
    out = []
    if "input_args" in record or "output" in record:
        for i, v in enumerate(record.get("input_args", [])):
            _walk(out, f"input.{i}", v)
        for k, v in record.get("input_kwargs", {}).items():
            _walk(out, f"input.{k}", v)
        out_items = record.get("output", [])
        for i, v in enumerate(out_items if isinstance(out_items, list) else [out_items]):
            _walk(out, f"output.{i}", v)
    else:
        for i, v in enumerate(record.get("input", [])):
            _walk(out, f"input.{i}", v)
    return out


# A function of its own, not a closure in items(): a closure that calls
# itself is a reference cycle, left for the cyclic collector once per call.
def _walk(out, label, node):
    if isinstance(node, dict) and (node.get("type") == "torch.Tensor"
                                   or node.get("type") in _VALUE_TYPES):
        out.append((label, node))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk(out, f"{label}.{i}", v)


def looser(a, b):
    ranks = [(_PRECISION.index(d) if d in _PRECISION else -1) for d in (a, b)]
    return a if ranks[0] >= ranks[1] else b


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _same(a, b):
    """Equal, NaN with NaN and infinities of one sign included."""
    if a == b:
        return True
    return _number(a) and _number(b) and math.isnan(a) and math.isnan(b)


def _diff(a, b):
    if not (_number(a) and _number(b)) or _same(a, b):
        return 0.0 if _number(a) and _number(b) else None
    return a - b


def _rel(d, bench):
    if d is None:
        return None
    if d == 0:
        return 0.0
    return abs(d) / abs(bench) if _number(bench) and bench != 0 else math.inf


def _magnitude(*descs):
    return max((abs(d[k]) for d in descs for k in ("Max", "Min")
                if _number(d.get(k)) and math.isfinite(d[k])), default=0.0)


def _error(n, b):
    """The largest statistic difference over the tensor's magnitude."""
    scale = _magnitude(n, b)
    worst = 0.0
    for stat in STATS:
        d = _diff(n.get(stat), b.get(stat))
        if d is None or d == 0:
            continue
        if math.isnan(d) or math.isinf(d):
            return math.inf
        s = max(abs(n.get("Norm") or 0), abs(b.get("Norm") or 0)) if stat == "Norm" else scale
        worst = max(worst, abs(d) / s if s > 0 else math.inf)
    return worst


def _tensor_errors(n_path, b_path):
    """Cosine, MaxAbsErr, MaxRelErr of two kept tensors, or None."""
    import torch

    try:
        n = torch.load(n_path, map_location="cpu", weights_only=True).double().flatten()
        b = torch.load(b_path, map_location="cpu", weights_only=True).double().flatten()
    except Exception:
        return None
    if n.shape != b.shape or n.numel() == 0:
        return None
    diff = (n - b).abs()
    denom = n.norm() * b.norm()
    cosine = min(1.0, max(-1.0, float((n @ b) / denom))) if denom > 0 else \
        (1.0 if diff.max() == 0 else 0.0)
    rel = diff / b.abs().clamp_min(torch.finfo(torch.float64).tiny)
    return cosine, float(diff.max()), float(rel.max())


def _nonfinite(d):
    return (d.get("nan_count") or 0, d.get("inf_count") or 0)


def compare_value(n, b):
    """(row values, verdict, message) of a pair of plain arguments, or None
    where there is nothing to say: equal (NaN with NaN), or two floats
    equal to float32's precision (a number a script reads from a float32
    tensor and passes on, where the last bits may differ between devices).
    Floats further apart are judged as float32 values are; any other
    argument that differs makes the call another call: an error."""
    if n is not None and b is not None:
        a, c = n.get("value"), b.get("value")
        if _same(a, c):
            return None
        if isinstance(a, str) and isinstance(c, str) and _DEVICE.match(a) and _DEVICE.match(c):
            return None  # each run's own device (or backend), by name
        if _number(a) and _number(c) and (isinstance(a, float) or isinstance(c, float)):
            scale = max(abs(a), abs(c))
            err = abs(a - c) / scale if scale else 0.0
            if err <= _FLOAT_ARGUMENT:
                return None
            passed, warned = THRESHOLDS["torch.float32"]
            verdict = ERROR if err > warned else WARNING if err > passed else PASS
            return {"Error": err}, verdict, f"arguments differ: {a!r} vs {c!r} (by {err:.3g})"
    shown = lambda d: "nothing" if d is None else repr(d.get("value"))  # noqa: E731
    return {}, ERROR, f"arguments differ: {shown(n)} vs {shown(b)}"


# A device or process-group backend, spelled as a string: each run names its
# own ('npu:0', 'cpu', 'cuda:0'; 'hccl', 'gloo', 'nccl').
_DEVICE = re.compile(r"^(?:(?:cuda|npu|cpu)(?::\d+)?|(?:(?:cuda|npu|cpu):)?(?:nccl|hccl|gloo)"
                     r"(?:,(?:cuda|npu|cpu):(?:nccl|hccl|gloo))*)$")

# Two float arguments this close (relatively) are one number: float32's
# precision is 6e-8, and a number a script computes on the device and
# passes on (loss.item() fed back) may differ in a few last bits.
_FLOAT_ARGUMENT = 1e-6


def compare_tensor(n, b, n_part, b_part, floor=None):
    """(row values, verdict, message) of one pair of tensor descriptors.
    floor: the dtype whose thresholds apply at least (the lower dtype of a
    run whose precision policy differs from its reference's)."""
    row = {"NPU Dtype": n and n.get("dtype"), "Bench Dtype": b and b.get("dtype"),
           "NPU Tensor Shape": n and n.get("shape"), "Bench Tensor Shape": b and b.get("shape")}
    if n is None or b is None:
        return row, ERROR, f"a tensor on the {'bench' if n is None else 'NPU'} side only"
    for side, d in (("NPU", n), ("Bench", b)):
        for stat, col in zip(STATS, ("max", "min", "mean", "l2norm")):
            row[f"{side} {col}"] = d.get(stat)
        row[f"{side} nan/inf"] = "%d/%d" % _nonfinite(d)
    if n.get("shape") != b.get("shape"):
        return row, ERROR, f"shapes differ: {n.get('shape')} vs {b.get('shape')}"
    if n.get("Max") is None or b.get("Max") is None:
        return row, NA, "no values to compare (memory not written yet, or empty)"
    for stat, col in zip(STATS, ("Max diff", "Min diff", "Mean diff", "L2norm diff")):
        d = _diff(n.get(stat), b.get(stat))
        row[col] = d
        row[col.replace(" diff", "").replace("L2norm", "Norm") + "RelativeErr"] = \
            _rel(d, b.get(stat))
    messages, verdict = [], PASS
    nf_n, nf_b = _nonfinite(n), _nonfinite(b)
    if (sum(nf_n) == 0) != (sum(nf_b) == 0):
        return row, ERROR, (f"NaN/Inf on the {'NPU' if sum(nf_n) else 'bench'} side only "
                            f"(NaN {nf_n[0]} vs {nf_b[0]}, Inf {nf_n[1]} vs {nf_b[1]})")
    if nf_n != nf_b:
        verdict = WARNING
        messages.append(f"NaN/Inf counts differ ({nf_n[0]}/{nf_n[1]} vs {nf_b[0]}/{nf_b[1]})")
    n_dtype, b_dtype = n.get("dtype"), b.get("dtype")
    floating = n_dtype in THRESHOLDS or b_dtype in THRESHOLDS
    if n_dtype != b_dtype:
        # Where the policies differ by choice (floor), the dtypes do too.
        if floor is None:
            verdict = WARNING
        messages.append(f"dtypes differ: {n_dtype} vs {b_dtype}")
    err = _error(n, b)
    if n.get("data_name") and b.get("data_name"):
        found = _tensor_errors(os.path.join(n_part.tensor_dir, n["data_name"]),
                               os.path.join(b_part.tensor_dir, b["data_name"]))
        if found is not None:
            row["Cosine"], row["MaxAbsErr"], row["MaxRelErr"] = found
            scale = _magnitude(n, b)
            err = max(err, found[1] / scale if scale > 0 else (0.0 if found[1] == 0 else math.inf))
    row["Error"] = err
    if not floating:
        if err > 0:
            return row, ERROR, "; ".join(messages + ["integer values differ"])
        return row, verdict, "; ".join(messages)
    dtype = looser(n_dtype, b_dtype)
    if floor is not None:
        dtype = looser(dtype, floor)
    passed, warned = THRESHOLDS.get(dtype, THRESHOLDS["torch.float32"])
    if err > warned:
        return row, ERROR, "; ".join(messages + [f"error {err:.3g} above {warned:g}"])
    if err > passed:
        return row, WARNING, "; ".join(messages + [f"error {err:.3g} above {passed:g}"])
    return row, verdict, "; ".join(messages)


# --- a call checked by itself (percall.py) -------------------------------------

# Per-call tolerances by the NPU output's dtype: (floor, pass, warning) on
# the largest element error |npu - host| / max(|host|, floor * max|host|),
# the host's computed in float64 from the same inputs.  The floor keeps
# elements near zero, where sums cancel, from counting as large relative
# errors: a float32 kernel that rounds and sums as kernels do stays under
# 2**-14 with a floor of 1/32 (a matmul of 4096 products: 1.2e-5), while
# an approximation in place of the function is far above (gelu's tanh form
# for erf: 7e-2).  A half type's kernel rounds its intermediate values
# too (a softmax's probabilities, a product before its sum): its errors
# are a few of its ulps of the tensor's largest value, wherever the
# element, so its floor is that value (the error is normwise), and it
# passes within 4 of them (multi_head_attention_forward, five roundings:
# 2 ulps).
PER_CALL = {
    "torch.float64": (2.0 ** -5, 2.0 ** -40, 2.0 ** -30),
    "torch.complex128": (2.0 ** -5, 2.0 ** -40, 2.0 ** -30),
    "torch.float32": (2.0 ** -5, 2.0 ** -14, 2.0 ** -11),
    "torch.complex64": (2.0 ** -5, 2.0 ** -14, 2.0 ** -11),
    "torch.float16": (1.0, 2.0 ** -8, 2.0 ** -6),
    "torch.bfloat16": (1.0, 2.0 ** -6, 2.0 ** -4),
}


def per_call(npu, host, floor=None):
    """{"Result", "Error", "Dtype", "Message"} of one output of a call: the
    NPU's (on the host, in its own dtype) against the host's, computed in
    higher precision from the same inputs.  floor: the dtype whose
    tolerances apply at least (autocast's, for a call made under it: its
    ops may compute in it inside the call, as cross_entropy's log_softmax
    does with the dtype its input has)."""
    import torch

    dtype = str(npu.dtype)
    judged = dtype if floor is None else looser(dtype, floor)
    out = {"Dtype": dtype, "Error": None, "Message": ""}
    if not (npu.is_floating_point() or npu.is_complex()):
        differ = int((npu != host.to(npu.dtype)).sum()) if npu.numel() else 0
        out.update(Result=ERROR if differ else PASS, Error=float(differ),
                   Message=f"{differ} of {npu.numel()} values differ" if differ else "")
        return out
    n = npu.detach().to(torch.complex128 if npu.is_complex() else torch.float64)
    h = host.detach().to(n.dtype)
    if n.numel() == 0:
        out["Result"] = PASS
        return out
    finite_n, finite_h = torch.isfinite(n), torch.isfinite(h)
    nonfinite = ~(finite_n & finite_h)
    if bool(nonfinite.any()):
        agree = (~finite_n & ~finite_h) & ((n == h) | (torch.isnan(n) & torch.isnan(h)))
        wrong = int((nonfinite & ~agree).sum())
        if wrong:
            where = int((~finite_n & finite_h).sum())
            out.update(Result=ERROR, Error=float("inf"),
                       Message=(f"{where} inf/nan where the host computes finite values"
                                if where else f"{wrong} inf/nan differ from the host's"))
            return out
        n, h = n[finite_n & finite_h], h[finite_n & finite_h]
        if n.numel() == 0:
            out["Result"] = PASS
            return out
    share, passed, warned = PER_CALL.get(judged, PER_CALL["torch.float32"])
    scale = h.abs()
    floor = float(scale.max()) * share
    err = float(((n - h).abs() / scale.clamp_min(floor if floor > 0 else 1e-300)).max())
    out["Error"] = err
    under = "" if judged == dtype else f", under autocast to {judged}"
    if err > warned:
        out.update(Result=ERROR, Message=f"error {err:.3g} above {warned:.3g} ({dtype}{under})")
    elif err > passed:
        out.update(Result=WARNING, Message=f"error {err:.3g} above {passed:.3g} ({dtype}{under})")
    else:
        out["Result"] = PASS
    return out
