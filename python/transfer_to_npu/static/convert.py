"""python -m transfer_to_npu convert SRC DST [--output DIR] [--mode MODE] [--torch-npu V]

A copy of the code base SRC, in DST, migrated as the manual migration
would: ``import torch_npu`` next to the first import of torch in each file,
each CUDA spelling the mapping table maps replaced by its NPU spelling
where it is a device (``'cuda:0'`` -> ``'npu:0'``, ``.cuda()`` ->
``.npu()``, ``torch.cuda.X`` -> ``torch.npu.X``, ``'nccl'`` ->
``'hccl'``...), and the tests of a device or backend the conversion
changed with it.  What cannot be converted stays as written, with a
``# transfer_to_npu:`` comment above its statement, and is listed in the
reports (written to DIR, by default DST/migration_report).  ``--mode
import`` only adds ``import transfer_to_npu`` after torch's import, for
the migration at run time.

The findings are ``analyze``'s (one scan for both tools); the edits are
made on the text (``rewrite``), so every other byte of the file stays as
it was: comments, layout, quotes, line endings.  Files without CUDA
spellings, and all other files, are copied as they are; so are links.
DST must be new or empty and outside SRC: nothing is overwritten.
Converting a converted copy changes none of its files.
"""

import argparse
import json
import os
import shutil
import sys
import time

from . import rewrite, sources as _sources, targets as _targets
from .sources import SourceError
from .report import Report, shown

REPORT_DIR = "migration_report"
MODES = ("npu", "import")


def _inside(path, root):
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_paths(src, dst, output=None):
    """src, dst and the reports' directory as convert takes them, or
    ValueError naming the one that will not do.  Nothing is written into
    SRC, nor over anything in DST."""
    if not os.path.exists(src):
        raise ValueError(f"convert: SRC {src!r} does not exist")
    if _inside(dst, src):
        raise ValueError(f"convert: DST {dst!r} is inside SRC {src!r}: it would be converted "
                         f"into itself")
    if output is not None and _inside(output, src):
        raise ValueError(f"convert: --output {output!r} is inside SRC {src!r}: nothing is "
                         f"written into SRC")
    if os.path.lexists(dst):
        if not os.path.isdir(dst) or os.listdir(dst):
            raise ValueError(f"convert: DST {dst!r} exists and is not an empty directory: "
                             f"nothing is overwritten")


# --- the copy ---------------------------------------------------------------

def own_report(path):
    """Whether a directory holds the reports of an earlier convert (a
    converted copy's migration_report), which the copy leaves out."""
    try:
        with open(os.path.join(path, "migration_report.json"), encoding="utf-8") as f:
            return json.load(f).get("tool") == "convert"
    except (OSError, ValueError, AttributeError):
        return False


