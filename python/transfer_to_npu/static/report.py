"""The reports of ``analyze`` and ``convert``.

In the offline migration tool's vocabulary, one CSV file per list (a header
row, then one row per finding: file, first and last line, column, kind,
api, the code as written, what it becomes or why not, a suggestion):

* ``change_list.csv``: what is (or will be) converted;
* ``unsupported_api.csv``: what is left as written: no NPU counterpart, a
  CUDA name the table does not know, code that needs a hand edit;
* ``cuda_op_list.csv``: CUDA-only packages, kernels and C++ extensions;
* ``advice_list.csv``: what runs as written but has a better NPU form
  (torch_npu's fused operators, dtypes; ``advice.py``), what saves most
  first;

and ``migration_report.json`` with the same rows, the files skipped and a
summary.  ``join_runtime()`` marks the findings that ran in a migrated run
(its TRANSFER_TO_NPU_REPORT): column ``ran``.
"""

import csv
import io
import json
import os
import sys

from .. import _files
from . import advice as _advice
from .scan import ADVICE, CHANGE, CUDA_OP, UNSUPPORTED, no_effect

LISTS = ((CHANGE, "change_list", "becomes"), (UNSUPPORTED, "unsupported_api", "reason"),
         (CUDA_OP, "cuda_op_list", "reason"), (ADVICE, "advice_list", "advice"))
JSON_NAME = "migration_report.json"
COLUMNS = ("file", "line", "end_line", "column", "kind", "api", "code")


