"""torch.distributed migrated, one rule at a time, in a one-process group on
the virtual NPU's hccl backend: 'nccl' becomes 'hccl' (and nothing that
merely contains it), CUDA device arguments become NPUs."""
import inspect
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.nn.parallel import DistributedDataParallel as DDP

import transfer_to_npu
from conftest import calls, npu, run_python


@pytest.fixture
def group():
    """Whatever a test initialises is torn down after it."""
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _init(backend, tmp_path, name="init", **kwargs):
    init = tmp_path / name
    dist.init_process_group(backend=backend, init_method=f"file://{init}", world_size=1, rank=0,
                            **kwargs)
    return init


# --- the hccl backend ---------------------------------------------------------

def test_hccl_is_registered_for_the_npu():
    assert "hccl" in dist.Backend.backend_list
    assert dist.Backend.backend_capability["hccl"] == ["npu"]
    assert dist.Backend.default_device_backend_map["npu"] == "hccl"
    assert dist.is_backend_available("hccl")


def test_hccl_group_runs_npu_collectives(tmp_path, group):
    _init("hccl", tmp_path)
    assert dist.get_backend() == "hccl"
    assert dist.group.WORLD._device_types == [torch.device("npu")]
    t = torch.arange(4.0, device="npu")
    dist.all_reduce(t)
    assert t.device == npu(0) and t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_default_backend_on_the_npu_is_hccl(tmp_path, group):
    # init_process_group() with no backend picks the accelerator's: the npu's.
    dist.init_process_group(init_method=f"file://{tmp_path / 'init'}", world_size=1, rank=0)
    assert dist.get_backend_config() == "npu:hccl"
    t = torch.ones(2, device="npu")
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0]


def test_cpu_tensors_need_a_cpu_backend(tmp_path, group):
    # As with NCCL: 'hccl' alone serves npu tensors; 'cpu:gloo,cuda:nccl'
    # serves both.
    _init("nccl", tmp_path)
    with pytest.raises(RuntimeError, match="device type cpu"):
        dist.all_reduce(torch.ones(2))


def test_group_without_npu_backend_names_the_fix(tmp_path, group):
    _init("cpu:gloo", tmp_path)
    with pytest.raises(RuntimeError, match=r"no backend for npu tensors.*'cpu:gloo,npu:hccl'"):
        dist.all_reduce(torch.ones(2, device="npu"))


# --- backend strings ----------------------------------------------------------

@pytest.mark.parametrize("backend", ["nccl", "NCCL", dist.Backend.NCCL])
def test_nccl_becomes_hccl(backend, tmp_path, group):
    before = calls("torch.distributed.init_process_group")
    _init(backend, tmp_path)
    assert dist.get_backend() == "hccl"
    assert calls("torch.distributed.init_process_group") == before + 1


def test_nccl_positional(tmp_path, group):
    dist.init_process_group("nccl", f"file://{tmp_path / 'x'}", world_size=1, rank=0)
    assert dist.get_backend() == "hccl"


def test_mixed_backend_string(tmp_path, group):
    _init("cpu:gloo,cuda:nccl", tmp_path)
    assert dist.get_backend_config() == "cpu:gloo,npu:hccl"
    # Both halves work: cpu tensors on gloo, npu tensors on hccl.
    c, n = torch.ones(2), torch.ones(2, device="cuda")
    dist.all_reduce(c)
    dist.all_reduce(n)
    assert c.tolist() == n.tolist() == [1.0, 1.0] and n.device == npu(0)


@pytest.mark.parametrize("backend", ["nccl2", "cuda_nccl", "NCCL_x"])
def test_names_that_only_contain_nccl_are_left_alone(backend, tmp_path, monkeypatch):
    # torch is handed them as given (lower-cased), and makes the group of
    # them: seen there, and the group not made (torch refuses such a name
    # before 2.14; from 2.14 on it makes a group for the cpu and the
    # accelerator, CUDA on its CUDA build, which no test may touch).
    seen = []

    def make_group(size, rank, ranks, backend, *args, **kwargs):
        seen.append(backend)
        raise LookupError

    monkeypatch.setattr(c10d, "_new_process_group_helper", make_group)
    with pytest.raises(LookupError):
        _init(backend, tmp_path)
    assert seen == [backend.lower()] and not dist.is_initialized()


def test_init_method_path_with_nccl_is_left_alone(tmp_path, group):
    before = calls("torch.distributed.init_process_group")
    init = _init("gloo", tmp_path, name="nccl_cuda_init")
    assert dist.get_backend() == "gloo"
    assert init.name == "nccl_cuda_init"
    assert calls("torch.distributed.init_process_group") == before


@pytest.mark.parametrize("url", ["tcp://nccl-cuda-0.cluster:23456",
                                 "tcp://cuda:23456", "file:///shared/nccl/cuda:0",
                                 "env://"])
