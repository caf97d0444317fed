"""Two-process jobs on the virtual NPU's hccl backend, started the ways GPU
users start them: torchrun, python -m torch.distributed.launch and
torch.multiprocessing.spawn, running scripts written for CUDA and NCCL."""
import re
import socket
import textwrap

import pytest
import torch

from conftest import EXAMPLES, run_python

DDP_SCRIPT = EXAMPLES / "ddp_train.py"
FSDP_SCRIPT = EXAMPLES / "fsdp_train.py"

# Ranks call torch.cuda.set_device(LOCAL_RANK): two virtual NPUs per machine.
ENV = {"TRANSFER_TO_NPU_BACKEND": "virtual", "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2",
       "OMP_NUM_THREADS": "1"}

# The ranks share one stdout, where one rank's line may end after another
# rank's has begun: the patterns are not anchored to lines.
LOSS = re.compile(r"epoch (\d+) loss (\d+\.\d{6})")
DDP_RANK = re.compile(
    r"rank (\d) world (\d) backend (\w+) params on (\S+) digest ([0-9a-f]{16})")


def _torchrun(args, cwd, nproc=2, env=None):
    return run_python(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                       str(nproc), *map(str, args)], cwd=cwd, env={**ENV, **(env or {})},
                      timeout=240)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ok(done):
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def _ranks(stdout):
    """{rank: (world, backend, device, digest)} from ddp_train.py's output."""
    return {int(r): (int(w), b, d, h) for r, w, b, d, h in DDP_RANK.findall(stdout)}


def _losses(stdout):
    return [float(loss) for _, loss in LOSS.findall(stdout)]


def _state_dicts_close(a, b, atol):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k].cpu(), b[k].cpu(), atol=atol, rtol=0), k