def convert(src, dst, output=None, spellings_=None, progress=None, mode="npu"):
    """Write the migrated copy of src to dst and its reports to output
    (default dst/migration_report); the report.  mode "import" only adds
    the import of transfer_to_npu."""
    from .analyze import cuda_findings, internal_error, spellings

    if mode not in MODES:
        raise ValueError(f"convert: mode={mode!r} must be one of {', '.join(MODES)}")
    check_paths(src, dst, output)
    output = os.path.join(dst, REPORT_DIR) if output is None else output
    skip, top_skip = ("__pycache__",), ()
    theirs = os.path.join(src, REPORT_DIR)
    if os.path.isdir(src) and os.path.lexists(theirs):
        if own_report(theirs):
            top_skip = (REPORT_DIR,)  # an earlier copy's reports: this copy writes its own
        elif os.path.realpath(output) == os.path.realpath(os.path.join(dst, REPORT_DIR)):
            raise ValueError(f"convert: SRC {src!r} has a {REPORT_DIR!r} of its own: give "
                             f"the reports another place with --output")
    sp = spellings_ if spellings_ is not None else spellings()
    report = Report("convert", [src])
    progress = progress if progress is not None else _sources.Progress("convert")
    start = time.perf_counter()
    os.makedirs(dst, exist_ok=True)
    uses, held = _targets.Uses(), []
    for entry in _sources.walk(src, skip, top_skip):
        out = os.path.join(dst, entry.rel)
        if entry.error is not None:
            report.skip(entry.path, entry.error)
            continue
        if entry.kind == "dir":
            os.makedirs(out, exist_ok=True)
            continue
        if entry.kind == "link":
            # A link is copied as a link (what it points at is not read),
            # to the same place: into the copy where it pointed into SRC.
            os.symlink(_link_target(entry, src, dst), out)
            continue
        written = False
        if entry.kind == "python":
            try:
                scanned = _Scanned(sp, entry, out, report, mode)
                uses.add(entry.path, entry.rel, scanned)
                if scanned.pending:
                    held.append(scanned)  # written once the tree settles its patches
                    continue
                written = scanned.write(report)
            except SourceError as exc:
                _skipped(report, entry.path, out, exc)
                written = True
            except Exception as exc:  # noqa: BLE001 - one file never stops the run
                _skipped(report, entry.path, out, internal_error(exc))
                written = True
        elif entry.kind in ("cuda", "cpp") and mode == "npu":
            try:
                report.findings.extend(cuda_findings(entry.path, _sources.read_bytes(entry.path),
                                                     entry.kind))
                report.other_files += 1
            except SourceError as exc:
                report.skip(entry.path, exc)
        if not written:
            _copy(report, entry.path, out)
        progress.update(f"{report.files} Python files, {report.lines:,} lines, "
                        f"{len(report.findings)} findings")
    dropped = uses.settle([p for scanned in held for p in scanned.pending])
    for scanned in held:
        try:
            if not scanned.write(report, dropped):
                _copy(report, scanned.path, scanned.out)
        except SourceError as exc:
            _skipped(report, scanned.path, scanned.out, exc)
    progress.done()
    report.seconds = time.perf_counter() - start
    report.write(output)
    return report


def _copy(report, path, out):
    try:
        shutil.copy2(path, out)  # as it is
    except OSError as exc:
        report.skip(path, SourceError(f"not copied ({exc.strerror})"))


class _Scanned:
    """One Python file of SRC scanned, to be written to out."""

    def __init__(self, sp, entry, out, report, mode):
        from .analyze import scan_python

        self.path, self.out = entry.path, out
        self.data = _sources.read_bytes(entry.path)
        scanned, lines, self.text, self.tree = scan_python(
            sp, entry.path, self.data, "transfer_to_npu" if mode == "import" else "torch_npu")
        self.findings, self.pending = scanned.findings, scanned.pending
        self.stored_attrs, self.functions = scanned.stored_attrs, scanned.functions
        report.files += 1
        report.lines += lines

    def write(self, report, dropped=()):
        """Write the converted copy; False when it has nothing to convert
        (it is then copied as it is)."""
        findings = [f for f in self.findings if id(f) not in dropped]
        if not findings:
            return False
        try:
            new = rewrite.apply(self.text, findings, self.tree)
        except (SyntaxError, ValueError):
            raise SourceError("not converted: the result would not parse") from None
        encoding = _sources.detect_encoding(self.data)
        bom = b""
        if encoding == "utf-8-sig":
            bom, encoding = b"\xef\xbb\xbf", "utf-8"
        try:
            new_bytes = bom + new.encode(encoding)
        except UnicodeEncodeError:
            raise SourceError(f"not converted: the result cannot be written in {encoding}") \
                from None
        with open(self.out, "xb") as f:
            f.write(new_bytes)
        shutil.copymode(self.path, self.out)
        report.findings.extend(findings)
        return True


