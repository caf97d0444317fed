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

from .._rules import cuda_extensions
from . import sources as _sources, spellings as _spellings
from .spellings import hccl_backend, npu_device

CHANGE, UNSUPPORTED, CUDA_OP = "change", "unsupported", "cuda_op"

# Packages that exist only for NVIDIA GPUs: what they are and what to use
# on the NPU.  (The table may also serve some of them at run time: see
# ``_package_finding``.)
CUDA_PACKAGES = {
    "flash_attn": ("FlashAttention's CUDA kernels",
                   "torch.nn.functional.scaled_dot_product_attention, or "
                   "torch_npu.npu_fusion_attention on Ascend"),
    "apex": ("NVIDIA apex (CUDA amp, fused optimizers and norms)",
             "torch.amp for mixed precision, torch.optim (AdamW, SGD), torch.nn.LayerNorm"),
    "xformers": ("xFormers' CUDA attention kernels",
                 "torch.nn.functional.scaled_dot_product_attention, or "
                 "torch_npu.npu_fusion_attention on Ascend"),
    "bitsandbytes": ("bitsandbytes' CUDA 8-bit and 4-bit kernels",
                     "torch.optim optimizers; quantisation with an Ascend-supported library"),
    "cupy": ("CuPy (NumPy on CUDA)", "numpy on the host, or torch tensors on the npu"),
    "pynvml": ("NVIDIA's management library (NVML)",
               "torch.npu memory functions (memory_allocated, mem_get_info), or npu-smi"),
    "triton": ("Triton (GPU kernels compiled for CUDA)",
               "torch ops, or an Ascend C / Triton-Ascend port of the kernel"),
}

_EXTENSIONS = "torch.utils.cpp_extension."

_FIELD = re.compile(r"\{[^{}]*\}")
_PERCENT = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdi]")

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


def _walk(scan, tree):
    """One walk over the tree, in source order, recording what the scan
    looks at.  Iterative: machine-written code nests deeper than Python's
    recursion allows."""
    s = scan
    aliases, from_names = s.aliases, s.from_names
    record = {ast.Call: s.calls, ast.Compare: s.compares, ast.Assign: s.assigns,
              ast.FunctionDef: s.functions, ast.AsyncFunctionDef: s.functions,
              ast.Lambda: s.functions, ast.Dict: s.dicts}
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
            if type(v) is str and len(v) <= 64 and ("cuda" in v or "nccl" in v.lower()):
                s.strings.append(node)
            continue
        if t is ast.Attribute:
            chain = _dotted(node)
            if chain is not None:
                s.chains.append((node,) + chain)
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
        if t is ast.AnnAssign:
            if node.value is not None:
                s.assigns.append(node)
        elif t is ast.JoinedStr:
            values = node.values
            if values and type(values[0]) is ast.Constant and \
                    type(values[0].value) is str and values[0].value.startswith("cuda"):
                s.strings.append(node)
                s.fstring_parts.update(id(v) for v in values)
        else:
            found = record.get(t)
            if found is not None:
                found.append(node)
        stack.extend(reversed(list(children(node))))


