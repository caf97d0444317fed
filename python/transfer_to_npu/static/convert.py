"""python -m transfer_to_npu convert SRC DST [--output DIR]

A copy of the code base SRC, in DST, migrated as the manual migration
would: ``import torch_npu`` after the first import of torch in each file,
each CUDA spelling the mapping table maps replaced by its NPU spelling
where it is a device (``'cuda:0'`` -> ``'npu:0'``, ``.cuda()`` ->
``.npu()``, ``torch.cuda.X`` -> ``torch.npu.X``, ``'nccl'`` ->
``'hccl'``...).  What cannot be converted stays as written, with a
``# transfer_to_npu:`` comment above its statement, and is listed in the
reports (written to DIR, by default DST/migration_report).

The findings are ``analyze``'s (one scan for both tools); the edits are
made on a concrete syntax tree (libcst), so every other byte of the file
stays as it was: comments, layout, quotes, line endings.  Files without
CUDA spellings, and all other files, are copied as they are.  DST must be
new or empty and outside SRC: nothing is overwritten.
"""

import argparse
import ast
import bisect
import os
import shutil
import sys
import time
import warnings

from . import sources as _sources
from .scan import CHANGE, UNSUPPORTED, _literal_text
from .sources import SourceError
from .report import Report

REPORT_DIR = "migration_report"
COMMENT = "# transfer_to_npu: "


def _libcst():
    try:
        with warnings.catch_warnings():
            # libcst 1.0's metadata module warns of its own use of
            # mypy_extensions when imported: nothing the user can act on.
            warnings.simplefilter("ignore", DeprecationWarning)
            import libcst
            import libcst.metadata  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"convert needs libcst (pip install libcst): {exc}") from None
    return libcst


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


# --- the edits, on libcst's tree ------------------------------------------------

def _char_key(lines, k):
    """An ast position (byte columns) as libcst's (character columns)."""
    l1, c1, l2, c2 = k

    def col(line, c):
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        return c if text.isascii() else len(text.encode("utf-8")[:c].decode("utf-8", "replace"))

    return (l1, col(l1, c1), l2, col(l2, c2))


