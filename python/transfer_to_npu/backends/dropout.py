"""Dropout as the cpu computes it (torch's ``_dropout_impl``): float noise
drawn, scaled, multiplied in, autograd recording the multiplication.

The virtual NPU computes ``aten::dropout`` so (``virtual/dropout.py``), and
so does any device in a compare's runs, its noise drawn on the host
(``accuracy/draws.py``): the same seed gives them the host's masks, to the
bit.
"""

import torch

aten = torch.ops.aten


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
