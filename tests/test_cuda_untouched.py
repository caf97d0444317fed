"""A migrated run never touches the machine's own CUDA: with torch's CUDA
build and a GPU beside the NPU, a training script written for CUDA runs on
the NPU alone.  CUDA is initialised by torch.cuda._lazy_init (which calls
torch._C._cuda_init): the script records every call of either, made before
the migration (without a GPU they would fail, with one they would make a
CUDA context), and asks the original torch.cuda.is_initialized() at the
end."""
import json
import textwrap

from conftest import run_python

SCRIPT = textwrap.dedent("""
    import io, json, tempfile, warnings
    warnings.simplefilter("ignore")
    import torch

    calls = []

    def recorded(name, fn):
        def call(*args, **kwargs):
            calls.append(name)
            return fn(*args, **kwargs)
        return call

    torch.cuda._lazy_init = recorded("torch.cuda._lazy_init", torch.cuda._lazy_init)
    if hasattr(torch._C, "_cuda_init"):
        torch._C._cuda_init = recorded("torch._C._cuda_init", torch._C._cuda_init)
    cuda_is_initialized = torch.cuda.is_initialized

    import transfer_to_npu
    import torch.distributed as dist
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint

    torch.cuda.set_device(0)
    device = torch.device("cuda", torch.cuda.current_device())
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    facts = [torch.cuda.is_available(), torch.cuda.device_count(), torch.version.cuda,
             torch.cuda.get_device_capability(), torch.cuda.get_device_properties(0).name,
             torch.cuda.is_bf16_supported()]
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cuda")
    generator = torch.Generator(device="cuda")
    generator.manual_seed(1)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(16, 8)),
                                       batch_size=4, pin_memory=True)
    stream = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for (x,) in data:
        x = x.to(device, non_blocking=True)
        noise = torch.randn(x.shape, device="cuda", generator=generator)
        start.record()
        with torch.cuda.stream(stream), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = checkpoint(model, x + noise, use_reentrant=False).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        end.record()
        torch.cuda.synchronize()
    facts += [start.elapsed_time(end) >= 0, torch.cuda.memory_allocated() > 0,
              torch.cuda.max_memory_allocated() > 0, len(torch.cuda.get_rng_state()) > 0]
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    model.load_state_dict(torch.load(buffer, map_location="cuda"))
    torch.cuda.empty_cache()
    dist.init_process_group("nccl", init_method="file://" + tempfile.mktemp(), rank=0,
                            world_size=1)
    total = torch.ones(2, device="cuda")
    dist.all_reduce(total)
    dist.destroy_process_group()
    transfer_to_npu.disable()
    print(json.dumps({"calls": calls, "cuda initialized": cuda_is_initialized(),
                      "device": str(total.device), "backend": transfer_to_npu.backend,
                      "facts": facts}))
""")


def test_a_migrated_run_never_initialises_cuda(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    proc = run_python([str(script)], cwd=tmp_path, env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["device"] == "npu:0" and out["backend"] == "virtual"
    assert out["facts"] == [True, 1, "12.1", [8, 0], out["facts"][4], True, True, True, True,
                            True]
    assert out["calls"] == [] and out["cuda initialized"] is False