def test_init_method_url_is_left_alone(url, monkeypatch):
    seen = []

    def rendezvous(url, *args, **kwargs):
        seen.append(url)
        raise LookupError

    monkeypatch.setattr(c10d, "rendezvous", rendezvous)
    with pytest.raises(LookupError):
        dist.init_process_group("nccl", url, rank=0, world_size=1)
    with pytest.raises(LookupError):
        dist.init_process_group(backend="nccl", init_method=url, rank=0, world_size=1)
    assert seen == [url, url]


def test_device_id_becomes_npu(tmp_path, group):
    _init("nccl", tmp_path, device_id=torch.device("cuda", 0))
    assert dist.group.WORLD.bound_device_id == npu(0)
    t = torch.ones(2, device="cuda")
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0]


def test_is_nccl_available_answers_for_hccl(tmp_path, group):
    backend = "nccl" if dist.is_nccl_available() else "gloo"
    assert backend == "nccl"
    _init(backend, tmp_path)
    assert dist.get_backend() == "hccl"


def test_torch_itself_still_sees_no_nccl(tmp_path, group):
    # torch's c10d asks its own question: a yes would send it to NCCL's
    # classes, which a torch without them (the CPU build) does not have.
    # The profiler's process-group record is one such place.
    assert c10d.is_nccl_available() is hasattr(torch._C._distributed_c10d, "ProcessGroupNCCL")
    _init("nccl", tmp_path)
    configs = c10d._get_all_pg_configs()
    assert [c["pg_name"] for c in configs] == [dist.group.WORLD.group_name]


def test_same_function_under_both_names():
    assert dist.init_process_group is c10d.init_process_group
    assert dist.init_process_group.__npu_source__ == "torch.distributed.init_process_group"
    assert dist.new_group is c10d.new_group


# --- new groups ---------------------------------------------------------------

def test_new_group_backend(tmp_path, group):
    _init("nccl", tmp_path)
    before = calls("torch.distributed.new_group")
    assert dist.get_backend(dist.new_group(backend="nccl")) == "hccl"
    assert dist.get_backend(dist.new_group([0], None, "nccl")) == "hccl"
    mixed = dist.new_group(backend="cpu:gloo,cuda:nccl")
    assert dist.get_backend_config(mixed) == "cpu:gloo,npu:hccl"
    assert calls("torch.distributed.new_group") == before + 3
    t = torch.ones(2, device="npu")
    dist.all_reduce(t, group=mixed)
    assert t.tolist() == [1.0, 1.0]


def test_new_group_device_id(tmp_path, group):
    _init("nccl", tmp_path)
    g = dist.new_group(backend="nccl", device_id=torch.device("cuda:0"))
    assert g.bound_device_id == npu(0)


def test_new_subgroups_backend(tmp_path, group):
    _init("nccl", tmp_path)
    current, _ = dist.new_subgroups(group_size=1, backend="nccl")
    assert dist.get_backend(current) == "hccl"
    current, _ = dist.new_subgroups_by_enumeration([[0]], backend="nccl")
    assert dist.get_backend(current) == "hccl"


# --- devices ------------------------------------------------------------------

@pytest.mark.parametrize("call", [lambda: init_device_mesh("cuda", (1,)),
                                  lambda: init_device_mesh(device_type="cuda", mesh_shape=(1,)),
                                  lambda: DeviceMesh("cuda", [0]),
                                  lambda: DeviceMesh(device_type="cuda", mesh=[0])])
def test_device_mesh_on_npu(call, tmp_path, group):
    _init("nccl", tmp_path)
    mesh = call()
    assert mesh.device_type == "npu"
    assert dist.get_backend(mesh.get_group()) == "hccl"


def test_cpu_device_mesh_stays_cpu(tmp_path, group):
    _init("cpu:gloo,cuda:nccl", tmp_path)
    assert init_device_mesh("cpu", (1,)).device_type == "cpu"


@pytest.mark.parametrize("device_ids, output_device", [
    ([0], 0), (["cuda:0"], "cuda:0"), ([torch.device("cuda", 0)], torch.device("cuda:0")),
    (None, None), ([0], "cuda")])
def test_ddp_device_arguments(device_ids, output_device, tmp_path, group):
    _init("nccl", tmp_path)
    model = nn.Linear(4, 2).cuda()
    ddp = DDP(model, device_ids=device_ids, output_device=output_device)
    out = ddp(torch.randn(3, 4, device="cuda"))
    out.sum().backward()
    assert out.device == npu(0)
    assert model.weight.grad.device == npu(0)
    assert ddp.device_ids in ([0], None)


def test_ddp_output_device_is_counted(tmp_path, group):
    _init("nccl", tmp_path)
    before = calls("torch.nn.parallel.DistributedDataParallel")
    DDP(nn.Linear(4, 2).cuda(), device_ids=[0], output_device="cuda:0")
    DDP(nn.Linear(4, 2).cuda(), device_ids=[0], output_device=0)  # an index: nothing to do
    assert calls("torch.nn.parallel.DistributedDataParallel") == before + 1


