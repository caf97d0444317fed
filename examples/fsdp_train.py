# Fully sharded data-parallel training (FSDP2: init_device_mesh + fully_shard)
# written for CUDA GPUs and NCCL, with synthetic data in place of a download.
# One line migrates it.
#
#   torchrun --standalone --nproc-per-node 2 fsdp_train.py
#
# Each rank keeps a shard of every parameter; rank 0 saves the full model.
import transfer_to_npu  # run this CUDA script on the NPU

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self, width=32, depth=3, classes=8):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class SyntheticData(Dataset):
    """Points around one centre per class."""

    def __init__(self, n=512, seed=0):
        g = torch.Generator().manual_seed(seed)
        centres = 0.5 * torch.randn(8, 32, generator=g)
        self.labels = torch.randint(0, 8, (n,), generator=g)
        self.points = centres[self.labels] + torch.randn(n, 32, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.points[i], self.labels[i]


def main():
    parser = argparse.ArgumentParser(description="FSDP training on synthetic data")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--checkpoint", default="fsdp_model.pt")
    args = parser.parse_args()

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group(backend="nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cuda", (world_size,))

    torch.manual_seed(0)
    model = Net().cuda()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()

    data = SyntheticData()
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=args.batch_size // world_size, sampler=sampler,
                        drop_last=True)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for points, labels in loader:
            points, labels = points.cuda(), labels.cuda()
            loss = criterion(model(points), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch} loss {mean_loss.item():.6f}")

    weight = model.head.weight
    print(f"rank {rank} holds {weight.to_local().shape[0]} of {weight.shape[0]} rows of "
          f"head.weight on {weight.to_local().device} (mesh on {mesh.device_type})")
    # Every rank takes part in gathering the full model; rank 0 saves it.
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                 cpu_offload=True))
    if rank == 0:
        torch.save(state, args.checkpoint)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
