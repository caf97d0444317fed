"""Dropout on the virtual NPU, as the cpu computes it.

torch's ``dropout`` takes a fused kernel (``native_dropout``) on any device
but the cpu.  The cpu's kernel of that op draws a boolean mask and casts it
to the input's dtype to multiply, forward and backward: a copy of every
activation each way, 0.5-1 ms of a small transformer's step on one thread.
Here the npu computes dropout as the cpu does (torch's ``_dropout_impl``):
float noise drawn from the npu's generator, scaled, multiplied in; autograd
records the multiplication.  The same seed gives the npu the cpu's masks
and values, to the bit, through the cpu's very ops.

``native_dropout`` itself, called by name, keeps its cpu kernel.
"""

import torch

aten = torch.ops.aten

__all__ = ["KEYS", "NAME", "dropout"]

# A composite: the kernel goes on the autograd key, where the ops it calls
# record their own gradients, and on the backend key for calls without
# autograd (inference mode).
NAME = "dropout"
KEYS = ("AutogradPrivateUse1", "PrivateUse1")


def dropout(input, p, train):
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        return input * torch.zeros((), dtype=input.dtype, device=input.device)
    noise = torch.empty_like(input)
    noise.bernoulli_(1 - p)
    # The overloads torch's C++ calls, so that modes and traces see the
    # cpu's ops.
    aten.div_.Scalar(noise, 1 - p)
    return input * noise
