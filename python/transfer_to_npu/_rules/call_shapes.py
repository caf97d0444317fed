"""Call shapes: what a call of a CUDA API may pass (its parameters' names,
positions, kinds and defaults), and whether what the table maps it to
takes every one of them.

A CUDA call reaches its counterpart with its arguments as written, so the
counterpart must take each of them as CUDA's does: ``torch.cuda.stream(
stream=s)`` reaches ``torch.npu.stream``, which must have a parameter named
``stream``.  ``differences(source, target)`` lists where it does not;
``signature`` reads what a live callable takes, ``from_text`` what one
written down takes (a release's surface, a package's sources).
"""

import ast
import functools
import inspect
import operator

from ._introspect import original

_P = inspect.Parameter
_POSITIONAL = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
_NAMED = (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)


class Text(str):
    """A default read from source that is not a literal (``torch.float32``,
    ``2.0 ** 16``): kept as written, and equal to a value that prints so."""

    def __repr__(self):
        return str(self)


def signature(obj):
    """What a call of obj takes, as an inspect.Signature, or None when that
    cannot be read (a builtin that states nothing).  A migration wrapper is
    looked through to its original, and a forwarder (``*args, **kwargs``
    around a function it names, ``functools.wraps``) to what it forwards to;
    a wrapper with parameters of its own is taken as it is.  A builtin
    method is read from its docstring's first line, as torch writes it
    (``cuda(device=None, non_blocking=False, ...) -> Tensor``).  A
    Signature is itself."""
    if isinstance(obj, inspect.Signature):
        return obj
    obj = original(obj)
    for follow in (False, True):
        try:
            found = inspect.signature(obj, follow_wrapped=follow)
        except (ValueError, TypeError):
            continue
        if follow or not _forwards(found) or not (hasattr(obj, "__wrapped__")
                                                  or isinstance(obj, type)):
            return found
    return _documented(obj)


def _forwards(found):
    return [p.kind for p in found.parameters.values()] == [_P.VAR_POSITIONAL, _P.VAR_KEYWORD]


def _documented(obj):
    name = getattr(obj, "__name__", None)
    lines = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    if not name or not lines or not lines[0].startswith(name + "("):
        return None
    text = lines[0][len(name):].partition(" -> ")[0]
    if inspect.ismethoddescriptor(obj):
        text = "(self, " + text[1:] if text != "()" else "(self)"
    try:
        found = from_text(text)
    except SyntaxError:
        return None
    # pybind11 names a parameter it was given no name for argN: positional.
    return found.replace(parameters=[
        p.replace(kind=_P.POSITIONAL_ONLY) if p.name.startswith("arg") and p.name[3:].isdigit()
        else p for p in found.parameters.values()])


def from_text(text):
    """The inspect.Signature of parameters as written: "(a, b=None, *,
    c=torch.float32)".  A literal default is its value, any other its
    text (``Text``)."""
    args = ast.parse(f"def f{text}: pass").body[0].args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [_P(a.arg, _P.POSITIONAL_ONLY if i < len(args.posonlyargs) else
                 _P.POSITIONAL_OR_KEYWORD, default=_default(d))
              for i, (a, d) in enumerate(zip(positional, defaults))]
    if args.vararg is not None:
        params.append(_P(args.vararg.arg, _P.VAR_POSITIONAL))
    params += [_P(a.arg, _P.KEYWORD_ONLY, default=_default(d))
               for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg is not None:
        params.append(_P(args.kwarg.arg, _P.VAR_KEYWORD))
    return inspect.Signature(params)


def _default(node):
    if node is None:
        return _P.empty
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    try:
        return _arithmetic(node)  # 2.0 ** 16
    except (ValueError, ArithmeticError):
        return Text(ast.unparse(node))


_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg}


