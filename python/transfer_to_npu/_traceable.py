"""What torch.compile traces in place of a wrapper.

Dynamo cannot trace a C callable it does not know, so a wrapper called in
a compiled region (``torch.is_autocast_enabled(x.device.type)``,
``torch.cuda.is_available()``) would end the graph there, and fail
``fullgraph=True``.  A wrapper's type says ``__script_if_tracing_wrapper``
(dynamo's protocol for a wrapper holding the callable it stands for) and
its ``__original_fn`` is made here: the migrated call written in Python,
which dynamo traces as it would the call on CUDA.  Each is made once.

* A wrapper that rewrites device arguments (or redirects to the npu's
  counterpart and rewrites them) becomes a function that rewrites them
  through the C core's own parser, which dynamo folds into a constant,
  then calls the original or the counterpart.
* A redirect with no device argument becomes its target.
* Anything else (a backend string, a user rule's replacement, an API with
  no counterpart) runs eagerly, migrated: dynamo calls the wrapper outside
  the graph, as before.
"""

import threading

from . import _C

# id(wrapper) -> (wrapper, what dynamo traces): held, so that an id is not
# reused while it is here.
_made = {}
_lock = threading.Lock()


def traceable(wrapper, mode, pos, device_kws):
    """What dynamo traces for ``wrapper`` (the C core asks, with the row's
    mode, positional device index and device keywords)."""
    made = _made.get(id(wrapper))
    if made is not None and made[0] is wrapper:
        return made[1]
    fn = _make(wrapper, mode, pos, device_kws)
    with _lock:
        _made.setdefault(id(wrapper), (wrapper, fn))
        return _made[id(wrapper)][1]


def _make(wrapper, mode, pos, device_kws):
    import torch

    if mode not in (_C.MODE_DEVICE_ARG, _C.MODE_REDIRECT):
        return torch.compiler.disable(_eager(wrapper))
    if _folds(wrapper):
        return _constant(wrapper)
    target = wrapper.__npu_target__
    if pos < 0 and not device_kws:
        return target
    _fold_device_strings(torch)
    return _rewriting(target, pos, tuple(device_kws))


def _folds(wrapper):
    """Whether dynamo folds the CUDA function ``wrapper`` stands for into a
    constant while tracing (torch.cuda.is_available, get_device_properties:
    its table, made at its import, names the original or the wrapper), with
    no guard on a state that may change (current_device)."""
    from torch._dynamo.variables import torch as variables

    folded = getattr(variables, "constant_fold_functions", ())
    guarded = getattr(variables, "constant_fold_functions_need_guards", ())
    return any(fn in folded and fn not in guarded for fn in (wrapper, wrapper.__wrapped__))


def _constant(wrapper):
    """The wrapper, called while dynamo traces, its result a constant in
    the graph, as dynamo does with the CUDA function."""
    import torch

    return torch.compiler.assume_constant_result(_eager(wrapper))


def _eager(wrapper):
    def call(*args, **kwargs):
        return wrapper(*args, **kwargs)

    return call


def _rewriting(target, pos, device_kws):
    def migrated(*args, **kwargs):
        if 0 <= pos < len(args):
            args = args[:pos] + (_npu(args[pos]),) + args[pos + 1:]
        for name in device_kws:
            if name in kwargs:
                kwargs[name] = _npu(kwargs[name])
        return target(*args, **kwargs)

    return migrated


def _npu(value):
    """value as the NPU's device: a CUDA device string or torch.device
    made the npu's, anything else as it is."""
    import torch

    if isinstance(value, torch.device):
        if value.type != "cuda":
            return value
        return torch.device(_C.npu_device_string(str(value)))
    if isinstance(value, str):
        spec = _C.npu_device_string(value)
        return value if spec is None else spec
    return value


_folded = []


def _fold_device_strings(torch):
    """Dynamo calls the C core's device parser while it traces, with the
    constant it is given (a device string is always one to dynamo), and
    puts the answer in the graph: declared to it once."""
    if _folded:
        return
    with _lock:
        if _folded:
            return
        substitute = getattr(torch.compiler, "substitute_in_graph", None)
        if substitute is not None:
            @substitute(_C.npu_device_string, can_constant_fold_through=True)
            def npu_device_string(spec):
                raise TypeError(f"a device string must be a constant to torch.compile, got "
                                f"{type(spec).__name__}")
        _folded.append(True)