# --- DDP ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    """ddp_train.py for four epochs under torchrun, on two ranks and on one
    rank (the whole global batch in one process)."""
    work = tmp_path_factory.mktemp("ddp")
    two = _ok(_torchrun([DDP_SCRIPT, "--checkpoint", "two.pt"], work))
    one = _ok(_torchrun([DDP_SCRIPT, "--checkpoint", "one.pt"], work, nproc=1))
    return work, two, one


def test_ddp_torchrun_replicas_stay_identical(ddp_runs):
    _, two, _ = ddp_runs
    ranks = _ranks(two.stdout)
    assert sorted(ranks) == [0, 1]
    # nccl was migrated to hccl, each rank trained on its own npu, and the
    # two replicas end bit for bit the same.
    assert ranks[0][:3] == (2, "hccl", "npu:0")
    assert ranks[1][:3] == (2, "hccl", "npu:1")
    assert ranks[0][3] == ranks[1][3]


def test_ddp_two_ranks_equal_one_process_on_the_full_batch(ddp_runs):
    work, two, one = ddp_runs
    assert _ranks(one.stdout)[0][:3] == (1, "hccl", "npu:0")
    two_losses, one_losses = _losses(two.stdout), _losses(one.stdout)
    assert len(two_losses) == len(one_losses) == 4
    assert two_losses[-1] < 0.5 * two_losses[0]
    for a, b in zip(two_losses, one_losses):
        assert abs(a - b) <= 1e-5
    a = torch.load(work / "two.pt", map_location="cpu")
    b = torch.load(work / "one.pt", map_location="cpu")
    assert a["epoch"] == b["epoch"] == 4
    _state_dicts_close(a["state_dict"], b["state_dict"], atol=1e-5)


def test_ddp_spawn_with_tcp_init(ddp_runs):
    work, two, _ = ddp_runs
    port = _free_port()
    spawned = _ok(run_python(
        [str(DDP_SCRIPT), "--spawn", "2", "--init-method", f"tcp://127.0.0.1:{port}",
         "--checkpoint", "spawn.pt"], cwd=work, env=ENV, timeout=240))
    ranks = _ranks(spawned.stdout)
    assert ranks[0][:3] == (2, "hccl", "npu:0") and ranks[1][:3] == (2, "hccl", "npu:1")
    # The same computation as under torchrun, to the bit.
    assert ranks[0][3] == ranks[1][3] == _ranks(two.stdout)[0][3]
    assert _losses(spawned.stdout) == _losses(two.stdout)


def test_ddp_torch_distributed_launch(ddp_runs):
    # The launcher passes --local-rank=N; the script reads it as GPU scripts
    # do and calls torch.cuda.set_device with it.
    work, two, _ = ddp_runs
    launched = _ok(run_python(
        ["-m", "torch.distributed.launch", "--nproc-per-node", "2", "--master-port",
         str(_free_port()), str(DDP_SCRIPT), "--checkpoint", "launch.pt"], cwd=work, env=ENV,
        timeout=240))
    ranks = _ranks(launched.stdout)
    assert ranks[0][2] == "npu:0" and ranks[1][2] == "npu:1"
    assert ranks[0][3] == ranks[1][3] == _ranks(two.stdout)[0][3]


def test_ddp_save_on_rank0_resume_on_all_ranks(ddp_runs):
    work, two, _ = ddp_runs
    first = _ok(_torchrun([DDP_SCRIPT, "--epochs", "2", "--checkpoint", "resume.pt"], work))
    assert len(_losses(first.stdout)) == 2
    resumed = _ok(_torchrun([DDP_SCRIPT, "--epochs", "4", "--checkpoint", "resume.pt",
                             "--resume"], work))
    # map_location=f'cuda:{rank}' put each rank's copy on its own npu.
    assert "rank 0 resumed at epoch 2 on npu:0" in resumed.stdout
    assert "rank 1 resumed at epoch 2 on npu:1" in resumed.stdout
    # Two epochs, a checkpoint, two more: the same model as four in a row.
    assert _losses(resumed.stdout) == _losses(two.stdout)[2:]
    ranks = _ranks(resumed.stdout)
    assert ranks[0][3] == ranks[1][3] == _ranks(two.stdout)[0][3]


def test_ddp_unedited_script_with_transfer_to_npu_set(ddp_runs):
    # No import line: TRANSFER_TO_NPU=1 migrates torchrun's every worker.
    work, two, _ = ddp_runs
    line = "import transfer_to_npu  # run this CUDA script on the NPU\n"
    source = DDP_SCRIPT.read_text()
    assert source.count(line) == 1
    plain = work / "ddp_unedited.py"
    plain.write_text(source.replace(line, ""))
    done = _ok(_torchrun([plain, "--checkpoint", "unedited.pt"], work,
                         env={"TRANSFER_TO_NPU": "1"}))
    ranks = _ranks(done.stdout)
    assert ranks[0][:3] == (2, "hccl", "npu:0") and ranks[1][:3] == (2, "hccl", "npu:1")
    assert ranks[0][3] == ranks[1][3] == _ranks(two.stdout)[0][3]


# --- FSDP ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def fsdp_runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("fsdp")
    two = _ok(_torchrun([FSDP_SCRIPT, "--checkpoint", "two.pt"], work))
    one = _ok(_torchrun([FSDP_SCRIPT, "--checkpoint", "one.pt"], work, nproc=1))
    return work, two, one


def test_fsdp_shards_on_each_rank_npu(fsdp_runs):
    _, two, _ = fsdp_runs
    # init_device_mesh('cuda', ...) made an npu mesh; each rank holds half
    # of every parameter on its own npu.
    assert "rank 0 holds 4 of 8 rows of head.weight on npu:0 (mesh on npu)" in two.stdout
    assert "rank 1 holds 4 of 8 rows of head.weight on npu:1 (mesh on npu)" in two.stdout


def test_fsdp_two_ranks_equal_one_process(fsdp_runs):
    work, two, one = fsdp_runs
    two_losses, one_losses = _losses(two.stdout), _losses(one.stdout)
    assert len(two_losses) == len(one_losses) == 3
    assert two_losses[-1] < two_losses[0]
    for a, b in zip(two_losses, one_losses):
        assert abs(a - b) <= 1e-5
    a, b = torch.load(work / "two.pt"), torch.load(work / "one.pt")
    assert len(a) == 20
    _state_dicts_close(a, b, atol=1e-5)


FSDP2_META_INIT = textwrap.dedent("""
    import hashlib
    import transfer_to_npu  # run this CUDA script on the NPU
    import torch, torch.distributed as dist, torch.nn as nn
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)

    def build(seed):
        # Made on the meta device, sharded, then given memory and
        # initialised in place: random ops on DTensors.
        with torch.device("meta"):
            model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        model.to_empty(device="cuda")
        torch.manual_seed(seed)
        for layer in model:
            if isinstance(layer, nn.Linear):
                layer.reset_parameters()
        return model

    def full(model):
        return [p.detach().full_tensor().cpu() for p in model.parameters()]

    a, again, other = full(build(0)), full(build(0)), full(build(1))
    w = a[0]  # 32 x 16, rows 0-15 on rank 0, 16-31 on rank 1
    bound = 1 / 16 ** 0.5
    model = build(0)
    x = torch.randn(8, 16, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in a)).hexdigest()[:16]
    print(f"rank {rank} digest {digest} halves differ {not torch.equal(w[:16], w[16:])} "
          f"in bound {bool(w.abs().max() <= bound)} spread {bool(w.std() > bound / 3)} "
          f"same seed same {all(torch.equal(p, q) for p, q in zip(a, again))} "
          f"other seed other {not torch.equal(w, other[0])} "
          f"loss finite {bool(torch.isfinite(loss))} end")
    dist.destroy_process_group()