def _skipped(report, path, out, error):
    """A Python file not converted: listed with the files skipped, and
    copied with a comment saying so at its top (after the lines that must
    come first: #!, an encoding declaration), unless it is not text."""
    report.skip(path, error)
    try:
        data = _sources.read_bytes(path)
    except SourceError:
        return
    if b"\0" in data:
        _copy(report, path, out)
        return
    lines = data.splitlines(keepends=True)
    end = next((m for m in (b"\r\n", b"\n", b"\r") if lines and lines[0].endswith(m)), b"\n")
    at = 0
    while at < min(2, len(lines)) and lines[at].lstrip().startswith(b"#") and (
            lines[at].startswith(b"#!") or b"coding" in lines[at]):
        at += 1
    mark = f"{rewrite.COMMENT}not converted: {error.reason}".encode("ascii", "backslashreplace")
    if at < len(lines) and lines[at].rstrip(b"\r\n") == mark:
        _copy(report, path, out)  # marked already (a copy converted again)
        return
    head = b"".join(lines[:at])
    if head and not head.endswith((b"\n", b"\r")):
        head += end
    try:
        with open(out, "xb") as f:
            f.write(head + mark + end + b"".join(lines[at:]))
        shutil.copymode(path, out)
    except OSError as exc:
        report.skip(path, SourceError(f"not copied ({exc.strerror})"))


def _link_target(entry, src, dst):
    """Where a link of SRC points from the copy: the copy's file for a
    link into SRC (an absolute one rewritten to DST, a relative one as it
    is), the same file for a link out of it (a relative one made
    absolute)."""
    link = entry.link
    src_abs = os.path.abspath(src)
    here = os.path.dirname(os.path.abspath(entry.path))
    target = os.path.normpath(os.path.join(here, link))
    if _inside(target, src_abs):
        if not os.path.isabs(link):
            return link
        inside = os.path.relpath(os.path.realpath(target), os.path.realpath(src_abs))
        return os.path.join(os.path.abspath(dst), inside)
    return link if os.path.isabs(link) else target


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m transfer_to_npu convert",
        description="Write a copy of a code base with its CUDA spellings migrated to the NPU.")
    parser.add_argument("src", metavar="SRC", help="the code base (a folder or a file)")
    parser.add_argument("dst", metavar="DST", help="where the copy goes (new or empty)")
    parser.add_argument("--output", metavar="DIR",
                        help=f"where the reports go (default DST/{REPORT_DIR})")
    parser.add_argument("--mode", choices=MODES, default="npu",
                        help="npu: write each CUDA spelling the NPU's way (default); import: "
                             "only add `import transfer_to_npu` after torch's import")
    parser.add_argument("--torch-npu", metavar="VERSION",
                        help="convert for that torch_npu release line (2.1 ... 2.14): the names "
                             "it has")
    args = parser.parse_args(argv)
    try:
        from .analyze import spellings

        sp = spellings(args.torch_npu)
        report = convert(args.src, args.dst, args.output, sp, mode=args.mode)
    except ValueError as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"convert: cannot write {shown(exc.filename)!r} ({exc.strerror})")
    output = args.output or os.path.join(args.dst, REPORT_DIR)
    report.print_summary(sys.stdout, [output + os.sep])
    left = incomplete(report)
    if left:
        print(f"convert: incomplete: {left}; see {shown(output + os.sep)}", file=sys.stderr)
        return 1
    return 0


def _count(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def incomplete(report):
    """What the copy leaves undone, in a line (empty when nothing): the
    places to port by hand (report.hand_work(): what stays as written, but
    for settings that change nothing on the NPU), and the files copied
    unconverted."""
    hand = report.hand_work()
    parts = []
    if hand:
        parts.append(f"{_count(sum(n for _, n in hand), 'place')} left as written in "
                     f"{_count(len(hand), 'file')} (unsupported_api.csv, cuda_op_list.csv)")
    if report.skipped:
        parts.append(f"{_count(len(report.skipped), 'file')} skipped, copied unconverted")
    return ", ".join(parts)