def _transformer(cst):
    """The libcst transformers, made once libcst is imported."""
    from libcst.metadata import PositionProvider

    class Positioned(cst.CSTTransformer):
        """A transformer that knows the file's line of each node: the
        module it walks may be one statement of the file, whose first
        line (as ast counts it, the def of a decorated function) is
        first_line."""

        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self, first_line):
            super().__init__()
            self.first_line = first_line
            self.delta = 0

        def visit_Module(self, node):
            if node.body:
                self.delta = self.first_line - self.get_metadata(
                    PositionProvider, node.body[0]).start.line

        def position(self, node):
            pos = self.get_metadata(PositionProvider, node)
            d = self.delta
            return (pos.start.line + d, pos.start.column, pos.end.line + d, pos.end.column)

    class Expressions(Positioned):
        """Applies the edits of expressions (strings, attributes, calls,
        imports), found by their position."""

        def __init__(self, edits, first_line):
            super().__init__(first_line)
            self.edits = edits          # char key -> [(finding, edit)]
            self.applied = set()        # ids of the findings whose edits were made

        def _take(self, node, *ops):
            k = self.position(node)
            found = [(f, e) for f, e in self.edits.get(k, ()) if e[0] in ops]
            for f, _ in found:
                self.applied.add(id(f))
            return [e for _, e in found]

        def leave_SimpleString(self, original, updated):
            for e in self._take(original, "literal"):
                updated = updated.with_changes(value=_literal_text(updated.value, e[2]))
            return updated

        def leave_ConcatenatedString(self, original, updated):
            for e in self._take(original, "literal"):
                return cst.SimpleString(repr(e[2]))
            return updated

        def leave_FormattedString(self, original, updated):
            for e in self._take(original, "fstring"):
                first = updated.parts[0]
                if isinstance(first, cst.FormattedStringText):
                    updated = updated.with_changes(
                        parts=[first.with_changes(value=e[2])] + list(updated.parts[1:]))
            return updated

        def leave_Attribute(self, original, updated):
            for e in self._take(original, "attr"):
                updated = updated.with_changes(attr=cst.Name(e[2]))
            return updated

        def leave_Call(self, original, updated):
            for e in self._take(original, "add_keyword", "swap_keyword", "call"):
                if e[0] == "add_keyword":
                    arg = cst.Arg(keyword=cst.Name(e[2]), value=cst.parse_expression(e[3]),
                                  equal=cst.AssignEqual(
                                      whitespace_before=cst.SimpleWhitespace(""),
                                      whitespace_after=cst.SimpleWhitespace("")))
                    updated = updated.with_changes(args=list(updated.args) + [arg])
                elif e[0] == "swap_keyword":
                    args = []
                    for a in updated.args:
                        if a.keyword is not None and a.keyword.value == e[2]:
                            (kw, text), *more = e[3]
                            args.append(a.with_changes(keyword=cst.Name(kw),
                                                       value=cst.parse_expression(text)))
                            args += [cst.Arg(keyword=cst.Name(k), value=cst.parse_expression(t))
                                     for k, t in more]
                        else:
                            args.append(a)
                    updated = updated.with_changes(args=args)
                else:
                    call = cst.parse_expression(f"f({e[3]})")
                    updated = updated.with_changes(
                        func=updated.func.with_changes(attr=cst.Name(e[2])), args=call.args)
            return updated

        def leave_ImportFrom(self, original, updated):
            for e in self._take(original, "import_from"):
                names = [alias.with_changes(
                    name=cst.Name(name),
                    asname=cst.AsName(name=cst.Name(asname)) if asname else None)
                    for alias, (name, asname) in zip(updated.names, e[3])]
                updated = updated.with_changes(module=cst.parse_expression(e[2]), names=names)
            return updated

        def leave_Import(self, original, updated):
            for e in self._take(original, "import"):
                names = list(updated.names)
                names[e[2]] = names[e[2]].with_changes(name=cst.parse_expression(e[3]))
                updated = updated.with_changes(names=names)
            return updated

    class Statements(Positioned):
        """Adds the comments above the statements and the lines after
        them, by line: each to the innermost statement holding it."""

        def __init__(self, comments, inserts, first_line):
            super().__init__(first_line)
            self.comments = comments    # line -> [comment text]
            self.inserts = inserts      # line -> [statement text]

        def _span(self, node):
            start, _, end, _ = self.position(node)
            for d in getattr(node, "decorators", ()):
                start = min(start, self.position(d)[0])
            return start, end

        def _body(self, original_body, updated_body, last=False):
            out = []
            spans = [self._span(o) for o in original_body]
            for i, (span, updated) in enumerate(zip(spans, updated_body)):
                first, end = span
                if last:
                    # Module level: a line no statement holds goes to the
                    # statement before it (the first one's to the first).
                    first = first if i else 1
                    end = spans[i + 1][0] - 1 if i + 1 < len(spans) else float("inf")
                lines = sorted(line for line in set(self.comments) | set(self.inserts)
                               if first <= line <= end)
                comments = [c for line in lines if line in self.comments
                            for c in self.comments.pop(line)]
                comments = list(dict.fromkeys(comments))  # one of each
                if comments and hasattr(updated, "leading_lines"):
                    updated = updated.with_changes(leading_lines=list(updated.leading_lines) + [
                        cst.EmptyLine(comment=cst.Comment(COMMENT + c)) for c in comments])
                out.append(updated)
                for line in lines:
                    for text in self.inserts.pop(line, ()):
                        out.append(cst.parse_statement(text + "\n"))
            return out

        def leave_IndentedBlock(self, original, updated):
            return updated.with_changes(body=self._body(original.body, updated.body))

        def leave_Module(self, original, updated):
            return updated.with_changes(body=self._body(original.body, updated.body, last=True))

    return Expressions, Statements


