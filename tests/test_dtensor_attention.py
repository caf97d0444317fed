"""scaled_dot_product_attention on DTensors on the virtual NPU: a 2-D
FSDP + tensor-parallel model (heads sharded over the tensor-parallel mesh)
trains on four ranks as one process trains on the whole batch, the
attention going through the ops DTensor has sharding rules for, as on
CUDA: the flash op without a mask, the memory-efficient op with one."""
import re
import textwrap

import torch
import torch.nn.functional as F

from conftest import run_torchrun

aten = torch.ops.aten

SCRIPT = textwrap.dedent("""
    import os
    import transfer_to_npu
    import torch, torch.nn as nn, torch.nn.functional as F
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    class Attention(nn.Module):
        def __init__(self, masked, dim=16, heads=4):
            super().__init__()
            self.masked, self.head_dim = masked, dim // heads
            self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = (w(x).view(b, t, -1, self.head_dim).transpose(1, 2)
                       for w in (self.q, self.k, self.v))
            if self.masked:
                mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
                if isinstance(q, DTensor):
                    mask = DTensor.from_local(mask, q.device_mesh)
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(out.transpose(1, 2).reshape(b, t, -1))

    def model():
        torch.manual_seed(0)
        return nn.Sequential(Attention(masked=False), Attention(masked=True)).cuda()

    def batch(dp_rank):
        return torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(dp_rank)).cuda()

    def train(m, batches):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(2):
            loss = sum(m(x).pow(2).mean() for x in batches) / len(batches)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return m

    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    sharded = model()
    for layer in sharded:
        plan = {name: ColwiseParallel(use_local_output=False) for name in "qkv"}
        plan["o"] = RowwiseParallel()
        parallelize_module(layer, mesh["tp"], plan)
    fully_shard(sharded, mesh=mesh["dp"])
    train(sharded, [batch(mesh["dp"].get_local_rank())])
    full = {n: p.full_tensor() for n, p in sharded.named_parameters()}
    if dist.get_rank() == 0:
        whole = train(model(), [batch(0), batch(1)])
        worst = max((full[n] - p).abs().max().item() for n, p in whole.named_parameters())
        print("max difference", worst < 1e-5, f"{worst:.1e}")
    dist.destroy_process_group()
""")


def test_fsdp_and_tensor_parallel_attention_on_four_ranks(tmp_path):
    proc = run_torchrun(tmp_path, SCRIPT, nproc=4, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # Searched for: torch 2.10's gloo writes its lines piecemeal from four
    # processes.
    assert re.search(r"max difference True ", proc.stdout), proc.stdout


def _inputs():
    torch.manual_seed(0)
    cpu = [torch.randn(2, 3, 5, 4, requires_grad=True) for _ in range(3)]
    npu = [t.detach().to("cuda").requires_grad_() for t in cpu]
    return cpu, npu


def _same_gradients(cpu, npu, out_cpu, out_npu):
    assert torch.allclose(out_npu.cpu(), out_cpu, atol=1e-6)
    out_cpu.sum().backward()
    out_npu.sum().backward()
    for c, n in zip(cpu, npu):
        assert n.grad.device.type == "npu" and torch.allclose(n.grad.cpu(), c.grad, atol=1e-5)


def test_cudas_flash_attention_op_runs_on_the_npu():
    cpu, npu = _inputs()
    out = aten._scaled_dot_product_flash_attention(*npu, 0.0, True)
    assert out[1].shape == (2, 3, 5) and (out[4], out[5]) == (5, 5)
    _same_gradients(cpu, npu, F.scaled_dot_product_attention(*cpu, is_causal=True), out[0])


def test_cudas_memory_efficient_attention_op_runs_on_the_npu():
    cpu, npu = _inputs()
    bias = torch.randn(2, 3, 5, 5)
    out = aten._scaled_dot_product_efficient_attention(*npu, bias.to("cuda"), True)
    assert out[1].shape == (2, 3, 32)  # CUDA's log-sum-exp: padded to 32 queries
    _same_gradients(cpu, npu, F.scaled_dot_product_attention(*cpu, attn_mask=bias), out[0])


def test_memory_efficient_attention_gives_the_bias_its_gradient():
    """Asked for (DTensor before torch 2.12 takes no absent gradient, so
    the sharded attention asks for the mask's): the scores' gradient."""
    cpu, npu = _inputs()
    bias = torch.randn(2, 3, 5, 5)
    bias_cpu, bias_npu = bias.clone().requires_grad_(), bias.to("cuda").requires_grad_()
    out = aten._scaled_dot_product_efficient_attention(*npu, bias_npu, True)
    _same_gradients(cpu, npu, F.scaled_dot_product_attention(*cpu, attn_mask=bias_cpu), out[0])
    assert torch.allclose(bias_npu.grad.cpu(), bias_cpu.grad, atol=1e-5)
