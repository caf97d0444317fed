"""Matching two dumps call by call, and whether they record one program."""

import difflib

from .dumps import backward, key
from .verdicts import (ERROR, NA, PASS, STATS, WARNING, compare_tensor, compare_value,
                       items)

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
        # Calls one side made after the other run ended (failed, stopped):
        # not compared, and no sign that the programs differ.
        self.not_reached = {"npu": 0, "bench": 0}
        self.problems = []
        self.matched = 0
        self.considered = {"npu": 0, "bench": 0}  # calls that could have matched
        self.total_npu = self.total_bench = 0
        self.first = {}         # rank -> first divergence (a row or a stretch)
        self.first_error = {}   # rank -> first error row


def _site(part, name):
    return part.stack.get(name) if part is not None else None


def compare_dumps(npu, bench, floor=None):
    """Match two dumps (dumps.Dump) rank by rank and step by step.  Where a
    run ended early (it failed, or was stopped), what the other made after
    that point is not reached, not a difference.  floor: the dtype whose
    thresholds apply at least (verdicts.compare_tensor)."""
    res = Result()
    res.floor = floor
    for side, dump in (("npu", npu), ("bench", bench)):
        total = sum(len(part.calls) for part in dump.parts.values())
        if side == "npu":
            res.total_npu = total
        else:
            res.total_bench = total
        res.problems += [part.problem for part in dump.parts.values() if part.problem]
    for rank in sorted(set(npu.ranks()) | set(bench.ranks())):
        ends = {"npu": npu.last_step(rank) if npu.ended_early(rank) else None,
                "bench": bench.last_step(rank) if bench.ended_early(rank) else None}
        steps = sorted({s for r, s in npu.parts if r == rank}
                       | {s for r, s in bench.parts if r == rank})
        for step in steps:
            n_part, b_part = npu.parts.get((rank, step)), bench.parts.get((rank, step))
            if n_part is not None and b_part is not None:
                cut = [side for side, end in ends.items() if end == step]
                _match(res, rank, step, n_part, b_part, cut)
                continue
            side, other = ("npu", "bench") if b_part is None else ("bench", "npu")
            part = n_part if b_part is None else b_part
            if ends[other] is not None and step > ends[other]:
                res.not_reached[side] += len(part.calls)
            else:
                res.only[side].append((rank, step))
                res.considered[side] += len(part.calls)
    return res