""")


def test_fsdp2_parameters_initialised_after_sharding(tmp_path):
    """FSDP2's meta-device initialisation, as large-model scripts write it:
    reset_parameters() on sharded parameters draws on every rank's shard."""
    script = tmp_path / "fsdp2_meta.py"
    script.write_text(FSDP2_META_INIT)
    done = _ok(_torchrun([script], tmp_path))
    found = re.findall(r"rank (\d) digest (\w+) (.*?) end", done.stdout)
    assert sorted(r for r, _, _ in found) == ["0", "1"], done.stdout
    assert found[0][1] == found[1][1]  # both ranks see the same full parameters
    for _, _, checks in found:
        assert checks == ("halves differ True in bound True spread True same seed same True "
                          "other seed other True loss finite True")


FSDP2_DIVIDE_FACTOR = textwrap.dedent("""
    import copy
    import transfer_to_npu  # run this CUDA script on the NPU
    import torch, torch.distributed as dist, torch.nn as nn
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).cuda()
    model = fully_shard(copy.deepcopy(reference))
    # Gradients summed over the ranks, then divided by 5: NCCL's PREMUL_SUM
    # by 1/5 in the reduce-scatter.
    model.set_gradient_divide_factor(5.0)
    batches = [torch.randn(4, 8, generator=torch.Generator().manual_seed(i)).cuda()
               for i in range(world)]
    model(batches[rank]).pow(2).sum().backward()
    for batch in batches:
        reference(batch).pow(2).sum().backward()
    got = [p.grad.full_tensor().cpu() for p in model.parameters()]
    want = [p.grad.cpu() / 5.0 for p in reference.parameters()]
    print(f"rank {rank} close {all(torch.allclose(g, x, atol=1e-6) for g, x in zip(got, want))} "
          f"end")
    dist.destroy_process_group()
""")


def test_fsdp2_gradient_divide_factor(tmp_path):
    script = tmp_path / "fsdp2_divide.py"
    script.write_text(FSDP2_DIVIDE_FACTOR)
    done = _ok(_torchrun([script], tmp_path))
    assert sorted(re.findall(r"rank (\d) close (\w+) end", done.stdout)) == [
        ("0", "True"), ("1", "True")], done.stdout


# --- every collective ---------------------------------------------------------

