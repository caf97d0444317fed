"""End to end: the seed's CNN training step (batch 64) written for CUDA and
migrated, against the same step written for the npu by hand and run with
migration off, both on the virtual NPU.  Budget: migrated / hand-written at
most 1.01.

Both steps train the same model with the same optimizer on the same
batch, so that they differ only in what the migration changes (the
device's spelling and the calls that take it), not in where their tensors
happen to lie in memory.  They alternate in rounds, in turn first and
second, on one core and one thread, and the figure is the median of the
rounds' ratios: a slow spell of the machine falls on both sides of a ratio.
"""
import os
import statistics
import time

os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")

import torch  # noqa: E402

import transfer_to_npu  # noqa: E402
from seed_cnn import make_step, make_training  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "40"))
STEPS = int(os.environ.get("BENCH_STEPS", "10"))


def per_step(step):
    t = time.perf_counter()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - t) / STEPS


def timed(step, migrated):
    if migrated:
        return per_step(step)
    transfer_to_npu.disable()  # a script for the npu runs without the patcher
    try:
        return per_step(step)
    finally:
        transfer_to_npu.enable()


def main():
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    training = make_training("npu:0")
    migrated, by_hand = make_step(training, "cuda:0"), make_step(training, "npu:0")
    timed(migrated, True)  # warm
    timed(by_hand, False)
    m_times, h_times, ratios = [], [], []
    for r in range(ROUNDS):
        if r % 2:
            h = timed(by_hand, False)
            m = timed(migrated, True)
        else:
            m = timed(migrated, True)
            h = timed(by_hand, False)
        m_times.append(m)
        h_times.append(h)
        ratios.append(m / h)
    print(f"CNN step, batch 64, virtual NPU ({ROUNDS} rounds of {STEPS} steps each way, "
          f"1 thread)")
    print(f"  written for CUDA, migrated:        {statistics.median(m_times) * 1e3:8.3f} ms")
    print(f"  written for the npu, migration off: {statistics.median(h_times) * 1e3:8.3f} ms")
    print(f"  migrated / hand-written:           {statistics.median(ratios):8.4f}  "
          f"(median of the rounds' ratios; budget 1.01)")


if __name__ == "__main__":
    main()
