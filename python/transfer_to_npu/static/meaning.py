"""Conversion by meaning: a test of the device and the code it guards are
converted together, or neither is.

CUDA code chooses its path by asking about the device: ``if
torch.cuda.is_available():``, ``x.device.type == 'cuda'``, a test skipped
``if not torch.cuda.is_available()``, an early ``return``.  Converted, the
test says yes on the NPU, and the program takes the path the original took
on a GPU: every CUDA spelling on that path must then be converted too, or
the converted program fails where the original, on a machine without a
GPU, fell back and worked.  So a test is converted only when what it
guards converts (``settle``); otherwise the test, and the conversions it
guards, stay as written (the fallback path, as on a machine without a
GPU), and the test is reported as needing a hand port, naming what stops
it.

What a test guards (its scope): the whole ``if``/``while`` statement (and,
when a branch leaves the block, ``return``, ``raise``, ``pytest.skip()``,
the rest of the block), the rest of the block after an ``assert``, the
function or class a skip decorator marks (the module for ``pytestmark``),
a conditional expression.  A flag assigned from a test (``use_cuda =
torch.cuda.is_available()``, ``self.is_cuda = ...``) guards what the tests
of the flag guard.  A call of a function of the same file inside a scope
brings that function's body in.

What stops a test: a finding left as written that fails on the NPU (an API
with no counterpart, a CUDA-only package, a device string that goes
nowhere a device goes, Lightning's CUDA accelerator...); settings that
change nothing there (cuDNN switches, environment variables) do not.
"""

import ast
import bisect

from .. import _environment
from .scan import CHANGE, CUDA_OP, UNSUPPORTED, key, no_effect

# Kinds of finding that are no test of the device (what torch_npu's import
# adds; what the identity policy answers with a constant is no question
# asked of the device any more).
_NOT_TESTS = frozenset(("import", "identity"))

# Findings left as written that change nothing on the NPU.
_HARMLESS_KINDS = frozenset(("check",))
_ENVIRONMENT = frozenset(name for row in _environment.CARRIED for name in row[:2]) | frozenset(
    _environment.UNSUPPORTED)

# Calls that leave a block: pytest.skip(), self.skipTest(), sys.exit()...
_EXITS = ("skip", "skipTest", "exit", "_exit", "fail")
# Decorators whose condition decides whether what they mark runs.
_SKIPS = ("skipif", "skipIf", "skipUnless", "xfail")


def blocks(f):
    """Whether a finding left as written fails on the NPU."""
    if f.category == CUDA_OP:
        return True
    if f.category != UNSUPPORTED or f.kind in _HARMLESS_KINDS or f.kind == "guarded":
        return False
    if f.kind == "unknown":
        return not no_effect(f)
    return f.api not in _ENVIRONMENT and f.api not in ("device check", "backend check")


def settle(scan):
    """Leave as written each test whose scope holds what fails on the NPU,
    with the conversions it guards."""
    findings = scan.findings
    if not any(f.category == CHANGE for f in findings) or \
            not any(blocks(f) for f in findings):
        return
    _Settle(scan).run()


