"""The seed's quick-start CNN (examples/train_cnn.py's model; batch 64, SGD,
cross-entropy) as the benchmarks train it."""
import torch
import torch.nn as nn


class CNN(nn.Module):
    """The model of examples/train_cnn.py."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=1),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(16, 32, 3, 1, 1),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 7 * 7, 16),
            nn.ReLU(),
            nn.Linear(16, 10),
        )

    def forward(self, x):
        return self.net(x)


def make_training(device):
    """The model, loss and optimizer on `device`, and one batch on the cpu,
    as the seed's data loader gives it."""
    torch.manual_seed(0)
    model = CNN().to(device)
    loss_func = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    batch = torch.rand(64, 1, 28, 28, generator=g), torch.randint(0, 10, (64,), generator=g)
    return model, loss_func, optimizer, batch


def make_step(training, device_spec):
    """The seed's loop body, with its device spelled as device_spec (made
    into a torch.device now, as the seed does before its loop)."""
    model, loss_func, optimizer, (imgs_cpu, labels_cpu) = training
    device = torch.device(device_spec)

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
