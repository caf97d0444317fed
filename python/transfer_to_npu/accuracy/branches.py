"""Tests of a device or backend name that go another way than on CUDA.

``if x.device.type == 'cuda':`` is a branch CUDA takes and the NPU does
not (nor the CPU reference): the two runs agree with each other, and both
differ from the original.  Such a line is found as the migrated run runs
it.  The user's own files that hold a test comparing something with a
CUDA or NCCL name are compiled with the test's subject passed through a
function of ours (as the script runs, and as its modules are imported),
which sees the value tested and hands it back unchanged; code without such
a test is compiled as Python compiles it, and nothing else is watched, so
the run pays for the tests alone.  A test is named when that value names
the migration's target, the migration having made it (``'npu'`` from
``x.device.type``, ``'hccl'`` from ``get_backend()``), and the test's
outcome differs from the one its CUDA spelling gives: a string the script
holds itself (nanoGPT's ``'cuda' in device``, with ``device = 'cuda'``) is
the same on both, and is not named.

Where the user's code was compiled before the dump began (a process that
imports torch from its script: a rank torchrun starts), its files are
watched by a trace function instead, limited to them: it evaluates, when a
test runs, the value tested, without running the user's code (names,
attributes of torch's objects, constant subscripts, and calls of torch's
query functions and ``str``).  On Python 3.11 and before, any trace
function slows every Python frame of the process.

The findings go to the run's record (outcome.py); compare joins them with
``analyze``'s findings at those lines (its advice on the edit), and counts
each as a difference.
"""

import ast
import builtins
import dis
import importlib.machinery
import importlib.util
import re
import sys
import threading
import types

from . import frames

# A line evaluated this many times without a finding is left alone.
MAX_EVALUATIONS = 16
# The name rewritten code calls (a builtin: found from any module).
HOOK = "__transfer_to_npu_device_test__"
# A file that holds none of these holds no test of a CUDA or NCCL name.
_CANDIDATE = re.compile(rb"cuda|nccl", re.IGNORECASE)
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in"}


class _Unknown(Exception):
    """A value the trace does not compute (it would run the user's code)."""


class Test:
    """One test of a name in the source: the subject evaluated at run time,
    the literals it is compared with, and how; span: where the test is
    (the instruction that compares carries it)."""

    __slots__ = ("filename", "line", "subject", "op", "literals", "literal_left", "code",
                 "span", "evaluations")

    def __init__(self, filename, line, subject, op, literals, literal_left, code, span):
        self.filename, self.line, self.subject, self.op = filename, line, subject, op
        self.literals, self.literal_left, self.code = literals, literal_left, code
        self.span = span
        self.evaluations = 0

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


