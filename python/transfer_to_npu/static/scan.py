"""Finding the CUDA spellings of one Python file: what both static tools
see.  ``analyze`` reports the findings; ``convert`` applies their edits.

The file is parsed with Python's ``ast`` (never imported or run).  Names
are resolved through the file's own imports (``import torch as th``,
``from torch.cuda import amp``); what a name means comes from the mapping
table (``spellings``).  A string is rewritten only where it is a device
or a backend: an argument the table says takes one, a keyword, variable,
option or key named for one (``device=``, ``map_location=``,
``backend=``), a variable that is passed where one goes; anything else
that spells CUDA is reported, never rewritten.

Each finding has a category, as the offline migration tool sorts its
reports: ``change`` (converted), ``unsupported`` (left as written, needs a
hand edit) and ``cuda_op`` (CUDA-only packages, kernels and extensions).
Positions are ast's: 1-based lines, columns in UTF-8 bytes.
"""

import ast
import re
import tokenize

from .. import _cuda_only, _environment
from .._rules import cuda_extensions, identity as _identity, lightning as _lightning
from . import advice as _advice, spellings as _spellings
from .spellings import hccl_backend, is_path, npu_device
from . import text as _text
from .text import Text, split_lines

CHANGE, UNSUPPORTED, CUDA_OP, ADVICE = "change", "unsupported", "cuda_op", _advice.ADVICE

# What a pending change waits for (Scan.pending).
PATCH, ATTRIBUTE = "patch", "attribute"

_EXTENSIONS = "torch.utils.cpp_extension."
_PROPERTIES = "torch.cuda.get_device_properties"

_FIELD = re.compile(r"\{[^{}]*\}")
# Flags, then a width that does not start with 0: no two ways to read a run
# of zeros (linear on any string).
_PERCENT = re.compile(r"%[-#0 +]*(?:[1-9]\d*)?(?:\.\d+)?[sdi]")

SUGGEST_DEVICE_CHECK = ("test for the npu too (after migration the device type is 'npu'): "
                        "device.type in ('cuda', 'npu')")
SUGGEST_BACKEND_CHECK = "test for 'hccl' too (after migration the backend is 'hccl')"


class Finding:
    """One CUDA spelling: where, what, what it becomes (``result`` for a
    change) or why not (``result`` otherwise), and the edits that make the
    change."""

    __slots__ = ("file", "line", "col", "end_line", "column", "category", "kind", "api", "code",
                 "result", "suggestion", "edits", "ran")

    def __init__(self, category, kind, api, code, result, suggestion, line, col, end_line,
                 column, edits=()):
        self.file = None
        self.category, self.kind, self.api = category, kind, api
        self.code, self.result, self.suggestion = code, result, suggestion
        self.line, self.col, self.end_line, self.column = line, col, end_line, column
        self.edits = list(edits)
        self.ran = None

    def __repr__(self):
        return (f"Finding({self.file}:{self.line}:{self.column} {self.category}/{self.kind} "
                f"{self.api}: {self.code!r} -> {self.result!r})")


def key(node):
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def _dotted(node):
    """(root Name, [Attribute nodes innermost first], [attribute names]) of
    a chain a.b.c, or None."""
    nodes = []
    while isinstance(node, ast.Attribute):
        nodes.append(node)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    nodes.reverse()
    return node, nodes, [n.attr for n in nodes]


def _cuda_part(parts):
    """Whether a torch name spells CUDA (torch.cuda.X, torch.backends.cudnn,
    torch.version.cuda, a name with nccl in it)."""
    for part in parts[1:]:
        low = part.lower()
        if low.startswith(("cuda", "cudnn")) or "nccl" in low:
            return True
    return False


def _device_or_invalid(text):
    """npu_device(text), or False for a malformed CUDA device string."""
    try:
        return npu_device(text)
    except ValueError:
        return False


def _template_npu(text, filled):
    """A template ('cuda:{}', 'cuda:%d', 'cuda:' + ...) with its NPU
    spelling, when filling it in makes a CUDA device string."""
    if not text.startswith("cuda") or not _device_or_invalid(filled):
        return None
    return "npu" + text[4:]


def _prefix_npu(text):
    """The NPU spelling of a prefix of CUDA device strings ('cuda',
    'cuda:'), as startswith() tests one; None for any other string."""
    if text == "cuda":
        return "npu"
    return _template_npu(text, text + "0") if text.startswith("cuda:") else None


_TRY_STAR = getattr(ast, "TryStar", ast.Try)
_IMPORT_ERRORS = frozenset(("ImportError", "ModuleNotFoundError", "Exception", "BaseException"))


def _catches_import_error(kind):
    """Whether an except clause of that type catches an ImportError."""
    if kind is None:
        return True
    if isinstance(kind, ast.Tuple):
        return any(_catches_import_error(e) for e in kind.elts)
    name = kind.attr if isinstance(kind, ast.Attribute) else getattr(kind, "id", None)
    return name in _IMPORT_ERRORS


