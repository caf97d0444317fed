"""A trainer in the shapes of pytorch/examples' mnist and minGPT's trainer,
written for CUDA: the device and the data path chosen by
torch.accelerator, a DataLoader with a worker, pinned batches and a
sampler drawing with replacement, dropout, gradient clipping, AdamW.  Its
compare must exit 0: the reference takes the same paths, draws the same
masks, and the data loading done in the worker is no part of either."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Squares(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 12, generator=g)
        self.y = (self.x.pow(2).sum(1) > 12).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] * 1.0, self.y[i].item()


def main():
    use_accel = torch.accelerator.is_available()
    torch.manual_seed(0)
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")
    kwargs = {"num_workers": 1, "persistent_workers": True, "pin_memory": True} \
        if use_accel else {}
    data = Squares(96)
    sampler = torch.utils.data.RandomSampler(data, replacement=True, num_samples=96)
    loader = torch.utils.data.DataLoader(data, batch_size=16, sampler=sampler, **kwargs)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.25),
                          nn.Linear(32, 2)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(f"step {step} loss {loss.item():.6f} on {device.type}")


if __name__ == "__main__":
    main()
