"""Tensor.npu() of the virtual NPU.

torch generates it for a renamed PrivateUse1 device in Python, building a
device string and a torch.device on every call; it is the target of every
migrated ``.cuda()``.  Here the common calls (no device, or None; the
keywords of ``to``) are served in C (``_C.npu_method``: the cached
torch.device of the thread's current npu, handed to torch's own ``to``),
and every other call by ``npu`` below, which the C object stands for
(this module loads at the first such call).
"""

import functools

import torch

from . import devices

# torch's own method (the name on torch.Tensor may be a migration wrapper).
_to = torch._C.TensorBase.to


@functools.lru_cache(maxsize=None)
def _device(index):
    return torch.device("npu", index)


def npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """A copy of this tensor on the npu ``device`` (default: the current
    one); the tensor itself when it is there already."""
    if torch.overrides.has_torch_function_unary(self):
        return torch.overrides.handle_torch_function(
            torch.Tensor.npu, (self,), self, device=device, non_blocking=non_blocking,
            memory_format=memory_format)
    return _to(self, _device(devices.index_of(device)), non_blocking=non_blocking,
               memory_format=memory_format)
