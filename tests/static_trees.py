"""Code bases for the static tools' tests: a generated tree of CUDA training
code, with what each file holds known."""
from pathlib import Path

# One module of the tree: a CUDA spelling of each common kind, a path and a
# name that contain "cuda" (to stay), every tenth file an API with no NPU
# counterpart, every twenty-fifth a CUDA-only package.
MODULE = '''\
# Module {i}: a block and its training step.
import os
import torch
import torch.nn as nn
{package}

class Block{i}(nn.Module):
    """Two layers; "cuda" in a docstring is not code."""

    def __init__(self, width=8):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x).relu()


def step{i}(path="/data/cuda_{i}/ckpt.pt", cuda_kernel_name="cuda_fused"):
    device = torch.device("cuda:{index}")
    model = Block{i}().to(device)
    x = torch.randn(4, 8, device="cuda")
    if torch.cuda.is_available():
        torch.cuda.synchronize()
{unsupported}    return model(x.cuda()), path, cuda_kernel_name
'''

# What the scan finds in each module: (the line's text, category, kind, api).
EXPECTED = [
    ("import torch\n", "change", "import", "torch_npu"),
    ('    device = torch.device("cuda:', "change", "constructor", "torch.device"),
    ('    x = torch.randn(4, 8, device="cuda")', "change", "device_arg", "torch.randn"),
    ("    if torch.cuda.is_available():", "change", "function", "torch.cuda.is_available"),
    ("        torch.cuda.synchronize()", "change", "function", "torch.cuda.synchronize"),
    ("    return model(x.cuda())", "change", "method", "torch.Tensor.cuda"),
]
OPTIONAL = [
    ("import flash_attn", "cuda_op", "package", "flash_attn"),
    ("    torch.cuda.nvtx.range_push", "unsupported", "unsupported", "torch.cuda.nvtx.range_push"),
]


def expected(i):
    """(line, category, kind, api) of each finding in module i."""
    lines = module(i).splitlines(keepends=True)
    out = []
    for text, *what in EXPECTED + OPTIONAL:
        found = [n for n, line in enumerate(lines, 1) if line.startswith(text)]
        assert len(found) <= 1, text
        out += [(n, *what) for n in found]
    return sorted(out)


def module(i):
    return MODULE.format(
        i=i, index=i % 8,
        package="import flash_attn" if i % 25 == 0 else "",
        unsupported='    torch.cuda.nvtx.range_push("step")\n' if i % 10 == 0 else "")


def generate(root, n_files):
    """n_files modules in packages of 20; their paths, in walk order."""
    root = Path(root)
    paths = []
    for i in range(n_files):
        package = root / f"pkg{i // 20:02d}"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch()
        path = package / f"mod{i:04d}.py"
        path.write_text(module(i), encoding="utf-8")
        paths.append(path)
    return paths
