"""End to end: the seed's CNN training step (batch 64) written for CUDA and
migrated, against the same step written for the npu by hand, both on the
virtual NPU.  Budget: migrated / hand-written at most 1.01.
"""
import os
import statistics
import time

os.environ.setdefault("TRANSFER_TO_NPU_BACKEND", "virtual")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

import transfer_to_npu  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "12"))
STEPS = int(os.environ.get("BENCH_STEPS", "20"))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=1), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, 1, 1), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(32 * 7 * 7, 16), nn.ReLU(), nn.Linear(16, 10))

    def forward(self, x):
        return self.net(x)


def make_step(device_spec):
    """The seed's loop body, with its device spelled as device_spec."""
    torch.manual_seed(0)
    device = torch.device(device_spec)
    model = CNN().to(device)
    loss_func = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    imgs_cpu = torch.rand(64, 1, 28, 28, generator=g)
    labels_cpu = torch.randint(0, 10, (64,), generator=g)

    def step():
        imgs = imgs_cpu.to(device)
        labels = labels_cpu.to(device)
        outputs = model(imgs)
        loss = loss_func(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def per_step(step):
    t = time.perf_counter()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - t) / STEPS


def main():
    migrated, by_hand = make_step("cuda:0"), make_step("npu:0")
    for s in (migrated, by_hand):
        per_step(s)  # warm
    m_times, h_times = [], []
    for _ in range(ROUNDS):  # interleaved against drift
        m_times.append(per_step(migrated))
        h_times.append(per_step(by_hand))
    m, h = statistics.median(m_times), statistics.median(h_times)
    print(f"CNN step, batch 64, virtual NPU ({ROUNDS} rounds of {STEPS} steps, medians)")
    print(f"  written for CUDA, migrated: {m * 1e3:8.3f} ms")
    print(f"  written for the npu:        {h * 1e3:8.3f} ms")
    print(f"  migrated / hand-written:    {m / h:8.4f}  (budget 1.01)")


if __name__ == "__main__":
    main()
