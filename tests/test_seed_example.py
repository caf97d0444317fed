"""The quick-start CNN of the seed, written for CUDA, trains on the virtual
NPU with the one-line import, and gives the losses the same script gives on
the cpu."""
import re

import pytest

from conftest import EXAMPLES, run_python

SCRIPT = EXAMPLES / "train_cnn.py"
LOSS = re.compile(r"^epoch (\d+) loss ([0-9.]+) outputs on (\S+)$", re.M)


def _cpu_version(source):
    """The same script as a cpu user would run it: no migration line, the
    device set to cpu.  Nothing else changes."""
    lines = [l for l in source.splitlines() if l.strip() != "import transfer_to_npu  "
             "# run this CUDA script on the NPU"]
    text = "\n".join(lines) + "\n"
    assert "import transfer_to_npu" not in text
    assert text.count("torch.device('cuda:0')") == 1
    return text.replace("torch.device('cuda:0')", "torch.device('cpu')")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    npu_dir = tmp_path_factory.mktemp("npu")
    cpu_dir = tmp_path_factory.mktemp("cpu")
    (cpu_dir / "train_cpu.py").write_text(_cpu_version(SCRIPT.read_text()))
    migrated = run_python([str(SCRIPT)], cwd=npu_dir, env={"TRANSFER_TO_NPU_BACKEND": "virtual"})
    plain = run_python(["train_cpu.py"], cwd=cpu_dir)
    assert migrated.returncode == 0, migrated.stderr
    assert plain.returncode == 0, plain.stderr
    return migrated, plain, npu_dir


def test_loss_goes_down_on_npu(runs):
    migrated, _, _ = runs
    rows = LOSS.findall(migrated.stdout)
    assert len(rows) == 10
    assert all(device == "npu:0" for _, _, device in rows)
    losses = [float(loss) for _, loss, _ in rows]
    assert losses[-1] < 0.5 * losses[0]


def test_same_losses_as_cpu(runs):
    migrated, plain, _ = runs
    npu_losses = [float(l) for _, l, _ in LOSS.findall(migrated.stdout)]
    cpu_losses = [float(l) for _, l, d in LOSS.findall(plain.stdout)]
    assert len(npu_losses) == len(cpu_losses) == 10
    assert all(d == "cpu" for _, _, d in LOSS.findall(plain.stdout))
    for a, b in zip(npu_losses, cpu_losses):
        assert abs(a - b) <= 1e-5


def test_checkpoint_written_with_npu_tensors(runs):
    migrated, _, npu_dir = runs
    ckpt = npu_dir / "checkpoint.pth.tar"
    assert ckpt.exists() and ckpt.stat().st_size > 10_000
    assert "parameters on npu:0" in migrated.stdout
    check = run_python(["-c", (
        "import sys, transfer_to_npu, torch\n"
        "class CNN: pass\n"  # the pickled 'arch' entry names __main__.CNN
        "ck = torch.load(sys.argv[1], weights_only=False)\n"
        "sd = ck['state_dict']\n"
        "assert ck['epoch'] == 10\n"
        "assert {str(t.device) for t in sd.values()} == {'npu:0'}, sd\n"
        "assert sd['net.0.weight'].shape == (16, 1, 3, 3)\n"
        "print(len(sd))\n"), str(ckpt)])
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == "8"
