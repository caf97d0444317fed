"""What a compare says: the summary (printed, summary.txt), compare_result.csv
and .json, curves.png, and the exit status with one line saying why.

Exit statuses: 0 nothing differs beyond noise; 1 something differs (the
values, the calls, the programs; a device-name test going another way; an
inf/nan; a call wrong by itself); 2 a usage error, before anything runs
(compare.py); 3 a run failed; 130 the compare was interrupted (Ctrl-C),
what was compared written.
"""

import csv
import io
import json
import os

from .. import _files
from . import branches as _branches, curves as _curves, overflow as _overflow
from . import percall as _percall
from .curves import fmt
from .matching import COLUMNS, compare_dumps, same_program
from .verdicts import ERROR, NA, PASS, WARNING, looser, random_draw

OK, DIFFERS, FAILED, INTERRUPTED = 0, 1, 3, 130

_SIDES = {"npu": "migrated", "bench": "reference"}


def _where(row):
    return row.get("NPU_Stack_Info") or "?"


class Report:
    """A compare of a migrated run's dump (npu) with its reference's (bench),
    or the checks of one dump alone (bench None)."""

    def __init__(self, npu, bench=None, interrupted=False):
        self.npu, self.bench, self.interrupted = npu, bench, interrupted
        self.floor, self.regions = _policy(npu, bench)
        self.result = compare_dumps(npu, bench, self.floor) if bench is not None else None
        self.same_program = self.result is None or same_program(self.result)
        self.dumps = {"npu": npu} if bench is None else {"npu": npu, "bench": bench}
        self.overflow = {side: _overflow.first(d) for side, d in self.dumps.items()}
        self.curves = _curves.series(self.dumps)
        self.branches = _branches.findings(npu)
        self.checks = _percall.findings(npu)
        self.status, self.reason = self._verdict()

    # -- the verdict

    def _failures(self):
        out = []
        for side, dump in self.dumps.items():
            for rank in dump.ranks() or [0]:
                status = dump.status(rank)
                if status in ("failed", "killed") or (status == "interrupted"
                                                      and not self.interrupted):
                    out.append((side, rank, status, dump.runs.get(rank, {}).get("exception")))
                elif status == "unknown" and dump.returncode not in (None, 0):
                    out.append((side, rank, "failed", None))
        return out

    def _verdict(self):
        if self.interrupted:
            return INTERRUPTED, "interrupted: what was compared before is written"
        failures = self._failures()
        if failures:
            side, rank, status, exc = failures[0]
            why = f"{exc['type']} at {exc['site']}" if exc else status
            same = [f for f in failures if f[0] != side and f[1] == rank and f[3] and exc
                    and (f[3]["type"], f[3]["site"]) == (exc["type"], exc["site"])]
            if same:
                return FAILED, (f"both runs failed ({why}): the script fails there on each "
                                f"side; the calls before it are compared above")
            what = f"the {_SIDES[side]} run" + (f" (rank {rank})" if self._many_ranks() else "")
            return FAILED, f"{what} failed ({why}); the calls before it are compared above"
        reasons = []
        res = self.result
        if res is not None:
            if not self.same_program:
                reasons.append("the two runs record different programs")
            elif res.unmatched:
                s = res.unmatched[0]
                reasons.append(f"the calls part at step {s['step']}"
                               + (f" ({s['npu_site']})" if s["npu_site"] else ""))
            if res.first_error:
                row = next(iter(res.first_error.values()))
                drawn = random_draw(row["NPU Name"])
                reasons.append(f"values differ (first error at {_where(row)}"
                               + (f", a random draw ({drawn}): the runs drew other numbers"
                                  if drawn else "") + ")")
        for finding in self.branches:
            reasons.append(f"a device-name test goes another way than on CUDA at "
                           f"{finding['site']}")
            break
        npu_overflow = self.overflow.get("npu", {})
        if npu_overflow:
            f = next(iter(npu_overflow.values()))
            reasons.append(f"inf/nan first at {f['site'] or f['name']}")
        # A call by itself beyond what its kernel's rounding gives: a
        # warning is a smaller one, no less a finding.
        wrong = [c for c in self.checks if c["Result"] in (WARNING, ERROR)]
        if wrong:
            reasons.append(f"{len(wrong)} call(s) beyond their tolerance by themselves on the "
                           f"host's check (first at {wrong[0]['site']})")
        if reasons:
            return DIFFERS, "; ".join(reasons)
        return OK, "nothing differs beyond noise"

    def _many_ranks(self):
        return any(len(d.ranks()) > 1 for d in self.dumps.values())

    # -- the text

    def text(self):
        out = io.StringIO()
        p = lambda *a: print(*a, file=out)  # noqa: E731
        if self.bench is not None:
            p(f"compare: {self.npu.directory} (NPU) against {self.bench.directory} (bench)")
        else:
            p(f"checks of {self.npu.directory} (no reference run)")
        self._runs(p)
        self._precision(p)
        res = self.result
        if res is not None:
            counts = {v: 0 for v in (PASS, WARNING, ERROR, NA)}
            for row in res.rows:
                counts[row["Result"]] += 1
            reached = [f"{n} {'NPU' if side == 'npu' else 'bench'} calls not reached (the "
                       f"other run ended before)" for side, n in res.not_reached.items() if n]
            p(f"calls: {res.total_npu} vs {res.total_bench}, {res.matched} matched"
              + "".join(f", {r}" for r in reached) + f"; checks: {counts[PASS]} pass, "
              f"{counts[WARNING]} warning, {counts[ERROR]} error"
              + (f", {counts[NA]} without values" if counts[NA] else ""))
            if not self.same_program:
                most = max(res.considered.values())
                p(f"NOT THE SAME PROGRAM: only {res.matched} of {most} calls match up, or most "
                  f"of their tensors differ in shape; these dumps record different models or "
                  f"scripts, and nothing below compares like with like.")
            for problem in res.problems:
                p(f"unreadable: {problem}")
            for side, label in (("npu", "NPU"), ("bench", "bench")):
                if res.only[side]:
                    shown = ", ".join(f"rank{r}/step{s}" for r, s in res.only[side][:8])
                    more = len(res.only[side]) - 8
                    p(f"only in the {label} dump: {shown}"
                      + (f" and {more} more" if more > 0 else ""))
        _branches.text(p, self.branches)
        ranks = sorted(set(self.npu.ranks()) | set(self.bench.ranks() if self.bench else ())
                       | set(self.curves))
        for rank in ranks:
            p("")
            p(f"rank {rank}:")
            if res is not None:
                self._divergence(p, rank)
            self._overflow(p, rank)
            _percall.text(p, [c for c in self.checks if c["rank"] == rank],
                          _percall.counts(self.npu, rank))
            _curves.text(p, self.curves.get(rank, {}))
        p("")
        p(self.last_line())
        return out.getvalue()

    def last_line(self):
        return f"compare: exit {self.status}: {self.reason}"

    def _runs(self, p):
        parts = []
        for side, dump in self.dumps.items():
            label = _SIDES[side]
            for rank in dump.ranks() or [0]:
                status = dump.status(rank)
                backend = dump.runs.get(rank, {}).get("backend")
                who = label + (f" ({backend})" if backend and side == "bench" else "") \
                    + (f" rank {rank}" if len(dump.ranks()) > 1 else "")
                exc = dump.runs.get(rank, {}).get("exception")
                if status == "finished":
                    parts.append(f"{who} finished ({dump.last_step(rank) + 1} steps)")
                elif exc:
                    parts.append(f"{who} {status} in step {dump.last_step(rank)}: "
                                 f"{exc['type']}: {_one_line(exc['message'])} at {exc['site']}"
                                 + (f" ({exc['code']})" if exc.get("code") else ""))
                else:
                    code = dump.returncode
                    parts.append(f"{who} {status}" + (f" (exit status {code})"
                                                      if code not in (None, 0) else ""))
        p("runs: " + "; ".join(parts))

    def _precision(self, p):
        if self.floor is None:
            return
        sites = ", ".join(sorted({r["site"] or "?" for r in self.regions}))
        p(f"precision: the reference computes in float32 (--reference-precision fp32), the "
          f"migrated run under autocast ({self.floor}) entered at {sites}: the policies differ, "
          f"and every value is judged by {self.floor}'s thresholds")

    def _divergence(self, p, rank):
        res = self.result
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

    def _overflow(self, p, rank):
        mine = self.overflow["npu"].get(rank)
        theirs = self.overflow.get("bench", {}).get(rank)
        if mine is None and theirs is None:
            return
        if mine is not None:
            p(f"  first inf/nan: {_overflow.describe(mine)}")
            if "bench" in self.overflow:
                if theirs is None:
                    p("    the reference stays finite there")
                elif theirs["name"] == mine["name"] and theirs["step"] == mine["step"]:
                    p("    the reference too: the original program overflows there")
                else:
                    p(f"    the reference's: {_overflow.describe(theirs)}")
        else:
            p(f"  first inf/nan of the reference: {_overflow.describe(theirs)}; the migrated "
              f"run stays finite")

    # -- the files

    def write(self, output, text):
        os.makedirs(output, exist_ok=True)
        res = self.result
        content = {"status": self.status, "reason": self.reason,
                   "runs": {side: {str(rank): dict(dump.runs.get(rank, {}),
                                                   status=dump.status(rank))
                                   for rank in dump.ranks()}
                            for side, dump in self.dumps.items()},
                   "returncodes": {side: dump.returncode for side, dump in self.dumps.items()},
                   "precision": {"floor": self.floor, "autocast": self.regions},
                   "first_overflow": self.overflow, "device_name_tests": self.branches,
                   "per_call": self.checks, "curves": self.curves}
        if res is not None:
            buf = io.StringIO()
            writer = csv.writer(buf)
            writer.writerow(COLUMNS)
            # A row holds the columns in order (matching.py).
            writer.writerows([fmt(v) if isinstance(v, float) else v for v in row.values()]
                             for row in res.rows)
            _files.replace(os.path.join(output, "compare_result.csv"), buf.getvalue().encode())
            first = {rank: (v[1] if v[0] == "row" else {"unmatched": v[1]})
                     for rank, v in res.first.items()}
            content.update({
                "same_program": self.same_program, "matched": res.matched,
                "calls": {"npu": res.total_npu, "bench": res.total_bench},
                "not_reached": res.not_reached,
                "first_divergence": first, "first_error": res.first_error,
                "unmatched": res.unmatched,
                "only": {k: [{"rank": r, "step": s} for r, s in v] for k, v in res.only.items()},
                "problems": res.problems,
                # Every row is in the CSV; here those that do not pass.
                "rows": [r for r in res.rows if r["Result"] != PASS]})
        _files.replace(os.path.join(output, "compare_result.json"),
                       json.dumps(content, default=str).encode())
        _files.replace(os.path.join(output, "summary.txt"), text.encode())
        _curves.plot(self.curves, os.path.join(output, "curves.png"))