def test_ddp_keeps_its_identity(tmp_path, group):
    _init("nccl", tmp_path)

    class MyDDP(DDP):
        def __init__(self, module):
            super().__init__(module, device_ids=[0], output_device="cuda:0")

    ddp = MyDDP(nn.Linear(4, 2).cuda())
    assert isinstance(ddp, DDP) and type(ddp) is MyDDP
    plain = DDP(nn.Linear(4, 2).cuda())
    assert type(plain) is DDP is torch.nn.parallel.DistributedDataParallel
    assert list(inspect.signature(DDP).parameters)[:3] == [
        "module", "device_ids", "output_device"]


@pytest.mark.parametrize("asked", [{"find_unused_parameters": True}, {"static_graph": True},
                                   "positional"])
def test_ddp_asked_to_find_unused_parameters_trains(asked, tmp_path, group):
    # Hugging Face's Trainer asks for it by default; torch's reducer would
    # need pinned memory for it, which the virtual NPU cannot give, so DDP
    # is made without it, and says so.
    _init("nccl", tmp_path)
    torch.manual_seed(0)
    model = nn.Linear(4, 2).cuda()
    reference = nn.Linear(4, 2)
    reference.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    with pytest.warns(RuntimeWarning, match="virtual NPU.*pinned memory"):
        if asked == "positional":  # module, device_ids, output_device, dim, broadcast_buffers,
            # init_sync, process_group, bucket_cap_mb, find_unused_parameters
            ddp = DDP(model, None, None, 0, True, True, None, None, True)
        else:
            ddp = DDP(model, **asked)
    x = torch.randn(3, 4)
    for _ in range(2):
        ddp(x.cuda()).pow(2).sum().backward()
    reference(x).pow(2).sum().backward()
    assert torch.allclose(model.weight.grad.cpu(), 2 * reference.weight.grad)


def test_ddp_finding_unused_parameters_on_the_cpu_is_left_alone(tmp_path, group):
    _init("gloo", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ddp = DDP(nn.Linear(4, 2), find_unused_parameters=True)
    assert ddp.find_unused_parameters


def test_ddp_bad_output_device_names_the_argument(tmp_path, group):
    _init("nccl", tmp_path)
    with pytest.raises(transfer_to_npu.InvalidDeviceError,
                       match=r"'cuda:x'.*'output_device'.*DistributedDataParallel"):
        DDP(nn.Linear(4, 2).cuda(), device_ids=[0], output_device="cuda:x")


def test_rank_device_beyond_the_virtual_npus_names_the_setting():
    # torchrun --nproc-per-node 2 with one virtual NPU: rank 1's
    # set_device(LOCAL_RANK) says what to set.
    done = run_python(["-c", "import transfer_to_npu, torch; torch.cuda.set_device(1)"],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual",
                           "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "1"}, timeout=120)
    assert done.returncode == 1
    assert "npu:1" in done.stderr and "TRANSFER_TO_NPU_VIRTUAL_DEVICES" in done.stderr


def test_barrier_device_ids(tmp_path, group):
    _init("nccl", tmp_path)
    dist.barrier(device_ids=[0])
    dist.barrier(device_ids=[torch.cuda.current_device()])


def test_fsdp_device_id(tmp_path):
    # FSDP takes an index, a string or a device through the migrated
    # torch.device.  A fresh interpreter imports FSDP after the migration,
    # as a script does.
    code = (
        "import transfer_to_npu, torch, torch.distributed as dist, torch.nn as nn\n"
        f"dist.init_process_group('nccl', init_method='file://{tmp_path / 'init'}', rank=0,"
        " world_size=1)\n"
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
        "for device_id in (torch.cuda.current_device(), torch.device('cuda', 0), 'cuda:0'):\n"
        "    model = FSDP(nn.Linear(4, 2).cuda(), device_id=device_id)\n"
        "    print(model.compute_device, next(model.parameters()).device)\n"
        "dist.destroy_process_group()\n")
    done = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["npu:0"] * 6


def test_destroying_a_group_after_npu_collectives_stops_its_threads(tmp_path):
    # What the npu collectives keep until they are seen complete holds no
    # process group: the destroyed group's gloo threads stop with it, at
    # destroy_process_group() with the interpreter lock let go, and not
    # later, wherever a collection frees a group that a kept collective
    # held (which could hang waiting for a gloo thread that waits for the
    # lock).
    code = (
        "import gc, os, torch, torch.distributed as dist, transfer_to_npu\n"
        "threads = lambda: len(os.listdir('/proc/self/task'))\n"
        "x = torch.ones(2, device='cuda')\n"
        f"dist.init_process_group('nccl', init_method='file://{tmp_path}/init', world_size=1,"
        " rank=0)\n"
        "dist.all_reduce(x); dist.broadcast(x, 0)\n"
        "during = threads()\n"
        "dist.destroy_process_group(); gc.collect()\n"
        "print(during - threads(), x.tolist())\n")
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_BACKEND": "virtual"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    stopped, values = proc.stdout.split(maxsplit=1)
    assert int(stopped) >= 2 and values.strip() == "[1.0, 1.0]"
