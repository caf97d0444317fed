"""torch_npu on the virtual NPU (served as ``torch_npu`` while migrating
on it, when no torch_npu is installed): ``torch_npu.npu`` is ``torch.npu``,
and the fused operators libraries and Ascend's scripts call most are their
reference math on the host (``_fused_ops.py``)."""

import torch

from .. import _served

from ._fused_ops import (npu_apply_adam, npu_apply_adam_w, npu_format_cast,  # noqa: F401
                         npu_fusion_attention, npu_geglu, npu_rms_norm, npu_rotary_mul,
                         npu_swiglu)

npu = torch.npu
# The torch_npu release paired with the torch that runs (Ascend numbers
# them after torch's: torch_npu 2.5.1 for torch 2.5.1).
__version__ = torch.__version__.split("+")[0]
__path__ = []  # a package: torch_npu.contrib, torch_npu.optim (_served.py)



def __getattr__(name):
    # torch_npu.contrib and .optim: torch_npu imports them at its own
    # import, here they load at their first use.
    return _served.submodule("torch_npu", name)
