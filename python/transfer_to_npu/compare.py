"""python -m transfer_to_npu compare: two dumps matched call by call, and
where they first part (docs/accuracy.md).

    compare NPU_DIR BENCH_DIR --output OUT
    compare --output OUT [--reference auto|cpu|cuda] [--seed N] [--dump-...] -- script.py args
    compare --output OUT ... -- -m torch.distributed.run --nproc-per-node 2 train.py

The first side is the run under test (msprobe's "NPU"), the second the
reference ("Bench").  Outputs in OUT: compare_result.csv,
compare_result.json, summary.txt (printed), curves.png (with matplotlib).
The exit status is 0 when the calls match and nothing is an error.
"""

import argparse
import csv
import difflib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys

# Verdict thresholds on a row's error (docs/accuracy.md): (pass, warning)
# per dtype; above the second, an error.
THRESHOLDS = {
    "torch.float64": (1e-10, 1e-6),
    "torch.complex128": (1e-10, 1e-6),
    "torch.float32": (1e-5, 1e-3),
    "torch.complex64": (1e-5, 1e-3),
    "torch.float16": (2e-3, 2e-2),
    "torch.bfloat16": (1.6e-2, 1e-1),
}
# Dtypes of less precision come later: the threshold of a pair is the
# looser one's.
_PRECISION = ("torch.float64", "torch.complex128", "torch.float32", "torch.complex64",
              "torch.float16", "torch.bfloat16")

PASS, WARNING, ERROR, NA = "pass", "warning", "error", "N/A"

# Below this share of calls matched, two dumps are not of one program.
SAME_PROGRAM = 0.5

STATS = ("Max", "Min", "Mean", "Norm")

COLUMNS = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
    "Bench Tensor Shape", "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
    "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr", "Cosine", "MaxAbsErr", "MaxRelErr",
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
    "Bench l2norm", "NPU nan/inf", "Bench nan/inf", "Error", "Result", "Err_message",
    "NPU_Stack_Info", "Bench_Stack_Info", "Module", "Step", "Rank",
]

_STEP = re.compile(r"^step(\d+)$")
_RANK = re.compile(r"^rank(\d+)$")
_COUNTER = re.compile(r"\.\d+(?=\.(?:forward|backward)$)|(?<=\.forward)\.\d+$|"
                      r"(?<=\.backward)\.\d+$")


class CompareError(Exception):
    """A compare that cannot be made: says why, naming the path."""


# --- reading dumps -------------------------------------------------------------

class Part:
    """One rank's step of a dump."""

    def __init__(self, place):
        self.place = place
        self.calls, self.stack, self.construct, self.scalars = [], {}, {}, []
        self.problem = None
        # The kept tensors beside it (the dump may have been moved).
        self.tensor_dir = os.path.join(place, "dump_tensor_data")
        try:
            with open(os.path.join(place, "dump.json"), encoding="utf-8") as f:
                self.calls = list(json.load(f).get("data", {}).items())
            for name in ("stack", "construct", "scalars"):
                path = os.path.join(place, f"{name}.json")
                if os.path.exists(path):
                    with open(path, encoding="utf-8") as f:
                        setattr(self, name, json.load(f))
        except (OSError, ValueError, AttributeError) as exc:
            self.problem = f"{place}: cannot be read ({exc})"
            self.calls = []


def load(directory):
    """{(rank, step): Part} of a dump directory."""
    if not os.path.isdir(directory):
        raise CompareError(f"{directory}: not a directory")
    parts = {}
    for step_dir in os.listdir(directory):
        s = _STEP.match(step_dir)
        if not s:
            continue
        for rank_dir in os.listdir(os.path.join(directory, step_dir)):
            r = _RANK.match(rank_dir)
            place = os.path.join(directory, step_dir, rank_dir)
            if r and os.path.exists(os.path.join(place, "dump.json")):
                parts[(int(r.group(1)), int(s.group(1)))] = Part(place)
    if not parts:
        raise CompareError(f"{directory}: no dump in it (step*/rank*/dump.json, as "
                           f"`python -m transfer_to_npu --dump {directory} ...` writes)")
    return parts


