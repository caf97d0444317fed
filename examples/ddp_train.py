# Data-parallel training written for CUDA GPUs and NCCL, in the shape of
# Ascend's DDP guide (ddp_setup, main_worker(gpu, ...), DistributedSampler,
# DistributedDataParallel), with synthetic data in place of a download.
# One line migrates it.  It runs under every launcher the guide uses:
#
#   torchrun --standalone --nproc-per-node 2 ddp_train.py
#   python -m torch.distributed.launch --nproc-per-node 2 --master-port 29500 ddp_train.py
#   python ddp_train.py --spawn 2 --init-method tcp://127.0.0.1:29500     (mp.spawn)
#
# --resume continues from the checkpoint rank 0 saved, loaded on every rank
# with map_location=f'cuda:{rank}'.
import transfer_to_npu  # run this CUDA script on the NPU

import argparse
import hashlib
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                                    nn.Linear(64, 8))

    def forward(self, x):
        return self.layers(x)


class SyntheticData(Dataset):
    """Points around one centre per class."""

    def __init__(self, n=1024, seed=0):
        g = torch.Generator().manual_seed(seed)
        centres = 0.5 * torch.randn(8, 32, generator=g)
        self.labels = torch.randint(0, 8, (n,), generator=g)
        self.points = centres[self.labels] + torch.randn(n, 32, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.points[i], self.labels[i]


def ddp_setup(rank, world_size, init_method):
    backend = "nccl" if dist.is_nccl_available() else "gloo"
    dist.init_process_group(backend=backend, init_method=init_method, rank=rank,
                            world_size=world_size)


def digest(module):
    """A fingerprint of the parameters, equal only if every bit is."""
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def main_worker(gpu, args):
    rank = args.node_rank * args.nproc + gpu if args.spawn else int(os.environ["RANK"])
    world_size = args.nproc if args.spawn else int(os.environ["WORLD_SIZE"])
    ddp_setup(rank, world_size, args.init_method)
    torch.cuda.set_device(gpu)
    device = torch.device(f"cuda:{gpu}")

    torch.manual_seed(0)
    model = Net().to(device)
    model = DDP(model, device_ids=[gpu], output_device=gpu)
    criterion = nn.CrossEntropyLoss().cuda(gpu)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    data = SyntheticData()
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    # The global batch is split between the ranks.
    loader = DataLoader(data, batch_size=args.batch_size // world_size, sampler=sampler,
                        drop_last=True)

    start_epoch = 0
    if args.resume:
        checkpoint = torch.load(args.checkpoint, map_location=f"cuda:{gpu}")
        model.module.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch = checkpoint["epoch"]
        print(f"rank {rank} resumed at epoch {start_epoch} on "
              f"{checkpoint['state_dict']['layers.0.weight'].device}")

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for images, target in loader:
            images = images.cuda(gpu, non_blocking=True)
            target = target.cuda(gpu, non_blocking=True)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        # The last batch's loss over the whole global batch.
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch} loss {mean_loss.item():.6f}")

    if rank == 0:
        torch.save({"epoch": args.epochs, "state_dict": model.module.state_dict(),
                    "optimizer": optimizer.state_dict()}, args.checkpoint)
    dist.barrier(device_ids=[gpu])
    print(f"rank {rank} world {world_size} backend {dist.get_backend()} "
          f"params on {next(model.parameters()).device} digest {digest(model)}")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description="DDP training on synthetic data")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    parser.add_argument("--checkpoint", default="checkpoint.pth.tar")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--spawn", type=int, default=0, metavar="N",
                        help="start N processes with torch.multiprocessing.spawn")
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--init-method", default="env://")
    # torch.distributed.launch passes --local-rank; torchrun sets LOCAL_RANK.
    parser.add_argument("--local-rank", "--local_rank", type=int,
                        default=int(os.environ.get("LOCAL_RANK", 0)))
    args = parser.parse_args()
    if args.spawn:
        args.nproc = args.spawn
        mp.spawn(main_worker, nprocs=args.spawn, args=(args,))
    else:
        main_worker(args.local_rank, args)


if __name__ == "__main__":
    main()
