"""TRANSFER_TO_NPU=1 migrates an unedited script and every process it starts
(through the .pth file installed with the package)."""
import textwrap

import pytest

from conftest import run_python

UNEDITED = textwrap.dedent("""
    import sys
    import torch
    import torch.multiprocessing as mp
    from torch.utils.data import DataLoader, TensorDataset

    def worker(rank, q):
        q.put(str(torch.zeros(1, device="cuda").device))

    class Probe(torch.utils.data.Dataset):
        def __len__(self):
            return 2
        def __getitem__(self, i):
            return torch.tensor([float(torch.cuda.is_available())])

    if __name__ == "__main__":
        print("main", torch.ones(1).cuda().device)
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        mp.spawn(worker, args=(q,), nprocs=1, join=True)
        print("spawned", q.get())
        loader = DataLoader(Probe(), batch_size=1, num_workers=1)
        print("worker", [b.item() for b in loader])
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(UNEDITED)
    return path


def test_unedited_script_and_its_processes(script):
    proc = run_python([str(script)], env={"TRANSFER_TO_NPU": "1"}, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["main npu:0", "spawned npu:0", "worker [1.0, 1.0]"]


def test_off_without_the_variable(script):
    proc = run_python(["-c", "import torch, sys; print('transfer_to_npu' in sys.modules)"])
    assert proc.returncode == 0 and proc.stdout.strip() == "False"


LOOKED_UP_FIRST = {
    # transformers and pytest plugins look torch up before importing it;
    # each look-up makes a spec of its own.
    "find_spec": "import importlib.util\nimportlib.util.find_spec('torch')\n",
    "transformers": "import transformers\n",
}


@pytest.mark.parametrize("first", sorted(LOOKED_UP_FIRST))
def test_torch_looked_up_before_it_is_imported(first):
    code = LOOKED_UP_FIRST[first] + textwrap.dedent("""
        import sys
        import torch
        print(torch.zeros(1, device="cuda").device,
              any(type(f).__name__ == "_TorchImportFinder" for f in sys.meta_path))
    """)
    if first == "transformers":
        pytest.importorskip("transformers")
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU": "1"}, timeout=180)
    assert proc.returncode == 0, proc.stderr
    # Migrated, and the finder gone once torch is imported.
    assert proc.stdout.split() == ["npu:0", "False"]