def _arithmetic(node):
    """The value of arithmetic on numbers, as written in a default."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS and not (
            isinstance(node.op, ast.Pow) and abs(_arithmetic(node.right)) > 64):
        return _OPERATORS[type(node.op)](_arithmetic(node.left), _arithmetic(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_arithmetic(node.operand))
    raise ValueError(ast.unparse(node))


def _same(a, b, device):
    """Whether two defaults mean the same: CUDA's device ('cuda',
    torch.device('cuda')) is the target's (``device``)."""
    if isinstance(a, str) and (a == "cuda" or a.startswith("cuda:")):
        a = device + a[4:]
    elif type(a).__name__ == "device" and getattr(a, "type", None) == "cuda":
        a = type(a)(device, a.index) if a.index is not None else type(a)(device)
    if isinstance(a, Text) or isinstance(b, Text):
        return repr(a) == repr(b)
    if a is b:
        return True
    try:
        return isinstance(a, bool) == isinstance(b, bool) and bool(a == b)
    except Exception:  # a value with no truth (a tensor)
        return False


def differences(source, target, device="npu"):
    """[(parameter, what differs)]: the calls signature ``source`` takes
    that ``target`` refuses or reads otherwise.  Every positional argument
    must land at the same place, every keyword (positional-or-keyword or
    keyword-only) must be a keyword of the target of that place, ``*args``
    and ``**kwargs`` must be taken, what the source may leave out the
    target may too, and a default the two have must be the same
    (``device``: the target's device, for CUDA's)."""
    out = []
    sp, tp = list(source.parameters.values()), list(target.parameters.values())
    s_pos = [p for p in sp if p.kind in _POSITIONAL]
    t_pos = [p for p in tp if p.kind in _POSITIONAL]
    t_named = {p.name: p for p in tp if p.kind in _NAMED}
    t_args = any(p.kind is _P.VAR_POSITIONAL for p in tp)
    t_kwargs = any(p.kind is _P.VAR_KEYWORD for p in tp)

    def default(p, q):
        if p.default is not _P.empty and q is not None and q.default is not _P.empty and \
                not _same(p.default, q.default, device):
            out.append((p.name, f"default {p.default!r}, here {q.default!r}"))

    for i, p in enumerate(s_pos):
        q = t_pos[i] if i < len(t_pos) else None
        if q is None and not t_args:
            out.append((p.name, f"not taken as positional argument {i + 1}"))
        if p.kind is _P.POSITIONAL_OR_KEYWORD:
            named = t_named.get(p.name)
            if named is None and not t_kwargs:
                out.append((p.name, f"{p.name}= not taken" +
                            (f" (here {q.name!r})" if q is not None else "")))
            elif named is not None and q is not None and named is not q:
                out.append((p.name, f"positional argument {i + 1}, here that is {q.name!r}"))
        default(p, q if q is not None else t_named.get(p.name))
    for p in sp:
        if p.kind is _P.KEYWORD_ONLY:
            q = t_named.get(p.name)
            if q is None and not t_kwargs:
                out.append((p.name, f"{p.name}= not taken"))
            default(p, q)
        elif p.kind is _P.VAR_POSITIONAL and not t_args:
            out.append((p.name, f"*{p.name} not taken"))
        elif p.kind is _P.VAR_KEYWORD and not t_kwargs:
            out.append((p.name, f"**{p.name} not taken"))
    # What the target requires, every call of the source gives: a required
    # argument at that place or of that name.
    s_args = any(p.kind is _P.VAR_POSITIONAL for p in sp)
    s_required = {p.name for p in sp if p.kind in _NAMED and p.default is _P.empty}
    for j, q in enumerate(t_pos):
        given = q.name in s_required or (s_pos[j].default is _P.empty if j < len(s_pos)
                                         else s_args)
        if q.default is _P.empty and not given:
            out.append((q.name, "required here, not in the source"))
    for q in tp:
        if q.kind is _P.KEYWORD_ONLY and q.default is _P.empty and q.name not in s_required:
            out.append((q.name, "required here, not in the source"))
    return out


# --- CUDA's calls made of a counterpart that takes them otherwise -----------