def _match(res, rank, step, n_part, b_part, cut=()):
    """Match a step's calls: the forward ones as two sequences (an extra
    call on one side leaves the rest matched), the backward ones by name
    (the order gradients arrive in differs with the graph: a cast autocast
    adds); then compare them in the NPU run's order.  cut: the sides whose
    run ended in this step: what the other made after its last call is not
    reached."""
    n_calls, b_calls = n_part.calls, b_part.calls
    n_fwd = [i for i, (name, _) in enumerate(n_calls) if not backward(name)]
    b_fwd = [j for j, (name, _) in enumerate(b_calls) if not backward(name)]
    events = []  # (NPU position, order, what)
    for tag, i1, i2, j1, j2 in _opcodes([key(n_calls[i][0]) for i in n_fwd],
                                        [key(b_calls[j][0]) for j in b_fwd]):
        if tag == "equal":
            events += [(n_fwd[i], 0, (n_fwd[i], b_fwd[j]))
                       for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        if i2 == len(n_fwd) and j2 == len(b_fwd) and _tail_not_reached(res, cut, i1 == i2,
                                                                        j1 == j2, i2 - i1,
                                                                        j2 - j1):
            continue
        at = n_fwd[i1] if i1 < len(n_fwd) else len(n_calls)
        events.append((at, -1, ([n_calls[i][0] for i in n_fwd[i1:i2]],
                                [b_calls[j][0] for j in b_fwd[j1:j2]],
                                n_calls[n_fwd[i1 - 1]][0] if i1 > 0 else None)))
    b_backward = {name: j for j, (name, _) in enumerate(b_calls) if backward(name)}
    n_only = []
    for i, (name, _) in enumerate(n_calls):
        if backward(name):
            j = b_backward.pop(name, None)
            if j is None:
                n_only.append(name)
            else:
                events.append((i, 0, (i, j)))
    if (n_only or b_backward) and not _tail_not_reached(res, cut, not n_only, not b_backward,
                                                         len(n_only), len(b_backward)):
        events.append((len(n_calls), -1, (n_only, list(b_backward), None)))
    for _, order, what in sorted(events, key=lambda e: (e[0], e[1])):
        if order == 0:
            res.matched += 1
            res.considered["npu"] += 1
            res.considered["bench"] += 1
            _compare_call(res, rank, step, n_part, b_part, n_calls[what[0]], b_calls[what[1]])
            continue
        n_names, b_names, after = what
        res.considered["npu"] += len(n_names)
        res.considered["bench"] += len(b_names)
        stretch = {"rank": rank, "step": step, "npu": n_names, "bench": b_names,
                   "npu_site": _site(n_part, n_names[0]) if n_names else None,
                   "bench_site": _site(b_part, b_names[0]) if b_names else None,
                   "after": after}
        res.unmatched.append(stretch)
        res.first.setdefault(rank, ("stretch", stretch))


def _opcodes(a, b):
    """difflib's opcodes of two sequences of names, cheaply where they
    mostly agree: the common head and tail are equal without a search (a
    step of a long run holds thousands of calls, and difflib's search is
    quadratic in the names that repeat)."""
    head = 0
    for x, y in zip(a, b):
        if x != y:
            break
        head += 1
    tail = 0
    for x, y in zip(reversed(a[head:]), reversed(b[head:])):
        if x != y:
            break
        tail += 1
    out = [("equal", 0, head, 0, head)] if head else []
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    if mid_a or mid_b:
        matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
        out += [(tag, i1 + head, i2 + head, j1 + head, j2 + head)
                for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
    if tail:
        out.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return out


def _tail_not_reached(res, cut, npu_empty, bench_empty, npu_count, bench_count):
    """Whether a stretch at the end of a step is what one side made after
    the other's run ended there (counted as not reached)."""
    if "npu" in cut and npu_empty:
        res.not_reached["bench"] += bench_count
        return True
    if "bench" in cut and bench_empty:
        res.not_reached["npu"] += npu_count
        return True
    return False


def _compare_call(res, rank, step, n_part, b_part, n_call, b_call):
    n_name, n_record = n_call
    b_name, b_record = b_call
    n_tensors = dict(items(n_record))
    # Records equal to the last bit (the common case where the NPU computes
    # as the reference does) need no verdict but pass: each tensor's row
    # says so with its statistics (a third of a compare's time otherwise).
    alike = n_record == b_record
    same = alike and not any("data_name" in d for d in n_tensors.values())
    b_tensors = n_tensors if alike else dict(items(b_record))
    labels = n_tensors if alike else dict.fromkeys(list(n_tensors) + list(b_tensors))
    call = {"NPU_Stack_Info": _site(n_part, n_name), "Bench_Stack_Info": _site(b_part, b_name),
            "Module": n_part.construct.get(n_name), "Step": step, "Rank": rank}
    for label in labels:
        n, b = n_tensors.get(label), b_tensors.get(label)
        if same:
            if n.get("type") != "torch.Tensor":
                continue
            row = _BLANK.copy()
            verdict, message = _equal(row, n)
        else:
            if "torch.Tensor" in (n and n.get("type"), b and b.get("type")):
                n = n if n is None or n.get("type") == "torch.Tensor" else None
                b = b if b is None or b.get("type") == "torch.Tensor" else None
                found = compare_tensor(n, b, n_part, b_part, res.floor)
            else:
                found = compare_value(n, b)
                if found is None:
                    continue
            values, verdict, message = found
            row = _BLANK.copy()
            row.update(values)
        row["NPU Name"] = f"{n_name}.{label}"
        row["Bench Name"] = f"{b_name}.{label}"
        row["Result"] = verdict
        row["Err_message"] = message
        row.update(call)
        res.rows.append(row)
        if verdict in (WARNING, ERROR):
            res.first.setdefault(rank, ("row", row))
        if verdict == ERROR:
            res.first_error.setdefault(rank, row)


# A row before its values: every column, in order (the CSV's).
_BLANK = dict.fromkeys(COLUMNS)
_SIDE_STATS = tuple((stat, f"NPU {col}", f"Bench {col}")
                    for stat, col in zip(STATS, ("max", "min", "mean", "l2norm")))
_NO_DIFFS = dict.fromkeys(("Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
                           "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr", "Error"), 0.0)


def _equal(row, d):
    """Fill row with a tensor recorded alike on both sides, as compare_tensor
    gives it; return (verdict, message)."""
    row["NPU Dtype"] = row["Bench Dtype"] = d.get("dtype")
    row["NPU Tensor Shape"] = row["Bench Tensor Shape"] = d.get("shape")
    for stat, npu_col, bench_col in _SIDE_STATS:
        row[npu_col] = row[bench_col] = d.get(stat)
    row["NPU nan/inf"] = row["Bench nan/inf"] = \
        f"{d.get('nan_count') or 0}/{d.get('inf_count') or 0}"
    if d.get("Max") is None:
        return NA, "no values to compare (memory not written yet, or empty)"
    row.update(_NO_DIFFS)
    return PASS, ""


def same_program(res):
    """Whether two dumps record one program: most calls match up, and most
    matched tensors have one shape (two sizes of one model do not).  What
    one side made after the other's run ended is left out."""
    most = max(res.considered["npu"], res.considered["bench"])
    tensors = [r for r in res.rows if r["NPU Dtype"] or r["Bench Dtype"]]
    reshaped = sum(1 for r in tensors if r["NPU Tensor Shape"] != r["Bench Tensor Shape"])
    return most == 0 or (res.matched >= SAME_PROGRAM * most
                         and reshaped <= SAME_PROGRAM * len(tensors))