class Scan:
    """The findings of one file."""

    def __init__(self, spellings, source, tree):
        self.sp = spellings
        self.source = source
        self._lines = None
        self.findings = []
        # name -> (dotted name, bound by `import` (a module for sure))
        self.aliases = {}
        self.from_names = set()
        self.imports, self.chains, self.names, self.calls = [], [], [], []
        self.compares, self.assigns, self.functions, self.dicts = [], [], [], []
        self.strings, self.loose_attrs = [], []
        self.fstring_parts = set()
        self.handled = set()            # ids of string nodes already judged
        self.device_vars, self.backend_vars = set(), set()
        # local name -> [(ok, new binding, pending findings)]: the uses of a
        # name bound by an import of a CUDA module, which the import's
        # conversion must keep meaning the same.
        self.alias_uses = {}
        _walk(self, tree)
        self.aliases.setdefault("torch", ("torch", True))
        for node in self.calls:
            self._call(node)
        for chain in self.chains:
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
        for node in self.strings:
            self._stray(node)

    # --- text and findings -------------------------------------------------

    @property
    def lines(self):
        if self._lines is None:
            self._lines = _sources.split_lines(self.source)
        return self._lines

    def _char_col(self, line, col):
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return col
        return len(text.encode("utf-8")[:col].decode("utf-8", "replace"))

    def text(self, node, limit=120):
        """The source of a node, on one line and at most ``limit`` long."""
        l1, c1, l2, c2 = key(node)
        lines = self.lines
        if l1 == l2:
            raw = lines[l1 - 1].encode("utf-8")[c1:c2].decode("utf-8", "replace")
        else:
            parts = [lines[l1 - 1].encode("utf-8")[c1:].decode("utf-8", "replace")]
            parts += lines[l1:l2 - 1]
            parts.append(lines[l2 - 1].encode("utf-8")[:c2].decode("utf-8", "replace"))
            raw = " ".join(p.strip() for p in parts)
        return raw if len(raw) <= limit else raw[:limit - 3] + "..."

    def _becomes(self, context, replacements, limit=160):
        """context's text with the spans (line, col, end_col, new text)
        replaced: what the code becomes."""
        l1, c1, l2, c2 = key(context)
        if l1 == l2 and all(r[0] == l1 for r in replacements):
            raw = self.lines[l1 - 1].encode("utf-8")
            out, pos = [], c1
            for _, start, end, new in sorted(replacements):
                out.append(raw[pos:start].decode("utf-8", "replace"))
                out.append(new)
                pos = end
            out.append(raw[pos:c2].decode("utf-8", "replace"))
            text = "".join(out)
        else:
            # On several lines (shown as one): each span's text replaced.
            text = self.text(context, 10**6)
            for line, start, end, new in replacements:
                old = self.lines[line - 1].encode("utf-8")[start:end].decode("utf-8", "replace")
                if old:
                    text = text.replace(old, new, 1)
                elif (line, start) == (l2, c2 - 1):  # inserted before the closing bracket
                    text = text[:-1] + new + text[-1:]
        return text if len(text) <= limit else text[:limit - 3] + "..."

    def add(self, category, kind, api, node, result, suggestion="", edits=(), code=None):
        f = Finding(category, kind, api, code if code is not None else self.text(node), result,
                    suggestion, node.lineno, node.col_offset, node.end_lineno,
                    self._char_col(node.lineno, node.col_offset) + 1, edits)
        self.findings.append(f)
        return f

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

    def _value_findings(self, values, context, kind, api, what="device"):
        for op, node, new in values:
            if op == "invalid":
                self.add(UNSUPPORTED, "hand_edit", api, node,
                         f"a malformed CUDA {what} string: torch rejects it",
                         "write a valid device ('cuda' or 'cuda:N')", code=self.text(context))
                continue
            if op == "fstring":
                written = self.text(node, 10**6).replace(node.values[0].value, new, 1)
                edit = ("fstring", key(node), new)
            else:
                written = _literal_text(self.text(node, 10**6), new)
                edit = ("literal", key(node), new)
            self.add(CHANGE, kind, api, node, self._becomes(context, [
                (node.lineno, node.col_offset, node.end_col_offset, written)]),
                edits=[edit], code=self.text(context))

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
                new = m.rename.rpartition(".")[2]
                end = func.end_col_offset
                self.add(CHANGE, m.kind, api, node, self._becomes(node, [
                    (func.end_lineno, end - len(func.attr.encode()), end, new)]),
                    edits=[("attr", key(func), new)])
            if m.default is not None:
                self._default(node, m, starred)
            if m.keyword_swap is not None:
                self._keyword_swap(node, m)
            if m.call is not None and not args and not node.keywords:
                self._call_replace(node, m)
            if m.legacy is not None and args and starred > 0:
                self._legacy(node, m)
        for k in node.keywords:
            if k.arg is None or k.arg in handled_kws:
                continue
            if sp.names_device(k.arg):
                self._device_arg(k.value, node, "device_string", f"{k.arg}=")
            elif sp.names_backend(k.arg):
                self._backend_arg(k.value, node, "backend", f"{k.arg}=")
        if args and isinstance(args[0], ast.Constant) and type(args[0].value) is str:
            self._option(node, args[0].value)
        if q is not None:
            if q.startswith(_EXTENSIONS):
                self._extension(node, q)
            top = q.partition(".")[0]
            if top in CUDA_PACKAGES and top != "triton":
                what, suggestion = CUDA_PACKAGES[top]
                self.add(CUDA_OP, "package_api", q, node,
                         f"{what}: no NPU build", self._package_suggestion(top, suggestion))

    def _option(self, node, name):
        """A command-line option or setting named for a device or a backend
        (add_argument('--device', default='cuda', choices=[...]))."""
        device, backend = self.sp.names_device(name), self.sp.names_backend(name)
        if not (device or backend) or (not name.startswith("-") and not name.isidentifier()):
            return
        for k in node.keywords:
            if k.arg in ("default", "const"):
                values = [k.value]
            elif k.arg == "choices" and isinstance(k.value, (ast.List, ast.Tuple, ast.Set)):
                values = k.value.elts
            else:
                continue
            for v in values:
                if device:
                    self._device_arg(v, node, "device_string", f"option {name}")
                else:
                    self._backend_arg(v, node, "backend", f"option {name}")

    def _default(self, node, m, starred):
        param, position, value = m.default
        if starred < len(node.args) or position < len(node.args) or \
                any(k.arg in (param, None) for k in node.keywords):
            return
        text = f"{param}={value!r}"
        end = node.end_col_offset - 1  # before ")"
        self.add(CHANGE, "default", m.source, node, self._becomes(node, [
            (node.end_lineno, end, end, (", " if node.args or node.keywords else "") + text)]),
            "", edits=[("add_keyword", key(node), param, repr(value))])

    def _keyword_swap(self, node, m):
        kw, value, new = m.keyword_swap
        for k in node.keywords:
            if k.arg == kw and isinstance(k.value, ast.Constant) and k.value.value == value:
                text = ", ".join(f"{a}={v}" for a, v in new)
                self.add(CHANGE, m.kind, m.source, node, self._becomes(node, [
                    (k.lineno, k.col_offset, k.end_col_offset, text)])
                    if k.lineno == k.end_lineno else text,
                    edits=[("swap_keyword", key(node), kw, new)])

    def _call_replace(self, node, m):
        attr, args = m.call
        func = node.func
        if isinstance(func, ast.Attribute):
            end = func.end_col_offset
            self.add(CHANGE, m.kind, m.source, node, self._becomes(node, [
                (func.end_lineno, end - len(func.attr.encode()), end, attr),
                (node.end_lineno, node.end_col_offset - 1, node.end_col_offset - 1, args)]),
                edits=[("call", key(node), attr, args)])
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

    # --- references --------------------------------------------------------

    def _chain(self, outer, root, nodes, attrs):
        sp = self.sp
        bound = self.aliases.get(root.id)
        if bound is None:
            # Any object (x.is_cuda): the attribute rows; methods are the
            # calls'.
            for n in nodes:
                m = sp.members.get(n.attr)
                if m is not None and m.kind == "attribute" and m.rename:
                    self._rename_attrs(n, [(n, m.rename.rpartition(".")[2])], m)
            return
        base = bound[0].split(".")
        parts = base + attrs
        nb = len(base)
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
        self._reference(m, node, root.id, nodes, parts[:k], nb)

    def _name(self, node):
        """A name imported from a CUDA module, used bare."""
        q = self.aliases[node.id][0]
        m = self.sp.lookup(q)
        if m is not None:
            if m.unsupported or m.runtime:
                self._reference(m, node, node.id, [], q.split("."), len(q.split(".")))
        elif q.startswith("torch.") and _cuda_part(q.split(".")) and q not in self.sp.modules:
            self._use(node.id, False, None, None)

    def _loose_attr(self, node):
        """x().is_cuda: the attribute rows on what an expression gives."""
        m = self.sp.members.get(node.attr)
        if m is not None and m.kind == "attribute" and m.rename:
            self._rename_attrs(node, [(node, m.rename.rpartition(".")[2])], m)

    def _reference(self, m, node, root, nodes, source_parts, nb):
        if m.unsupported is not None:
            self.add(UNSUPPORTED, "unsupported", m.source, node, m.unsupported,
                     "remove it, or guard it for CUDA only")
            self._use(root, False, None, None)
            return
        if m.runtime is not None:
            self.add(UNSUPPORTED, "runtime_only", m.source, node, m.runtime,
                     "run it migrated (python -m transfer_to_npu), or replace it by hand")
            self._use(root, False, None, None)
            return
        if m.rename is None:
            return
        target = m.rename.split(".")
        if m.member:
            # Reached through a class (torch.Tensor.cuda): its own name.
            self._rename_attrs(node, [(node, target[-1])], m)
            return
        if len(target) != len(source_parts):
            self.add(UNSUPPORTED, "hand_edit", m.source, node,
                     f"spelled through another path: it becomes {m.rename}",
                     f"write {m.rename}")
            return
        renames = [(nodes[i - nb], target[i]) for i in range(nb, len(target))
                   if source_parts[i] != target[i]]
        if any(source_parts[i] != target[i] for i in range(nb)):
            # The import that binds the root must bind the NPU module.
            f = self._rename_attrs(node, renames, m)
            base = ".".join(target[:nb])
            f.result = f"{f.result} (with {root} bound to {base})"
            self._use(root, True, base, f)
            return
        if renames:
            self._rename_attrs(node, renames, m)

    def _rename_attrs(self, node, renames, m):
        edits = [("attr", key(n), new) for n, new in renames]
        spans = []
        for n, new in renames:
            end = n.end_col_offset
            spans.append((n.end_lineno, end - len(n.attr.encode()), end, new))
        becomes = self._becomes(node, spans) if spans else self.text(node)
        return self.add(CHANGE, m.kind, m.source, node, becomes, edits=edits)

    def _module_rename(self, outer, root, nodes, parts, nb):
        q = ".".join(parts)
        target = self.sp.modules[q].split(".")
        if len(target) != len(parts) or any(parts[i] != target[i] for i in range(nb)):
            self._unknown(outer, root.id, nb, q)
            return
        renames = [(nodes[i - nb], target[i]) for i in range(nb, len(target))
                   if parts[i] != target[i]]
        node = nodes[-1]
        edits = [("attr", key(n), new) for n, new in renames]
        spans = [(n.end_lineno, n.end_col_offset - len(n.attr.encode()), n.end_col_offset, new)
                 for n, new in renames]
        self.add(CHANGE, "module", q, node, self._becomes(node, spans), edits=edits)

    def _unknown(self, node, root, nb, q):
        self.add(UNSUPPORTED, "unknown", q, node,
                 "a CUDA name the mapping table does not know: left as written",
                 "check what it does on the NPU (cuDNN and CUDA settings have no effect there)")
        self._use(root, False, None, None)

    def _use(self, root, ok, new_base, finding):
        self.alias_uses.setdefault(root, []).append((ok, new_base, finding))

    # --- imports ---------------------------------------------------------

    def _imports(self):
        first_torch, has_torch_npu = None, False
        for node in self.imports:
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            else:
                modules = [node.module] if node.module and not node.level else []
            for module in modules:
                top = module.partition(".")[0]
                if top in CUDA_PACKAGES:
                    what, suggestion = CUDA_PACKAGES[top]
                    self.add(CUDA_OP, "package", module, node, f"{what}: no NPU build",
                             self._package_suggestion(top, suggestion))
                elif top == "torch_npu":
                    has_torch_npu = True
                elif top == "torch" and first_torch is None:
                    first_torch = node
            if isinstance(node, ast.Import):
                for i, a in enumerate(node.names):
                    if a.asname and a.name in self.sp.modules:
                        self._rebind_import(node, i, a)
            elif modules and modules[0].partition(".")[0] == "torch":
                self._rebind_from(node)
        if first_torch is not None and not has_torch_npu:
            self.add(CHANGE, "import", "torch_npu", first_torch,
                     f"{self.text(first_torch)}; import torch_npu",
                     edits=[("insert_after", first_torch.lineno, "import torch_npu")])

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
            self.add(CHANGE, "import", alias.name, node,
                     f"import {new} as {alias.asname}",
                     edits=[("import", key(node), index, new)])
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
                blockers.append(a.name)
                target = q
            else:
                target = q
            if target != q and not self._uses_allow(local, target):
                blockers.append(a.name)
            targets.append((a, local, q, target))
        if all(t == q for _, _, q, t in targets):
            return
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
        names = []
        for a, local, q, t in targets:
            name = t.rpartition(".")[2]
            names.append((name, local if local != name else None))
        text = f"from {new_module} import " + ", ".join(
            n if a is None else f"{n} as {a}" for n, a in names)
        self.add(CHANGE, "import", node.module, node, text,
                 edits=[("import_from", key(node), new_module, names)])

    # --- assignments, defaults, dicts ---------------------------------------

    def _assign(self, node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, (ast.Tuple, ast.List)) and isinstance(node.value, (ast.Tuple, ast.List)) \
                    and len(t.elts) == len(node.value.elts):
                for te, ve in zip(t.elts, node.value.elts):
                    self._named_value(_target_name(te), ve, node)
            else:
                self._named_value(_target_name(t), node.value, node)

    def _named_value(self, name, value, context):
        if name is None:
            return
        if name in self.device_vars or self.sp.names_device(name):
            self._device_arg(value, context, "device_string", name)
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
                what, suggestion = CUDA_PACKAGES["triton"]
                self.add(CUDA_OP, "kernel", q, d, "a Triton GPU kernel: it needs an NPU port",
                         self._package_suggestion("triton", suggestion),
                         code=f"@{self.text(d)} def {node.name}(...)")
                break

    def _dict(self, node):
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and type(k.value) is str and k.value.isidentifier():
                self._named_value(k.value, v, node)

    # --- tests of the device or backend ---------------------------------------

    def _compare(self, node):
        operands = [node.value] if isinstance(node, ast.MatchValue) else \
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
    if not quote or not rest.endswith(quote) or len(rest) < 2 * len(quote):
        return repr(new)
    return f"{prefix}{quote}{new}{quote}"


def scan(spellings, source, tree):
    """The findings of one parsed file, in the order of the source."""
    findings = Scan(spellings, source, tree).findings
    findings.sort(key=lambda f: (f.line, f.column))
    return findings
