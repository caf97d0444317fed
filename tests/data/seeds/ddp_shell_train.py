# The multi-card example of Ascend's migration guide (its model script, the
# shell/torchrun main_worker and train, ddp_setup) as it is written for CUDA
# GPUs before migration, with the single-card manual-migration steps
# (set_device, .cuda(gpu), is_available) and the mixed-precision step of the
# quick start, each in its "before" form.  The guide's note on backend
# checks (assert backend in ['gloo', 'nccl']) is in ddp_setup.
import argparse
import os
import time

import torch
from torch import nn
import torch.distributed as dist
from torch.utils.data import DataLoader
from torchvision import datasets
from torchvision.transforms import ToTensor
from torch.cuda import amp

torch.manual_seed(0)
training_data = datasets.FashionMNIST(root="./data", train=True, download=True,
                                      transform=ToTensor())


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28*28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10)
        )

    def forward(self, x):
        x = self.flatten(x)
        return self.linear_relu_stack(x)


def ddp_setup(rank, world_size, backend='nccl'):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "29688"
    assert backend in ['gloo', 'nccl']
    dist.init_process_group(backend=backend, rank=rank, world_size=world_size)


def main_worker(gpu, ngpus_per_node, args):
    args.gpu = int(os.environ['LOCAL_RANK'])
    ddp_setup(args.gpu, args.world_size)
    torch.cuda.set_device(args.gpu)
    batch_size = int(args.batch_size / ngpus_per_node)
    model = NeuralNetwork()
    device = torch.device('cuda:{}'.format(args.gpu))
    train_sampler = torch.utils.data.distributed.DistributedSampler(training_data)
    train_loader = torch.utils.data.DataLoader(
        training_data, batch_size=batch_size, shuffle=(train_sampler is None),
        num_workers=2, pin_memory=False, sampler=train_sampler, drop_last=True)
    loc = 'cuda:{}'.format(args.gpu)
    model = model.to(loc)
    criterion = nn.CrossEntropyLoss().to(loc)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = amp.GradScaler()
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
    for epoch in range(5):
        train_sampler.set_epoch(epoch)
        train(train_loader, model, criterion, optimizer, scaler, args.gpu)


def train(train_loader, model, criterion, optimizer, scaler, gpu):
    model.train()
    for i, (images, target) in enumerate(train_loader):
        if torch.cuda.is_available():
            images = images.cuda(gpu, non_blocking=True)
            target = target.cuda(gpu, non_blocking=True)
        with amp.autocast():
            loss = criterion(model(images), target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", 1)))
    args = parser.parse_args()
    main_worker(args.gpu if hasattr(args, "gpu") else 0, args.world_size, args)