def _type_checking(test):
    """Whether an if's test is typing's TYPE_CHECKING (true for type
    checkers only: what its body imports is never imported at run time)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(scan, tree):
    """One walk over the tree, in source order, recording what the scan
    looks at.  Iterative: machine-written code nests deeper than Python's
    recursion allows."""
    s = scan
    aliases, from_names = s.aliases, s.from_names
    record = {ast.Call: s.calls, ast.Compare: s.compares, ast.Assign: s.assigns,
              ast.AugAssign: s.assigns, ast.FunctionDef: s.functions,
              ast.AsyncFunctionDef: s.functions, ast.Lambda: s.functions, ast.Dict: s.dicts,
              ast.BinOp: s.binops}
    if hasattr(ast, "MatchValue"):
        record[ast.MatchValue] = s.compares
    children = ast.iter_child_nodes
    stack = [tree]
    while stack:
        node = stack.pop()
        t = type(node)
        if t is ast.Name:
            if node.id in from_names:
                s.names.append(node)
            continue
        if t is ast.Constant:
            v = node.value
            if type(v) is str and len(v) <= 64 and (
                    "cuda" in v or "CUDA" in v or "nccl" in v.lower() or
                    v.partition(".")[0] in _NAMED_PACKAGES):
                s.strings.append(node)
            continue
        if t is ast.Attribute:
            chain = _dotted(node)
            if chain is not None:
                s.chains.append((node,) + chain)
                if type(node.ctx) is ast.Store and len(chain[2]) == 1:
                    s.stored_attrs.setdefault(node.attr, node.lineno)
                continue
            # A chain that starts at an expression (a call, a subscript).
            s.loose_attrs.append(node)
            while type(node) is ast.Attribute:
                node = node.value
            stack.append(node)
            continue
        if t is ast.Import:
            s.imports.append(node)
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = (a.name, True)
                else:
                    top = a.name.partition(".")[0]
                    aliases[top] = (top, True)
            continue
        if t is ast.ImportFrom:
            s.imports.append(node)
            if not node.level and node.module:
                for a in node.names:
                    if a.name != "*":
                        local = a.asname or a.name
                        aliases[local] = (f"{node.module}.{a.name}", False)
                        from_names.add(local)
            continue
        if t is ast.arg:
            continue  # its annotation is no value of the program
        if t is ast.AnnAssign:
            if node.value is not None:
                s.assigns.append(node)
                stack += (node.value, node.target)
            continue
        elif t is ast.JoinedStr:
            values = node.values
            if values and type(values[0]) is ast.Constant and \
                    type(values[0].value) is str and values[0].value.startswith("cuda"):
                s.strings.append(node)
                s.fstring_parts.update(id(v) for v in values)
        elif t is ast.If:
            if _type_checking(node.test) and node.body:
                s.type_checking.append((node.body[0].lineno, node.body[-1].end_lineno))
        elif t is ast.IfExp:
            s.ifexps.append(node)
        elif t is ast.With or t is ast.AsyncWith:
            s.withs.append(node)
        elif t is ast.List or t is ast.Tuple or t is ast.Set:
            s.handled.update(_listed(node.elts))
            _gather(s, node, node.elts)
        elif t is ast.Try or t is _TRY_STAR:
            if any(_catches_import_error(h.type) for h in node.handlers):
                s.tries.append(node)
        else:
            found = record.get(t)
            if found is not None:
                found.append(node)
                if t is ast.Dict:
                    s.handled.update(_listed(node.keys))
                    s.handled.update(_listed(node.values))
                    _gather(s, node, node.values)
        stack.extend(reversed(list(children(node))))


class Scan:
    """The findings of one file."""

    def __init__(self, spellings, source, tree, insert="torch_npu", advice=True):
        self.sp = spellings
        self.source = source
        self.insert = insert            # the module imported after torch's first import
        self._src = None
        self.findings = []
        # name -> (dotted name, bound by `import` (a module for sure))
        self.aliases = {}
        self.from_names = set()
        self.imports, self.chains, self.names, self.calls = [], [], [], []
        self.compares, self.assigns, self.functions, self.dicts = [], [], [], []
        self.strings, self.loose_attrs, self.type_checking, self.binops = [], [], [], []
        self.ifexps = []
        self.withs = []
        self.displays = []              # (display, its CUDA strings) with several
        self.tries = []                 # try statements whose handlers catch an ImportError
        self.stored_attrs = {}          # attribute the file assigns (x.a = ...) -> line
        self.patched = set()            # ids of module references a patch names
        # Changes that follow the code of the whole tree (targets.py):
        # [(finding, PATCH, module named or None, (API, names the code under
        # the patch calls))] for a patch target,
        # [(finding, ATTRIBUTE, root name or None, attribute)] for an
        # attribute renamed (x.is_cuda), which the tree's own classes may have.
        self.pending = []
        self.fstring_parts = set()
        self.handled = set()            # ids of string nodes already judged
        self.device_vars, self.backend_vars, self.accelerator_vars = set(), set(), set()
        self.unconverted_vars = set()   # named for a device, given a CUDA one left as written
        self.answered = set()           # ids of questions answered by the identity policy
        self.tree = tree
        # local name -> [(ok, new binding, pending findings)]: the uses of a
        # name bound by an import of a CUDA module, which the import's
        # conversion must keep meaning the same.
        self.alias_uses = {}
        _walk(self, tree)
        self.aliases.setdefault("torch", ("torch", True))
        if insert != "torch_npu":
            self._imports()
            return
        for node in self.calls:
            self._call(node)
        self._properties()
        self._identity_compares()
        for chain in self.chains:
            if id(chain[0]) not in self.patched:
                self._chain(*chain)
        for node in self.names:
            self._name(node)
        for node in self.loose_attrs:
            self._loose_attr(node)
        self._imports()
        for node in self.assigns:
            self._assign(node)
        for node in self.functions:
            self._function(node)
        for node in self.dicts:
            self._dict(node)
        for node in self.compares:
            self._compare(node)
        for node, elts in self.displays:
            self._strays(node, elts)
        for node in self.strings:
            self._stray(node)
        if spellings.fused is not None and advice:
            _advice.advise(self, spellings.fused)

    # --- text and findings -------------------------------------------------

    @property
    def src(self):
        if self._src is None:
            self._src = Text(self.source)
        return self._src

    def span(self, node):
        """Where a node is in the text: (start, end) offsets."""
        src = self.src
        return (src.index(node.lineno, node.col_offset),
                src.index(node.end_lineno, node.end_col_offset))

    def text(self, node, limit=120):
        """The source of a node, on one line and at most ``limit`` long."""
        return self._becomes(node, (), limit)

    def _becomes(self, context, splices, limit=160):
        """context's text with the splices (start, end, new text) made:
        what the code becomes, on one line and at most ``limit`` long.
        Only the text that can be shown is read (a finding in a large
        statement does not copy all of it)."""
        s, e = self.span(context)
        stop = min(e, s + 8 * limit)
        out, pos = [], s
        for start, end, new in sorted(splices):
            if start < pos or end > stop:
                continue
            out.append(self.source[pos:start])
            out.append(new)
            pos = end
        out.append(self.source[pos:stop])
        return _one_line("".join(out), limit, stop < e)

    def add(self, category, kind, api, node, result, suggestion="", edits=(), code=None):
        f = Finding(category, kind, api, code if code is not None else self.text(node), result,
                    suggestion, node.lineno, node.col_offset, node.end_lineno,
                    self.src.char_col(node.lineno, node.col_offset) + 1, edits)
        self.findings.append(f)
        return f

    def change(self, kind, api, node, splices, context=None, code=None):
        """A change made by the splices (start, end, new text), shown on
        context (by default the node)."""
        context = node if context is None else context
        if None in splices:
            # A piece of it not written as the tree reads it (a name in
            # another Unicode form, an unusual layout): left to a hand edit.
            return self.add(UNSUPPORTED, "hand_edit", api, node,
                            "not converted automatically: its text is not as expected",
                            "convert it by hand", code=code)
        return self.add(CHANGE, kind, api, node, self._becomes(context, splices),
                        edits=[("splice",) + sp for sp in splices],
                        code=code if code is not None else self.text(context))

    def _name_splice(self, attr_node, new):
        """The splice that renames an Attribute's attribute (its last
        name, which ends the node)."""
        end = self.src.index(attr_node.end_lineno, attr_node.end_col_offset)
        start = end - len(attr_node.attr)
        return (start, end, new) if self.source[start:end] == attr_node.attr else None

    # --- names ---------------------------------------------------------------

    def qual(self, expr):
        """The dotted name an expression names through the file's imports,
        or None."""
        if isinstance(expr, ast.Name):
            bound = self.aliases.get(expr.id)
            return bound[0] if bound else None
        chain = _dotted(expr)
        if chain is None:
            return None
        bound = self.aliases.get(chain[0].id)
        return ".".join([bound[0]] + chain[2]) if bound else None

    def _is_module_ref(self, expr):
        chain = _dotted(expr) if not isinstance(expr, ast.Name) else (expr, [], [])
        if chain is None:
            return False
        bound = self.aliases.get(chain[0].id)
        if bound is None:
            return False
        if bound[1] and not chain[2]:
            return True
        return self.sp.is_module(".".join([bound[0]] + chain[2]))

    # --- device and backend values ------------------------------------------

    def _device_values(self, expr, out):
        """The device strings in an expression that gives a device: literals,
        templates ('cuda:{}'.format(i), f'cuda:{i}', 'cuda:' + str(i)),
        either branch of a conditional, a dict's keys and values
        (map_location)."""
        for e in _alternatives(expr):
            t = type(e)
            if t is ast.Constant:
                if type(e.value) is str:
                    self.handled.add(id(e))
                    new = _device_or_invalid(e.value)
                    if new:
                        out.append(("literal", e, new))
                    elif new is False:
                        out.append(("invalid", e, None))
            elif t is ast.JoinedStr:
                self.handled.add(id(e))
                values = e.values
                if len(values) == 2 and isinstance(values[0], ast.Constant) and \
                        isinstance(values[0].value, str) and \
                        isinstance(values[1], ast.FormattedValue):
                    new = _template_npu(values[0].value, values[0].value + "0")
                    if new:
                        out.append(("fstring", e, new))
            elif t is ast.BinOp:
                left = e.left
                if isinstance(left, ast.Constant) and type(left.value) is str:
                    self.handled.add(id(left))
                    text = left.value
                    if isinstance(e.op, ast.Add):
                        new = _template_npu(text, text + "0")
                    elif isinstance(e.op, ast.Mod) and len(_PERCENT.findall(text)) == 1:
                        new = _template_npu(text, _PERCENT.sub("0", text))
                    else:
                        new = None
                    if new:
                        out.append(("literal", left, new))
            elif t is ast.Call and _default_of(e) is not None:
                # os.environ.get(k, 'cuda'), getattr(args, 'device', 'cuda'),
                # options.get('device', 'cuda'): the default it gives.
                self._device_values(_default_of(e), out)
            elif t is ast.Call:
                f = e.func
                if isinstance(f, ast.Attribute) and f.attr == "format" and \
                        isinstance(f.value, ast.Constant) and type(f.value.value) is str:
                    text = f.value.value
                    self.handled.add(id(f.value))
                    if len(_FIELD.findall(text)) == 1:
                        new = _template_npu(text, _FIELD.sub("0", text))
                        if new:
                            out.append(("literal", f.value, new))
            elif t is ast.Dict:
                for k in e.keys:
                    if k is not None:
                        self._device_values(k, out)
                for v in e.values:
                    self._device_values(v, out)
            elif t is ast.Name:
                self.device_vars.add(e.id)

    def _backend_values(self, expr, out):
        for e in _alternatives(expr):
            if type(e) is ast.Constant and type(e.value) is str:
                self.handled.add(id(e))
                new = hccl_backend(e.value)
                if new is not None:
                    out.append(("literal", e, new))
            elif type(e) is ast.Name:
                self.backend_vars.add(e.id)

    def _literal_splice(self, node, new):
        """The splice that makes a string literal (as written: its prefix
        and quotes) hold new."""
        s, e = self.span(node)
        return (s, e, _literal_text(self.source[s:e], new))

    def _fstring_splice(self, node, new):
        """The splice that makes an f-string's first text new, or None
        when that text is not written as it reads (escapes, braces)."""
        s, e = self.span(node)
        old = self.source[s:e]
        n = _prefix_len(old)
        quote = old[n:n + 3] if old[n:n + 3] in ('"""', "'''") else old[n:n + 1]
        first = node.values[0].value
        head = n + len(quote)
        if not quote or old[head:head + len(first)] != first:
            return None
        return (s + head, s + head + len(first), new)

    def _value_findings(self, values, context, kind, api, what="device"):
        for op, node, new in values:
            if op == "invalid":
                self.add(UNSUPPORTED, "hand_edit", api, node,
                         f"a malformed CUDA {what} string: torch rejects it",
                         "write a valid device ('cuda' or 'cuda:N')", code=self.text(context))
                continue
            splice = self._fstring_splice(node, new) if op == "fstring" else \
                self._literal_splice(node, new)
            if splice is None:
                self.add(UNSUPPORTED, "hand_edit", api, node,
                         "a CUDA device template written with escapes: not rewritten",
                         "write 'npu' in it by hand", code=self.text(context))
                continue
            self.change(kind, api, node, [splice], context)

    def _device_arg(self, expr, context, kind, api):
        out = []
        self._device_values(expr, out)
        self._value_findings(out, context, kind, api)

    def _backend_arg(self, expr, context, kind, api):
        out = []
        self._backend_values(expr, out)
        self._value_findings(out, context, kind, api, "backend")

    # --- calls ---------------------------------------------------------------

    def _call(self, node):
        sp = self.sp
        func = node.func
        q = self.qual(func)
        if q in _identity.ANSWERED_CALLS:
            self._identity_call(node, q)
            return
        m = sp.lookup(q) if q is not None else None
        explicit_self = m is not None and m.member
        member = False
        if m is None and isinstance(func, ast.Attribute) and not self._is_module_ref(func.value):
            m = sp.members.get(func.attr)
            member = m is not None
        handled_kws = set()
        args = node.args
        starred = next((i for i, a in enumerate(args) if isinstance(a, ast.Starred)), len(args))
        if m is not None:
            api = m.source
            kind = m.kind if m.kind != "default" else "device_arg"
            for pos in m.device_pos:
                pos += explicit_self
                if pos < starred:
                    self._device_arg(args[pos], node, kind, api)
            if m.backend_pos is not None and 0 <= m.backend_pos < starred:
                self._backend_arg(args[m.backend_pos], node, m.kind, api)
            for k in node.keywords:
                if k.arg in m.device_kws:
                    self._device_arg(k.value, node, kind, api)
                    handled_kws.add(k.arg)
                elif k.arg == _spellings.BACKEND_KEYWORD and m.backend_pos is not None:
                    self._backend_arg(k.value, node, m.kind, api)
                    handled_kws.add(k.arg)
            if member and m.rename:
                self.change(m.kind, api, node, [
                    self._name_splice(func, m.rename.rpartition(".")[2])])
            elif member and m.unsupported:
                self.add(UNSUPPORTED, "unsupported", api, node, m.unsupported,
                         "remove it, or guard it for CUDA only")
            if m.default is not None:
                self._default(node, m, starred)
            if m.keyword_swap is not None:
                self._keyword_swap(node, m)
            if m.call is not None and not args and not node.keywords:
                self._call_replace(node, m)
            if m.legacy is not None and args and starred > 0:
                self._legacy(node, m)
            if m.source in _identity.WITHOUT_ARGUMENTS and (args or node.keywords):
                self._drop_arguments(node, m)
        for k in node.keywords:
            if k.arg is None or k.arg in handled_kws:
                continue
            if _names_accelerator(k.arg):
                self._accelerator_arg(k.value, node)
            elif sp.names_device(k.arg):
                self._device_arg(k.value, node, "device_string", f"{k.arg}=")
            elif sp.names_backend(k.arg):
                self._backend_arg(k.value, node, "backend", f"{k.arg}=")
            elif k.arg == "attn_implementation":
                self._attention_arg(k.value, node)
        if args and isinstance(args[0], ast.Constant) and type(args[0].value) is str:
            self._option(node, args[0].value)
            if isinstance(func, ast.Attribute) and func.attr in ("startswith", "endswith"):
                self._prefix_test(node, func.value, [args[0]])
            elif isinstance(func, (ast.Attribute, ast.Name)):
                self._patch_target(node, func, q, args[0])
                self._module_named(node, func, q, args[0])
                self._tool_run(node, q, args[0])
        elif args and isinstance(args[0], ast.Tuple) and isinstance(func, ast.Attribute) and \
                func.attr in ("startswith", "endswith"):
            self._prefix_test(node, func.value, args[0].elts)
        elif len(args) >= 2 and isinstance(args[1], ast.Constant) and \
                type(args[1].value) is str and isinstance(func, (ast.Attribute, ast.Name)):
            self._patch_object(node, func, args[0], args[1])
        elif args and isinstance(args[0], (ast.List, ast.Tuple)) and args[0].elts and \
                isinstance(args[0].elts[0], ast.Constant) and type(args[0].elts[0].value) is str:
            self._tool_run(node, q, args[0].elts[0])
        if q is not None:
            if q.startswith(_EXTENSIONS):
                self._extension(node, q)
            found = _cuda_only.lookup(q)
            if found is not None and found[0] == "package" and found[1] != "triton":
                self.add(CUDA_OP, "package_api", q, node, f"{found[2]}: no NPU build",
                         self._package_suggestion(found[1], found[3]))
            elif q in _ENVIRON_WRITES and args and isinstance(args[0], ast.Constant):
                self._environ_write(args[0], node)
            elif q == "os.environ.update":
                for k in _dict_keys(node):
                    self._environ_write(k, node)
            elif q.rpartition(".")[2] in ("DataParallel", "data_parallel") and \
                    self.sp.is_data_parallel(q):
                self.add(UNSUPPORTED, "hand_edit", "torch.nn.DataParallel", node,
                         "single-process data parallelism: on Ascend, training on several "
                         "npus runs DistributedDataParallel, one process per device",
                         "use torch.nn.parallel.DistributedDataParallel under torchrun")

    def _option(self, node, name):
        """A command-line option or setting named for a device or a backend
        (add_argument('--device', default='cuda', choices=[...]))."""
        device, backend = self.sp.names_device(name), self.sp.names_backend(name)
        accelerator = _names_accelerator(name.lstrip("-").replace("-", "_"))
        if not (device or backend or accelerator) or \
                (not name.startswith("-") and not name.isidentifier()):
            return
        for k in node.keywords:
            if k.arg in ("default", "const"):
                values = [k.value]
            elif k.arg == "choices" and isinstance(k.value, (ast.List, ast.Tuple, ast.Set)):
                values = k.value.elts
            else:
                continue
            for v in values:
                if accelerator:
                    self._accelerator_arg(v, node)
                elif device:
                    self._device_arg(v, node, "device_string", f"option {name}")
                else:
                    self._backend_arg(v, node, "backend", f"option {name}")

    def _default(self, node, m, starred):
        param, position, value = m.default
        if starred < len(node.args) or position < len(node.args) or \
                any(k.arg in (param, None) for k in node.keywords) or \
                any(isinstance(a, ast.GeneratorExp) for a in node.args):
            return
        splice = self._argument_splice(node, f"{param}={value!r}")
        if splice is not None:
            self.change("default", m.source, node, [splice])

    def _argument_splice(self, call, text):
        """The splice that adds text as the call's last argument (after
        its arguments, before a trailing comma), or None when the call's
        text does not read as expected."""
        s, e = self.span(call)
        tokens = _tokens(self.source[s:e])
        if tokens is None or len(tokens) < 2 or tokens[-1][0] != ")":
            return None
        last, close = tokens[-2], tokens[-1]
        if last[0] == "(":
            return (s + close[1], s + close[1], text)
        if last[0] == ",":
            return (s + last[2], s + last[2], f" {text},")
        return (s + last[2], s + last[2], f", {text}")

    def _keyword_swap(self, node, m):
        kw, value, new = m.keyword_swap
        for k in node.keywords:
            if k.arg == kw and isinstance(k.value, ast.Constant) and k.value.value == value:
                s, e = self.span(k)
                self.change(m.kind, m.source, node,
                            [(s, e, ", ".join(f"{a}={v}" for a, v in new))])

    def _call_replace(self, node, m):
        attr, args = m.call
        func = node.func
        if isinstance(func, ast.Attribute):
            close = self.span(node)[1] - 1
            if self.source[close:close + 1] == ")":
                self.change(m.kind, m.source, node,
                            [self._name_splice(func, attr), (close, close, args)])
        else:
            self.add(UNSUPPORTED, "hand_edit", m.source, node,
                     f"imported by name: call {attr}({args}) instead", f"{attr}({args})")

    def _legacy(self, node, m):
        pattern, target = m.legacy
        arg = node.args[0]
        text = None
        if isinstance(arg, ast.Constant) and type(arg.value) is str:
            text = arg.value
            self.handled.add(id(arg))
        else:
            text = self.qual(arg)
        regex = re.escape(pattern).replace(re.escape("<T>"), r"\w+")
        if text is not None and re.fullmatch(regex, text):
            self.add(UNSUPPORTED, "hand_edit", m.source, node,
                     f"a legacy CUDA tensor type: it becomes {target}",
                     f"write {target} with the dtype the type names")

    def _extension(self, node, q):
        name = q[len(_EXTENSIONS):]
        kws = {k.arg: k.value for k in node.keywords if k.arg}
        cuda = False
        if name == "CUDAExtension":
            cuda = True
        elif name in ("load", "load_inline"):
            sources = kws.get("sources", node.args[1] if len(node.args) > 1 else None)
            if name == "load" and isinstance(sources, (ast.List, ast.Tuple)):
                cuda = any(isinstance(e, ast.Constant) and isinstance(e.value, str)
                           and e.value.endswith(cuda_extensions.CUDA_SUFFIXES) for e in sources.elts)
            cuda_sources = kws.get("cuda_sources",
                                   node.args[2] if name == "load_inline" and len(node.args) > 2
                                   else None)
            if cuda_sources is not None and not (isinstance(cuda_sources, ast.Constant)
                                                 and cuda_sources.value is None):
                cuda = True
            with_cuda = kws.get("with_cuda")
            if isinstance(with_cuda, ast.Constant) and with_cuda.value is True:
                cuda = True
            if "extra_cuda_cflags" in kws:
                cuda = True
        if cuda:
            self.add(CUDA_OP, "extension", q, node,
                     "builds CUDA C++ kernels: they need an Ascend port",
                     "port the kernels to Ascend C (or to torch ops) and build them with "
                     "torch_npu's extension tools")

    # --- names of code in strings and arguments -------------------------------

    def _patch_target(self, node, func, q, arg):
        """mock.patch('pkg.mod.torch.cuda.X'), monkeypatch.setattr(
        'torch.cuda.X', ...): the name patched follows the code it names,
        which may be another file's (``pending``, settled with the tree)."""
        name = func.attr if isinstance(func, ast.Attribute) else func.id
        path = arg.value
        if not (name == "patch" or (name in ("setattr", "delattr") and q is None)) or \
                not is_path(path):
            return
        module, api, m = self._patched_api(path)
        if m is None:
            return
        self.handled.add(id(arg))
        if m.rename is not None and m.rename.count(".") == api.count("."):
            new = f"{module}.{m.rename}" if module else m.rename
            f = self.change("patch_target", m.source, arg, [self._literal_splice(arg, new)], node)
        else:
            f = self.add(CHANGE, "patch_target", m.source, arg, self.text(node),
                         code=self.text(node))
        self.pending.append((f, PATCH, module, (m.source, self._exercised(node))))

    def _exercised(self, patch):
        """The names the code under a patch calls: the body of the with
        statement or of the function it decorates, else the rest of the
        function it is in."""
        region = None
        for node in self.withs:
            if any(key(i.context_expr)[:2] <= key(patch)[:2] and
                   key(patch)[2:] <= key(i.context_expr)[2:] for i in node.items):
                region = (key(node.body[0])[:2], key(node)[2:])
        for f in self.functions:
            if region is None and any(d is patch or key(d)[:2] <= key(patch)[:2] and
                                      key(patch)[2:] <= key(d)[2:]
                                      for d in getattr(f, "decorator_list", ())):
                region = (key(f.body[0])[:2], key(f)[2:])
        if region is None:
            inner = [f for f in self.functions if key(f)[:2] <= key(patch)[:2] and
                     key(patch)[2:] <= key(f)[2:]]
            region = (key(patch)[2:], key(max(inner, key=key))[2:]) if inner else None
        if region is None:
            return frozenset()
        names = set()
        for call in self.calls:
            if region[0] <= key(call)[:2] <= region[1]:
                func = call.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if name:
                    names.add(name)
        return frozenset(names)

    def _patched_api(self, path):
        """(module, API, its Meaning) of a patched path: 'litgpt.utils.torch.
        cuda.device_count' is torch.cuda.device_count as litgpt.utils
        reaches it; (None, None, None) for a path that names no API of the
        table."""
        parts = path.split(".")
        for k, part in enumerate(parts):
            if part == "torch" and k + 1 < len(parts):
                api = ".".join(parts[k:])
                m = self.sp.lookup(api)
                if m is not None and not m.member and (m.rename or m.runtime or m.unsupported):
                    return ".".join(parts[:k]) or None, api, m
                break
        return None, None, None

    def _patch_object(self, node, func, target, attr):
        """monkeypatch.setattr(torch.cuda, 'is_available', ...),
        mock.patch.object(torch.cuda, ...), setattr(torch.cuda, ...): the
        module patched follows the code that calls the name."""
        name = func.attr if isinstance(func, ast.Attribute) else func.id
        if name not in ("setattr", "delattr", "object"):
            return
        module = self.qual(target)
        new_module = self.sp.modules.get(module) if module else None
        if new_module is None or not self._is_module_ref(target):
            return
        m = self.sp.lookup(f"{module}.{attr.value}")
        if m is None or m.member:
            return
        self.patched.add(id(target))
        chain = _dotted(target)
        renames = None
        if m.rename is not None and m.rename.rpartition(".")[0] == new_module and chain:
            old_parts = module.split(".")
            new_parts = new_module.split(".")
            bound = self.aliases.get(chain[0].id)
            nb = len(bound[0].split(".")) if bound else 0
            if len(new_parts) == len(old_parts) and old_parts[:nb] == new_parts[:nb] and \
                    nb + len(chain[2]) == len(old_parts):
                renames = [self._name_splice(n, new_parts[nb + i])
                           for i, n in enumerate(chain[1]) if old_parts[nb + i] != new_parts[nb + i]]
        if renames:
            f = self.change("patch_target", m.source, target, renames, node)
        else:
            f = self.add(CHANGE, "patch_target", m.source, target, self.text(node),
                         code=self.text(node))
        self.pending.append((f, PATCH, None, (m.source, self._exercised(node))))

    def _module_named(self, node, func, q, arg):
        """importlib.import_module('fused_layer_norm_cuda'): a CUDA-only
        module named in a string, as an import of it."""
        if q != "importlib.import_module" and not (isinstance(func, ast.Name) and
                                                   func.id == "__import__"):
            return
        found = _cuda_only.lookup(arg.value) if is_path(arg.value) else None
        if found is not None:
            self.handled.add(id(arg))
            kind, name, what, use = found
            self.add(CUDA_OP, kind, arg.value, node, f"{what}: no NPU build",
                     self._package_suggestion(name, use))

    def _tool_run(self, node, q, arg):
        """subprocess.run(['nvidia-smi', ...]), os.system('nvidia-smi ...'):
        a CUDA-only program run."""
        if q not in _RUNNERS:
            return
        words = arg.value.split()
        tool = words[0].rpartition("/")[2] if words else ""
        found = _cuda_only.TOOLS.get(tool)
        if found is not None:
            self.handled.add(id(arg))
            self.add(UNSUPPORTED, "unsupported", tool, node,
                     f"runs {tool}, {found[0]}: not on an Ascend machine", f"use {found[1]}")

    def _accelerator_arg(self, expr, context):
        """Lightning's accelerator names ('cuda', 'gpu'), where an
        accelerator is given: Lightning has no NPU accelerator."""
        for e in _alternatives(expr):
            if type(e) in (ast.Set, ast.List, ast.Tuple):
                # Accelerator names listed (those allowed): no choice made.
                self.handled.update(id(n) for n in e.elts)
            elif type(e) is ast.Constant and type(e.value) is str:
                self.handled.add(id(e))
                if e.value.lower() in _CUDA_ACCELERATORS:
                    self.add(UNSUPPORTED, "accelerator", f"accelerator={e.value!r}", e,
                             _LIGHTNING_CUDA, _LIGHTNING_USE, code=self.text(context))
            elif type(e) is ast.Name:
                self.accelerator_vars.add(e.id)

    def _attention_arg(self, expr, context):
        """transformers' attn_implementation: FlashAttention by name."""
        for e in _alternatives(expr):
            if type(e) is ast.Constant and e.value in _ATTENTION:
                kind, why, use = _ATTENTION[e.value]
                self.add(UNSUPPORTED, kind, f"attn_implementation={e.value!r}", e, why, use,
                         code=self.text(context))

    def _drop_arguments(self, node, m):
        """torch.cuda.is_bf16_supported(including_emulation=False): asked of
        torch_npu, which takes no arguments."""
        s, e = self.span(node)
        f_end = self.span(node.func)[1]
        tokens = _tokens(self.source[f_end:e])
        if not tokens or tokens[0][0] != "(" or tokens[-1][0] != ")":
            return
        self.change("arguments", m.source, node,
                    [(f_end + tokens[0][2], f_end + tokens[-1][1], "")])

    # --- what CUDA code asks about the device ---------------------------------

    def _identity_call(self, node, q):
        """get_device_capability(), get_arch_list(), is_tf32_supported():
        the identity policy's answer written in place of the question."""
        answer = _identity.ANSWERED_CALLS.get(q)
        if answer is None:
            return False
        self.answered.add(id(node.func))
        self.change("identity", q, node, [self.span(node) + (answer,)])
        return True

    def _identity_compares(self):
        """torch.version.cuda is None: answered (False), as the identity
        policy answers torch.version.cuda; a constant compared by identity
        would warn."""
        for node in self.compares:
            if not isinstance(node, ast.Compare) or len(node.ops) != 1 or \
                    not isinstance(node.ops[0], (ast.Is, ast.IsNot)):
                continue
            left, right = node.left, node.comparators[0]
            if isinstance(left, ast.Constant) and left.value is None:
                left, right = right, left
            q = self.qual(left) if isinstance(left, ast.Attribute) else None
            if q in _identity.ANSWERED_VALUES and isinstance(right, ast.Constant) and \
                    right.value is None:
                self.answered.add(id(left))
                value = isinstance(node.ops[0], ast.IsNot)
                self.change("identity", q, node, [self.span(node) + (str(value),)])

    def _properties(self):
        """torch.cuda.get_device_properties(d).major, and a variable given
        the properties whose every use reads a field: each field as the
        identity policy answers it (the npu's own name, memory and cores;
        the capability and the rest of an Ampere GPU's as constants)."""
        for node in self.loose_attrs:
            call = node.value
            if isinstance(call, ast.Call) and type(node.ctx) is ast.Load and \
                    self.qual(call.func) == _PROPERTIES:
                splices = self._fields([node], call, False)
                if splices is not None:
                    self.answered.add(id(call.func))
                    asked = any(sp is not None and sp[2] == "npu" for sp in splices)
                    self.change("function" if asked else "identity", _PROPERTIES, node, splices)
        for node in self.assigns:
            if not isinstance(node, ast.Assign) or len(node.targets) != 1 or \
                    not isinstance(node.targets[0], ast.Name) or \
                    not isinstance(node.value, ast.Call) or \
                    self.qual(node.value.func) != _PROPERTIES:
                continue
            uses = self._field_uses(node, node.targets[0].id)
            splices = self._fields(uses, node.value, True) if uses is not None else None
            if splices is not None:
                self.answered.add(id(node.value.func))
                self.change("function", _PROPERTIES, node, splices)

    def _field_uses(self, assign, name):
        """The attribute reads of a variable in the function (or module)
        that assigns it, or None when it is used otherwise or assigned
        again."""
        scope = self.tree
        for f in self.functions:
            if key(f)[:2] <= key(assign)[:2] and key(assign)[2:] <= key(f)[2:] and \
                    (scope is self.tree or key(scope)[:2] <= key(f)[:2]):
                scope = f
        reads, names = [], 0
        for n in ast.walk(scope):
            if isinstance(n, ast.Name) and n.id == name:
                if type(n.ctx) is ast.Load:
                    names += 1
                elif n is not assign.targets[0]:
                    return None
            elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and \
                    n.value.id == name and type(n.ctx) is ast.Load:
                reads.append(n)
        return reads if names == len(reads) else None

    def _fields(self, reads, call, kept):
        """The splices that answer each field read of the properties call
        makes, the call asked of torch_npu where a field is the npu's (or
        where it is kept: a variable is given it); None when a field has no
        answer or the call is not spelled torch.cuda."""
        splices, asked = [], kept
        for node in reads:
            field = _identity.PROPERTY_FIELDS.get(node.attr, False)
            if field is False:
                return None
            if isinstance(field, str):
                asked = True
                if field != node.attr:
                    splices.append(self._name_splice(node, field))
            else:
                splices.append(self.span(node) + (repr(field),))
        if asked:
            module = call.func.value if isinstance(call.func, ast.Attribute) else None
            if not (isinstance(module, ast.Attribute) and module.attr == "cuda" and
                    self.qual(module.value) == "torch"):
                return None
            splices.append(self._name_splice(module, "npu"))
        return splices

    # --- environment variables -----------------------------------------------

    def _environ_write(self, key_node, context):
        """os.environ['CUDA_VISIBLE_DEVICES'] = ...: a variable the NPU reads
        under another name (renamed when it takes the same value), or one
        it has no counterpart of."""
        if not isinstance(key_node, ast.Constant) or type(key_node.value) is not str:
            return
        name = key_node.value
        self.handled.add(id(key_node))
        carried = _CARRIED.get(name)
        if carried is not None:
            npu, carry = carried
            if carry is _environment._as_is:
                self.change("environment", name, key_node,
                            [self._literal_splice(key_node, npu)], context)
            else:
                why = (carry.__doc__ or "").strip().split("\n\n")[0]
                self.add(UNSUPPORTED, "hand_edit", name, key_node,
                         f"the NPU reads {npu}, in another form: {' '.join(why.split())}",
                         f"set {npu} as the NPU reads it", code=self.text(context))
        elif name in _environment.UNSUPPORTED:
            self.add(UNSUPPORTED, "unsupported", name, key_node,
                     f"no NPU counterpart ({_environment.UNSUPPORTED[name]})",
                     "remove it, or set it for CUDA runs only", code=self.text(context))

    def _environ_name(self, node):
        """A CUDA-side variable named anywhere but where it is written (a
        read, a child process's environment): it follows the writes, which
        give the NPU's variable."""
        npu, carry = _CARRIED[node.value]
        if carry is _environment._as_is:
            self.change("environment", node.value, node,
                        [self._literal_splice(node, npu)])
        else:
            self.add(UNSUPPORTED, "hand_edit", node.value, node,
                     f"the NPU reads {npu}, in another form",
                     f"read {npu}, as the NPU gives it")

    # --- references --------------------------------------------------------

    def _chain(self, outer, root, nodes, attrs):
        sp = self.sp
        bound = self.aliases.get(root.id)
        if bound is None:
            # Any object (x.is_cuda): the attribute rows; methods are the
            # calls'.
            for i, n in enumerate(nodes):
                m = sp.members.get(n.attr)
                if m is not None and m.kind == "attribute" and m.rename:
                    f = self._rename_attrs(n, [(n, m.rename.rpartition(".")[2])], m)
                    self.pending.append((f, ATTRIBUTE, root.id if i == 0 else None, n.attr))
            return
        base = bound[0].split(".")
        parts = base + attrs
        nb = len(base)
        if parts[0] in _LIGHTNING_PACKAGES and self._lightning_accelerator(outer, parts):
            return
        if parts[0] == "accelerate" and parts[-1] in _ACCELERATE_TYPES and \
                "DistributedType" in parts[:-1] and len(parts) > nb:
            # accelerate's name for several GPUs: its NPU's, which accelerate
            # chooses itself once torch_npu imports.
            self.change("accelerator", ".".join(parts), outer,
                        [self._name_splice(outer, _ACCELERATE_TYPES[parts[-1]])])
            return
        for k in range(len(parts), nb, -1):
            m = sp.lookup(".".join(parts[:k]))
            if m is not None:
                break
        else:
            k, m = nb, None
        node = nodes[k - nb - 1] if k > nb else root
        if m is None:
            q = ".".join(parts)
            if q in sp.modules and k == nb and len(parts) > nb:
                self._module_rename(outer, root, nodes, parts, nb)
            elif parts[0] == "torch" and _cuda_part(parts):
                self._unknown(outer, root.id, nb, q)
            return
        self._reference(m, node, root, nodes, parts[:k], nb)

    def _lightning_accelerator(self, node, parts):
        """Lightning's CUDAAccelerator named: Lightning has no NPU
        accelerator."""
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in _LIGHTNING_CLASSES:
                self.add(UNSUPPORTED, "accelerator", ".".join(parts[:n]), node, _LIGHTNING_CUDA,
                         _LIGHTNING_USE)
                return True
        return False

    def _name(self, node):
        """A name imported from a CUDA module, used bare."""
        q = self.aliases[node.id][0]
        if q.partition(".")[0] in _LIGHTNING_PACKAGES and \
                self._lightning_accelerator(node, q.split(".")):
            return
        m = self.sp.lookup(q)
        if m is not None:
            if m.unsupported or m.runtime:
                self._reference(m, node, node, [], q.split("."), len(q.split(".")))
        elif q.startswith("torch.") and _cuda_part(q.split(".")) and q not in self.sp.modules:
            self._use(node.id, False, None, None)

    def _loose_attr(self, node):
        """x().is_cuda: the attribute rows on what an expression gives."""
        m = self.sp.members.get(node.attr)
        if m is not None and m.kind == "attribute" and m.rename:
            f = self._rename_attrs(node, [(node, m.rename.rpartition(".")[2])], m)
            self.pending.append((f, ATTRIBUTE, None, node.attr))

    def _reference(self, m, node, root, nodes, source_parts, nb):
        if id(node) in self.answered:
            return
        answer = _identity.ANSWERED_VALUES.get(m.source)
        if answer is not None and type(getattr(node, "ctx", None)) is ast.Load:
            self.change("identity", m.source, node, [self.span(node) + (answer,)])
            return
        if m.unsupported is not None:
            self.add(UNSUPPORTED, "unsupported", m.source, node, m.unsupported,
                     "remove it, or guard it for CUDA only")
            self._use(root.id, False, None, None)
            return
        if m.runtime is not None:
            self.add(UNSUPPORTED, "runtime_only", m.source, node, m.runtime,
                     "run it migrated (python -m transfer_to_npu), or replace it by hand")
            self._use(root.id, False, None, None)
            return
        if m.rename is None:
            return
        target = m.rename.split(".")
        if m.member:
            # Reached through a class (torch.Tensor.cuda): its own name.
            self._rename_attrs(node, [(node, target[-1])], m)
            return
        if len(target) != len(source_parts):
            self._respell(m, node, root, target, source_parts, nb)
            return
        renames = [(nodes[i - nb], target[i]) for i in range(nb, len(target))
                   if source_parts[i] != target[i]]
        if any(source_parts[i] != target[i] for i in range(nb)):
            # The import that binds the root must bind the NPU module.
            f = self._rename_attrs(node, renames, m)
            base = ".".join(target[:nb])
            f.result = f"{f.result} (with {root.id} bound to {base})"
            self._use(root.id, True, base, f)
            return
        if renames:
            self._rename_attrs(node, renames, m)

    def _respell(self, m, node, root, target, source_parts, nb):
        """A name whose NPU counterpart has another path
        (torch.backends.cuda.matmul.allow_tf32 -> torch.npu.matmul.allow_hf32):
        written anew after the root, when the root names the same module in
        both."""
        s, e = self.span(node)
        after_root = self.span(root)[1]
        if root is node or target[:nb] != source_parts[:nb] or \
                not self.source[after_root:e].lstrip().startswith("."):
            self.add(UNSUPPORTED, "hand_edit", m.source, node,
                     f"spelled through another path: it becomes {m.rename}",
                     f"write {m.rename}")
            self._use(root.id, False, None, None)
            return
        self.change(m.kind, m.source, node, [(after_root, e, "." + ".".join(target[nb:]))])

    def _rename_attrs(self, node, renames, m):
        return self.change(m.kind, m.source, node,
                           [self._name_splice(n, new) for n, new in renames])

    def _module_rename(self, outer, root, nodes, parts, nb):
        q = ".".join(parts)
        target = self.sp.modules[q].split(".")
        if len(target) != len(parts) or any(parts[i] != target[i] for i in range(nb)):
            self._unknown(outer, root.id, nb, q)
            return
        renames = [(nodes[i - nb], target[i]) for i in range(nb, len(target))
                   if parts[i] != target[i]]
        self.change("module", q, nodes[-1], [self._name_splice(n, new) for n, new in renames])

    def _unknown(self, node, root, nb, q):
        if q.startswith(_SETTINGS):
            self.add(UNSUPPORTED, "unknown", q, node,
                     "a cuDNN or CUDA attention setting: left as written, it has no effect on "
                     "the NPU", "nothing to do (remove it if it is for CUDA only)")
        else:
            self.add(UNSUPPORTED, "unknown", q, node,
                     "a CUDA name the mapping table does not know: left as written",
                     "check what it does on the NPU")
        self._use(root, False, None, None)

    def _use(self, root, ok, new_base, finding):
        self.alias_uses.setdefault(root, []).append((ok, new_base, finding))

    # --- imports ---------------------------------------------------------

    def _imports(self):
        first_torch, has_insert = None, False
        for node in self.imports:
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                modules = [node.module] if node.module and not node.level else []
            for module in modules:
                top = module.partition(".")[0]
                found = _cuda_only.lookup(module) if self.insert == "torch_npu" else None
                if found is not None:
                    kind, name, what, use = found
                    self.add(CUDA_OP, kind, module, node, f"{what}: no NPU build",
                             self._package_suggestion(name, use))
                elif top == self.insert:
                    has_insert = True
                elif top == "torch" and first_torch is None and not self._checking_only(node):
                    first_torch = node
            if self.insert != "torch_npu":
                continue
            if isinstance(node, ast.Import):
                for i, a in enumerate(node.names):
                    if a.asname and a.name in self.sp.modules:
                        self._rebind_import(node, i, a)
            elif modules and modules[0].partition(".")[0] == "torch":
                self._rebind_from(node)
        if first_torch is not None and not has_insert:
            # Before the import when the import itself becomes the NPU's
            # (torch.npu exists once torch_npu is imported), else after it.
            before = any((f.line, f.col) == (first_torch.lineno, first_torch.col_offset) and
                         f.category == CHANGE and f.kind == "import" for f in self.findings)
            # Never inside a try whose handler would take torch_npu's
            # absence for torch's (code that runs without torch): after it.
            at = self._outside_handlers(first_torch)
            splice = self._statement_insert(at, f"import {self.insert}", before)
            self.add(CHANGE, "import", self.insert, first_torch,
                     f"import {self.insert}; {self.text(first_torch)}" if before else
                     f"{self.text(first_torch)}; import {self.insert}" if at is first_torch else
                     f"{self.text(first_torch)} ... (after the try) import {self.insert}",
                     edits=[("splice",) + splice])

    def _outside_handlers(self, stmt):
        """The outermost try holding stmt whose handlers catch an
        ImportError, or stmt itself."""
        for node in self.tries:
            if key(node)[:2] <= key(stmt)[:2] and key(stmt)[2:] <= key(node)[2:] and \
                    key(stmt)[:2] < key(node.handlers[0])[:2]:
                return node
        return stmt

    def _checking_only(self, node):
        return any(a <= node.lineno <= b for a, b in self.type_checking)

    def _statement_insert(self, stmt, text, before):
        """The splice that puts the statement text just before or after a
        simple statement: a line of its own at the statement's indentation
        when the statement has its line to itself, else on its line,
        separated by ';'."""
        src = self.src
        s, e = self.span(stmt)
        alone = src.logical_start(stmt.lineno, stmt.col_offset) == stmt.lineno and \
            not src.line(stmt.lineno)[:src.char_col(stmt.lineno, stmt.col_offset)].strip(" \t\f")
        if before:
            if alone:
                at = src.starts[stmt.lineno - 1]
                return (at, at, src.indent(stmt.lineno) + text + src.newline(stmt.lineno))
            return (s, s, f"{text}; ")
        line = stmt.end_lineno
        rest = src.line(line)[src.char_col(line, stmt.end_col_offset):].strip(" \t\f")
        if alone and (not rest or rest.startswith("#")):
            added = src.indent(stmt.lineno) + text
            if line < len(src.lines):
                return (src.starts[line], src.starts[line], added + src.newline(line))
            return (len(self.source), len(self.source), src.newline(line) + added)
        if not rest or rest.startswith(("#", ";")):
            return (e, e, f"; {text}")
        return (s, s, f"{text}; ")

    def _package_suggestion(self, top, suggestion):
        served = sorted(s for s in self.sp.names if s.partition(".")[0] == top)
        if served:
            return (f"served at run time by the migration ({len(served)} mappings): run it "
                    f"migrated, or use {suggestion}")
        return f"use {suggestion}"

    def _uses_allow(self, local, new_base):
        """Whether every use of a name bound to a CUDA module keeps its
        meaning with the name bound to new_base; the uses' findings stay
        changes only then."""
        uses = self.alias_uses.get(local, [])
        return all(ok and base == new_base for ok, base, _ in uses)

    def _demote(self, local, why):
        for ok, _, f in self.alias_uses.get(local, []):
            if f is not None and f.category == CHANGE:
                f.category, f.kind = UNSUPPORTED, "hand_edit"
                f.result = f"{why}: {f.result} by hand"
                f.edits = []

    def _rebind_import(self, node, index, alias):
        new = self.sp.modules[alias.name]
        if self._uses_allow(alias.asname, new):
            self.change("import", alias.name, node,
                        [self.span(alias) + (f"{new} as {alias.asname}",)])
        else:
            self.add(UNSUPPORTED, "hand_edit", alias.name, node,
                     f"{alias.asname} is used for names the NPU module lacks",
                     f"import {new} for the names it has")
            self._demote(alias.asname, f"{alias.name} is imported as {alias.asname}")

    def _rebind_from(self, node):
        sp = self.sp
        targets, blockers = [], []
        for a in node.names:
            if a.name == "*":
                return
            q = f"{node.module}.{a.name}"
            local = a.asname or a.name
            m = sp.lookup(q)
            if m is not None and m.rename and not m.member:
                target = m.rename
            elif q in sp.modules:
                target = sp.modules[q]
            elif m is not None and (m.unsupported or m.runtime):
                blockers.append(a.name)
                target = q
            elif m is None and _cuda_part(q.split(".")):
                # A CUDA name the table does not know, from a CUDA module
                # (torch.cuda, not cpp_extension's CUDAExtension).
                if _cuda_part(node.module.split(".")):
                    blockers.append(a.name)
                target = q
            else:
                target = q
            if target != q and not self._uses_allow(local, target):
                blockers.append(a.name)
            targets.append((a, local, q, target))
        module = {t.rpartition(".")[0] for a, _, q, t in targets}
        if blockers or len(module) != 1:
            names = ", ".join(blockers) if blockers else "names from different modules"
            self.add(UNSUPPORTED, "hand_edit", node.module, node,
                     f"imports {names}, which the NPU module lacks",
                     "import the names the NPU has from it, the others apart")
            for _, local, q, t in targets:
                if t != q:
                    self._demote(local, f"{q} is imported by name")
            return
        new_module = module.pop()
        if new_module == node.module and all(t == q for _, _, q, t in targets):
            return
        splices = [] if new_module == node.module else [self._module_splice(node, new_module)]
        names = []
        for a, local, q, t in targets:
            name = t.rpartition(".")[2]
            asname = local if local != name else None
            names.append(name if asname is None else f"{name} as {asname}")
            if (a.name, a.asname) != (name, asname):
                splices.append(self.span(a) + (names[-1],))
        self.change("import", node.module, node, splices)

    def _module_splice(self, node, new_module):
        """The splice that names another module in a from-import."""
        s, e = self.span(node)
        tokens = _tokens(self.source[s:e])
        if not tokens or tokens[0][0] != "from":
            return None
        end = next((i for i, t in enumerate(tokens) if t[0] == "import"), None)
        if end is None or end < 2:
            return None
        return (s + tokens[1][1], s + tokens[end - 1][2], new_module)

    # --- assignments, defaults, dicts ---------------------------------------

    def _assign(self, node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and self.qual(t.value) == "os.environ":
                self._environ_write(t.slice, node)
            elif isinstance(t, (ast.Tuple, ast.List)) and \
                    isinstance(node.value, (ast.Tuple, ast.List)) and \
                    len(t.elts) == len(node.value.elts):
                for te, ve in zip(t.elts, node.value.elts):
                    self._named_value(_target_name(te), ve, node)
            elif not isinstance(node, ast.AugAssign):
                self._named_value(_target_name(t), node.value, node)

    def _named_value(self, name, value, context):
        if name is None:
            return
        if name in self.accelerator_vars or _names_accelerator(name):
            self._accelerator_arg(value, context)
        elif name == "attn_implementation":
            self._attention_arg(value, context)
        elif name in self.device_vars or self.sp.names_device(name):
            self._device_arg(value, context, "device_string", name)
            if any(type(n) is ast.Constant and type(n.value) is str and id(n) not in self.handled
                   and _device_or_invalid(n.value)
                   for e in _alternatives(value) for n in ast.walk(e)):
                # A CUDA device it may hold stays: tests of it stay too.
                self.unconverted_vars.add(name)
        elif name in self.backend_vars or self.sp.names_backend(name):
            self._backend_arg(value, context, "backend", name)

    def _function(self, node):
        a = node.args
        positional = a.posonlyargs + a.args
        for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
            self._named_value(arg.arg, default, default)
        for arg, default in zip(a.kwonlyargs, a.kw_defaults):
            if default is not None:
                self._named_value(arg.arg, default, default)
        if isinstance(node, ast.Lambda):
            return
        for d in node.decorator_list:
            q = self.qual(d.func if isinstance(d, ast.Call) else d)
            if q and q.partition(".")[0] == "triton" and \
                    q.rpartition(".")[2] in ("jit", "autotune", "heuristics"):
                what, use = _cuda_only.PACKAGES["triton"]
                self.add(CUDA_OP, "kernel", q, d, "a Triton GPU kernel: it needs an NPU port",
                         self._package_suggestion("triton", use),
                         code=f"@{self.text(d)} def {node.name}(...)")
                break

    def _dict(self, node):
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and type(k.value) is str and k.value.isidentifier():
                self._named_value(k.value, v, node)

    # --- tests of the device or backend ---------------------------------------

    def _subject(self, e):
        """What an expression a test compares holds, as far as the
        conversion decides it: "device" for a device or device type whose
        CUDA spelling the conversion makes the npu's (a variable, parameter,
        attribute or key named for a device or holding one, x.device,
        its .type, str() of one, torch.device(...)), "backend" for a
        backend so named, else None."""
        t = type(e)
        name = None
        if t is ast.Name:
            if e.id in self.unconverted_vars:
                return None
            if e.id in self.accelerator_vars:
                return "accelerator"
            if e.id in self.device_vars:
                return "device"
            if e.id in self.backend_vars:
                return "backend"
            name = e.id
        elif t is ast.Attribute:
            if e.attr == "type":
                return "device" if self._subject(e.value) == "device" else None
            name = e.attr
        elif t is ast.Subscript:
            s = e.slice
            if isinstance(s, ast.Constant) and type(s.value) is str and s.value.isidentifier():
                name = s.value
        elif t is ast.Call:
            q = self.qual(e.func)
            if q == "torch.device":
                return "device"
            if isinstance(e.func, ast.Name) and e.func.id == "str" and len(e.args) == 1:
                return self._subject(e.args[0])
        if name is None:
            return None
        if _names_accelerator(name):
            return "accelerator"
        if self.sp.names_device(name):
            return "device"
        if self.sp.names_backend(name):
            return "backend"
        return None

    def _convert_test(self, node, subject, literals, prefix=False):
        """The CUDA (or NCCL) literals a test compares a converted device
        (or backend) with, converted with it; False when there are none.
        Lightning's accelerator names stay, as the accelerators do."""
        splices = []
        for e in literals:
            if not (isinstance(e, ast.Constant) and type(e.value) is str):
                continue
            if subject == "accelerator":
                if e.value.lower() in _CUDA_ACCELERATORS:
                    self.handled.add(id(e))
                    splices.append(None)
                continue
            if subject == "device":
                new = _prefix_npu(e.value) if prefix else _device_or_invalid(e.value) or None
            else:
                new = hccl_backend(e.value)
            if new is not None:
                self.handled.add(id(e))
                splices.append(self._literal_splice(e, new))
        if not splices:
            return False
        if subject != "accelerator":
            self.change(f"{subject}_check", f"{subject} check", node, splices)
        return True

    def _prefix_test(self, node, subject_node, literals):
        """device.startswith('cuda')."""
        subject = self._subject(subject_node)
        if subject == "device":
            self._convert_test(node, subject, literals, prefix=True)

    def _compare(self, node):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                node.ops[0], (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)):
            for this, other in ((node.left, node.comparators[0]),
                                (node.comparators[0], node.left)):
                subject = self._subject(other)
                elts = this.elts if isinstance(this, (ast.Tuple, ast.List, ast.Set)) else [this]
                if subject is not None and self._convert_test(node, subject, elts):
                    return
        operands = [node.value] if not isinstance(node, ast.Compare) else \
            [node.left] + node.comparators
        device = backend = False
        for op in operands:
            elts = op.elts if isinstance(op, (ast.Tuple, ast.List, ast.Set)) else [op]
            for e in elts:
                if isinstance(e, ast.Constant) and type(e.value) is str:
                    if _device_or_invalid(e.value):
                        device = True
                        self.handled.add(id(e))
                    elif hccl_backend(e.value) is not None:
                        backend = True
                        self.handled.add(id(e))
        if device:
            self.add(UNSUPPORTED, "hand_edit", "device check", node,
                     "tests for a CUDA device: after migration the device is the npu",
                     SUGGEST_DEVICE_CHECK)
        elif backend:
            self.add(UNSUPPORTED, "hand_edit", "backend check", node,
                     "tests for NCCL: after migration the backend is hccl", SUGGEST_BACKEND_CHECK)

    def _strays(self, node, elts):
        """Several CUDA device strings in one display that goes nowhere a
        device goes (a test's table of where each parameter lives): one
        finding."""
        left = [e for e in elts if id(e) not in self.handled and _device_or_invalid(e.value)]
        if len(left) < 2:
            return
        self.handled.update(id(e) for e in left)
        self.add(UNSUPPORTED, "hand_edit", "device string", node,
                 f"{len(left)} CUDA device strings outside a device argument: not rewritten",
                 "write 'npu' where they name the device")

    def _stray(self, node):
        """A string that spells a CUDA device or NCCL outside anything that
        takes one: reported, not rewritten."""
        if id(node) in self.handled or id(node) in self.fstring_parts:
            return
        if isinstance(node, ast.JoinedStr):
            first = node.values[0].value
            if _template_npu(first, first + "0"):
                self.add(UNSUPPORTED, "hand_edit", "device string", node,
                         "builds a CUDA device string outside a device argument: not rewritten",
                         "write 'npu' if it names the device")
            return
        v = node.value
        if v in _CARRIED:
            self._environ_name(node)
            return
        if "." in v and v.partition(".")[0] in _NAMED_PACKAGES and is_path(v):
            found = _cuda_only.lookup(v)
            if found is not None:
                self.add(CUDA_OP, "package_name", v, node,
                         f"names {v} in a string ({found[2]}): no NPU build",
                         self._package_suggestion(found[1], found[3]))
            return
        new = _device_or_invalid(v)
        if new or _template_npu(v, _FIELD.sub("0", _PERCENT.sub("0", v)) if v != "cuda:"
                                else "cuda:0"):
            self.add(UNSUPPORTED, "hand_edit", "device string", node,
                     "a CUDA device string outside a device argument: not rewritten",
                     "write 'npu' if it names the device")
        elif hccl_backend(v) is not None:
            self.add(UNSUPPORTED, "hand_edit", "backend string", node,
                     "names NCCL outside a backend argument: not rewritten",
                     "write 'hccl' if it names the process-group backend")
        elif v.startswith("torch.") and is_path(v) and _cuda_part(v.split(".")):
            m = self.sp.lookup(v)
            if m is not None and (m.rename or m.unsupported or m.runtime):
                self.add(UNSUPPORTED, "hand_edit", "API name", node,
                         f"names {m.source} in a string: not rewritten",
                         f"write {m.rename}" if m.rename else "check what uses the name")


