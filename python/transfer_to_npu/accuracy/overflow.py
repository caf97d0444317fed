"""The first inf/nan (the seeds' overflow check, msprobe's
``overflow_check``): per rank, the first call, in the order the run made
them, whose output holds inf or nan while its inputs are finite.  Read
from a dump's statistics alone: it needs no reference run, and a compare
names it on each side.

A call given a value that is not finite as an argument writes it on
purpose (an attention mask: ``masked_fill(mask, float('-inf'))``), and a
call whose inputs hold one passes it on: neither is an overflow.  Where
the forward calls stay finite, the first gradient that is not finite is
named instead.
"""

import math

from .dumps import backward


def _tensors(node):
    if isinstance(node, dict):
        if node.get("type") == "torch.Tensor":
            yield node
    elif isinstance(node, list):
        for v in node:
            yield from _tensors(v)


def _nonfinite(desc):
    return (desc.get("nan_count") or 0) + (desc.get("inf_count") or 0) > 0


def _written(record):
    """Whether a call is given a number that is not finite (to write it)."""
    values = list(record.get("input_args", [])) + list(record.get("input_kwargs", {}).values())
    while values:
        v = values.pop()
        if isinstance(v, list):
            values.extend(v)
        elif isinstance(v, dict) and v.get("type") == "float":
            x = v.get("value")
            if isinstance(x, float) and not math.isfinite(x):
                return True
    return False


def _finding(part, name, step, rank, what, bad):
    return {"name": name, "step": step, "rank": rank, "site": part.stack.get(name),
            "module": part.construct.get(name), "what": what,
            "nan": sum(d.get("nan_count") or 0 for d in bad),
            "inf": sum(d.get("inf_count") or 0 for d in bad), "dtype": bad[0].get("dtype")}


def first(dump):
    """{rank: finding} of a dumps.Dump; a finding is a dict: name, step,
    rank, site, module, what ("overflow": the call made it from finite
    inputs; "input": it came in; "gradient"), nan and inf (counts)."""
    out = {}
    for (rank, step), part in sorted(dump.parts.items()):
        if rank in out:
            continue
        for name, record in part.calls:
            if name.startswith("Module.") or backward(name):
                continue
            inputs = list(_tensors(record.get("input_args", [])))
            inputs += list(_tensors(list(record.get("input_kwargs", {}).values())))
            outputs = list(_tensors(record.get("output", [])))
            bad_out = [d for d in outputs if _nonfinite(d)]
            if not bad_out or any(_nonfinite(d) for d in inputs) or _written(record):
                continue
            out[rank] = _finding(part, name, step, rank, "overflow", bad_out)
            break
        if rank in out:
            continue
        for name, record in part.calls:
            if not backward(name):
                continue
            bad = [d for d in _tensors(record.get("input", [])) if _nonfinite(d)]
            if bad:
                out[rank] = _finding(part, name, step, rank, "gradient", bad)
                break
    return out


def describe(finding):
    """One line saying what the finding is."""
    counts = ", ".join(f"{n} {label}" for n, label in ((finding["nan"], "nan"),
                                                       (finding["inf"], "inf")) if n)
    where = f"{finding['name']} (step {finding['step']}) at {finding['site'] or '?'}"
    if finding["what"] == "overflow":
        return f"{where}: its output holds {counts} ({finding['dtype']}), its inputs are finite"
    return f"{where}: the first gradient that is not finite ({counts})"