def key(name):
    """A call's name without its counter: what matches across runs."""
    return _COUNTER.sub("", name)


# --- comparing tensors ---------------------------------------------------------

# Arguments compared by value (a device is not: it is the run's own).
_VALUE_TYPES = frozenset(("int", "float", "bool", "str", "NoneType", "torch.dtype",
                          "torch.Size"))


def _items(record):
    """(label, descriptor) of each tensor and each plain value of a call,
    in order."""
    out = []

    def walk(label, node):
        if isinstance(node, dict) and (node.get("type") == "torch.Tensor"
                                       or node.get("type") in _VALUE_TYPES):
            out.append((label, node))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(f"{label}.{i}", v)

    if "input_args" in record or "output" in record:
        for i, v in enumerate(record.get("input_args", [])):
            walk(f"input.{i}", v)
        for k, v in record.get("input_kwargs", {}).items():
            walk(f"input.{k}", v)
        out_items = record.get("output", [])
        for i, v in enumerate(out_items if isinstance(out_items, list) else [out_items]):
            walk(f"output.{i}", v)
    else:
        for i, v in enumerate(record.get("input", [])):
            walk(f"input.{i}", v)
    return out


def _looser(a, b):
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
    where there is nothing to say."""
    if n is not None and b is not None and n.get("value") == b.get("value"):
        return None
    shown = lambda d: "nothing" if d is None else repr(d.get("value"))  # noqa: E731
    return {}, WARNING, f"arguments differ: {shown(n)} vs {shown(b)}"


def compare_tensor(n, b, n_part, b_part):
    """(row values, verdict, message) of one pair of tensor descriptors."""
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
    passed, warned = THRESHOLDS.get(_looser(n_dtype, b_dtype), THRESHOLDS["torch.float32"])
    if err > warned:
        return row, ERROR, "; ".join(messages + [f"error {err:.3g} above {warned:g}"])
    if err > passed:
        return row, WARNING, "; ".join(messages + [f"error {err:.3g} above {passed:g}"])
    return row, verdict, "; ".join(messages)


# --- comparing dumps -----------------------------------------------------------

class Result:
    def __init__(self):
        self.rows = []
        self.unmatched = []     # stretches that do not match
        self.only = {"npu": [], "bench": []}  # (rank, step) on one side only
        self.problems = []
        self.matched = self.total_npu = self.total_bench = 0
        self.curves = {}        # rank -> {site: {"npu": [(step, v)], "bench": [...]}}
        self.first = {}         # rank -> first divergence (a row or a stretch)
        self.first_error = {}   # rank -> first error row


def _site(part, name):
    return part.stack.get(name) if part is not None else None


def compare_dumps(npu_dir, bench_dir):
    npu, bench = load(npu_dir), load(bench_dir)
    res = Result()
    for k in sorted(set(npu) | set(bench)):
        if k not in bench:
            res.only["npu"].append(k)
        elif k not in npu:
            res.only["bench"].append(k)
    for (rank, step) in sorted(set(npu) & set(bench)):
        n_part, b_part = npu[(rank, step)], bench[(rank, step)]
        for part in (n_part, b_part):
            if part.problem:
                res.problems.append(part.problem)
        _match(res, rank, step, n_part, b_part)
    for side, parts in (("npu", npu), ("bench", bench)):
        for (rank, step), part in sorted(parts.items()):
            if side == "npu":
                res.total_npu += len(part.calls)
            else:
                res.total_bench += len(part.calls)
            for s in part.scalars:
                site = _short_site(s.get("site"))
                series = res.curves.setdefault(rank, {}).setdefault(site, {"npu": [],
                                                                          "bench": []})
                series[side].append((step, s.get("value")))
    return res


def _short_site(site):
    """file:line by the file's name: the two runs may run copies in two
    places."""
    if not site:
        return "?"
    path, _, line = site.rpartition(":")
    return f"{os.path.basename(path)}:{line}"


def _backward(name):
    return key(name).endswith(".backward")


def _match(res, rank, step, n_part, b_part):
    """Match a step's calls: the forward ones as two sequences (an extra
    call on one side leaves the rest matched), the backward ones by name
    (the order gradients arrive in differs with the graph: a cast autocast
    adds); then compare them in the NPU run's order."""
    n_calls, b_calls = n_part.calls, b_part.calls
    n_fwd = [i for i, (name, _) in enumerate(n_calls) if not _backward(name)]
    b_fwd = [j for j, (name, _) in enumerate(b_calls) if not _backward(name)]
    matcher = difflib.SequenceMatcher(None, [key(n_calls[i][0]) for i in n_fwd],
                                      [key(b_calls[j][0]) for j in b_fwd], autojunk=False)
    events = []  # (NPU position, order, what)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            events += [(n_fwd[i], 0, (n_fwd[i], b_fwd[j]))
                       for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        at = n_fwd[i1] if i1 < len(n_fwd) else len(n_calls)
        events.append((at, -1, ([n_calls[i][0] for i in n_fwd[i1:i2]],
                                [b_calls[j][0] for j in b_fwd[j1:j2]],
                                n_calls[n_fwd[i1 - 1]][0] if i1 > 0 else None)))
    b_backward = {name: j for j, (name, _) in enumerate(b_calls) if _backward(name)}
    n_only = []
    for i, (name, _) in enumerate(n_calls):
        if _backward(name):
            j = b_backward.pop(name, None)
            if j is None:
                n_only.append(name)
            else:
                events.append((i, 0, (i, j)))
    if n_only or b_backward:
        events.append((len(n_calls), -1, (n_only, list(b_backward), None)))
    for _, order, what in sorted(events, key=lambda e: (e[0], e[1])):
        if order == 0:
            res.matched += 1
            _compare_call(res, rank, step, n_part, b_part, n_calls[what[0]], b_calls[what[1]])
            continue
        n_names, b_names, after = what
        stretch = {"rank": rank, "step": step, "npu": n_names, "bench": b_names,
                   "npu_site": _site(n_part, n_names[0]) if n_names else None,
                   "bench_site": _site(b_part, b_names[0]) if b_names else None,
                   "after": after}
        res.unmatched.append(stretch)
        res.first.setdefault(rank, ("stretch", stretch))


