"""The device's own random numbers in the reference run.

On CUDA (and on the NPU) the device has a generator of its own: dropout
draws from it, and leaves the host's stream (data order, initialisation on
the host, a DataLoader's seeds) alone.  On the host there is one
generator for both, so a reference run drawing its dropout masks from it
would draw the host's numbers in another order than the original.  Here
the device's generator is a host generator of its own (``GENERATOR``):
``torch.cuda``'s seed functions (``torch.manual_seed`` calls them) seed it,
and dropout draws its masks from it, computed as the virtual NPU computes
it from its npu's generator (``backends/dropout.py``): the same seed gives
the two runs the same masks, to the bit.

Other random ops with a device argument (``torch.randn(..., device='cuda')``)
draw from the host's generator: they cannot be told from the host's own
draws once the device is the host.
"""

import torch

from ..dropout import dropout as host_dropout

#: The device's generator.
GENERATOR = torch.Generator()

_libraries = []

# A composite: the kernel goes on the autograd key, where the ops it calls
# record their own gradients, and on the backend key for calls without
# autograd (inference mode).
_KEYS = ("AutogradCPU", "CPU")


def dropout(input, p, train):
    return host_dropout(input, p, train, GENERATOR)


def register():
    lib = torch.library.Library("aten", "IMPL")
    for key in _KEYS:
        lib.impl("dropout", dropout, key)
    _libraries.append(lib)