COLLECTIVES = textwrap.dedent('''
    import math, os, sys
    import transfer_to_npu
    import torch
    import torch.distributed as dist

    # A file:// rendezvous, as a shared file system gives; both ranks use
    # the one virtual NPU of the machine (npu:0).
    dist.init_process_group("nccl", init_method="file://" + sys.argv[1],
                            rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    r, w = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda")
    passed = []

    def check(name, got, want):
        got = got if isinstance(got, (list, tuple)) else [got]
        want = want if isinstance(want, (list, tuple)) else [want]
        assert len(got) == len(want), (name, got, want)
        for g, x in zip(got, want):
            assert g.device == torch.device("npu", 0), (name, g.device)
            assert g.dtype == x.dtype, (name, g.dtype, x.dtype)
            assert torch.equal(g.cpu(), x), (name, r, g, x)
        passed.append(name)

    def full(value, n=3, dtype=torch.float32):
        return torch.full((n,), float(value), dtype=dtype)

    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        t = (torch.arange(4) * (r + 1)).to(dtype).to(dev)
        ptr = t.data_ptr()
        dist.all_reduce(t)
        assert t.data_ptr() == ptr  # written in place, in the npu memory
        check(f"all_reduce sum {dtype}", t, (torch.arange(4) * sum(range(1, w + 1))).to(dtype))
    for op, want in (("MAX", w), ("MIN", 1), ("PRODUCT", math.factorial(w)),
                     ("AVG", (w + 1) / 2)):
        t = full(r + 1).to(dev)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        check(f"all_reduce {op}", t, full(want))
    t = full(r + 1, dtype=torch.bfloat16).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    check("all_reduce AVG torch.bfloat16", t, full((w + 1) / 2, dtype=torch.bfloat16))

    t = full(r, dtype=torch.bfloat16).to(dev)
    dist.broadcast(t, src=1)
    check("broadcast", t, full(1, dtype=torch.bfloat16))

    outs = [torch.empty(3, device=dev) for _ in range(w)]
    dist.all_gather(outs, full(r).to(dev))
    check("all_gather", outs, [full(i) for i in range(w)])
    out = torch.empty(3 * w, device=dev)
    dist.all_gather_into_tensor(out, full(r).to(dev))
    check("all_gather_into_tensor", out, torch.cat([full(i) for i in range(w)]))

    out = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(out, (torch.arange(2.0 * w) + r).to(dev))
    base = torch.arange(2.0 * w) * w + sum(range(w))
    check("reduce_scatter_tensor", out, base[2 * r:2 * r + 2])
    # NCCL takes the tensors of these two as flat memory, of any shapes
    # whose sizes agree (accelerate gathers (1, n) tensors into a flat one).
    out = torch.empty(3 * w, device=dev)
    dist.all_gather_into_tensor(out, full(r).to(dev)[None])
    check("all_gather_into_tensor (1, n) into flat", out, torch.cat([full(i) for i in range(w)]))
    out = torch.empty(1, 2, device=dev)
    dist.reduce_scatter_tensor(out, (torch.arange(2.0 * w) + r).to(dev))
    check("reduce_scatter_tensor flat into (1, n)", out, base[None, 2 * r:2 * r + 2])
    out = torch.empty(3, device=dev)
    dist.reduce_scatter(out, [full(10 * i + r).to(dev) for i in range(w)])
    check("reduce_scatter", out, full(sum(10 * r + i for i in range(w))))

    t = full(r + 1).to(dev)
    dist.reduce(t, dst=0)
    if r == 0:
        check("reduce", t, full(sum(range(1, w + 1))))
    else:
        passed.append("reduce")

    # NCCL's PREMUL_SUM: each rank's input times the factor (a float, or a
    # one-element tensor), then the sum; inputs not written stay as given.
    for factor in (0.5, torch.tensor([0.25], device=dev)):
        t = full(r + 1).to(dev)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        check(f"all_reduce PREMUL_SUM {type(factor).__name__}", t,
              full(float(factor) * sum(range(1, w + 1))))
    given = (torch.arange(2.0 * w) + r).to(dev)
    out = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(out, given, op=dist._make_nccl_premul_sum(2.0))
    check("reduce_scatter_tensor PREMUL_SUM", [out, given],
          [2 * base[2 * r:2 * r + 2], torch.arange(2.0 * w) + r])
    t = full(r + 1).to(dev)
    dist.reduce(t, dst=0, op=dist._make_nccl_premul_sum(3.0))
    check("reduce PREMUL_SUM", t, full(3 * sum(range(1, w + 1))) if r == 0 else full(r + 1))

    gathered = [torch.empty(3, device=dev) for _ in range(w)] if r == 0 else None
    dist.gather(full(r).to(dev), gathered, dst=0)
    if r == 0:
        check("gather", gathered, [full(i) for i in range(w)])
    else:
        passed.append("gather")
    out = torch.empty(3, device=dev)
    dist.scatter(out, [full(7 * i).to(dev) for i in range(w)] if r == 0 else None, src=0)
    check("scatter", out, full(7 * r))

    out = torch.empty(2 * w, device=dev)
    dist.all_to_all_single(out, (torch.arange(2.0 * w) + 100 * r).to(dev))
    check("all_to_all_single", out,
          torch.cat([torch.arange(2.0 * r, 2.0 * r + 2) + 100 * i for i in range(w)]))
    outs = [torch.empty(3, device=dev) for _ in range(w)]
    dist.all_to_all(outs, [full(10 * r + i).to(dev) for i in range(w)])
    check("all_to_all", outs, [full(10 * i + r) for i in range(w)])

    dist.barrier()
    dist.barrier(device_ids=[0])
    passed.append("barrier")

    if r == 0:
        dist.send(torch.arange(5.0, device=dev), dst=1)
        reply = torch.empty(5, device=dev)
        dist.recv(reply, src=1)
        check("send/recv", reply, torch.arange(5.0) * 2)
    else:
        got = torch.empty(5, device=dev)
        dist.recv(got, src=0)
        dist.send(got * 2, dst=0)
        check("send/recv", got, torch.arange(5.0))

    # Asynchronous: gloo completes the work later, in the npu memory itself.
    t = full(r + 1).to(dev)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    check("all_reduce async", t, full(sum(range(1, w + 1))))

    objects = [None] * w
    dist.all_gather_object(objects, {"rank": r, "text": "x" * (r + 1)})
    assert objects == [{"rank": i, "text": "x" * (i + 1)} for i in range(w)], objects
    box = ["from rank %d" % r, r]
    dist.broadcast_object_list(box, src=1)
    assert box == ["from rank 1", 1], box
    passed.append("object collectives")

    # One string, one write: the ranks share stdout.
    print(f"rank {r} passed {len(passed)} {'|'.join(passed)} end")
    dist.destroy_process_group()
''')