# The environment's CUDA-side variables the NPU reads under another name:
# name -> (the NPU's, how a value is carried).
_CARRIED = {}
for _cuda, _npu, _carry in _environment.CARRIED:
    _CARRIED.setdefault(_cuda, (_npu, _carry))

# Top-level names of the CUDA-only packages and extensions, which strings
# may name ('bitsandbytes.optim.AdamW8bit'); cuda-python's "cuda" is too
# common a word to tell.
_NAMED_PACKAGES = frozenset(
    {p.partition(".")[0] for p in _cuda_only.PACKAGES} | set(_cuda_only.EXTENSIONS)) - {"cuda"}

# Calls that run a program: its command first.
_RUNNERS = frozenset(("subprocess.run", "subprocess.call", "subprocess.check_call",
                      "subprocess.check_output", "subprocess.Popen", "subprocess.getoutput",
                      "subprocess.getstatusoutput", "os.system", "os.popen"))

# Lightning's accelerator names that choose its CUDA accelerator, its
# classes, and what to say of them.
_CUDA_ACCELERATORS = ("cuda", "gpu")
_LIGHTNING_PACKAGES = frozenset(spec.partition(".")[0] for spec in _lightning.ACCELERATORS)
_LIGHTNING_CLASSES = frozenset(
    path for spec in _lightning.ACCELERATORS
    for module, _, name in [spec.partition(":")]
    for path in (f"{module}.{name}", f"{module.rpartition('.')[0]}.{name}"))
