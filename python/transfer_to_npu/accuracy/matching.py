"""Matching two dumps call by call, and whether they record one program."""

import difflib
import os

from .dumps import key, load
from .verdicts import ERROR, WARNING, compare_tensor, compare_value, items

# Below this share of calls matched, two dumps are not of one program.
SAME_PROGRAM = 0.5


COLUMNS = [
    "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
    "Bench Tensor Shape", "Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
    "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr", "Cosine", "MaxAbsErr", "MaxRelErr",
    "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
    "Bench l2norm", "NPU nan/inf", "Bench nan/inf", "Error", "Result", "Err_message",
    "NPU_Stack_Info", "Bench_Stack_Info", "Module", "Step", "Rank",
]


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
    n_tensors, b_tensors = dict(items(n_record)), dict(items(b_record))
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


def same_program(res):
    """Whether two dumps record one program: most calls match up, and most
    matched tensors have one shape (two sizes of one model do not)."""
    most = max(res.total_npu, res.total_bench)
    tensors = [r for r in res.rows if r["NPU Dtype"] or r["Bench Dtype"]]
    reshaped = sum(1 for r in tensors if r["NPU Tensor Shape"] != r["Bench Tensor Shape"])
    return most == 0 or (res.matched >= SAME_PROGRAM * most
                         and reshaped <= SAME_PROGRAM * len(tensors))
