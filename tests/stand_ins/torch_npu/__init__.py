"""A stand-in for Huawei's torch_npu, API-compatible in what the migration
uses: it registers the ``npu`` device and ``torch.npu`` (``torch_npu.npu``,
with its ``amp``, ``graphs`` and ``memory``), ``torch_npu.profiler`` and the
``hccl`` process group.  Its modules record the calls tests look for.

Its device is the virtual NPU, presented under this package's own modules,
so that tests can tell which module a migrated call reached.  Where torch
lacks what the virtual NPU builds on (torch older than it supports), or with
``STAND_IN_KERNELS=0``, the device is registered with no kernels at all
(``_bare``): calls still reach torch_npu's functions and are recorded, but
no tensor can be made on the npu.  Import transfer_to_npu first, as users
of torch_npu do (it imports torch_npu).
"""
import os

import torch  # noqa: F401

from transfer_to_npu import backends

STAND_IN = True
#: Whether npu tensors can be made (the virtual NPU is the device).
KERNELS = os.environ.get("STAND_IN_KERNELS", "1") != "0" and backends.virtual_supported()
# As torch_npu's release names itself (the two kinds are two releases: their
# tables differ).
__version__ = "0.0.0+stand-in" + ("" if KERNELS else ".no-kernels")

from . import npu, profiler  # noqa: E402

if KERNELS:
    from transfer_to_npu.backends import virtual

    virtual.install(backend_module=npu)
else:
    from . import _bare

    _bare.install(npu)

# Ascend's fused attention, as its reference math: what flash_attn and
# xformers call on torch_npu.
from transfer_to_npu.served._fused_ops import npu_fusion_attention  # noqa: E402,F401