def _one_line(text, limit=200):
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _policy(npu, bench):
    """(floor dtype, autocast regions of the migrated run) where the
    reference computes in full precision and the migrated run under
    autocast; else (None, regions)."""
    regions = [r for rs in npu.run_facts("autocast").values() for r in rs if r.get("enabled")]
    if bench is None or not bench.run_facts("reference_precision") or not regions:
        return None, regions
    floor = None
    for r in regions:
        floor = r["dtype"] if floor is None else looser(floor, r["dtype"])
    return floor, regions


def _describe_row(p, title, row):
    p(f"  {title}: {row['NPU Name']} (step {row['Step']}) at {_where(row)}")
    if row.get("Module"):
        p(f"    in {row['Module']}")
    p(f"    {row['Result']}: {row['Err_message'] or 'statistics differ'}")
    drawn = random_draw(row["NPU Name"])
    if drawn and row["Result"] in (WARNING, ERROR):
        p(f"    {drawn} draws random numbers: the two runs drew other numbers (dumps not "
          f"seeded alike, or a generator the script set itself), and what they feed differs "
          f"with them (docs/accuracy.md)")
    if row["NPU Dtype"] is None and row["Bench Dtype"] is None:
        return
    p(f"    NPU   {row['NPU Dtype']} {row['NPU Tensor Shape']}: max {fmt(row['NPU max'])} "
      f"min {fmt(row['NPU min'])} mean {fmt(row['NPU mean'])} norm {fmt(row['NPU l2norm'])}")
    p(f"    bench {row['Bench Dtype']} {row['Bench Tensor Shape']}: max {fmt(row['Bench max'])} "
      f"min {fmt(row['Bench min'])} mean {fmt(row['Bench mean'])} "
      f"norm {fmt(row['Bench l2norm'])}")


def show(report, output, stream):
    """Write the report's files, print its text; return its exit status."""
    text = report.text()
    report.write(output, text)
    try:
        stream.write(text)
        stream.write(f"(compare_result.json, summary.txt in {output})\n")
        stream.flush()
    except BrokenPipeError:
        # `compare ... | head`: the reader has gone, which is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return report.status
