"""Memory figures of the virtual NPU come from its live tensors."""
import gc

import torch

from conftest import run_python

MiB = 1024 * 1024


def _settle():
    gc.collect()


def test_allocated_and_reserved_follow_live_tensors():
    _settle()
    base = torch.npu.memory_allocated()
    assert torch.npu.memory_reserved() == base
    x = torch.empty(MiB, device="npu")                       # 4 MiB
    y = torch.ones(256, 256, dtype=torch.float16, device="npu")  # 128 KiB
    assert torch.npu.memory_allocated() == base + 4 * MiB + 128 * 1024
    assert torch.npu.memory_reserved() == torch.npu.memory_allocated()
    v = x[10:20]  # a view: no new memory
    assert torch.npu.memory_allocated() == base + 4 * MiB + 128 * 1024
    del x, v
    assert torch.npu.memory_allocated() == base + 128 * 1024
    del y
    assert torch.npu.memory_allocated() == base


def test_peak_and_its_reset():
    _settle()
    torch.npu.reset_peak_memory_stats()
    base = torch.npu.memory_allocated()
    assert torch.npu.max_memory_allocated() == base
    x = torch.empty(2 * MiB, device="npu")
    del x
    assert torch.npu.max_memory_allocated() == base + 8 * MiB
    assert torch.npu.max_memory_reserved() == base + 8 * MiB
    assert torch.npu.memory_allocated() == base
    torch.npu.reset_peak_memory_stats()
    assert torch.npu.max_memory_allocated() == base


def test_memory_stats():
    _settle()
    torch.npu.reset_peak_memory_stats()
    before = torch.npu.memory_stats()
    x = torch.empty(MiB, device="npu")
    after = torch.npu.memory_stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + 4 * MiB
    assert after["allocation.all.current"] == before["allocation.all.current"] + 1
    assert after["allocation.all.allocated"] == before["allocation.all.allocated"] + 1
    assert (after["allocated_bytes.all.allocated"]
            == before["allocated_bytes.all.allocated"] + 4 * MiB)
    assert after["reserved_bytes.all.current"] == after["allocated_bytes.all.current"]
    assert after["allocated_bytes.all.peak"] >= after["allocated_bytes.all.current"]
    del x
    freed = torch.npu.memory_stats()
    assert freed["allocated_bytes.all.freed"] == after["allocated_bytes.all.freed"] + 4 * MiB
    assert freed["num_ooms"] == 0 and freed["num_alloc_retries"] == 0
    nested = torch.npu.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == freed["allocated_bytes.all.current"]
    torch.npu.reset_accumulated_memory_stats()
    assert torch.npu.memory_stats()["allocation.all.allocated"] == 0


def test_memory_summary_shows_the_figures():
    _settle()
    x = torch.empty(3 * MiB, device="npu")
    summary = torch.npu.memory_summary()
    assert "device ID 0" in summary and "Allocated memory" in summary
    current = torch.npu.memory_allocated() / MiB
    assert f"{current:.2f} MiB" in summary
    del x


def test_empty_cache_and_mem_get_info():
    _settle()
    torch.npu.empty_cache()
    free, total = torch.npu.mem_get_info()
    assert total == torch.npu.get_device_properties(0).total_memory > 0
    assert free == total - torch.npu.memory_reserved()
    x = torch.empty(4 * MiB, device="npu")
    assert torch.npu.mem_get_info()[0] == free - 16 * MiB
    del x
    assert torch.npu.mem_get_info()[0] == free


def test_device_properties():
    props = torch.npu.get_device_properties(0)
    assert props.name == torch.npu.get_device_name(0) == torch.npu.get_device_name()
    assert "NPU" in props.name
    assert props.total_memory > 0 and props.multi_processor_count >= 1
    assert "total_memory" in repr(props)
    assert torch.npu.is_bf16_supported()


def test_figures_are_per_device():
    code = (
        "import gc, torch, transfer_to_npu\n"
        "a0, a1 = torch.npu.memory_allocated(0), torch.npu.memory_allocated(1)\n"
        "x = torch.empty(1024, device='npu:1')\n"
        "assert torch.npu.memory_allocated(1) == a1 + 4096, torch.npu.memory_allocated(1)\n"
        "assert torch.npu.memory_allocated(0) == a0\n"
        "assert torch.npu.memory_stats('npu:1')['allocation.all.current'] >= 1\n"
        "assert torch.npu.mem_get_info(1)[0] == torch.npu.mem_get_info(1)[1] - a1 - 4096\n"
        "print('ok')\n")
    proc = run_python(["-c", code], env={"TRANSFER_TO_NPU_VIRTUAL_DEVICES": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
