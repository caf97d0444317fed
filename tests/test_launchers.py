"""Launchers that start a process per device without telling each process
how many devices the node has (torchrun's LOCAL_WORLD_SIZE): on the virtual
NPU the node gets one virtual NPU per process the launcher starts, or an
error that names TRANSFER_TO_NPU_VIRTUAL_DEVICES."""
import re
import textwrap

import pytest

from conftest import run_python

# Nothing inherited from a launcher the tests themselves run under.
CLEAN = {"TRANSFER_TO_NPU_BACKEND": "virtual", "TRANSFER_TO_NPU_VIRTUAL_DEVICES": None,
         "LOCAL_WORLD_SIZE": None, "LOCAL_RANK": None, "RANK": None, "WORLD_SIZE": None,
         "OMP_NUM_THREADS": "1", "PYTHONPATH": None}

# A script's start: a model that records the device it trains on.
LIGHTNING_MODEL = textwrap.dedent("""
    import sys
    import transfer_to_npu
    import torch
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, index):
            x, y = batch
            self.seen = str(x.device)
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)
""")

LIGHTNING = LIGHTNING_MODEL + textwrap.dedent("""
    if __name__ == "__main__":
        torch.manual_seed(0)
        data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
        trainer = L.Trainer(accelerator="gpu", devices=2, strategy="ddp", max_steps=3,
                            logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False)
        model = Model()
        trainer.fit(model, DataLoader(data, batch_size=4))
        weight = model.layer.weight.detach().cpu()
        # One write a line: the ranks' lines do not mix.
        sys.stdout.write(f"rank {trainer.global_rank} of {trainer.world_size} on {model.seen} "
                         f"npus {torch.cuda.device_count()} weight {weight.sum().item():.6f}\\n")
""")
RANK = re.compile(r"rank (\d) of (\d) on (\S+) npus (\d) weight (\S+)")


def test_lightning_devices_2_gets_a_virtual_npu_per_process(tmp_path):
    pytest.importorskip("lightning")
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING)
    proc = run_python([str(script)], cwd=tmp_path, env=CLEAN, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = {int(r): (int(w), d, int(n), x) for r, w, d, n, x in RANK.findall(proc.stdout)}
    assert sorted(ranks) == [0, 1], proc.stdout
    assert ranks[0][:3] == (2, "npu:0", 2) and ranks[1][:3] == (2, "npu:1", 2)
    assert ranks[0][3] == ranks[1][3]  # DDP kept the replicas alike


def test_lightning_refusal_names_the_variable(tmp_path):
    pytest.importorskip("lightning")
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING)
    proc = run_python([str(script)], cwd=tmp_path,
                      env={**CLEAN, "TRANSFER_TO_NPU_VIRTUAL_DEVICES": "1"}, timeout=300)
    assert proc.returncode != 0
    assert "TRANSFER_TO_NPU_VIRTUAL_DEVICES=1" in proc.stderr


ACCELERATE = textwrap.dedent("""
    import sys
    import transfer_to_npu
    import torch
    from accelerate import Accelerator, notebook_launcher

    def train():
        accelerator = Accelerator()
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer = accelerator.prepare(model, optimizer)
        x = torch.randn(8, 4, device=accelerator.device)
        accelerator.backward(model(x).pow(2).mean())
        optimizer.step()
        sys.stdout.write(f"rank {accelerator.process_index} of {accelerator.num_processes} on "
                         f"{accelerator.device} npus {torch.cuda.device_count()}\\n")
        sys.stdout.flush()

    if __name__ == "__main__":
        notebook_launcher(train, num_processes=2)
""")


def test_accelerate_notebook_launcher_forks_a_worker_per_npu(tmp_path):
    """Its workers are forked, then told LOCAL_WORLD_SIZE: the count is
    read again after the fork."""
    pytest.importorskip("accelerate")
    script = tmp_path / "train.py"
    script.write_text(ACCELERATE)
    proc = run_python([str(script)], cwd=tmp_path, env=CLEAN, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sorted(re.findall(r"rank \d of 2 on npu:\d npus 2", proc.stdout)) == [
        "rank 0 of 2 on npu:0 npus 2", "rank 1 of 2 on npu:1 npus 2"]


LIGHTNING_AGAIN = LIGHTNING_MODEL + textwrap.dedent("""
    def fit(**kwargs):
        trainer = L.Trainer(accelerator="gpu", max_steps=2, logger=False,
                            enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False, **kwargs)
        model = Model()
        trainer.fit(model, DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)),
                                      batch_size=4))
        return trainer, model

    if __name__ == "__main__":
        trainer, _ = fit(devices=2, strategy="ddp_spawn")
        print("spawned", trainer.num_devices, "then", torch.cuda.device_count())
        trainer, model = fit(devices=[1])
        # The job's npu:1 given back: the process is on the node's npu:0.
        print("second npu", model.seen, "then", torch.cuda.device_count(),
              torch.cuda.current_device(), len(torch.cuda.get_rng_state_all()))
        # devices="auto": the one npu the node has, not the two asked for before
        # (two would relaunch this script as DDP's rank 0).
        trainer, model = fit()
        print("later", trainer.num_devices, type(trainer.strategy).__name__, model.seen)
""")


def test_lightning_devices_are_provided_for_the_job_that_asks(tmp_path):
    """The virtual NPUs provided for a Trainer's devices=N are the node's
    while its processes run, not for the rest of the process."""
    pytest.importorskip("lightning")
    script = tmp_path / "train.py"
    script.write_text(LIGHTNING_AGAIN)
    proc = run_python([str(script)], cwd=tmp_path, env=CLEAN, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # What the script says: the spawned processes' gloo (torch 2.10) prints
    # lines of its own, piece by piece, which can run into the script's.
    said = re.findall(r"spawned \d+ then \d+|second npu \S+ then \d+ \d+ \d+|later \d+ \w+ \S+",
                      proc.stdout)
    assert said == ["spawned 2 then 1", "second npu npu:1 then 1 0 1",
                    "later 1 SingleDeviceStrategy npu:0"]