def _compare_call(res, rank, step, n_part, b_part, n_call, b_call):
    n_name, n_record = n_call
    b_name, b_record = b_call
    n_tensors, b_tensors = dict(_items(n_record)), dict(_items(b_record))
    for label in list(dict.fromkeys(list(n_tensors) + list(b_tensors))):
        n, b = n_tensors.get(label), b_tensors.get(label)
        if "torch.Tensor" in (n and n.get("type"), b and b.get("type")):
            n = n if n is None or n.get("type") == "torch.Tensor" else None
            b = b if b is None or b.get("type") == "torch.Tensor" else None
            values, verdict, message = compare_tensor(n, b, n_part, b_part)
        else:
            found = compare_value(n, b)
            if found is None:
                continue
            values, verdict, message = found
        row = dict.fromkeys(COLUMNS)
        row.update(values)
        row.update({"NPU Name": f"{n_name}.{label}", "Bench Name": f"{b_name}.{label}",
                    "Result": verdict, "Err_message": message,
                    "NPU_Stack_Info": _site(n_part, n_name),
                    "Bench_Stack_Info": _site(b_part, b_name),
                    "Module": n_part.construct.get(n_name), "Step": step, "Rank": rank})
        res.rows.append(row)
        if verdict in (WARNING, ERROR):
            res.first.setdefault(rank, ("row", row))
        if verdict == ERROR:
            res.first_error.setdefault(rank, row)


# --- reporting -----------------------------------------------------------------

