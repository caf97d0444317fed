"""A CUDA training script that uses mixed precision, a pinned-memory
DataLoader with workers, a fused optimizer, events, memory queries and a
checkpoint runs, migrated, on the virtual NPU."""
import textwrap

from conftest import run_python

SCRIPT = textwrap.dedent("""
    import sys
    import transfer_to_npu
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    torch.cuda.manual_seed_all(0)
    device = torch.device("cuda")
    x = torch.randn(512, 20)
    y = (x[:, :10].sum(1) > x[:, 10:].sum(1)).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True, num_workers=2,
                        pin_memory=True)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(64, 2)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.reset_peak_memory_stats()
    start.record()
    for epoch in range(6):
        for xb, yb in loader:
            assert xb.is_pinned()
            xb, yb = xb.cuda(non_blocking=True), yb.cuda(non_blocking=True)
            with torch.autocast("cuda", dtype=torch.float16):
                logits = model(xb)
                assert logits.dtype == torch.float16
                loss = nn.functional.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    end.record()
    torch.cuda.synchronize()
    model.eval()
    with torch.no_grad():
        accuracy = (model(x.cuda()).argmax(1).cpu() == y).float().mean().item()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "scaler": scaler.state_dict()}, sys.argv[1])
    ckpt = torch.load(sys.argv[1], map_location="cuda:0")
    again = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 2))
    again.load_state_dict(ckpt["model"])
    again.cuda().eval()
    with torch.no_grad():
        same = torch.equal(again(x.cuda()).cpu(), model(x.cuda()).cpu())
    print(f"device={next(model.parameters()).device} accuracy={accuracy:.2f} "
          f"timed={start.elapsed_time(end) > 0} peak={torch.cuda.max_memory_allocated() > 0} "
          f"reloaded={same} scale={scaler.get_scale() > 0}")
""")


def test_cuda_training_script_runs_on_the_virtual_npu(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    proc = run_python([str(script), str(tmp_path / "ckpt.pt")],
                      env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    assert proc.returncode == 0, proc.stderr
    fields = dict(item.split("=") for item in proc.stdout.split())
    assert fields["device"] == "npu:0"
    assert float(fields["accuracy"]) > 0.85
    assert fields["timed"] == fields["peak"] == fields["reloaded"] == fields["scale"] == "True"
