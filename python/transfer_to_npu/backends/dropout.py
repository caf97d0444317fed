"""Dropout as the cpu computes it (torch's ``_dropout_impl``): float noise
drawn, scaled, multiplied in, autograd recording the multiplication.

Both devices that compute on the host use it for ``aten::dropout``: the
virtual NPU (its npu's generator: ``virtual/dropout.py``) and the cpu
backend's reference (the device's generator of its own: ``cpu/random.py``),
so that the same seed gives them the same masks, to the bit.
"""

import torch

aten = torch.ops.aten


def dropout(input, p, train, generator=None):
    if not 0 <= p <= 1:
        raise RuntimeError(f"dropout probability has to be between 0 and 1, but got {p}")
    if p == 0 or not train or input.numel() == 0:
        return input
    if p == 1:
        return input * torch.zeros((), dtype=input.dtype, device=input.device)
    noise = torch.empty_like(input)
    noise.bernoulli_(1 - p, generator=generator)
    # The overloads torch's C++ calls, so that modes and traces see the
    # cpu's ops.
    aten.div_.Scalar(noise, 1 - p)
    return input * noise
