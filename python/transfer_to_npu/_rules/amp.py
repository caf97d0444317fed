"""Mixed precision in every spelling: torch.autocast('cuda'),
torch.amp.autocast(device_type='cuda'), torch.cuda.amp.autocast(),
torch.amp.GradScaler('cuda'), torch.amp.GradScaler() (whose default device
is 'cuda'), torch.cuda.amp.GradScaler(), custom_fwd/custom_bwd.

The deprecated torch.cuda.amp classes and functions pass "cuda" on to
torch.amp, so rewriting torch.amp's device argument covers both.

The autocast state functions take the device type first
(``torch.is_autocast_enabled('cuda')``); given none, they are CUDA's
(``torch.is_autocast_enabled()``, ``torch.set_autocast_enabled(True)``,
``torch.get_autocast_gpu_dtype()``), so the npu's when migrating.
"""

import functools

from .. import _C
from ._introspect import original
from ._row import row

# torch.* functions taking the device type first.
_AUTOCAST_STATE = ("is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
                   "set_autocast_dtype")
# The state functions with a form that names no device: CUDA's.
_CUDA_FORMS = ("is_autocast_enabled", "set_autocast_enabled")
# CUDA's own names of the state functions that take a device type.
_GPU_NAMES = {"get_autocast_gpu_dtype": "get_autocast_dtype",
              "set_autocast_gpu_dtype": "set_autocast_dtype"}


def is_autocast_enabled(fn):
    """What a row makes of torch's is_autocast_enabled: given no device
    type, the target's (a CUDA one, the wrapper has rewritten)."""
    from .. import backends

    target = backends.target_type()

    def is_autocast_enabled(device_type=target):
        return fn(device_type)

    return is_autocast_enabled


def set_autocast_enabled(fn):
    """What a row makes of torch's set_autocast_enabled: given the flag
    alone, for the target."""
    from .. import backends

    target = backends.target_type()

    def set_autocast_enabled(*args, **kwargs):
        if len(args) + len(kwargs) < 2 and "device_type" not in kwargs:
            args = (target,) + args
        return fn(*args, **kwargs)

    return set_autocast_enabled


def _npu_defaults(fn):
    """fn's defaults with a default device 'cuda' made the target's, or
    None."""
    from .. import backends

    defaults = getattr(fn, "__defaults__", None)
    if not defaults or "cuda" not in defaults:
        return None
    return tuple(backends.target_type() if d == "cuda" else d for d in defaults)


def rows(torch):
    from .. import backends

    autocast = torch.amp.autocast_mode.autocast
    scaler = getattr(torch.amp, "GradScaler", None)
    target = backends.target_type()
    if target == "cpu":
        # A reference run (the cpu backend): the host's autocast, by CUDA's
        # lists, in CUDA's default dtype.
        out = [row("torch.autocast", "torch.autocast('cpu', dtype=float16 by default)",
                   "method", _C.MODE_REDIRECT, autocast, "__init__",
                   f"{backends.__name__}.cpu:autocast_init()", binds=True, kws=())]
    else:
        out = [row("torch.autocast", "torch.autocast", "device_arg", _C.MODE_DEVICE_ARG,
                   autocast, "__init__", pos=1, binds=True, kws=("device_type",))]
    # torch.amp.GradScaler came with torch 2.3; before, the scaler was
    # torch.cuda.amp's own (the npu's amp module's, cuda_module.py).
    if scaler is not None:
        out.append(row("torch.amp.GradScaler", "torch.amp.GradScaler", "device_arg",
                       _C.MODE_DEVICE_ARG, scaler, "__init__", pos=1, binds=True))
    defaults = None if scaler is None else _npu_defaults(scaler.__init__)
    if defaults is not None:
        out.append(row("torch.amp.GradScaler(device='cuda' by default)",
                       f"torch.amp.GradScaler(device='{backends.target_type()}' by default)",
                       "default", _C.MODE_REPLACE, scaler.__init__, "__defaults__", defaults))
    for name in ("custom_fwd", "custom_bwd", "is_autocast_available"):
        # Bound in torch.amp and in the module that defines them: one
        # wrapper, one entry.
        for owner in (torch.amp, torch.amp.autocast_mode):
            out.append(row(f"torch.amp.{name}", f"torch.amp.{name}", "device_arg",
                           _C.MODE_DEVICE_ARG, owner, name,
                           pos=0 if name == "is_autocast_available" else -1,
                           kws=("device_type",)))
    # Whether the state functions take a device type (torch 2.4 and later):
    # before, they are CUDA's only, and torch_npu has its own.
    by_device = hasattr(torch, "get_autocast_dtype")
    for name in _AUTOCAST_STATE:
        if by_device and name in _CUDA_FORMS:
            out.append(row(f"torch.{name}", f"torch.{name} ('{target}' when no device is named)",
                           "function", _C.MODE_REDIRECT, torch, name,
                           f"{__name__}:{name}()", pos=0,
                           kws=("device_type",)))
        else:
            out.append(row(f"torch.{name}", f"torch.{name}", "device_arg", _C.MODE_DEVICE_ARG,
                           torch, name, pos=0, kws=("device_type",)))
    for name, by_type in _GPU_NAMES.items():
        if by_device and hasattr(torch, name):
            out.append(row(f"torch.{name}", f"torch.{by_type}('{target}')", "function",
                           _C.MODE_REDIRECT, torch, name,
                           functools.partial(original(getattr(torch, by_type)), target), kws=()))
    return out
