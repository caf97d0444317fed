"""DistributedDataParallel on the virtual NPU: without detecting unused
parameters.

DDP's reducer, asked to find unused parameters (``find_unused_parameters=
True``, or ``static_graph=True`` in its first iteration), stages its map of
used parameters in pinned host memory before copying it to the device.
torch gets pinned memory from the device's hooks, and a device defined in
Python cannot provide an allocator there, so the first backward would fail
("implement `getPinnedMemoryAllocator`").  Hugging Face's Trainer asks for
it by default.  On npu parameters, DDP is made without it, with a warning:
a model whose parameters all take part in the loss trains the same; one
with unused parameters gets DDP's own error at its next iteration.
"""

import functools
import inspect
import warnings

import torch

_ASKS = ("find_unused_parameters", "static_graph")


def _on_npu(module):
    return isinstance(module, torch.nn.Module) and any(
        p.device.type == "npu" for p in module.parameters())


def without_unused_parameters(init):
    """DDP's ``__init__`` (``init``) that makes DDP on npu parameters
    without detecting unused ones."""

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        # Read per DDP made, not at import: a few made per process.
        try:
            bound = inspect.signature(init).bind(self, *args, **kwargs)
        except TypeError:
            return init(self, *args, **kwargs)  # torch's own error
        asked = [name for name in _ASKS if bound.arguments.get(name)]
        if not asked or not _on_npu(bound.arguments.get("module")):
            return init(self, *args, **kwargs)
        for name in asked:
            bound.arguments[name] = False
        warnings.warn(
            f"DistributedDataParallel({', '.join(f'{name}=True' for name in asked)}) on the "
            f"virtual NPU: made without it, as torch's reducer needs pinned memory for it, "
            f"which a device defined in Python cannot provide; every parameter must take part "
            f"in the loss", RuntimeWarning, stacklevel=2)
        return init(*bound.args, **bound.kwargs)

    return __init__
