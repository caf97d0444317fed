"""The calls both overhead benchmarks measure.

Each case is (label, path, migrated, direct): `migrated` is the call as a
CUDA script writes it, run with migration on; `direct` is the same call
written for the npu, run with migration off, so through torch's own
objects.  Both are spelled alike (same attribute lookups), so the
difference is what migration adds to the user's call.
"""

CASES = [
    ("x.to('cuda')", "rewrite", "x.to('cuda')", "x.to('npu')"),
    ("x.to('cuda:0')", "rewrite", "x.to('cuda:0')", "x.to('npu:0')"),
    ("x.to(device=dev)", "rewrite", "x.to(device=cuda_dev)", "x.to(device=npu_dev)"),
    ("x.to(torch.float32)", "pass-through", "x.to(torch.float32)", "x.to(torch.float32)"),
    ("torch.empty(0, device='cuda')", "rewrite", "torch.empty(0, device='cuda')",
     "torch.empty(0, device='npu')"),
    ("torch.empty(3)", "pass-through", "torch.empty(3)", "torch.empty(3)"),
    ("torch.ones(2, dtype=torch.float64)", "pass-through", "torch.ones(2, dtype=torch.float64)",
     "torch.ones(2, dtype=torch.float64)"),
    ("torch.cuda.synchronize()", "rewrite", "torch.cuda.synchronize()",
     "torch.npu.synchronize()"),
    ("torch.cuda.is_available()", "rewrite", "torch.cuda.is_available()",
     "torch.npu.is_available()"),
    ("torch.cuda.current_device()", "rewrite", "torch.cuda.current_device()",
     "torch.npu.current_device()"),
    ("x.cuda()", "rewrite", "x.cuda()", "x.npu()"),
    ("x.is_cuda", "rewrite", "x.is_cuda", "x.is_npu"),
    ("torch.device('cuda', 0)", "rewrite", "torch.device('cuda', 0)", "torch.device('npu', 0)"),
    ("torch.device('npu', 0)", "pass-through", "torch.device('npu', 0)",
     "torch.device('npu', 0)"),
    ("model.to('cuda')", "rewrite", "model.to('cuda')", "model.to('npu')"),
    # A served package's function through its row, against its
    # implementation called directly: one that computes nothing, so that
    # what the row adds is all there is to see.
    ("torch_npu.npu_format_cast(x, 2)", "rewrite", "torch_npu.npu_format_cast(x, 2)",
     "fused_ops.npu_format_cast(x, 2)"),
]


def environment(torch):
    """The names the statements use (made with migration on)."""
    import torch_npu  # served while migrating on the virtual NPU

    from transfer_to_npu.served import _fused_ops

    return {"torch": torch, "torch_npu": torch_npu, "fused_ops": _fused_ops,
            "x": torch.ones(4).to("cuda"),
            "model": torch.nn.Linear(2, 2).to("cuda"),
            "cuda_dev": torch.device("cuda:0"), "npu_dev": torch.device("npu:0")}
