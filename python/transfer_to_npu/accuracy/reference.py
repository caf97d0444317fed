"""A reference run in full precision (``compare --reference-precision
fp32``, which sets ``TRANSFER_TO_NPU_REFERENCE_PRECISION=fp32`` for the
reference run only): every autocast region the script asks for on CUDA is
entered disabled, whatever its spelling (``torch.autocast('cuda')``,
``torch.cuda.amp.autocast``, apex's O1), so that the reference computes
in float32.  By default the reference keeps the script's policy."""

import os

from .settings import DumpError

ENV = "TRANSFER_TO_NPU_REFERENCE_PRECISION"
CHOICES = ("policy", "fp32")


def requested():
    """'fp32' or 'policy' (the default); DumpError for anything else."""
    value = os.environ.get(ENV, "").strip().lower() or "policy"
    if value not in CHOICES:
        raise DumpError(f"{ENV} must be one of {', '.join(CHOICES)}, got "
                         f"{os.environ.get(ENV)!r}")
    return value


def _cuda(device_type):
    return isinstance(device_type, str) and device_type.split(":")[0] == "cuda"


def full_precision():
    """Enter CUDA's autocast regions disabled; return what undoes it."""
    import functools

    from torch.amp import autocast_mode

    cls = autocast_mode.autocast
    original = cls.__dict__["__init__"]

    @functools.wraps(original)
    def __init__(self, device_type, *args, **kwargs):
        if _cuda(device_type):
            if len(args) >= 2:  # dtype, enabled, cache_enabled
                args = (args[0], False, *args[2:])
            else:
                kwargs["enabled"] = False
        original(self, device_type, *args, **kwargs)

    cls.__init__ = __init__
    return lambda: setattr(cls, "__init__", original)
