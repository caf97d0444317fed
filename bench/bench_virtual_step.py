"""The virtual NPU's cost: time per training step of the quick-start CNN
(examples/train_cnn.py's model, batch 64, SGD, cross-entropy) on the virtual
NPU against the same step on plain cpu tensors; and, for a model of many
small ops, of a two-layer transformer encoder (d_model 128, batch 16 x 32
tokens, AdamW).  First, single ops on small tensors (add, matmul, conv, a
factory, a view, a reduction), where the per-op cost of the virtual NPU (a
kernel registered from Python, arguments aliased in C) is all there is: the
last column is that overhead, npu minus cpu, in microseconds.

    python bench/bench_virtual_step.py [--steps N]

After a warm-up the two steps alternate, one cpu step then one npu step (the
order swapped every other pair), so that both see the same machine load.
The table reports the median milliseconds per step of each, and their ratio.
"""
import argparse
import os
import statistics
import sys
import time
import timeit

import torch
import torch.nn as nn

import transfer_to_npu  # noqa: F401  (the npu device)
from seed_cnn import make_step, make_training


def cnn_step(device):
    return make_step(make_training(device), device)


def transformer_step(device):
    tokens = torch.randn(16, 32, 128, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.1, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss = model(tokens.to(device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def timed(step):
    start = time.perf_counter()
    step()
    return (time.perf_counter() - start) * 1e3


def compare(make, steps):
    """Median ms per step on the cpu and on the npu, steps alternating."""
    cpu_step, npu_step = make("cpu"), make("npu")
    for _ in range(10):
        cpu_step()
        npu_step()
    torch.npu.synchronize()
    cpu_ms, npu_ms = [], []
    for i in range(steps):
        if i % 2:
            npu_ms.append(timed(npu_step))
            cpu_ms.append(timed(cpu_step))
        else:
            cpu_ms.append(timed(cpu_step))
            npu_ms.append(timed(npu_step))
    return statistics.median(cpu_ms), statistics.median(npu_ms)


# Single ops on small tensors (a, b: 4 elements; m: 4 x 4; x: 1 x 1 x 4 x 4
# with a 1 x 1 x 3 x 3 filter w), and a factory.
OPS = (("a + b", "a + b"), ("m @ m", "m @ m"), ("conv2d(x, w)", "conv2d(x, w)"),
       ("torch.empty(0, device=...)", "torch.empty(0, device=device)"),
       ("a.view(2, 2)", "a.view(2, 2)"), ("a.sum()", "a.sum()"))


def op_costs():
    """Best microseconds per call of each single op, cpu and npu, and the
    npu's overhead (their difference)."""
    for label, stmt in OPS:
        best = {}
        for device in ("cpu", "npu"):
            env = {"a": torch.ones(4, device=device), "b": torch.ones(4, device=device),
                   "m": torch.ones(4, 4, device=device), "x": torch.ones(1, 1, 4, 4, device=device),
                   "w": torch.ones(1, 1, 3, 3, device=device),
                   "conv2d": torch.nn.functional.conv2d, "torch": torch, "device": device}
            timer = timeit.Timer(stmt, globals=env)
            best[device] = min(timer.repeat(repeat=5, number=20_000)) / 20_000 * 1e6
        yield label, best["cpu"], best["npu"]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300,
                        help="timed steps of each model on each device (default 300)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps must be positive, got {args.steps}")

    print(f"training step, median of {args.steps}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {os.cpu_count()} cpus")
    print(f"{'op, small float32 tensors':<34}{'cpu us':>9}{'npu us':>9}{'npu/cpu':>9}"
          f"{'+us':>9}")
    for label, cpu, npu in op_costs():
        print(f"{label:<34}{cpu:>9.2f}{npu:>9.2f}{npu / cpu:>9.2f}{npu - cpu:>9.2f}")
    print(f"{'model':<34}{'cpu ms':>9}{'npu ms':>9}{'npu/cpu':>9}")
    for name, make in (("CNN of train_cnn.py, batch 64", cnn_step),
                       ("transformer, 2 layers, d 128", transformer_step)):
        cpu, npu = compare(make, args.steps)
        print(f"{name:<34}{cpu:>9.2f}{npu:>9.2f}{npu / cpu:>9.2f}")
    print(f"command: python bench/bench_virtual_step.py --steps {args.steps}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