def shown(path):
    """A path as reports and the terminal show it: a name that is not
    UTF-8 (a GBK name from a Windows archive) with its bytes escaped
    (\\xb2), as no text file can hold them as they are."""
    if path is None:
        return None
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class Report:
    def __init__(self, tool, paths):
        self.tool = tool
        self.paths = list(paths)
        self.findings = []
        self.skipped = []       # {"file", "line", "column", "reason"}
        self.files = 0          # Python files read
        self.other_files = 0    # CUDA and C++ sources read
        self.lines = 0
        self.seconds = 0.0
        self.joined = False

    def skip(self, path, error):
        self.skipped.append({"file": shown(path), "line": error.line, "column": error.column,
                             "reason": error.reason})

    def rows(self, category, with_ran=None):
        with_ran = self.joined if with_ran is None else with_ran
        result = dict((c, r) for c, _, r in LISTS)[category]
        out = []
        findings = self.findings
        if category == ADVICE:
            # What following it saves first (a stable sort: files and lines
            # in order within a rank).
            findings = sorted((f for f in findings if f.category == ADVICE), key=_advice.rank)
        for f in findings:
            if f.category != category:
                continue
            row = {"file": shown(f.file), "line": f.line, "end_line": f.end_line,
                   "column": f.column, "kind": f.kind, "api": f.api, "code": f.code,
                   result: f.result, "suggestion": f.suggestion}
            if with_ran:
                row["ran"] = f.ran
            out.append(row)
        return out

    def counts(self):
        out = {}
        for f in self.findings:
            kinds = out.setdefault(f.category, {})
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        return out

    def hand_work(self):
        """Files by how much in them is left to do by hand, most first."""
        per_file = {}
        for f in self.findings:
            if f.category not in (CHANGE, ADVICE) and not no_effect(f):
                per_file[f.file] = per_file.get(f.file, 0) + 1
        return sorted(per_file.items(), key=lambda item: (-item[1], item[0]))

    def to_json(self):
        import torch

        from .. import backends

        data = {
            "tool": self.tool,
            "paths": [shown(p) for p in self.paths],
            "torch_version": torch.__version__,
            "backend": backends.installed,
            "summary": {
                "python_files": self.files, "cuda_sources": self.other_files,
                "lines": self.lines, "seconds": round(self.seconds, 4),
                "lines_per_second": round(self.lines / self.seconds) if self.seconds else None,
                "counts": self.counts(),
                "hand_work": [{"file": shown(f), "findings": n} for f, n in self.hand_work()],
            },
            "skipped": self.skipped,
        }
        for category, name, _ in LISTS:
            data[name] = self.rows(category)
        return data

    def write(self, directory):
        """Write the CSV and JSON reports into directory; their paths."""
        os.makedirs(directory, exist_ok=True)
        written = []
        for category, name, result in LISTS:
            path = os.path.join(directory, name + ".csv")
            columns = list(COLUMNS) + [result, "suggestion"]
            if self.joined:
                columns.append("ran")
            text = io.StringIO(newline="")
            w = csv.DictWriter(text, columns)
            w.writeheader()
            w.writerows(self.rows(category))
            _files.replace(path, text.getvalue().encode("utf-8"))
            written.append(path)
        path = os.path.join(directory, JSON_NAME)
        _files.replace(path, (json.dumps(self.to_json(), indent=1, ensure_ascii=False)
                              + "\n").encode("utf-8"))
        written.append(path)
        return written

    def join_runtime(self, runtime):
        """Mark each finding with whether the migrated run (``runtime``: its
        TRANSFER_TO_NPU_REPORT, as a dict) mapped something at its line:
        the same API, or anything for a finding that is not one of the
        table's APIs (a device string, whose mapping happens at the line
        that uses it, is "no")."""
        sites = {}
        sources = set()
        for entry in list(runtime.get("mappings", [])) + list(runtime.get("unsupported", [])):
            source = entry.get("source", entry.get("api"))
            sources.add(source)
            for site in entry.get("sites", []):
                file, _, line = str(site).rpartition(":")
                if line.isdigit():
                    sites.setdefault(_parts(file), []).append((int(line), source))
        for f in self.findings:
            hits = _site_hits(sites, f.file, f.line, f.end_line)
            if f.api in sources:
                f.ran = "yes" if f.api in hits else "no"
            else:
                f.ran = "yes" if hits else "no"
        self.joined = True

    def print_summary(self, stream=None, written=()):
        stream = sys.stdout if stream is None else stream
        try:
            self._print_summary(stream, written)
            stream.flush()
        except BrokenPipeError:
            # `analyze . | head`: the reader has gone, which is not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())

    def _print_summary(self, stream, written):
        rate = f", {self.lines / self.seconds:,.0f} lines/s" if self.seconds else ""
        print(f"{self.tool}: {self.files} Python files ({self.lines:,} lines) and "
              f"{self.other_files} CUDA/C++ sources in {self.seconds:.2f} s{rate}; "
              f"{len(self.skipped)} skipped", file=stream)
        counts = self.counts()
        for category, name, _ in LISTS:
            kinds = counts.get(category, {})
            detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda i: -i[1]))
            print(f"  {name + '.csv':<20} {sum(kinds.values()):>6}  {detail}", file=stream)
        if self.joined:
            ran = sum(1 for f in self.findings if f.ran == "yes")
            print(f"  ran in the migrated run: {ran} of {len(self.findings)} findings",
                  file=stream)
        hand = self.hand_work()
        if hand:
            print("hand work first (unsupported APIs, hand edits and CUDA code per file):",
                  file=stream)
            for path, n in hand[:10]:
                print(f"  {n:>6}  {shown(path)}", file=stream)
            if len(hand) > 10:
                print(f"  ... and {len(hand) - 10} more files", file=stream)
        if self.skipped:
            print("skipped:", file=stream)
            for s in self.skipped:
                where = f":{s['line']}" if s["line"] else ""
                print(f"  {s['file']}{where}: {s['reason']}", file=stream)
        if written:
            print(f"reports: {', '.join(shown(w) for w in written)}", file=stream)
        else:
            print("(--output DIR writes the CSV and JSON reports)", file=stream)


def _parts(path):
    return tuple(p for p in os.path.normpath(path).split(os.sep) if p not in ("", "."))


def _site_hits(sites, file, first, last):
    """The sources mapped at lines first..last of file: the runtime's file
    names are as the run spelled them (relative to where it ran, or
    absolute), so a file matches when one path ends with the other."""
    mine = _parts(os.path.abspath(file))
    found = set()
    for theirs, entries in sites.items():
        n = min(len(mine), len(theirs))
        if n and mine[-n:] == theirs[-n:]:
            found.update(source for line, source in entries if first <= line <= last)
    return found
