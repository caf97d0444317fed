"""A small MLP written for CUDA whose NPU (the virtual NPU) is given two
wrong kernels on purpose, registered for its device before its first
tensor: gelu computes its tanh approximation, and silu adds a small bias.
The first error propagates into everything after it, where it hides the
second; each call checked by itself names both at their lines."""
import torch
import torch.nn.functional as F

lib = torch.library.Library("aten", "IMPL")


def tanh_gelu(x, approximate="none"):
    host = torch.ops.aten.gelu.default(x.cpu(), approximate="tanh")
    return host.to(x.device)


def biased_silu(x):
    return (torch.ops.aten.silu.default(x.cpu()) + 1e-3).to(x.device)


lib.impl("gelu", tanh_gelu, "PrivateUse1")
lib.impl("silu", biased_silu, "PrivateUse1")

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
x = torch.randn(64, 16, generator=g).cuda()
w1 = (torch.randn(16, 32, generator=g) * 0.5).cuda()
w2 = (torch.randn(32, 32, generator=g) * 0.5).cuda()
w3 = (torch.randn(32, 4, generator=g) * 0.5).cuda()
h = F.gelu(x @ w1)  # GELU
h = F.silu(h @ w2)  # SILU
out = torch.tanh(h @ w3)
print(f"out {out.sum().item():.6f}")
