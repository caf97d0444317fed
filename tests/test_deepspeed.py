"""DeepSpeed, as a CUDA script uses it, takes its own Ascend path on the
virtual NPU (its npu accelerator and hccl, chosen as torch_npu imports)
and trains with ZeRO, in one process and on two ranks (under torchrun and
under its own launcher)."""
import importlib.util
import socket
import textwrap

import pytest

from conftest import run_python, run_torchrun

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                reason="deepspeed is not installed")

SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    import deepspeed
    from deepspeed.accelerator import get_accelerator

    accelerator = get_accelerator()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    # ZeRO's stage: the first argument that is one (DeepSpeed's launcher
    # adds --local_rank=N).
    stage = next((int(a) for a in sys.argv[1:] if a.isdigit()), 3)
    config = {"train_batch_size": 8, "steps_per_print": 1000, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}},
              "zero_optimization": {"stage": stage}}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                           config=config)
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).cuda()
    y = (x[:, :4] > 0).float()
    losses = []
    for step in range(12):
        out = engine(x.to(torch.bfloat16))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(out.float(), y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    # A file per rank: lines of ranks sharing a pipe may interleave with
    # DeepSpeed's logs.
    with open(f"ran-{os.environ.get('RANK', '0')}", "w") as f:
        f.write(f"{accelerator.device_name()} {accelerator.communication_backend_name()} "
                f"{out.device} {losses[0]} {losses[-1]}")
""")

# A CANN home given to the test process is not the virtual NPU's.
ENV = {"TRANSFER_TO_NPU_BACKEND": "virtual", "ASCEND_HOME_PATH": None,
       "DS_ACCELERATOR": None, "OMP_NUM_THREADS": "1"}


def _ran(directory):
    return [path.read_text().split() for path in sorted(directory.glob("ran-*"))]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_zero_2_in_one_process(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    proc = run_python(["-m", "transfer_to_npu", str(script), "2"], cwd=tmp_path,
                      env={**ENV, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": _free_port()})
    assert proc.returncode == 0, proc.stderr[-3000:]
    [(device_name, backend, device, first, last)] = _ran(tmp_path)
    assert (device_name, backend, device) == ("npu", "hccl", "npu:0")
    assert float(last) < 0.5 * float(first)


@pytest.mark.parametrize("launcher", ["torchrun", "deepspeed"])
def test_zero_3_on_two_ranks(tmp_path, launcher):
    """Under torchrun, and under DeepSpeed's own launcher (`deepspeed
    --num_gpus 2`), which tells its workers how many run on the node by
    LOCAL_SIZE and sets ASCEND_RT_VISIBLE_DEVICES for them."""
    env = {**ENV, "TRANSFER_TO_NPU": "1"}
    if launcher == "torchrun":
        proc = run_torchrun(tmp_path, SCRIPT, env=env, timeout=300)
    else:
        script = tmp_path / "train.py"
        script.write_text(SCRIPT)
        proc = run_python(["-m", "deepspeed.launcher.runner", "--num_gpus", "2",
                           "--master_port", _free_port(), str(script), "3"], cwd=tmp_path,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = sorted(_ran(tmp_path), key=lambda r: r[2])
    assert [r[:3] for r in ran] == [["npu", "hccl", "npu:0"], ["npu", "hccl", "npu:1"]]
    assert ran[0][3:] == ran[1][3:]  # one model, sharded
    assert float(ran[0][4]) < 0.5 * float(ran[0][3])
