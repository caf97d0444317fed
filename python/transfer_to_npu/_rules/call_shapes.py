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
import inspect

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
    (``cuda(device=None, non_blocking=False, ...) -> Tensor``)."""
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
        return Text(ast.unparse(node))


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
    s_args = any(p.kind is _P.VAR_POSITIONAL for p in sp)
    s_named = {p.name: p for p in sp if p.kind in _NAMED}
    for j, q in enumerate(t_pos):
        if q.default is _P.empty and (j < len(s_pos) and s_pos[j].default is not _P.empty
                                      or j >= len(s_pos) and not s_args):
            out.append((q.name, "required here, not in the source"))
    for q in tp:
        if q.kind is _P.KEYWORD_ONLY and q.default is _P.empty and (
                q.name not in s_named or s_named[q.name].default is not _P.empty):
            out.append((q.name, "required here, not in the source"))
    return out