class _Settle:
    def __init__(self, scan):
        self.scan = scan
        ordered = sorted(scan.findings, key=lambda f: (f.line, f.col))
        self.keys = [(f.line, f.col) for f in ordered]
        self.ordered = ordered
        self.blocking = [f for f in ordered if blocks(f)]
        self.blocking_keys = [(f.line, f.col) for f in self.blocking]
        self.flags = {}         # flag (name or self.attr) -> [its findings]
        self.flag_scopes = {}   # flag -> [scopes of the tests of it]
        self.guards = []        # (test findings, scopes, flag or None)

    # --- where -------------------------------------------------------------

    def _in(self, keys, span):
        start, end = span
        return bisect.bisect_left(keys, start), bisect.bisect_left(keys, end)

    def _findings(self, span):
        i, j = self._in(self.keys, span)
        return self.ordered[i:j]

    def _blocker(self, span):
        i, j = self._in(self.blocking_keys, span)
        return self.blocking[i] if i < j else None

    # --- the scopes ----------------------------------------------------------

    def run(self):
        self.tests = []         # (test node, scope)
        self._statements(self.scan.tree.body)
        self.tests += [(node.test, [_span(node)]) for node in self.scan.ifexps]
        for test, scope in self.tests:
            self._test(test, scope)
        for flag, scopes in self.flag_scopes.items():
            self.guards.append((self.flags[flag], scopes, flag))
        functions = self._blocked_functions()
        insert = self.scan.insert
        for tests, scopes, flag in self.guards:
            why = None
            for span in scopes:
                why = self._blocker(span) or self._blocking_call(span, functions)
                if why is not None:
                    break
            if why is None:
                continue
            for f in tests:
                self._leave(f, why)
            for span in scopes:
                for f in self._findings(span):
                    if f.kind != "import" or f.api != insert:
                        self._guarded(f, tests)

    def _statements(self, body):
        """The tests of the statements of the module, with their scopes, and
        the flags it assigns."""
        stack = [(body, True)]
        while stack:
            body, top = stack.pop()
            if not body:
                continue
            end = _span(body[-1])[1]
            for i, stmt in enumerate(body):
                t = type(stmt)
                rest = [(_span(stmt)[1], end)] if i + 1 < len(body) else []
                if t is ast.If or t is ast.While:
                    scope = [_span(stmt)]
                    if _leaves(stmt.body) or _leaves(stmt.orelse):
                        scope += rest
                    self.tests.append((stmt.test, scope))
                elif t is ast.Assert:
                    self.tests.append((stmt.test, [_span(stmt)] + rest))
                elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
                    self.tests += [(d, [_span(stmt)]) for d in stmt.decorator_list
                                   if _is_skip(d)]
                elif t is ast.Assign or t is ast.AnnAssign:
                    self._flag(stmt, top)
                for name in ("body", "orelse", "finalbody"):
                    inner = getattr(stmt, name, None)
                    if inner and isinstance(inner, list) and isinstance(inner[0], ast.stmt):
                        stack.append((inner, False))
                for handler in getattr(stmt, "handlers", ()) or ():
                    stack.append((handler.body, False))
                for case in getattr(stmt, "cases", ()) or ():
                    stack.append((case.body, False))

    def _test(self, test, scope):
        found = [f for f in self._findings(_span(test))
                 if f.category == CHANGE and f.kind not in _NOT_TESTS]
        if found:
            self.guards.append((found, scope, None))
        if self.flags:
            for n in ast.walk(test):
                flag = _flag_name(n)
                if flag is not None and flag in self.flags:
                    self.flag_scopes.setdefault(flag, []).extend(scope)

    def _flag(self, stmt, top):
        """A flag assigned from a test of the device (not a device: the
        test that chose a device is the device's own)."""
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if stmt.value is None or len(targets) != 1:
            return
        if top and isinstance(targets[0], ast.Name) and targets[0].id == "pytestmark" and \
                _is_skip(stmt.value):
            self.tests.append((stmt.value, [((1, 0), (len(self.scan.src.lines) + 1, 0))]))
            return
        flag = _flag_name(targets[0])
        if flag is None:
            return
        found = [f for f in self._findings(_span(stmt.value))
                 if f.category == CHANGE and f.kind not in _NOT_TESTS]
        if found and all(f.kind in ("function", "device_check", "backend_check")
                         for f in found):
            self.flags.setdefault(flag, []).extend(found)

    # --- calls of the file's own functions ---------------------------------------

    def _blocked_functions(self):
        """name -> the first finding that fails on the NPU in the file's
        function of that name, or in one it calls (a function defined
        twice: either)."""
        spans = {}
        for f in self.scan.functions:
            name = getattr(f, "name", None)
            if name is not None:
                spans.setdefault(name, []).append(_span(f))
        if not spans:
            return {}
        calls = sorted((key(c)[:2], name) for c in self.scan.calls
                       for name in [_callee(c)] if name in spans)
        self.calls, self.call_keys = calls, [c[0] for c in calls]
        blocked = {}
        for name, ss in spans.items():
            for span in ss:
                why = self._blocker(span)
                if why is not None:
                    blocked[name] = why
                    break
        changed = True
        while changed:
            changed = False
            for name, ss in spans.items():
                if name in blocked:
                    continue
                for span in ss:
                    why = self._blocking_call(span, blocked)
                    if why is not None:
                        blocked[name] = why
                        changed = True
                        break
        return blocked

    def _blocking_call(self, span, blocked):
        if not blocked:
            return None
        i, j = self._in(self.call_keys, span)
        for _, name in self.calls[i:j]:
            if name in blocked:
                return blocked[name]
        return None

    # --- the findings left --------------------------------------------------

    def _leave(self, f, why):
        if f.category != CHANGE:
            return
        f.category, f.kind = UNSUPPORTED, "hand_edit"
        f.result = (f"a test of the device, left as written with what it guards: "
                    f"{why.api} (line {why.line}) stays as written ({why.result})")
        f.suggestion = "port what it guards, then convert the test with it"
        f.edits = []

    def _guarded(self, f, tests):
        if f.category != CHANGE:
            return
        f.category, f.kind = UNSUPPORTED, "guarded"
        f.result = f"left as written with the test that guards it (line {tests[0].line})"
        f.suggestion = "convert it with the test"
        f.edits = []


def _span(node):
    k = key(node)
    return (k[0], k[1]), (k[2], k[3])


def _leaves(body):
    """Whether a block ends by leaving the block that holds it."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        func = last.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return name in _EXITS
    return False


def _is_skip(node):
    """pytest.mark.skipif(...), unittest.skipIf(...), skipUnless, xfail."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name in _SKIPS


def _flag_name(node):
    """A flag's name: a variable, or an attribute of self or cls."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
            node.value.id in ("self", "cls"):
        return f"{node.value.id}.{node.attr}"
    return None


def _callee(call):
    """The name a call calls a function of the file by: f(...),
    self.f(...), cls.f(...)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id in ("self", "cls"):
        return func.attr
    return None