_LIGHTNING_CUDA = ("Lightning's CUDA accelerator: Lightning has no NPU accelerator, and "
                   "torch_npu as it is adds none")
_LIGHTNING_USE = ("run it migrated (python -m transfer_to_npu gives Lightning's CUDA "
                  "accelerator the npu), or give Lightning an accelerator of the npu's")

# accelerate's distributed types of CUDA devices, and the NPU's.
_ACCELERATE_TYPES = {"MULTI_GPU": "MULTI_NPU"}

# transformers' attention implementations named for FlashAttention.
_ATTENTION = {
    "flash_attention_2": (
        "check", "FlashAttention 2 through flash_attn, which has no NPU build: recent "
        "transformers (4.57 here) run it on Ascend through torch_npu instead",
        "keep it with a recent transformers, or use 'sdpa'"),
    "flash_attention_3": (
        "hand_edit", "FlashAttention 3 (Hopper GPUs only): not on the NPU",
        "use 'sdpa', or 'flash_attention_2' with a recent transformers"),
}


# CUDA names the table does not know that are settings: cuDNN's switches,
# the choice of attention kernels.  torch_npu leaves them as they are; they
# change nothing on the NPU.
_SETTINGS = ("torch.backends.", "torch.nn.attention.")


def no_effect(f):
    """Whether a finding left as written is a setting that changes nothing
    on the NPU (it needs no port)."""
    return f.kind == "unknown" and f.api.startswith(_SETTINGS)