#: Parameters torch_npu names otherwise than CUDA (at the same place, for
#: the same thing), per source: {CUDA's name: torch_npu's}.
RENAMED = {
    "torch.cuda.StreamContext": {"stream": "stream_ctx"},
    "torch.cuda.get_device_name": {"device": "device_name"},
    "torch.cuda.can_device_access_peer": {"device": "device_id", "peer_device": "peer_device_id"},
    "torch.cuda.graph": {"cuda_graph": "npu_graph"},
    "torch.cuda.graphs.graph": {"cuda_graph": "npu_graph"},
    "torch.cuda.memory._set_allocator_settings": {"env": "settings"},
    "torch.profiler.profile.export_chrome_trace": {"path": "output_path"},
    "torch.profiler.profile.export_memory_timeline": {"path": "output_path"},
    "torch.profiler.profile.export_stacks": {"path": "output_path"},
}

#: Parameters that mean something for CUDA (or torch's own profiler) only,
#: per source, and why.  Where the NPU's counterpart lacks one, a call that
#: passes it is taken and the argument left out, with a warning when it
#: asks for something else than its default.
_GRAPHS = {"enable_annotations": "kernel annotations of CUDA's driver (cuda.bindings)",
           "check_input_liveness": "a debugging check of a CUDA graph's inputs"}
_KEEP_GRAPH = {"keep_graph": "whether CUDA keeps its graph once instantiated"}
_FX = {"augment_with_fx_traces": "FX frames in CUDA's allocator history"}
_PYTHON_EXPORT = "how torch's profiler writes its trace; torch_npu's writes its own"
CUDA_ONLY = {
    "torch.cuda.Event": {"external": "how a CUDA graph that captures the event records it"},
    "torch.cuda.CUDAGraph": _KEEP_GRAPH,
    "torch.cuda.graphs.CUDAGraph": _KEEP_GRAPH,
    "torch.cuda.graph": _GRAPHS,
    "torch.cuda.graphs.graph": _GRAPHS,
    "torch.cuda.make_graphed_callables": {"enable_annotations": _GRAPHS["enable_annotations"]},
    "torch.cuda.graphs.make_graphed_callables": {
        "enable_annotations": _GRAPHS["enable_annotations"]},
    "torch.cuda.is_bf16_supported": {"including_emulation": "bfloat16 emulated on a GPU "
                                                            "without it; the NPU answers for "
                                                            "its own"},
    "torch.cuda.memory_snapshot": {"include_traces": "whether CUDA's snapshot holds its trace "
                                                     "entries"},
    "torch.cuda.memory._snapshot": _FX,
    "torch.cuda.memory._dump_snapshot": _FX,
    "torch.profiler.tensorboard_trace_handler": {
        "use_gzip": "torch's trace file gzipped; torch_npu writes its own",
        "use_python_export": _PYTHON_EXPORT},
    "torch.profiler.profile.export_chrome_trace": {"use_python_export": _PYTHON_EXPORT},
}


def differ(source, target):
    """Whether target may take source's calls otherwise: their parameter
    names differ in place or in kind (read from their code, fast enough for
    every row at every start; None, when that cannot be read, is taken as
    the same)."""
    from ._introspect import parameters

    mine, theirs = parameters(source), parameters(target)
    if mine is None or theirs is None:
        return False
    return theirs[0][:len(mine[0])] != mine[0] or not set(mine[1]) <= set(theirs[0] + theirs[1])


class Adapted:
    """A CUDA call made of its counterpart that names or places its
    parameters otherwise (torch_npu's ``StreamContext(stream_ctx)``, CUDA's
    ``StreamContext(stream)``): the arguments are bound as CUDA's function
    takes them and passed by the counterpart's names (``Keywords``).  A
    row's target: the counterpart, or the reference it is found by at the
    first call (``"torch:npu.StreamContext"``); a class's stays the class
    to isinstance(), issubclass() and as a base."""

    def __init__(self, source, original, target):
        self._source, self._original, self._target = source, original, target
        self._ready = None

    def _made(self):
        if self._ready is None:
            from .. import _table

            target, name = self._target, getattr(self._target, "__qualname__", None)
            if isinstance(target, str):
                target, name = _table.resolve(target, self._original), target.replace(":", ".")
            self._ready = target, Keywords(self._source, self._original, target, name)
        return self._ready

    def __call__(self, *args, **kwargs):
        target, keywords = self._made()
        return target(**keywords(args, kwargs)) if keywords.adapts else target(*args, **kwargs)

    def __instancecheck__(self, obj):
        return isinstance(obj, self._made()[0])

    def __subclasscheck__(self, cls):
        return issubclass(cls, self._made()[0])

    def __mro_entries__(self, bases):
        return (self._made()[0],)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._made()[0], name)

    def __repr__(self):
        return f"<{self._source} adapted to {self._made()[1].target}>"


