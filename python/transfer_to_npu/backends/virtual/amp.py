"""``torch.npu.amp`` on the virtual NPU (this module, loaded at its first
use: npu.py): ``autocast``, ``GradScaler``, ``custom_fwd`` and
``custom_bwd`` for the npu, like ``torch.cuda.amp``.  What autocast casts
is in autocast.py.
"""

import torch

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


class autocast(torch.amp.autocast):
    """``torch.npu.amp.autocast(...)``: ``torch.autocast('npu', ...)``."""

    def __init__(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.npu.amp.GradScaler(...)``: ``torch.amp.GradScaler('npu', ...)``.
    Its parameters are CUDA's, in CUDA's places (torch.cuda.amp.GradScaler
    reaches it), and torch_npu's ``dynamic`` by name: False keeps the scale
    at init_scale (steps with an inf or a nan are still skipped)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, *, dynamic=True):
        super().__init__("npu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
        self._dynamic = dynamic

    def update(self, new_scale=None):
        if new_scale is None and not self._dynamic and self._scale is not None:
            new_scale = self._scale.clone()
        super().update(new_scale)

    # torch_npu's overflow flags: the virtual NPU computes infs and nans as
    # the host does, as Ascend's chips since 910B do, and has no flag to read.
    @staticmethod
    def get_npu_overflow_flag():
        return False

    @staticmethod
    def clear_npu_overflow_flag():
        pass


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.amp.custom_fwd`` for the npu."""
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``torch.amp.custom_bwd`` for the npu."""
    return torch.amp.custom_bwd(bwd, device_type="npu")
