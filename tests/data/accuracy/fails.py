"""A small model written for CUDA whose reference run fails at its third
step (FAIL_WHERE=reference: the host's run only) or whose runs both fail
there (FAIL_WHERE=both)."""
import os

import torch
import torch.nn.functional as F

reference = os.environ.get("TRANSFER_TO_NPU_BACKEND") == "cpu"
fail = os.environ.get("FAIL_WHERE") == "both" or (reference and os.environ.get("FAIL_WHERE")
                                                   == "reference")
torch.manual_seed(0)
w = torch.randn(8, 4).cuda().requires_grad_()
x = torch.randn(5, 16, 8).cuda()
opt = torch.optim.SGD([w], lr=0.1)
for step in range(5):
    out = torch.tanh(x[step] @ w)
    if step == 2 and fail:
        out = out[99]  # FAILS
    loss = out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}")