def tests_in(source, filename, tree=None):
    """{line: [Test]} of the tests of a CUDA or NCCL name in a source (its
    tree, where parsed already)."""
    if tree is None:
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
                Test(filename, subject.lineno, subject, op, lits, left, " ".join(code.split()),
                     span))
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
    """The device-name tests of one process: ``findings`` {(file, line,
    code): finding}."""

    def __init__(self, target_device, target_backend):
        self.device, self.backend = target_device, target_backend
        self.files = {}      # filename -> {line: [Test]}
        self.findings = {}
        self.lock = threading.Lock()
        self.finder = None
        # The trace, where code compiled before the dump is watched: the
        # files it watches; code object -> {line: [Test]} or None (its
        # answer for a code object, made at its first call).
        self.trace = None
        self.traced = None
        self.codes = {}
        self.answers = _Answers(self)

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

    def judge(self, test, value):
        """A test's subject evaluated to value: named where its outcome
        differs from the one CUDA's spelling of value gives."""
        test.evaluations += 1
        if not isinstance(value, str):
            return  # a torch.device equals no string, on CUDA either
        cuda = self.twin(value)
        if cuda is None:
            return
        here, there = test.outcome(value), test.outcome(cuda)
        if here != there:
            with self.lock:
                self.findings.setdefault((test.filename, test.line, test.code), {
                    "site": f"{test.filename}:{test.line}", "code": test.code,
                    "value": value, "cuda": cuda, "here": here, "on_cuda": there})

    def done(self, test):
        return test.evaluations >= MAX_EVALUATIONS or \
            (test.filename, test.line, test.code) in self.findings

    # -- the user's code, compiled with its tests watched

    def install(self):
        """Watch the tests of the user's code from now on: the script our
        runner compiles (compile_user), the modules imported; and, by the
        trace, the user's files loaded already."""
        global _current
        _current = self
        setattr(builtins, HOOK, _seen)
        self.finder = _Finder(self)
        at = next((i for i, f in enumerate(sys.meta_path)
                   if f is importlib.machinery.PathFinder), len(sys.meta_path))
        sys.meta_path.insert(at, self.finder)
        loaded = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        loaded = {f for f in loaded if isinstance(f, str) and f.endswith(".py")
                  and frames.is_user(f) and self._tests_of(f)}
        if loaded:
            self.start(loaded)

    def rewritten(self, source, filename):
        """The code of a user's file with each test's subject passed through
        HOOK; None for a file with no test (compiled as usual)."""
        if not _CANDIDATE.search(source):
            return None
        try:
            text = importlib.util.decode_source(source)
            tree = ast.parse(text, filename)
        except (SyntaxError, ValueError):
            return None  # compiled as usual: Python says what is wrong
        tests = [t for ts in tests_in(text, filename, tree).values() for t in ts]
        if not tests:
            return None
        with _LOCK:
            first = len(_TESTS)
            _TESTS.extend((self, t) for t in tests)
        subjects = {id(t.subject): first + i for i, t in enumerate(tests)}
        tree = ast.fix_missing_locations(_Rewriter(subjects).visit(tree))
        return compile(tree, filename, "exec", dont_inherit=True)

    def _tests_of(self, filename):
        tests = self.files.get(filename)
        if tests is None:
            try:
                with open(filename, encoding="utf-8", errors="replace") as f:
                    tests = tests_in(f.read(), filename)
            except OSError:
                tests = {}
            self.files[filename] = tests
        return tests

    def stop(self):
        global _current
        if _current is self:
            _current = None
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        if self.trace is not None:
            if sys.gettrace() is self.trace:
                sys.settrace(None)
            threading.settrace(None)

    # -- the trace, for code compiled before

    def start(self, files=None):
        """Trace this thread and the threads started from now on, in files
        (None: every user file); False where a trace function is set
        already (a debugger, coverage)."""
        if sys.gettrace() is not None:
            return False
        self.traced = files
        answers = self.answers

        # Called at every call of a Python function in the process: as
        # little as can be (a dict's look-up), the work at a code object's
        # first call (_Answers.__missing__).
        def trace(frame, event, arg):
            return answers[frame.f_code]

        self.trace = trace
        sys.settrace(trace)
        threading.settrace(trace)
        # The frames running already (the script's, importing torch) had
        # no call to answer: their lines are traced from here on.
        frame = sys._getframe(1)
        while frame is not None:
            if answers[frame.f_code] is not None:
                frame.f_trace = self._line
            frame = frame.f_back
        return True

    def classify(self, code):
        try:
            lines = self._lines_of(code)
        except Exception:  # the interpreter finishing, a file gone: not traced
            lines = None
        self.codes[code] = lines
        return self._line if lines else None

    def _lines_of(self, code):
        filename = code.co_filename
        if not frames.is_user(filename) or \
                (self.traced is not None and filename not in self.traced):
            return None
        tests = self._tests_of(filename)
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
        for test in tests:
            try:
                value = _evaluate(test.subject, frame)
            except Exception:  # _Unknown, or a name not bound yet
                test.evaluations += 1
                continue
            self.judge(test, value)
        line = frame.f_lineno
        if all(self.done(t) for t in lines.get(line, ())):
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


# Every test rewritten code watches, as (tracer, Test), by its index.
_TESTS = []
_LOCK = threading.Lock()
_current = None  # the tracer of this process's dump


def _seen(index, value):
    """HOOK: a test's subject, on its way to the test."""
    try:
        tracer, test = _TESTS[index]
        if tracer is _current and not tracer.done(test):
            tracer.judge(test, value)
    except Exception:  # nothing of ours may change what the user's code does
        pass
    return value


def compile_user(source, filename):
    """The script our runner runs, compiled: its tests watched where a dump
    watches them."""
    tracer = _current
    code = tracer.rewritten(source, filename) if tracer is not None else None
    return code if code is not None else compile(source, filename, "exec", dont_inherit=True)


class _Rewriter(ast.NodeTransformer):
    """Each test's subject (by node) passed through HOOK with its index."""

    def __init__(self, subjects):
        self.subjects = subjects

    def visit(self, node):
        index = self.subjects.get(id(node))
        node = super().visit(node)
        if index is None:
            return node
        call = ast.Call(func=ast.Name(HOOK, ast.Load()),
                        args=[ast.Constant(index), node], keywords=[])
        return ast.copy_location(call, node)


class _Finder:
    """On sys.meta_path just before the path finder: the spec the path
    finder gives, with a loader that watches the tests of a user's file."""

    def __init__(self, tracer):
        self.tracer = tracer

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.SourceFileLoader \
                and frames.is_user(spec.origin):
            spec.loader = _Loader(fullname, spec.origin, self.tracer)
        return spec

    def invalidate_caches(self):
        pass


class _Loader(importlib.machinery.SourceFileLoader):
    """A user's module: rewritten where it holds a test, and then compiled
    from its source (its cached bytecode is Python's, without the
    rewriting; none is written of ours); else as Python loads it."""

    def __init__(self, fullname, path, tracer):
        super().__init__(fullname, path)
        self.tracer = tracer

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        code = self.tracer.rewritten(self.get_data(path), path)
        return code if code is not None else super().get_code(fullname)


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
