"""Mixed precision in every spelling: torch.autocast('cuda'),
torch.amp.autocast(device_type='cuda'), torch.cuda.amp.autocast(),
torch.amp.GradScaler('cuda'), torch.amp.GradScaler() (whose default device
is 'cuda'), torch.cuda.amp.GradScaler(), custom_fwd/custom_bwd.

The deprecated torch.cuda.amp classes and functions pass "cuda" on to
torch.amp, so rewriting torch.amp's device argument covers both.
"""

from .. import _C
from ._row import row

# torch.* functions taking the device type first.
_AUTOCAST_STATE = ("is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled",
                   "set_autocast_dtype")


def _npu_defaults(fn):
    """fn's defaults with a default device 'cuda' made 'npu', or None."""
    defaults = getattr(fn, "__defaults__", None)
    if not defaults or "cuda" not in defaults:
        return None
    return tuple("npu" if d == "cuda" else d for d in defaults)


def rows(torch):
    autocast = torch.amp.autocast_mode.autocast
    out = [
        row("torch.autocast", "torch.autocast", "device_arg", _C.MODE_DEVICE_ARG, autocast,
            "__init__", pos=1, binds=True, kws=("device_type",)),
    ]
    # torch.amp.GradScaler came with torch 2.3; before, the scaler was
    # torch.cuda.amp's own (the npu's amp module's, cuda_module.py).
    scaler = getattr(torch.amp, "GradScaler", None)
    if scaler is not None:
        out.append(row("torch.amp.GradScaler", "torch.amp.GradScaler", "device_arg",
                       _C.MODE_DEVICE_ARG, scaler, "__init__", pos=1, binds=True))
    defaults = None if scaler is None else _npu_defaults(scaler.__init__)
    if defaults is not None:
        out.append(row("torch.amp.GradScaler(device='cuda' by default)",
                       "torch.amp.GradScaler(device='npu' by default)", "default",
                       _C.MODE_REPLACE, scaler.__init__, "__defaults__", defaults))
    for name in ("custom_fwd", "custom_bwd", "is_autocast_available"):
        # Bound in torch.amp and in the module that defines them: one
        # wrapper, one entry.
        for owner in (torch.amp, torch.amp.autocast_mode):
            out.append(row(f"torch.amp.{name}", f"torch.amp.{name}", "device_arg",
                           _C.MODE_DEVICE_ARG, owner, name,
                           pos=0 if name == "is_autocast_available" else -1,
                           kws=("device_type",)))
    for name in _AUTOCAST_STATE:
        out.append(row(f"torch.{name}", f"torch.{name}", "device_arg", _C.MODE_DEVICE_ARG, torch,
                       name, pos=0, kws=("device_type",)))
    return out
