"""DDP's communication hooks on the virtual NPU's hccl: bf16_compress_hook
(which DDP accepts only with CUDA and NCCL 2.10 or later), fp16_compress_hook
and PowerSGD, whose hooks keep what the futures of their collectives give."""
import tempfile
import textwrap

import pytest
import torch
import torch.distributed as dist

from conftest import run_torchrun

HOOKS = textwrap.dedent("""
    import os
    import transfer_to_npu
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    dist.init_process_group("nccl")
    rank, local = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)

    def train(hook=None, state=None):
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(),
                                        torch.nn.Linear(8, 4)).cuda(), device_ids=[local])
        if hook is not None:
            model.register_comm_hook(state, hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(rank)
        for _ in range(4):
            x = torch.randn(8, 16, generator=gen).cuda()
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        both = [torch.zeros_like(flat) for _ in range(2)]
        dist.all_gather(both, flat)
        return flat, torch.equal(both[0], both[1])

    reference, same = train()
    lines = [f"allreduce {rank} {same}"]
    for name, hook in (("bf16", default_hooks.bf16_compress_hook),
                       ("fp16", default_hooks.fp16_compress_hook)):
        flat, same = train(hook)
        lines.append(f"{name} {rank} {same} {(flat - reference).abs().max().item():.1e}")
    state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                                   start_powerSGD_iter=2)
    flat, same = train(powersgd.powerSGD_hook, state)
    kept = {t.device.type for t in [*state.p_memory_dict.values(), *state.q_memory_dict.values()]}
    lines.append(f"powersgd {rank} {same} {sorted(kept)} {bool(torch.isfinite(flat).all())}")
    every = [None, None]
    dist.all_gather_object(every, lines)
    if rank == 0:  # one writer: the ranks' lines do not mix
        print("\\n".join(line for each in every for line in each))
    dist.destroy_process_group()
""")


def test_ddp_communication_hooks_on_two_ranks(tmp_path):
    proc = run_torchrun(tmp_path, HOOKS, env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = {tuple(line.split(" ")[:2]): line.split(" ")[2:] for line in proc.stdout.splitlines()}
    for rank in "01":
        assert lines[("allreduce", rank)] == ["True"]
        # Replicas agree, and the compressed gradients stay close to the
        # exact ones.
        for name, bound in (("bf16", 1e-2), ("fp16", 1e-3)):
            same, deviation = lines[(name, rank)]
            assert same == "True" and float(deviation) < bound, (name, rank, deviation)
        # PowerSGD keeps its low-rank factors from its collectives' futures:
        # npu tensors, as NCCL's futures give CUDA ones.
        assert lines[("powersgd", rank)] == ["True", "['npu']", "True"], proc.stdout


@pytest.fixture
def group():
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl", init_method=f"file://{tmp}/init", rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()


def test_a_collectives_future_gives_the_npu_tensors(group):
    t = torch.ones(3, device="cuda")
    work = dist.all_reduce(t, async_op=True)
    assert work.get_future().wait()[0] is t
    out = torch.empty(1, 3, device="cuda")
    work = dist.all_gather_into_tensor(out, torch.ones(3, device="cuda"), async_op=True)
    for _ in range(3):  # later collectives do not make it forget
        dist.all_reduce(torch.ones(1, device="cuda"))
    assert work.get_future().wait()[0] is out
    cpu = dist.new_group(backend="gloo")
    c = torch.ones(2)
    assert dist.all_reduce(c, group=cpu, async_op=True).get_future().wait()[0] is c
