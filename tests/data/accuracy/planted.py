"""A small classifier written for CUDA, with bugs planted by the first
argument (each a comma-separated list of names), each marked where it
must be found:

  branch   a branch on a device name taken on CUDA only;
  gelu     gelu computed with its tanh approximation on the NPU only;
  overflow the logits overflow to inf at the fifth step, on both sides.

It also tests a device name the script holds as a string (as nanoGPT
does), which goes the same way on both: it must not be named."""
import sys

import torch
import torch.nn.functional as F

bugs = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else set()
device = 'cuda'
device_type = 'cuda' if 'cuda' in device else 'cpu'  # a string of the script's own
torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
data = torch.randn(6, 16, 8, generator=g)
labels = torch.randint(0, 4, (6, 16), generator=g)
w1 = torch.nn.Parameter(torch.randn(8, 32, generator=g) * 0.3)
w2 = torch.nn.Parameter(torch.randn(32, 4, generator=g) * 0.3)
w1.data, w2.data = w1.data.to(device), w2.data.to(device)
opt = torch.optim.SGD([w1, w2], lr=1e6 if "overflow" in bugs else 0.1)
for step in range(6):
    x, y = data[step].to(device), labels[step].to(device)
    h = x @ w1
    if "branch" in bugs and h.device.type == 'cuda':  # BRANCH
        h = h * 0.5
    on_npu = "gelu" in bugs and torch.tensor(0).to(device).device.type == 'npu'
    h = F.gelu(h, approximate='tanh' if on_npu else 'none')  # GELU
    logits = h @ w2  # OVERFLOW
    loss = F.cross_entropy(logits, y)  # LOSS
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f} on {device_type}")
