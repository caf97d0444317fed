"""python -m transfer_to_npu analyze PATH... [--output DIR] [--runtime-report FILE]

A static scan of a code base before anything runs: every CUDA spelling the
mapping table knows (what ``convert`` would change, and what the runtime
migration maps), and what it does not (APIs with no NPU counterpart,
CUDA-only packages, CUDA kernels and C++ extensions, tests of the device
type or backend that need a hand edit).  The user's code is parsed, never
imported or run.

The terminal gets a summary; ``--output DIR`` gets the reports (see
``report``).  ``--runtime-report FILE`` joins the report of a
migrated run (``python -m transfer_to_npu --report FILE train.py``) and
says which findings ran.
"""

import argparse
import json
import os
import sys
import time

from . import scan as _scan, sources as _sources, spellings as _spellings, targets as _targets
from .scan import CUDA_OP
from .sources import SourceError
from .report import Report, shown


def spellings(torch_npu=None):
    """The mapping table, read for its source spellings: the one this
    machine's NPU backend gets, or (torch_npu, a release line such as
    "2.5") the one that release would get, from the names it has
    (``surfaces/``); ValueError for a release with no surface."""
    fused = None
    if torch_npu is not None:
        from .. import surfaces
        from .advice import fused_names

        fused = fused_names(surface=surfaces.read(torch_npu))
    return _spellings.Spellings(_spellings.table_rows(torch_npu), fused)


def count_lines(text):
    """Lines as Python counts them (CRLF, CR or LF ends one)."""
    n = text.count("\n") + text.count("\r") - text.count("\r\n")
    return n + (1 if text and not text.endswith(("\n", "\r")) else 0)


def scan_python(spellings, path, data, insert="torch_npu"):
    """(scan, lines, source text, tree) of one Python file's bytes (its
    findings: scan.findings); SourceError when it cannot be read as
    Python."""
    text = _sources.decode_python(data)
    tree = _sources.parse_python(text, path)
    scanned = _scan.scan_file(spellings, text, tree, insert, not _sources.is_test(path))
    for f in scanned.findings:
        f.file = path
    return scanned, count_lines(text), text, tree


def cuda_findings(path, data, kind):
    """The CUDA code in a C++ or CUDA source: each kernel and CUDA header;
    a .cu file with neither is reported as a whole."""
    found = _sources.cuda_code(data)
    if not found and kind == "cuda":
        found = [(1, "CUDA source")]
    out = []
    for line, what in found:
        f = _scan.Finding(CUDA_OP, "cuda_source", what, what,
                          "CUDA C++ code: it needs an Ascend port",
                          "port it to Ascend C, or replace the op by torch ops", line, 0, line, 1)
        f.file = path
        out.append(f)
    return out


def link_reason(entry, root):
    """Why a symbolic link in a tree is not read: what it points at is read
    where it is (inside the tree), or not at all."""
    target = os.path.realpath(entry.path)
    inside = os.path.realpath(root)
    if not os.path.exists(entry.path):
        return "a broken symbolic link"
    if target == inside or target.startswith(inside.rstrip(os.sep) + os.sep):
        return f"a symbolic link (to {shown(entry.link)}): not followed, what it points at is " \
               f"read where it is"
    return f"a symbolic link out of the tree (to {shown(entry.link)}): not followed"


def analyze(paths, spellings_=None, progress=None):
    """The report of a scan of the files and folders in paths."""
    sp = spellings_ if spellings_ is not None else spellings()
    report = Report("analyze", paths)
    progress = progress if progress is not None else _sources.Progress("analyze")
    start = time.perf_counter()
    uses, pending = _targets.Uses(), []
    for root in paths:
        for entry in _sources.walk(root):
            if entry.error is not None:
                report.skip(entry.path, entry.error)
                continue
            if entry.kind == "link":
                report.skip(entry.path, SourceError(link_reason(entry, root)))
                continue
            if entry.kind not in ("python", "cuda", "cpp"):
                continue
            try:
                data = _sources.read_bytes(entry.path)
                if entry.kind == "python":
                    scanned, lines, _, _ = scan_python(sp, entry.path, data)
                    findings = scanned.findings
                    uses.add(entry.path, entry.rel, scanned)
                    pending += scanned.pending
                    report.files += 1
                    report.lines += lines
                else:
                    findings = cuda_findings(entry.path, data, entry.kind)
                    report.other_files += 1
            except SourceError as exc:
                report.skip(entry.path, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - one file never stops the run
                report.skip(entry.path, internal_error(exc))
                continue
            report.findings.extend(findings)
            progress.update(f"{report.files} Python files, {report.lines:,} lines, "
                            f"{len(report.findings)} findings")
    dropped = uses.settle(pending)
    if dropped:
        report.findings = [f for f in report.findings if id(f) not in dropped]
    progress.done()
    report.seconds = time.perf_counter() - start
    return report


def internal_error(exc):
    """A file the tool failed on (its own error, not the file's): reported
    with the others, and the run goes on."""
    return SourceError(f"not scanned: the tool failed on it ({type(exc).__name__}: {exc})")


def load_runtime_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ValueError(f"--runtime-report {path!r}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise ValueError(f"--runtime-report {path!r}: not a JSON report ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("mappings", []), list):
        raise ValueError(f"--runtime-report {path!r}: not a transfer_to_npu run report "
                         f"(TRANSFER_TO_NPU_REPORT)")
    return data


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m transfer_to_npu analyze",
        description="Scan Python code for CUDA spellings, without importing or running it.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files and folders to scan")
    parser.add_argument("--output", metavar="DIR",
                        help="write change_list.csv, unsupported_api.csv, cuda_op_list.csv and "
                             "migration_report.json there")
    parser.add_argument("--runtime-report", metavar="FILE",
                        help="the report of a migrated run (TRANSFER_TO_NPU_REPORT): say which "
                             "findings ran")
    parser.add_argument("--torch-npu", metavar="VERSION",
                        help="analyze for that torch_npu release line (2.1 ... 2.14): the names "
                             "it has")
    args = parser.parse_args(argv)
    missing = [p for p in args.paths if not os.path.lexists(p)]
    if missing:
        parser.error(f"PATH {shown(missing[0])!r} does not exist")
    runtime = None
    if args.runtime_report:
        try:
            runtime = load_runtime_report(args.runtime_report)
        except ValueError as exc:
            parser.error(str(exc))
    try:
        sp = spellings(args.torch_npu)
    except ValueError as exc:
        parser.error(f"--torch-npu: {exc}")
    report = analyze(args.paths, sp)
    if runtime is not None:
        report.join_runtime(runtime)
    try:
        written = report.write(args.output) if args.output else ()
    except OSError as exc:
        parser.error(f"--output {shown(args.output)!r}: cannot write the reports there "
                     f"({exc.strerror})")
    report.print_summary(sys.stdout, written)
    return 0