def _default_of(call):
    """The default a look-up call gives: getattr(obj, name, default),
    x.get(key, default) (os.environ's, a dict's), os.getenv(key, default)."""
    func, args = call.func, call.args
    if isinstance(func, ast.Name) and func.id == "getattr" and len(args) == 3:
        return args[2]
    if isinstance(func, ast.Attribute) and func.attr in ("get", "getenv") and len(args) == 2:
        return args[1]
    return None


# Device types and backends named next to CUDA's and NCCL's in one display
# (["cuda", "xpu", "hpu"], {"cuda": "nccl", "npu": "hccl"}): the code lists
# the accelerators it knows, the npu's among them or beside them; it
# chooses none.
_OTHER_DEVICES = frozenset(("npu", "xpu", "hpu", "mps", "mtia", "xla", "privateuseone"))
_OTHER_BACKENDS = frozenset(("hccl", "ccl", "xccl", "mpi"))


def _listed(values):
    """The ids of the CUDA device types and NCCL backends of a display
    that names other accelerators' too."""
    strings = [v for v in values if type(v) is ast.Constant and type(v.value) is str]
    if len(strings) < 2:
        return ()
    names = {v.value.lower() for v in strings}
    out = []
    if names & _OTHER_DEVICES:
        out += [id(v) for v in strings if v.value == "cuda"]
    if names & _OTHER_BACKENDS:
        out += [id(v) for v in strings if v.value.lower() == "nccl"]
    return out


