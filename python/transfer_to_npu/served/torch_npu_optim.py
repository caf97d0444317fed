"""torch_npu.optim on the virtual NPU: its fused optimizers on torch's."""

from ._optimizers import NpuFusedAdam, NpuFusedAdamW, NpuFusedSGD  # noqa: F401

__all__ = ["NpuFusedAdam", "NpuFusedAdamW", "NpuFusedSGD"]
