"""The dump's cost (docs/accuracy.md): the seed's CNN training step (batch
64) written for CUDA, migrated to the virtual NPU, with the dump off, on
in statistics mode (every call, module, gradient and optimizer step
recorded, each step's files written), and on with the step left out by
--dump-steps (the cost of the mode and hooks alone).  Budget: on, at most
2x the step.

Off is nothing: before the first start, this process has no dump module,
no torch function mode and no global module or optimizer hook, which the
first line checks.  The settings alternate in rounds on one core and one
thread, each step timed in CPU time (the machine's other load falls outside
it), and each figure is the median of the rounds.
"""
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")

import torch  # noqa: E402
from torch.nn.modules import module as nn_module  # noqa: E402
from torch.optim import optimizer as optim_module  # noqa: E402

import transfer_to_npu  # noqa: E402,F401
from seed_cnn import make_step, make_training  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "8"))
STEPS = int(os.environ.get("BENCH_STEPS", "10"))


def installed():
    return ("transfer_to_npu.accuracy.dump" in sys.modules, torch._C._len_torch_function_stack(),
            len(nn_module._global_forward_pre_hooks) + len(nn_module._global_forward_hooks),
            len(optim_module._global_optimizer_pre_hooks)
            + len(optim_module._global_optimizer_post_hooks))


def per_step(step):
    t = time.process_time()
    for _ in range(STEPS):
        step()
    return (time.process_time() - t) / STEPS * 1e3


def main():
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    module, mode, hooks, optimizer_hooks = installed()
    print(f"dump off: dump module imported {module}, torch function modes {mode}, "
          f"global module hooks {hooks}, optimizer hooks {optimizer_hooks}")
    step = make_step(make_training("cuda:0"), "cuda:0")
    per_step(step)  # warm
    from transfer_to_npu.accuracy import dump

    times = {"off": [], "on": [], "on, step not dumped": []}
    with tempfile.TemporaryDirectory() as directory:
        settings = {"on": dump.Settings(directory),
                    "on, step not dumped": dump.Settings(directory, steps=frozenset())}
        for r in range(ROUNDS):
            order = list(times) if r % 2 == 0 else list(reversed(times))
            for what in order:
                if what == "off":
                    times[what].append(per_step(step))
                    continue
                dump.start(settings[what])
                try:
                    times[what].append(per_step(step))
                finally:
                    dump.stop()
    off = statistics.median(times["off"])
    print(f"CNN step (batch 64, CPU ms, median of {ROUNDS} rounds of {STEPS} steps):")
    for what, values in times.items():
        ms = statistics.median(values)
        print(f"  dump {what:<20} {ms:7.2f} ms  {ms / off:5.2f}x")
    print("  (budget: on at most 2.00x)")


if __name__ == "__main__":
    main()