def _comment(f):
    text = f"{f.api}: {f.result}" if f.api not in f.result else f.result
    return " ".join(text.split())


def _top_spans(cst, module, tree):
    """The lines of each top-level statement of the libcst module, from the
    ast of the same text: (first line, decorators included; the line
    ast and libcst both start it at).  None when the two do not pair up."""
    spans, j, body = [], 0, tree.body
    for stmt in module.body:
        n = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        nodes = body[j:j + n]
        j += n
        if len(nodes) != n:
            return None
        first = nodes[0]
        top = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", ())])
        spans.append((top, first.lineno))
    return spans if j == len(body) else None


def apply(text, findings, tree):
    """text with the findings' edits made (libcst), and comments above what
    stays as written; the findings whose edits could not be made become
    unsupported ones.  Only the top-level statements that hold an edit are
    walked (libcst's positions cost most of the time)."""
    cst = _libcst()
    from libcst.metadata import MetadataWrapper

    Expressions, Statements = _transformer(cst)
    lines = _sources.split_lines(text)
    module = cst.parse_module(text)
    # Per line: the edits of expressions, the statements added.
    edits, inserts = {}, {}
    for f in findings:
        for e in f.edits:
            if e[0] == "insert_after":
                inserts.setdefault(e[1], []).append(e[2])
            else:
                k = _char_key(lines, e[1])
                edits.setdefault(k[0], {}).setdefault(k, []).append((f, e))
    spans = _top_spans(cst, module, tree)
    whole = spans is None or not module.body
    if whole:
        # Walked as one (the statements did not pair up with ast's).
        spans = [(1, tree.body[0].lineno if tree.body else 1)]
    body = list(module.body)
    starts = [top for top, _ in spans]
    owner = {}   # top-level statement index -> the lines it holds something at
    for line in set(edits) | set(inserts) | {f.line for f in findings}:
        i = max(0, bisect.bisect_right(starts, line) - 1)
        owner.setdefault(i, set()).add(line)
    applied = set()
    for i in sorted(owner, reverse=True):
        held = owner[i]
        sub = module if whole else module.with_changes(body=[body[i]], header=[], footer=[])
        first_line = spans[i][1]
        sub_edits = {k: v for line in held for k, v in edits.get(line, {}).items()}
        if sub_edits:
            t = Expressions(sub_edits, first_line)
            sub = MetadataWrapper(sub, unsafe_skip_copy=True).visit(t)
            applied |= t.applied
        sub_comments = {}
        for f in findings:
            if f.line not in held:
                continue
            if f.category == CHANGE:
                if id(f) in applied or all(e[0] == "insert_after" for e in f.edits):
                    continue
                # An edit that found nothing to change at its place.
                f.category, f.kind = UNSUPPORTED, "hand_edit"
                f.result = f"not converted automatically: it becomes {f.result}"
                f.edits = []
            sub_comments.setdefault(f.line, []).append(_comment(f))
        sub_inserts = {line: inserts[line] for line in held if line in inserts}
        if sub_comments or sub_inserts:
            sub = MetadataWrapper(sub, unsafe_skip_copy=True).visit(
                Statements(sub_comments, sub_inserts, first_line))
        if whole:
            return sub.code
        body[i:i + 1] = sub.body
    return module.with_changes(body=body).code


# --- the copy ---------------------------------------------------------------

