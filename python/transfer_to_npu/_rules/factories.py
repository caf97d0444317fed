"""The device argument of torch.*, torch.fft.* and torch.signal.windows.*
functions, found through torch's dispatcher and function signatures."""

import functools
import inspect
import sys

from .. import _C
from ._introspect import op_takes_device, original, takes_device
from ._row import row

# Device-taking factories that are Python bindings of their own, with no
# native op (hence no BackendSelect kernel) behind them.
BINDINGS = ("tensor", "as_tensor", "asarray")

# (module, the prefix of its ops' names) per module whose functions are
# scanned.
_MODULES = (("torch", ""), ("torch.fft", "fft_"), ("torch.signal.windows", ""))


def _module(torch, dotted):
    module = torch
    for part in dotted.split(".")[1:]:
        module = getattr(module, part)
    return module


def _builtins_taking_device(torch):
    """Per module, the names of its builtins that take a device: those of
    the ops dispatched by their device argument (one call lists them all,
    where reading each builtin's op schemas takes some 6 ms a process), and
    the ``*_like`` builtins whose schemas have one."""
    from .. import backends

    selected = {q[len("aten::"):].partition(".")[0] for q in backends.dispatched_by_device()}
    found = {}
    for dotted, prefix in _MODULES:
        module = _module(torch, dotted)
        # torch.*'s builtins are those of _VariableFunctions (dir() of
        # torch itself also lists its submodules and Python helpers).
        scanned = torch._C._VariableFunctions if module is torch else module
        found[dotted] = [
            name for name in sorted(dir(scanned))
            if (prefix + name in selected
                or (name.endswith("_like") and op_takes_device(torch, prefix + name)))
            and not name.startswith("_") and inspect.isbuiltin(original(getattr(scanned, name)))]
    return found


def _python_functions(module):
    """The names of a module's public Python functions with a device
    parameter."""
    functions = {name: original(getattr(module, name)) for name in dir(module)
                 if not name.startswith("_")}
    return [name for name, fn in functions.items()
            if inspect.isfunction(fn) and takes_device(fn)]


def rows(torch):
    """Every torch.* function whose op schema has a ``device`` argument, and
    those of torch.fft and torch.signal.windows, builtins or not."""
    out = []
    builtins = _builtins_taking_device(torch)
    for dotted, _ in _MODULES:
        module = _module(torch, dotted)
        if module is torch:
            names = sorted(set(builtins[dotted]) | set(BINDINGS))
        else:
            names = sorted(builtins[dotted] + _python_functions(module))
        for name in names:
            if hasattr(module, name):
                # Builtins' device arguments torch parses as a Device (every
                # "device" argument of an op schema is typed Device).
                out.append(row(f"{dotted}.{name}", f"{dotted}.{name}", "device_arg",
                               _C.MODE_DEVICE_ARG, module, name,
                               device_objects=inspect.isbuiltin(original(getattr(module, name))),
                               current_index=True))
    out += _class_rows(torch)
    return out


# torch's device-generic C classes whose constructor takes a device first,
# and whether one made without a device is the current device's (a stream,
# an event) rather than the cpu's (a generator).
_CLASSES = {"Stream": True, "Event": True, "Generator": False}


def _class_rows(torch):
    """torch.Stream, torch.Event, torch.Generator(device='cuda'): C classes,
    whose construction (their tp_new slot) is patched in C, whatever class
    makes them.  Where the npu is the virtual NPU its own subclasses make
    those for the npu: torch's streams and events cannot synchronise or
    time on a device defined in Python, and torch asks such a device's C++
    hooks for a new generator, which it cannot give."""
    npu_classes = {}
    virtual = sys.modules.get("transfer_to_npu.backends.virtual")
    if virtual is not None and virtual.is_installed():
        from ..backends.virtual import random, streams

        npu_classes = {"Stream": streams.Stream, "Event": streams.DeviceEvent,
                       "Generator": random.Generator}
    return [row(f"torch.{name}", f"torch.{name}" + (" (the virtual NPU's)" if name in npu_classes
                                                    else ""),
                "constructor", _C.MODE_CLASS_DEVICE, torch, name, npu_classes.get(name), pos=0,
                current_index=none_is_current)
            for name, none_is_current in _CLASSES.items()
            if isinstance(getattr(torch, name, None), type)]


def device_context_rows(torch):
    """``with torch.device('cuda'):`` and ``torch.set_default_device('cuda')``
    place tensors through torch's DeviceContext, which knows the factories
    by identity, in a set torch fills at its first use: with migration on,
    that set would name the wrappers where the function mode is handed the
    builtins.  Replaced, when torch.utils._device is imported, by one that
    names what the wrappers stand for."""
    return [row("torch.utils._device._device_constructors",
                "torch.utils._device._device_constructors (the factories as torch's own)",
                "function", _C.MODE_REPLACE, "torch.utils._device", "_device_constructors",
                f"{__name__}:device_constructors()", kws=())]


def device_constructors(torchs):
    """torch's _device_constructors (``torchs``) naming the functions the
    migration wraps, not their wrappers."""
    make = getattr(torchs, "__wrapped__", torchs)  # under its lru_cache

    @functools.lru_cache(1)
    def _device_constructors():
        return {original(f) for f in make()}

    return functools.update_wrapper(_device_constructors, make)