EXPECTED = {
    *(f"all_reduce sum torch.{t}" for t in ("float32", "bfloat16", "float16", "int64")),
    *(f"all_reduce {op}" for op in ("MAX", "MIN", "PRODUCT", "AVG")),
    "all_reduce AVG torch.bfloat16", "broadcast", "all_gather", "all_gather_into_tensor",
    "reduce_scatter_tensor", "all_gather_into_tensor (1, n) into flat",
    "reduce_scatter_tensor flat into (1, n)", "reduce_scatter", "reduce", "gather", "scatter",
    "all_to_all_single", "all_to_all", "barrier", "send/recv", "all_reduce async",
    "object collectives", "all_reduce PREMUL_SUM float", "all_reduce PREMUL_SUM Tensor",
    "reduce_scatter_tensor PREMUL_SUM", "reduce PREMUL_SUM"}


def test_every_collective_on_two_ranks_sharing_one_npu(tmp_path):
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES)
    done = _ok(_torchrun([script, tmp_path / "rendezvous"], tmp_path,
                         env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "1"}))
    lines = re.findall(r"rank (\d) passed (\d+) (.*?) end", done.stdout)
    assert sorted(int(r) for r, _, _ in lines) == [0, 1], done.stdout
    for _, count, names in lines:
        assert set(names.split("|")) == EXPECTED and int(count) == len(EXPECTED)


PER_RANK_DEVICE = textwrap.dedent("""
    import os
    import torch, torch.distributed as dist
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    t = torch.full((2,), float(rank + 1), device="cuda")
    dist.all_reduce(t)
    print(f"rank {rank} count {torch.cuda.device_count()} on {t.device} sum {t[0].item():.0f} end")
    dist.destroy_process_group()
""")


def test_torchrun_gives_each_local_rank_a_virtual_npu(tmp_path):
    # An unedited GPU script under torchrun, with no setting: the node has
    # as many virtual NPUs as processes, and rank 1's set_device(1) works.
    script = tmp_path / "per_rank.py"
    script.write_text(PER_RANK_DEVICE)
    done = _ok(_torchrun([script], tmp_path, env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": None,
                                                  "TRANSFER_TO_NPU": "1"}))
    found = sorted(re.findall(r"rank (\d) count (\d) on (\S+) sum (\d+) end", done.stdout))
    assert found == [("0", "2", "npu:0", "3"), ("1", "2", "npu:1", "3")], done.stdout


# --- one batch, sharded between the ranks -----------------------------------------

def _sharded_training(model, x_shape, y_shape, steps, imports="", after=""):
    """A CUDA script in which each rank trains ``model`` on its share of one
    batch and rank 0 prints the loss of each step, averaged over the ranks:
    on one rank, the whole batch."""
    return textwrap.dedent("""
        import transfer_to_npu  # run this CUDA script on the NPU
        import os
        import torch, torch.nn as nn, torch.distributed as dist
        {imports}
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        model = {model}
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn({x_shape}, generator=g), torch.randn({y_shape}, generator=g)
        share = x.size(0) // world
        for step in range({steps}):
            xs = x[rank * share:(rank + 1) * share].cuda()
            ys = y[rank * share:(rank + 1) * share].cuda()
            loss = nn.functional.mse_loss(model(xs), ys)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total = loss.detach().clone()
            dist.all_reduce(total)
            if rank == 0:
                print(f"epoch {{step}} loss {{total.item() / world:.6f}}")
        {after}
        dist.destroy_process_group()
    """).format(imports=imports, model=model, x_shape=x_shape, y_shape=y_shape, steps=steps,
                after=after)


