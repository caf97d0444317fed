"""Tests of a device or backend name that go another way than on CUDA.

``if x.device.type == 'cuda':`` is a branch CUDA takes and the NPU does
not (nor the CPU reference): the two runs agree with each other, and both
differ from the original.  Such a line is found as the migrated run runs
it: a trace limited to the code objects that hold a test comparing
something with a CUDA or NCCL name (a cheap scan of the user's own files,
read once each as their code first runs) evaluates, when the line runs,
the value tested, without running the user's code: names, attributes of
torch's objects, constant subscripts, and calls of torch's query functions
(``dist.get_backend()``) and ``str``.  A test is named when that value
names the migration's target, the migration having made it (``'npu'``
from ``x.device.type``, ``'hccl'`` from ``get_backend()``), and the test's
outcome differs from the one its CUDA spelling gives: a string the script
holds itself (nanoGPT's ``'cuda' in device``, with ``device = 'cuda'``) is
the same on both, and is not named.

The findings go to the run's record (outcome.py); compare joins them with
``analyze``'s findings at those lines (its advice on the edit), and counts
each as a difference.  Measured: the trace costs no more than the noise of
a training step (docs/accuracy.md).
"""

import ast
import dis
import sys
import threading
import types

from . import frames

# A line evaluated this many times without a finding is left alone.
MAX_EVALUATIONS = 16
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in"}


class _Unknown(Exception):
    """A value the trace does not compute (it would run the user's code)."""


class Test:
    """One test of a name in the source: the subject evaluated at run time,
    the literals it is compared with, and how; span: where the test is
    (the instruction that compares carries it)."""

    __slots__ = ("line", "subject", "op", "literals", "literal_left", "code", "span")

    def __init__(self, line, subject, op, literals, literal_left, code, span):
        self.line, self.subject, self.op = line, subject, op
        self.literals, self.literal_left, self.code = literals, literal_left, code
        self.span = span

    def outcome(self, value):
        if self.op == "startswith":
            return value.startswith(tuple(self.literals))
        if self.literal_left:  # 'cuda' in value
            hit = self.literals[0] in value
            return hit if self.op == "in" else not hit
        if self.op in ("==", "!="):
            equal = value == self.literals[0]
            return equal if self.op == "==" else not equal
        hit = value in self.literals
        return hit if self.op == "in" else not hit


def _spells_cuda(text):
    from .. import _C

    try:
        return (_C.npu_device_string(text) is not None
                or _C.hccl_backend_string(text) is not None)
    except ValueError:  # 'cuda:x': CUDA's name, spelled wrong
        return True


def _literals(node):
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    values = [e.value for e in items if isinstance(e, ast.Constant)]
    if len(values) != len(items) or not all(type(v) is str for v in values):
        return None
    return values if any(_spells_cuda(v) for v in values) else None