def _gather(scan, node, values):
    """A display holding several CUDA strings, for one finding of them."""
    strings = [v for v in values if type(v) is ast.Constant and type(v.value) is str and
               "cuda" in v.value]
    if len(strings) > 1:
        scan.displays.append((node, strings))


def _names_accelerator(name):
    n = name.lower()
    return n in ("accelerator", "accelerators") or n.endswith(("_accelerator", "_accelerators"))


# Calls that write an environment variable, its name first.
_ENVIRON_WRITES = ("os.environ.setdefault", "os.putenv", "os.environ.__setitem__")


def _dict_keys(call):
    """The keys of the dict display os.environ.update() is given."""
    if call.args and isinstance(call.args[0], ast.Dict):
        return [k for k in call.args[0].keys if k is not None]
    return []


def _one_line(raw, limit, cut=False):
    """Source text on one line (its lines stripped and joined), at most
    limit long; cut: there is more of it."""
    if "\n" in raw or "\r" in raw:
        raw = " ".join(p.strip() for p in split_lines(raw))
    return raw if len(raw) <= limit and not cut else raw[:limit - 3] + "..."


_SKIPPED_TOKENS = frozenset((tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                             tokenize.DEDENT, tokenize.ENDMARKER))


def _tokens(text):
    """The tokens of a piece of source (an expression or one statement) as
    (string, start, end) offsets in it, comments and line breaks left out;
    None when it does not tokenize."""
    starts = [0]
    for m in re.finditer(r"\r\n|\r|\n", text):
        starts.append(m.end())
    out = []
    try:
        for tok in _text.tokens(text):
            if tok.type in _SKIPPED_TOKENS:
                continue
            (r1, c1), (r2, c2) = tok.start, tok.end
            out.append((tok.string, starts[r1 - 1] + c1, starts[r2 - 1] + c2))
    except (tokenize.TokenError, SyntaxError, IndexError):
        return None
    return out


