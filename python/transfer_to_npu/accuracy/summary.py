"""What a compare says: the summary, compare_result.csv and .json, and the
exit status."""

import csv
import io
import json
import os
import sys

from .. import _files
from . import curves as _curves
from .curves import fmt
from .matching import COLUMNS, compare_dumps, same_program
from .verdicts import ERROR, NA, PASS, WARNING

def _where(row):
    return row.get("NPU_Stack_Info") or "?"


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
        _curves.text(p, res.curves.get(rank, {}))
    return out.getvalue()


def _describe_row(p, title, row):
    p(f"  {title}: {row['NPU Name']} (step {row['Step']}) at {_where(row)}")
    if row.get("Module"):
        p(f"    in {row['Module']}")
    p(f"    {row['Result']}: {row['Err_message'] or 'statistics differ'}")
    if row["NPU Dtype"] is None and row["Bench Dtype"] is None:
        return
    p(f"    NPU   {row['NPU Dtype']} {row['NPU Tensor Shape']}: max {fmt(row['NPU max'])} "
      f"min {fmt(row['NPU min'])} mean {fmt(row['NPU mean'])} norm {fmt(row['NPU l2norm'])}")
    p(f"    bench {row['Bench Dtype']} {row['Bench Tensor Shape']}: max {fmt(row['Bench max'])} "
      f"min {fmt(row['Bench min'])} mean {fmt(row['Bench mean'])} "
      f"norm {fmt(row['Bench l2norm'])}")


def write_outputs(res, output, text):
    os.makedirs(output, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    for row in res.rows:
        writer.writerow({k: fmt(v) if isinstance(v, float) else v for k, v in row.items()})
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
    _curves.plot(res, os.path.join(output, "curves.png"))


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