def tests_in(source, filename):
    """{line: [Test]} of the tests of a CUDA or NCCL name in a source."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return {}
    out = {}
    for node in ast.walk(tree):
        found = None
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
            op = _OPS[type(node.ops[0])]
            left, right = node.left, node.comparators[0]
            lits = _literals(right)
            if lits is not None and not isinstance(left, ast.Constant):
                found = (left, op, lits, False)
            elif op in ("in", "not in") and isinstance(left, ast.Constant):
                lits = _literals(left)
                if lits is not None:
                    found = (right, op, lits, True)
            elif op in ("==", "!="):
                lits = _literals(left)
                if lits is not None:
                    found = (right, op, lits, False)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "startswith" and len(node.args) == 1 and not node.keywords):
            lits = _literals(node.args[0])
            if lits is not None:
                found = (node.func.value, "startswith", lits, False)
        if found is not None:
            subject, op, lits, left = found
            code = ast.get_source_segment(source, node) or ""
            span = (node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)
            out.setdefault(subject.lineno, []).append(
                Test(subject.lineno, subject, op, lits, left, " ".join(code.split()), span))
    return out


# --- evaluating a subject without running the user's code ---------------------

def _torch_owned(value):
    import torch

    return isinstance(value, (torch.Tensor, torch.device, types.ModuleType, str)) or \
        type(value).__module__.startswith("torch")


def _evaluate(node, frame):
    kind = type(node)
    if kind is ast.Constant:
        return node.value
    if kind is ast.Name:
        for scope in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in scope:
                return scope[node.id]
        raise _Unknown(node.id)
    if kind is ast.Attribute:
        base = _evaluate(node.value, frame)
        if _torch_owned(base):
            return getattr(base, node.attr)
        import inspect

        found = inspect.getattr_static(base, node.attr)
        if hasattr(type(found), "__get__") and not isinstance(found, (str, int, float)):
            raise _Unknown(node.attr)  # a property: the user's code
        return found
    if kind is ast.Subscript and isinstance(node.slice, ast.Constant):
        base = _evaluate(node.value, frame)
        if isinstance(base, (dict, list, tuple, str)):
            return base[node.slice.value]
        raise _Unknown("subscript")
    if kind is ast.Call and not node.keywords:
        func = _evaluate(node.func, frame)
        if func in (str, repr) or (callable(func) and getattr(func, "__module__", "")
                                   and func.__module__.startswith("torch")):
            return func(*[_evaluate(a, frame) for a in node.args])
    raise _Unknown(kind.__name__)


class Tracer:
    """The trace of one process: ``findings`` {(file, line, code): finding}."""

    def __init__(self, target_device, target_backend):
        self.device, self.backend = target_device, target_backend
        self.files = {}      # filename -> {line: [Test]}
        # code object -> {line: [Test]} or None; the trace function's
        # answer for a code object, made at its first call.
        self.codes = {}
        self.answers = _Answers(self)
        self.counts = {}     # (file, line) -> evaluations
        self.findings = {}
        self.lock = threading.Lock()

    def twin(self, value):
        """What a value the migration made is on CUDA, or None for a value
        it did not make."""
        d = self.device
        if value == d or value.startswith(d + ":"):
            return "cuda" + value[len(d):]
        if self.backend in value.split(",") or any(
                part.split(":")[-1] == self.backend for part in value.split(",")):
            return value.replace(self.backend, "nccl")
        return None

    # -- the trace

    def start(self):
        """Trace this thread and the threads started from now on; False
        where a trace function is set already (a debugger, coverage)."""
        if sys.gettrace() is not None:
            return False
        answers = self.answers

        # Called at every call of a Python function in the process: as
        # little as can be (a dict's look-up), the work at a code object's
        # first call (_Answers.__missing__).
        def trace(frame, event, arg):
            return answers[frame.f_code]

        self.trace = trace
        sys.settrace(trace)
        threading.settrace(trace)
        return True

    def stop(self):
        if getattr(self, "trace", None) is not None and sys.gettrace() is self.trace:
            sys.settrace(None)
        threading.settrace(None)

    def classify(self, code):
        try:
            lines = self._lines_of(code)
        except Exception:  # the interpreter finishing, a file gone: not traced
            lines = None
        self.codes[code] = lines
        return self._line if lines else None

    def _lines_of(self, code):
        filename = code.co_filename
        if not frames.is_user(filename):
            return None
        tests = self.files.get(filename)
        if tests is None:
            try:
                with open(filename, encoding="utf-8", errors="replace") as f:
                    tests = tests_in(f.read(), filename)
            except OSError:
                tests = {}
            self.files[filename] = tests
        if not tests:
            return None
        lines = {line for _, line in dis.findlinestarts(code) if line in tests}
        found = {line: tests[line] for line in lines}
        if not found or not hasattr(code, "co_positions"):
            return found or None
        # Python 3.11 and later: the instruction that makes each test, so
        # that a test is evaluated when it is, not when its line starts (in
        # `a and x.device.type == 'cuda'` it may never be).
        spans = {t.span: t for ts in found.values() for t in ts}
        offsets, placed = {}, set()
        for ins in dis.get_instructions(code):
            # The first instruction spanning the whole test is the one that
            # compares (or calls startswith): its operands come before it.
            span = tuple(ins.positions) if ins.positions else None
            if span in spans and span not in placed:
                placed.add(span)
                offsets.setdefault(ins.offset, []).append(spans[span])
        return {"lines": found, "offsets": offsets} if offsets else found

    def _line(self, frame, event, arg):
        lines = self.codes.get(frame.f_code)
        if not lines:
            return self._line
        if "offsets" in lines:
            if event == "line":
                # Instruction by instruction, on the lines with a test only.
                frame.f_trace_opcodes = frame.f_lineno in lines["lines"]
            elif event == "opcode":
                tests = lines["offsets"].get(frame.f_lasti)
                if tests:
                    self._check(frame, lines["lines"], tests)
        elif event == "line" and frame.f_lineno in lines:
            self._check(frame, lines, lines[frame.f_lineno])
        return self._line

    def _check(self, frame, lines, tests):
        code = frame.f_code
        line = frame.f_lineno
        place = (code.co_filename, line)
        count = self.counts.get(place, 0) + 1
        self.counts[place] = count
        for test in tests:
            try:
                value = _evaluate(test.subject, frame)
            except Exception:  # _Unknown, or a name not bound yet
                continue
            if not isinstance(value, str):
                continue  # a torch.device equals no string, on CUDA either
            cuda = self.twin(value)
            if cuda is None:
                continue
            here, there = test.outcome(value), test.outcome(cuda)
            if here != there:
                with self.lock:
                    self.findings.setdefault((code.co_filename, line, test.code), {
                        "site": f"{code.co_filename}:{line}", "code": test.code,
                        "value": value, "cuda": cuda, "here": here, "on_cuda": there})
        if count >= MAX_EVALUATIONS or all(
                (code.co_filename, line, t.code) in self.findings for t in lines.get(line, ())):
            lines.pop(line, None)
            if not lines:  # every test of the code object decided: not traced again
                self.codes[code] = None
                self.answers[code] = None


class _Answers(dict):
    """code object -> the trace function's answer: the line tracer, or None."""

    def __init__(self, tracer):
        super().__init__()
        self.tracer = tracer

    def __missing__(self, code):
        answer = self[code] = self.tracer.classify(code)
        return answer