FSDP1 = _sharded_training(
    "FSDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)), device_id=local_rank)",
    "16, 8", "16, 4", 4,
    imports="from torch.distributed.fsdp import FullyShardedDataParallel as FSDP",
    after='assert next(model.parameters()).device.type == "npu"')


def test_fsdp_wrapper_class_two_ranks_equal_one_process(tmp_path):
    script = tmp_path / "fsdp1.py"
    script.write_text(FSDP1)
    two = _losses(_ok(_torchrun([script], tmp_path)).stdout)
    one = _losses(_ok(_torchrun([script], tmp_path, nproc=1)).stdout)
    assert len(two) == len(one) == 4
    assert one[-1] < one[0]
    for a, b in zip(two, one):
        assert abs(a - b) <= 1e-5


# --- exit ---------------------------------------------------------------------

# Ranks that end right after their collectives (gloo's threads still letting
# go of the tensors).  Each job forks its two ranks from one interpreter, and
# each rank exits as a script does, finalising the interpreter.
EXIT_AFTER_COLLECTIVES = textwrap.dedent("""
    import os, sys, tempfile
    import transfer_to_npu
    import torch, torch.distributed as dist

    def rank_main(rank, store):
        dist.init_process_group("nccl", init_method="file://" + store, rank=rank,
                                world_size=2)
        for _ in range(8):
            t = torch.ones(1024, device="cuda")
            storage = torch.UntypedStorage(4096, device="cuda")
            view = torch.tensor([], device="cuda").set_(storage).view(torch.float32)
            work = dist.all_reduce(t, async_op=True)
            dist.all_reduce(view, async_op=True)
            del t, storage, view, work

    jobs, tmp, failed = int(sys.argv[1]), tempfile.mkdtemp(), []
    for job in range(jobs):
        pids = []
        for rank in (0, 1):
            pid = os.fork()
            if pid == 0:
                rank_main(rank, os.path.join(tmp, f"store{job}"))
                sys.exit(0)
            pids.append(pid)
        statuses = [os.waitpid(pid, 0)[1] for pid in pids]
        failed += [status for status in statuses if status != 0]
    print(f"jobs {jobs} failed ranks {failed}")
""")


def test_ranks_exit_cleanly_right_after_async_collectives(tmp_path):
    # gloo's thread letting go of the last reference to a collective's
    # tensors while the interpreter finalises aborted such a rank in about
    # one run in two ("terminate called without an active exception").
    script = tmp_path / "exit_after_collectives.py"
    script.write_text(EXIT_AFTER_COLLECTIVES)
    done = _ok(run_python([script, "6"], cwd=tmp_path, env=ENV, timeout=240))
    assert "jobs 6 failed ranks []" in done.stdout, done.stdout + done.stderr


# --- SyncBatchNorm ----------------------------------------------------------------

SYNC_BN = _sharded_training(
    "DDP(nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.Conv2d(3, 4, 3), "
    "nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))).cuda(), "
    "device_ids=[local_rank])",
    "8, 3, 6, 6", "8, 2", 3,
    imports="from torch.nn.parallel import DistributedDataParallel as DDP",
    after=textwrap.dedent("""
        bn = model.module[1]
        assert isinstance(bn, nn.SyncBatchNorm) and bn.running_mean.device.type == "npu"
        if rank == 0:
            stats = torch.cat([bn.running_mean, bn.running_var]).cpu().tolist()
            print("running " + " ".join(f"{v:.6f}" for v in stats) + " end")
    """).strip())


def test_sync_batch_norm_two_ranks_equal_one_process(tmp_path):
    # convert_sync_batchnorm, as detection and segmentation scripts do: on two
    # ranks its statistics are gathered (CUDA-only ops in torch); on one it
    # is BatchNorm on the whole batch.
    script = tmp_path / "sync_bn.py"
    script.write_text(SYNC_BN)
    two = _ok(_torchrun([script], tmp_path)).stdout
    one = _ok(_torchrun([script], tmp_path, nproc=1)).stdout
    assert len(_losses(two)) == len(_losses(one)) == 3
    for a, b in zip(_losses(two), _losses(one)):
        assert abs(a - b) <= 1e-5
    running = [re.search(r"running (.*?) end", out).group(1).split() for out in (two, one)]
    assert len(running[0]) == 8
    for a, b in zip(*running):
        assert abs(float(a) - float(b)) <= 1e-5
