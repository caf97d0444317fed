"""Distributed autograd (torch.distributed.autograd under RPC) on npu:1: the
backward pass runs in torch's C++ engine, on the RPC agent's threads of the
process that holds the tensors, which must not hand npu:1 to a per-device
worker the engine does not have for a device defined in Python."""
import textwrap

from conftest import run_torchrun

SCRIPT = textwrap.dedent("""
    import os
    import transfer_to_npu
    import torch
    import torch.distributed.autograd as dist_autograd
    import torch.distributed.rpc as rpc

    def remote_matmul(a, b):
        # On the worker's second npu, as a script with a GPU per stage would.
        out = a.to("cuda:1") @ b.to("cuda:1")
        return out.tanh().cpu()

    rank = int(os.environ["RANK"])
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2)
    if rank == 0:
        torch.manual_seed(0)
        a = torch.randn(3, 4, requires_grad=True)
        b = torch.randn(4, 2, requires_grad=True)
        expected = torch.autograd.grad((a @ b).tanh().sum(), (a, b))
        for step in range(2):
            with dist_autograd.context() as ctx:
                loss = rpc.rpc_sync("worker1", remote_matmul, args=(a, b)).sum()
                dist_autograd.backward(ctx, [loss])
                grads = dist_autograd.get_gradients(ctx)
                print("remote", step, all(torch.allclose(grads[t], g, atol=1e-6)
                                          for t, g in zip((a, b), expected)))
        x = torch.randn(5, device="cuda:1", requires_grad=True)
        with dist_autograd.context() as ctx:
            dist_autograd.backward(ctx, [(x * x).sum()])
            grad = dist_autograd.get_gradients(ctx)[x]
            print("local", grad.device, torch.equal(grad.cpu(), 2 * x.detach().cpu()))
    rpc.shutdown()
""")


def test_distributed_autograd_through_npu_1(tmp_path):
    proc = run_torchrun(tmp_path, SCRIPT, env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.splitlines() == ["remote 0 True", "remote 1 True", "local npu:1 True"]