# --- in a compare --------------------------------------------------------------

def findings(dump):
    """The tests a migrated run found going another way than on CUDA (every
    rank's, each line once), with analyze's advice at that line."""
    seen, out = set(), []
    for rank, found in sorted(dump.run_facts("branches").items()):
        for f in found:
            if f["site"] not in seen:
                seen.add(f["site"])
                out.append(dict(f, rank=rank))
    if out:
        _advise(out)
    return out


def _advise(found):
    """analyze's suggestion for each finding's line, where it has one (the
    static findings of the same test)."""
    try:
        from ..static import analyze
    except ImportError:
        return
    spellings = None
    by_file = {}
    for f in found:
        path, _, line = f["site"].rpartition(":")
        by_file.setdefault(path, []).append((int(line), f))
    for path, items in by_file.items():
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            if spellings is None:
                spellings = analyze.spellings()
            static = analyze.scan_python(spellings, path, data)[0].findings
        except Exception:  # the file moved, or cannot be read as Python
            continue
        for line, f in items:
            for s in static:
                if s.line <= line <= s.end_line and "check" in f"{s.kind} {s.api}":
                    f["advice"] = (f"analyze: {s.suggestion}" if s.category != "change" else
                                   f"analyze: convert writes it `{s.result}`")
                    break


def text(p, found):
    if not found:
        return
    p("device-name tests that go another way than on CUDA (the migrated run takes the "
      "other branch):")
    for f in found:
        p(f"  {f['site']}: `{f['code']}` is {f['here']} here ({f['value']!r}), "
          f"{f['on_cuda']} on CUDA ({f['cuda']!r})")
        if f.get("advice"):
            p(f"    {f['advice']}")
