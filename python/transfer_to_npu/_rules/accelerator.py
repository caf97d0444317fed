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
device, and the accelerator: torch.accelerator answers as on the GPU
machine (an available accelerator, the cpu device), so that a script
choosing its device or data path by it (pytorch/examples' mnist:
``torch.accelerator.is_available()``, then pinned memory and a worker)
takes the path it takes there.  torch._C's functions behind it are the
host's (backends/cpu/accelerator.py): on a CUDA build of torch they would
find CUDA and ask the real driver.
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


def rows(torch):
    answer = _answer()
    out = [row("torch._utils._get_available_device_type",
               f"torch._utils._get_available_device_type ({answer!r} for 'cuda')", "function",
               _C.MODE_REDIRECT, module, "_get_available_device_type",
               f"{__name__}:available_device_type()", kws=())
           for module in _BOUND_IN]
    accelerator = getattr(torch, "accelerator", None)
    if answer is None and accelerator is not None:
        from ..backends.cpu import accelerator as host

        where = host.__name__
        for name in host.ANSWERS:
            if hasattr(torch._C, name):
                out.append(row(f"torch._C.{name}", f"{where}.{host.ANSWERS[name].__name__}",
                               "function", _C.MODE_REDIRECT, torch._C, name,
                               f"{where}:{host.ANSWERS[name].__name__}", kws=()))
        for name, answer_fn in host.FUNCTIONS.items():
            if hasattr(accelerator, name):
                out.append(row(f"torch.accelerator.{name}",
                               f"{answer_fn.__module__}.{answer_fn.__name__}", "function",
                               _C.MODE_REDIRECT, accelerator, name,
                               f"{answer_fn.__module__}:{answer_fn.__name__}", kws=()))
    return out
