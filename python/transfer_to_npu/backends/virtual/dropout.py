"""Dropout on the virtual NPU, as the cpu computes it.

torch's ``dropout`` takes a fused kernel (``native_dropout``) on any device
but the cpu.  The cpu's kernel of that op draws a boolean mask and casts it
to the input's dtype to multiply, forward and backward: a copy of every
activation each way, 0.5-1 ms of a small transformer's step on one thread.
Here the npu computes dropout as the cpu does (``backends/dropout.py``),
from the npu's generator: the same seed gives the npu the cpu's masks and
values, to the bit, through the cpu's very ops.

``native_dropout`` itself, called by name, keeps its cpu kernel.
"""

from ..dropout import dropout

__all__ = ["KEYS", "NAME", "dropout"]

# A composite: the kernel goes on the autograd key, where the ops it calls
# record their own gradients, and on the backend key for calls without
# autograd (inference mode).
NAME = "dropout"
KEYS = ("AutogradPrivateUse1", "PrivateUse1")
