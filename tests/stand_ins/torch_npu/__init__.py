"""A stand-in for Huawei's torch_npu, API-compatible in what the migration
uses: it registers the ``npu`` device and ``torch.npu`` (``torch_npu.npu``,
with its ``amp``), ``torch_npu.profiler`` and the ``hccl`` process group.

Its device is the virtual NPU, presented under this package's own modules,
so that tests can tell which module a migrated call reached.  Import
transfer_to_npu first, as users of torch_npu do (it imports torch_npu).
"""
import torch

from transfer_to_npu.backends import virtual

from . import npu, profiler  # noqa: E402

STAND_IN = True

# Ascend's fused attention, as its reference math: what flash_attn and
# xformers call on torch_npu.
from transfer_to_npu.served._fused_ops import npu_fusion_attention  # noqa: E402,F401

virtual.install(backend_module=npu)