class Keywords:
    """``keywords(args, kwargs)``: the keyword arguments of the
    counterpart's call (``target``, named ``name``) for a call of CUDA's
    ``original``.  Each of CUDA's parameters goes to the counterpart's of
    its name or of the name it is RENAMED to; where the counterpart has
    none, it is left out when it is its default or CUDA_ONLY, and refused
    otherwise (a TypeError naming it); a default of CUDA's that the
    counterpart's would read otherwise is passed.  ``adapts`` is false
    where the two cannot be read, or the call cannot be made of keywords
    (CUDA's ``*args``, a positional-only parameter of the counterpart)."""

    def __init__(self, source, original, target, name):
        mine, theirs = signature(original), signature(target)
        self.source, self.mine, self.target = source, mine, name
        self.cuda_only = CUDA_ONLY.get(source, {})
        self.names, self.defaults, self.warned = {}, {}, set()
        self.adapts = mine is not None and theirs is not None and not any(
            p.kind is _P.VAR_POSITIONAL for p in mine.parameters.values()) and not any(
            p.kind is _P.POSITIONAL_ONLY for p in theirs.parameters.values())
        if not self.adapts:
            return
        t_named = {p.name: p for p in theirs.parameters.values() if p.kind in _NAMED}
        t_kwargs = any(p.kind is _P.VAR_KEYWORD for p in theirs.parameters.values())
        renamed = RENAMED.get(source, {})
        for p in mine.parameters.values():
            q = t_named.get(renamed.get(p.name, p.name))
            if q is None and not (t_kwargs or p.kind is _P.VAR_KEYWORD):
                self.names[p.name] = None
                continue
            self.names[p.name] = p.name if q is None else q.name
            # A default of CUDA's the counterpart's would read otherwise (one
            # it writes as an expression of its own is left to it).
            if q is not None and p.default is not _P.empty and (
                    q.default is _P.empty or not isinstance(q.default, Text)
                    and not _same(p.default, q.default, "npu")):
                self.defaults[q.name] = p.default

    def __call__(self, args, kwargs):
        bound = self.mine.bind(*args, **kwargs)  # CUDA's refusal of what CUDA refuses
        out = dict(self.defaults)
        for name, value in bound.arguments.items():
            if self.mine.parameters[name].kind is _P.VAR_KEYWORD:
                out.update(value)
            elif self.names[name] is not None:
                out[self.names[name]] = value
            else:
                self._left_out(name, value)
        return out

    def _left_out(self, name, value):
        default = self.mine.parameters[name].default
        if default is not _P.empty and _same(value, default, "npu"):
            return
        if name not in self.cuda_only:
            raise TypeError(f"{self.source}: {name}={value!r} has no counterpart in "
                            f"{self.target}")
        if name not in self.warned:
            import warnings

            self.warned.add(name)
            warnings.warn(f"{self.source}: {name}={value!r} left out: {self.target} takes no "
                          f"{name} ({self.cuda_only[name]})", stacklevel=4)


def adapted_method(source, original, target):
    """The method target (a function of self) taking the calls of CUDA's
    original as Adapted does, for a class of this package's made around
    torch_npu's (profiler.npu_profile)."""
    keywords = Keywords(source, original, target, getattr(target, "__qualname__", source))
    if not keywords.adapts:
        return target

    @functools.wraps(target)
    def method(*args, **kwargs):
        return target(**keywords(args, kwargs))

    return method