def convert(src, dst, output=None, spellings_=None, progress=None):
    """Write the migrated copy of src to dst and its reports to output
    (default dst/migration_report); the report."""
    from .analyze import cuda_findings, internal_error, spellings

    check_paths(src, dst, output)
    output = os.path.join(dst, REPORT_DIR) if output is None else output
    if os.path.isdir(src) and os.path.lexists(os.path.join(src, REPORT_DIR)) and \
            os.path.realpath(output) == os.path.realpath(os.path.join(dst, REPORT_DIR)):
        raise ValueError(f"convert: SRC {src!r} has a {REPORT_DIR!r} of its own: give the "
                         f"reports another place with --output")
    _libcst()
    sp = spellings_ if spellings_ is not None else spellings()
    report = Report("convert", [src])
    progress = progress if progress is not None else _sources.Progress("convert")
    start = time.perf_counter()
    os.makedirs(dst, exist_ok=True)
    if os.path.isdir(src):
        for d, dirs, _ in os.walk(src):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for x in dirs:
                rel = os.path.relpath(os.path.join(d, x), src)
                if not os.path.islink(os.path.join(d, x)):
                    os.makedirs(os.path.join(dst, rel), exist_ok=True)
    for entry in _sources.walk(src, follow_links=False, skip=("__pycache__",)):
        out = os.path.join(dst, entry.rel)
        if entry.error is not None:
            report.skip(entry.path, entry.error)
            continue
        if entry.kind == "link":
            os.symlink(entry.link, out)
            continue
        written = False
        if entry.kind == "python":
            try:
                written = _convert_file(sp, entry.path, out, report)
            except SourceError as exc:
                report.skip(entry.path, exc)
            except Exception as exc:  # noqa: BLE001 - one file never stops the run
                report.skip(entry.path, internal_error(exc))
        elif entry.kind in ("cuda", "cpp"):
            try:
                report.findings.extend(cuda_findings(entry.path, _sources.read_bytes(entry.path),
                                                     entry.kind))
                report.other_files += 1
            except SourceError as exc:
                report.skip(entry.path, exc)
        if not written:
            try:
                shutil.copy2(entry.path, out)  # as it is
            except OSError as exc:
                report.skip(entry.path, SourceError(f"not copied ({exc.strerror})"))
        progress.update(f"{report.files} Python files, {report.lines:,} lines, "
                        f"{len(report.findings)} findings")
    progress.done()
    report.seconds = time.perf_counter() - start
    report.write(output)
    return report


def _convert_file(sp, path, out, report):
    """Write the converted copy of one Python file; False when it has
    nothing to convert (it is then copied as it is)."""
    from .analyze import scan_python

    data = _sources.read_bytes(path)
    findings, lines, text, tree = scan_python(sp, path, data)
    report.files += 1
    report.lines += lines
    if not findings:
        return False
    try:
        new = apply(text, findings, tree)
    except Exception as exc:  # libcst's own errors: the file is copied as it is
        raise SourceError(f"not converted: the syntax tree library failed on it "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                          ) from None
    try:
        ast.parse(new)
    except SyntaxError as exc:
        raise SourceError(f"not converted: the result would not parse ({exc.msg})") from None
    encoding = _sources.detect_encoding(data)
    with open(out, "wb") as f:
        if encoding == "utf-8-sig":
            f.write(b"\xef\xbb\xbf")
            encoding = "utf-8"
        f.write(new.encode(encoding))
    shutil.copymode(path, out)
    report.findings.extend(findings)
    return True


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m transfer_to_npu convert",
        description="Write a copy of a code base with its CUDA spellings migrated to the NPU.")
    parser.add_argument("src", metavar="SRC", help="the code base (a folder or a file)")
    parser.add_argument("dst", metavar="DST", help="where the copy goes (new or empty)")
    parser.add_argument("--output", metavar="DIR",
                        help=f"where the reports go (default DST/{REPORT_DIR})")
    args = parser.parse_args(argv)
    try:
        report = convert(args.src, args.dst, args.output)
    except (ValueError, ImportError) as exc:
        parser.error(str(exc))
    except OSError as exc:
        parser.error(f"convert: cannot write {exc.filename!r} ({exc.strerror})")
    output = args.output or os.path.join(args.dst, REPORT_DIR)
    report.print_summary(sys.stdout, [output + os.sep])
    return 0
