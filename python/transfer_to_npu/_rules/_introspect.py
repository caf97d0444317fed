"""What the rules learn by looking at torch, done fast enough for every
process start.

* Parameter names of Python functions come from their code objects
  (inspect.signature costs tens of microseconds a call).
* Which ops take a device comes from torch's dispatcher (factories.py),
  and for the few it cannot tell, from their op schemas.
"""

import inspect
import types

from .. import _C

_WRAPPERS = (_C.FunctionWrapper, _C.MethodWrapper)


def op_takes_device(torch, name):
    """Whether any overload of aten::<name> has a ``device`` argument."""
    try:
        schemas = torch._C._jit_get_schemas_for_operator("aten::" + name)
    except RuntimeError:
        return False
    return any(arg.name == "device" for schema in schemas for arg in schema.arguments)


def original(fn):
    """fn, or what it wraps when it is a migration wrapper: what torch's
    own code would have found there."""
    return fn.__wrapped__ if isinstance(fn, _WRAPPERS) else fn


def module_has(module, name):
    """hasattr(module, name), without the AttributeError (formatted, then
    dropped) of each name it lacks: the rules ask about hundreds."""
    namespace = module.__dict__
    return name in namespace or ("__getattr__" in namespace and hasattr(module, name))


def class_original(obj, name):
    """What the class of obj defines as name, a migration wrapper looked
    through."""
    for cls in type(obj).__mro__:
        attr = cls.__dict__.get(name)
        if attr is not None:
            return original(attr)
    raise AttributeError(name)


def _code(fn):
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__:
        return fn.__code__
    fn = inspect.unwrap(fn) if hasattr(fn, "__wrapped__") else fn
    return getattr(fn, "__code__", None)


def _text_signature(fn):
    """(positional, keyword-only) names from a builtin's __text_signature__
    ("($self, device, /, *, flag=False)"), or None."""
    text = getattr(fn, "__text_signature__", None)
    if not text or not text.startswith("(") or not text.endswith(")"):
        return None
    positional, keyword, star = [], [], False
    for part in text[1:-1].split(","):
        name = part.strip().split("=")[0].strip()
        if name in ("/", "") or name.startswith("$"):
            continue
        if name.startswith("*"):
            star = True
            continue
        (keyword if star else positional).append(name)
    return positional, keyword


def parameters(fn):
    """(positional names, keyword-only names) of fn, self left out of a
    class's; None when they cannot be known."""
    skip = 0
    if isinstance(fn, type):
        cls, fn, skip = fn, fn.__init__, 1
        for klass in cls.__mro__:  # a class made by its __new__ (torch.cuda.Stream)
            if "__init__" in vars(klass):
                break
            if "__new__" in vars(klass):
                fn = cls.__new__
                break
    code = _code(fn)
    if code is None:
        return _text_signature(fn)
    names = code.co_varnames
    n, k = code.co_argcount, code.co_kwonlyargcount
    return list(names[skip:n]), list(names[n:n + k])


def device_position(fn):
    """Position of a positional ``device`` parameter (as callers pass it: a
    class's self left out), or -1."""
    params = parameters(fn)
    if params is None or "device" not in params[0]:
        return -1
    return params[0].index("device")


def takes_device(fn):
    params = parameters(fn)
    return params is not None and ("device" in params[0] or "device" in params[1])
