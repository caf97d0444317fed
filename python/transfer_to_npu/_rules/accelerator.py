"""Which accelerator the process has, as torch's own code asks it.

torch.accelerator.current_accelerator() and torch.get_device_module()
ask the dispatcher, which knows the npu.  torch._utils's
_get_available_device_type() asks torch.cuda.is_available() first, which
migrated says True, so it answered "cuda" while the tensors are the npu's:
distributed checkpointing (its file writer moves the tensors of that device
type to the host before writing them, and refused the npu's: "Tensor must
be on CPU"), nn.DataParallel and torch._utils's device queries
(_get_device_attr, through it) took CUDA for the device.  The npu's device
type is its answer when migrated, in every module that bound it.

Under the cpu backend (an accuracy compare's reference) the host is the
device, and a machine with no accelerator the answer: torch.cuda answers
for the host, so on a CUDA build of torch torch.accelerator found CUDA
available and asked the real driver (the optimizer's graph-capture check on
each step: "CUDA driver version is insufficient").
"""

import functools

from .. import _C
from ._row import row

# The modules that bind torch._utils._get_available_device_type under its
# own name, imported or not.
_BOUND_IN = ("torch._utils", "torch.nn.parallel.data_parallel",
             "torch.distributed.checkpoint.filesystem")


def _answer():
    """What CUDA is, as the device type: the npu's, or none for the host."""
    from .. import backends

    target = backends.target_type()
    return None if target == "cpu" else target


def available_device_type(original):
    """_get_available_device_type() answering the target where it finds CUDA."""
    answer = _answer()

    @functools.wraps(original)
    def _get_available_device_type():
        device_type = original()
        return answer if device_type == "cuda" else device_type

    return _get_available_device_type


def no_accelerator(original):
    """torch.accelerator.current_accelerator() without CUDA (the cpu
    backend); is_available() and the functions that ask it follow."""
    @functools.wraps(original)
    def current_accelerator(*args, **kwargs):
        device = original(*args, **kwargs)
        return None if device is not None and device.type == "cuda" else device

    return current_accelerator


def rows(torch):
    answer = _answer()
    out = [row("torch._utils._get_available_device_type",
               f"torch._utils._get_available_device_type ({answer!r} for 'cuda')", "function",
               _C.MODE_REDIRECT, module, "_get_available_device_type",
               f"{__name__}:available_device_type()", kws=())
           for module in _BOUND_IN]
    accelerator = getattr(torch, "accelerator", None)
    if answer is None and hasattr(accelerator, "current_accelerator"):
        out.append(row("torch.accelerator.current_accelerator",
                       "torch.accelerator.current_accelerator (None for CUDA: the host)",
                       "function", _C.MODE_REDIRECT, accelerator, "current_accelerator",
                       f"{__name__}:no_accelerator()", kws=()))
    return out