def _alternatives(expr):
    """The expressions a value may come from: either branch of a
    conditional, any operand of ``or`` and ``and``."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if type(e) is ast.IfExp:
            stack += (e.orelse, e.body)
        elif type(e) is ast.BoolOp:
            stack.extend(reversed(e.values))
        else:
            yield e


def _target_name(t):
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Attribute):
        return t.attr
    if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and \
            type(t.slice.value) is str and t.slice.value.isidentifier():
        return t.slice.value
    return None


def _prefix_len(text):
    n = 0
    while n < len(text) and text[n] not in "'\"":
        n += 1
    return n


def _literal_text(old, new):
    """The literal old (as written: prefix and quotes) holding new instead."""
    n = _prefix_len(old)
    prefix, rest = old[:n], old[n:]
    quote = rest[:3] if rest[:3] in ('"""', "'''") else rest[:1]
    if not quote or not rest.endswith(quote) or len(rest) < 2 * len(quote) or \
            rest[len(quote):-len(quote)].count(quote[0]) or "\\" in rest or \
            any(c in rest for c in "\r\n") and len(quote) == 1:
        return repr(new)
    return f"{prefix}{quote}{new}{quote}"


def scan_file(spellings, source, tree, insert="torch_npu", advice=True):
    """The scan of one parsed file: its findings in the order of the
    source, each test of the device settled with what it guards
    (``meaning``), and the patch targets that follow the code of other
    files (``pending``).  With insert another module
    (``transfer_to_npu``), only its import after torch's first one; with
    advice False (a test file), no advice."""
    from . import meaning

    s = Scan(spellings, source, tree, insert, advice)
    if insert == "torch_npu":
        meaning.settle(s)
    s.findings.sort(key=lambda f: (f.line, f.column))
    return s


def scan(spellings, source, tree, insert="torch_npu"):
    """The findings of one parsed file (``scan_file``), in the order of the
    source; its patch targets as the file alone says."""
    return scan_file(spellings, source, tree, insert).findings