def _fmt(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def _where(row):
    return row.get("NPU_Stack_Info") or "?"


def same_program(res):
    """Whether two dumps record one program: most calls match up, and most
    matched tensors have one shape (two sizes of one model do not)."""
    most = max(res.total_npu, res.total_bench)
    tensors = [r for r in res.rows if r["NPU Dtype"] or r["Bench Dtype"]]
    reshaped = sum(1 for r in tensors if r["NPU Tensor Shape"] != r["Bench Tensor Shape"])
    return most == 0 or (res.matched >= SAME_PROGRAM * most
                         and reshaped <= SAME_PROGRAM * len(tensors))


def summary(res, npu_dir, bench_dir):
    out = io.StringIO()
    p = lambda *a: print(*a, file=out)  # noqa: E731
    counts = {v: 0 for v in (PASS, WARNING, ERROR, NA)}
    for row in res.rows:
        counts[row["Result"]] += 1
    p(f"compare: {npu_dir} (NPU) against {bench_dir} (bench)")
    p(f"calls: {res.total_npu} vs {res.total_bench}, {res.matched} matched; checks: "
      f"{counts[PASS]} pass, {counts[WARNING]} warning, {counts[ERROR]} error"
      + (f", {counts[NA]} without values" if counts[NA] else ""))
    if not same_program(res):
        p(f"NOT THE SAME PROGRAM: only {res.matched} of {max(res.total_npu, res.total_bench)} "
          f"calls match up, or most of their tensors differ in shape; these dumps record "
          f"different models or scripts, and nothing below compares like with like.")
    for problem in res.problems:
        p(f"unreadable: {problem}")
    for side, label in (("npu", "NPU"), ("bench", "bench")):
        if res.only[side]:
            shown = ", ".join(f"rank{r}/step{s}" for r, s in res.only[side][:8])
            more = len(res.only[side]) - 8
            p(f"only in the {label} dump: {shown}" + (f" and {more} more" if more > 0 else ""))
    ranks = sorted(set(res.first) | set(res.curves) |
                   {row["Rank"] for row in res.rows})
    for rank in ranks:
        p("")
        p(f"rank {rank}:")
        first = res.first.get(rank)
        if first is None:
            p("  every matched call agrees (pass)")
        elif first[0] == "row":
            _describe_row(p, "first divergence", first[1])
            err = res.first_error.get(rank)
            if err is not None and err is not first[1]:
                _describe_row(p, "first error", err)
        else:
            s = first[1]
            p(f"  first divergence: the calls part at step {s['step']}"
              + (f", after {s['after']}" if s["after"] else ""))
            p(f"    NPU:   {', '.join(s['npu'][:3]) or '(nothing)'}"
              + (f" ... ({len(s['npu'])} calls)" if len(s['npu']) > 3 else "")
              + (f" at {s['npu_site']}" if s["npu_site"] else ""))
            p(f"    bench: {', '.join(s['bench'][:3]) or '(nothing)'}"
              + (f" ... ({len(s['bench'])} calls)" if len(s['bench']) > 3 else "")
              + (f" at {s['bench_site']}" if s["bench_site"] else ""))
            err = res.first_error.get(rank)
            if err is not None:
                _describe_row(p, "first error", err)
        stretches = [s for s in res.unmatched if s["rank"] == rank]
        if stretches:
            p(f"  {len(stretches)} stretch(es) of calls do not match up "
              f"({sum(len(s['npu']) for s in stretches)} NPU calls, "
              f"{sum(len(s['bench']) for s in stretches)} bench calls)")
        _curves(p, res.curves.get(rank, {}))
    return out.getvalue()


def _describe_row(p, title, row):
    p(f"  {title}: {row['NPU Name']} (step {row['Step']}) at {_where(row)}")
    if row.get("Module"):
        p(f"    in {row['Module']}")
    p(f"    {row['Result']}: {row['Err_message'] or 'statistics differ'}")
    if row["NPU Dtype"] is None and row["Bench Dtype"] is None:
        return
    p(f"    NPU   {row['NPU Dtype']} {row['NPU Tensor Shape']}: max {_fmt(row['NPU max'])} "
      f"min {_fmt(row['NPU min'])} mean {_fmt(row['NPU mean'])} norm {_fmt(row['NPU l2norm'])}")
    p(f"    bench {row['Bench Dtype']} {row['Bench Tensor Shape']}: max {_fmt(row['Bench max'])} "
      f"min {_fmt(row['Bench min'])} mean {_fmt(row['Bench mean'])} "
      f"norm {_fmt(row['Bench l2norm'])}")


def _curves(p, curves, most=12):
    for site, series in sorted(curves.items()):
        n, b = dict(series["npu"]), dict(series["bench"])
        steps = sorted(set(n) | set(b))
        if not steps:
            continue
        p(f"  scalar at {site} (NPU | bench | rel diff), by step:")
        shown = steps if len(steps) <= most else \
            [steps[round(i * (len(steps) - 1) / (most - 1))] for i in range(most)]
        for s in shown:
            nv, bv = n.get(s), b.get(s)
            rel = ""
            if _number(nv) and _number(bv):
                rel = _fmt(_rel(nv - bv, bv))
            p(f"    {s:>6}  {_fmt(nv):>14}  {_fmt(bv):>14}  {rel}")


def write_outputs(res, output, text):
    os.makedirs(output, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    for row in res.rows:
        writer.writerow({k: _fmt(v) if isinstance(v, float) else v for k, v in row.items()})
    from . import _files

    _files.replace(os.path.join(output, "compare_result.csv"), buf.getvalue().encode())
    first = {rank: (v[1] if v[0] == "row" else {"unmatched": v[1]})
             for rank, v in res.first.items()}
    content = {"same_program": same_program(res), "matched": res.matched,
               "calls": {"npu": res.total_npu, "bench": res.total_bench},
               "first_divergence": first, "first_error": res.first_error,
               "unmatched": res.unmatched,
               "only": {k: [{"rank": r, "step": s} for r, s in v] for k, v in res.only.items()},
               "problems": res.problems,
               "curves": {rank: c for rank, c in res.curves.items()}, "rows": res.rows}
    _files.replace(os.path.join(output, "compare_result.json"),
                   json.dumps(content, indent=1, default=str).encode())
    _files.replace(os.path.join(output, "summary.txt"), text.encode())
    _plot(res, os.path.join(output, "curves.png"))


def _plot(res, path):
    """curves.png of the scalar curves, when matplotlib is installed."""
    series = [(rank, site, s) for rank, c in sorted(res.curves.items())
              for site, s in sorted(c.items()) if s["npu"] or s["bench"]]
    if not series:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(len(series), 1, figsize=(7, 2.8 * len(series)), squeeze=False)
    for ax, (rank, site, s) in zip(axes[:, 0], series):
        for side, style in (("npu", "-"), ("bench", "--")):
            points = [(x, y) for x, y in s[side] if _number(y)]
            if points:
                ax.plot(*zip(*points), style, label="NPU" if side == "npu" else "bench")
        ax.set_title(f"rank {rank}: {site}")
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def exit_status(res):
    if not same_program(res) or res.unmatched or res.first_error:
        return 1
    return 0


def run(npu_dir, bench_dir, output, stream=sys.stdout):
    res = compare_dumps(npu_dir, bench_dir)
    text = summary(res, npu_dir, bench_dir)
    write_outputs(res, output, text)
    try:
        stream.write(text)
        stream.write(f"(compare_result.csv, compare_result.json, summary.txt in {output})\n")
        stream.flush()
    except BrokenPipeError:
        # `compare ... | head`: the reader has gone, which is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return exit_status(res)


# --- running the reference and the migrated run --------------------------------

def _cuda_present():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _fresh(directory):
    """An empty dump directory: one compare wrote before is cleared; a
    directory holding anything else is the user's, and kept."""
    if os.path.isdir(directory):
        entries = os.listdir(directory)
        if any(not _STEP.match(e) for e in entries):
            raise CompareError(f"{directory} holds files that are not a dump: choose another "
                               f"--output")
        shutil.rmtree(directory)
    os.makedirs(directory)


def _launch(argv, env, log_path):
    with open(log_path, "wb") as log:
        proc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc.returncode


def _tail(path, lines=15):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def run_script(opts, target, stream=sys.stdout):
    output = os.path.abspath(opts.output)
    os.makedirs(output, exist_ok=True)
    npu_dir, bench_dir = os.path.join(output, "npu"), os.path.join(output, "bench")
    _fresh(npu_dir)
    _fresh(bench_dir)
    reference = opts.reference
    if reference == "auto":
        reference = "cuda" if _cuda_present() else "cpu"
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("TRANSFER_TO_NPU_DUMP") and k != "TRANSFER_TO_NPU"}
    base.update(PYTHONHASHSEED="0", TRANSFER_TO_NPU_DUMP_SEED=str(opts.seed))
    for option, variable in (("dump_steps", "TRANSFER_TO_NPU_DUMP_STEPS"),
                             ("dump_list", "TRANSFER_TO_NPU_DUMP_LIST"),
                             ("dump_tensors", "TRANSFER_TO_NPU_DUMP_TENSORS")):
        if getattr(opts, option):
            base[variable] = getattr(opts, option)
    ours = [sys.executable, "-m", __package__]
    if reference == "cuda":
        # The original run: unmigrated even where the script imports us.
        bench_env = dict(base, TRANSFER_TO_NPU="0", TRANSFER_TO_NPU_DUMP=bench_dir)
        bench_argv = [sys.executable] + target
    else:
        # On the host, from the same table; torch_npu, if installed, is
        # not loaded by torch (its device would be the NPU's).
        bench_env = dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        bench_argv = ours + ["--backend", "cpu", "--dump", bench_dir] + target
    npu_argv = ours + ["--dump", npu_dir] + target
    failed = []
    for side, argv, env, where in (("reference", bench_argv, bench_env, bench_dir),
                                   ("migrated", npu_argv, dict(base), npu_dir)):
        log = os.path.join(output, "bench.log" if side == "reference" else "npu.log")
        label = f"the reference run ({reference})" if side == "reference" else "the migrated run"
        stream.write(f"compare: {label}: {' '.join(argv[1:])} (output in {log})\n")
        stream.flush()
        code = _launch(argv, env, log)
        if code != 0:
            failed.append(side)
            stream.write(f"compare: {label} exited with status {code}; its last lines:\n"
                         f"{_tail(log)}\n")
    try:
        status = run(npu_dir, bench_dir, output, stream)
    except CompareError as exc:
        stream.write(f"compare: {exc}\n")
        return 2
    return 1 if failed else status


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m transfer_to_npu compare",
        description="Compare two dumps, or run a script's reference and migrated runs and "
                    "compare them.",
        usage="%(prog)s NPU_DIR BENCH_DIR --output DIR\n"
              "       %(prog)s --output DIR [options] -- (script.py | -m module) [args ...]")
    p.add_argument("dumps", nargs="*", metavar="DIR",
                   help="two dumps: the run under test (NPU), then the reference (bench)")
    p.add_argument("--output", "-o", required=True, metavar="DIR",
                   help="where the results (and, with --, the dumps) go")
    p.add_argument("--reference", choices=("auto", "cpu", "cuda"), default="auto",
                   help="with --: where the reference runs (auto: CUDA when this machine has "
                        "a GPU, else the CPU)")
    p.add_argument("--seed", type=int, default=0,
                   help="with --: the seed both runs get before the script (default 0)")
    p.add_argument("--dump-steps", metavar="STEPS", help="with --: dump only these steps")
    p.add_argument("--dump-list", metavar="PATTERNS", help="with --: dump only these calls")
    p.add_argument("--dump-tensors", metavar="PATTERNS",
                   help="with --: keep the full tensors of these calls")
    return p


def main(argv):
    parser = _parser()
    if "--" in argv:
        at = argv.index("--")
        ours, target = argv[:at], argv[at + 1:]
    else:
        ours, target = argv, None
    opts = parser.parse_args(ours)
    if target is not None:
        if opts.dumps:
            parser.error("give two dumps, or a script after --, not both")
        if not target or target[0] == "-m" and len(target) < 2:
            parser.error("a script (or -m module) is needed after --")
        if opts.dump_steps:
            from .dump import DumpError, parse_steps

            try:
                parse_steps(opts.dump_steps, "--dump-steps")
            except DumpError as exc:
                parser.error(str(exc))
        try:
            return run_script(opts, target)
        except CompareError as exc:
            parser.error(str(exc))
    if len(opts.dumps) != 2:
        parser.error("two dumps are needed (NPU_DIR BENCH_DIR), or a script after --")
    try:
        return run(opts.dumps[0], opts.dumps[1], opts.output)
    except CompareError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
